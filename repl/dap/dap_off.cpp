// dap_off.cpp: this tapedeck was built without the DAP server (nlohmann's JSON was not found).
#include <cstdio>

#include "dap.h"

namespace {
int say_how() {
    fprintf(stderr, "tapedeck: this tapedeck has no DAP server: it was built without nlohmann's JSON "
                    "(Debian: apt-get install nlohmann-json3-dev, then build again)\n");
    return 1;
}
}  // namespace

bool dap_built() { return false; }
int dap_serve_stdio(lua_State*) { return say_how(); }
int dap_serve_port(lua_State*, int) { return say_how(); }
