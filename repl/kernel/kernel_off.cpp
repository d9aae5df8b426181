// kernel_off.cpp: the kernel's functions in a tapedeck built without xeus (kernel.h): each says
// how to get it.
#include <cstdio>

#include "kernel.h"

namespace {
const char* const NO_KERNEL =
    "tapedeck: this build has no Jupyter kernel: install xeus 2.4 (apt-get install xeus-dev libzmq3-dev) "
    "and build again (CMake finds it)\n";
}

bool kernel_built() { return false; }

int kernel_run(lua_State*, const std::string&) {
    fputs(NO_KERNEL, stderr);
    return 1;
}

int kernel_install(int, char**) {
    fputs(NO_KERNEL, stderr);
    return 1;
}
