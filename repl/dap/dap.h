// dap.h: tapedeck as a Debug Adapter Protocol server, for editors (VS Code, nvim-dap, Emacs' dape,
// JupyterLab's debugger): `tapedeck --dap` speaks DAP on stdin and stdout, `tapedeck --dap-port N`
// on 127.0.0.1:N. The editor launches a Lua script; breakpoints, stops, stepping (into backward
// too), rewinding and edits are the debugger core's (repl/debugger), as at the terminal's prompt.
// Built when CMake finds nlohmann's JSON (dap_session.cpp and the rest); without it (dap_off.cpp)
// both say so and fail. docs/debugger.md, "In an editor", is the user's page.
#pragma once

#include <string>

struct lua_State;

// Whether this tapedeck was built with the DAP server.
bool dap_built();

// One session on stdin/stdout: the protocol on the process's stdin and stdout, the script's own
// output sent as output events. `L` is the program's Lua state, set up as for the REPL (the
// debugger's front end set, not attached yet). Returns the exit status.
int dap_serve_stdio(lua_State* L);

// Listen on 127.0.0.1:`port` (0: a free port; the line on stderr says which) and serve each
// connection as one session in a child process of its own, until SIGINT or SIGTERM. Returns the
// exit status (1 when it cannot listen).
int dap_serve_port(lua_State* L, int port);
