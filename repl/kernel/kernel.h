// kernel.h: tapedeck as a Jupyter kernel (`tapedeck --kernel CONNECTION_FILE`) and its kernelspec
// (`tapedeck --install-kernel [--user | --prefix DIR]`). Built with xeus 2.4 when CMake finds it
// (kernel_main.cpp); without it (kernel_off.cpp) both say so and fail.
#pragma once

#include <string>

struct lua_State;

// Whether this tapedeck was built with the kernel.
bool kernel_built();

// Serve the notebook on the connection file's sockets until it shuts the kernel down; `L` is the
// program's Lua state, set up as for the REPL (tapedeck_open, the debugger's front end). Returns
// only on failure (a message on stderr, exit status 1): xeus ends the process on shutdown.
int kernel_run(lua_State* L, const std::string& connection_file);

// `--install-kernel [--user | --prefix DIR]`: write the kernelspec `tapedeck` (kernel.json naming
// this program, the logo) where Jupyter looks: --user: the user's Jupyter data folder; --prefix
// DIR: DIR/share/jupyter/kernels; neither: /usr/local/share/jupyter/kernels. Returns the exit status.
int kernel_install(int argc, char** argv);
