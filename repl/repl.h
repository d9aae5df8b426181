// repl.h: running Lua chunks the way lua.c does, and the interactive loop with ':' commands.
#pragma once

#include <string>

#include "line_source.h"

struct lua_State;

// Run the function on top of the stack with `nargs` arguments below it, with a traceback
// handler and Ctrl-C turned into the error "interrupted!". Results stay on the stack.
// Returns a lua status; on error the message (with traceback) is on the stack.
int repl_docall(lua_State* L, int nargs, int nresults);

// Print the error on top of the stack to stderr and pop it.
void repl_report(lua_State* L);

// Load and run a chunk (a script file when `is_file`, else the code itself). Returns a status.
int repl_run_chunk(lua_State* L, const std::string& source, const std::string& chunk_name, bool is_file,
                   int nargs = 0);

// Evaluate `expression` as "return <expression>", leaving one value on the stack; false (and the
// error reported) when it does not compile or fails.
bool repl_eval(lua_State* L, const std::string& expression);

// The loop: read a line; ':' lines are commands; otherwise try "return <line>", then the line as
// a statement, reading more lines while the chunk is incomplete; print results or the error.
// Returns when input ends or :quit.
void repl_loop(lua_State* L, LineSource& source);

// Ctrl-C while waiting at the prompt: the terminal source asks whether one came.
bool repl_take_interrupt();
// Install the SIGINT handler used at the prompt and while Lua runs.
void repl_install_interrupt_handler(lua_State* L);
