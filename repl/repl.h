// repl.h: running Lua chunks the way lua.c does, and the interactive loop with ':' commands.
#pragma once

#include <string>

#include "debugger_front_end.h"   // ReplLoopOptions, ReplEnd, LineSource

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
// Returns why it ended: input ended, :quit (or a quit requested from a nested loop), or
// should_leave said so.
ReplEnd repl_loop(lua_State* L, LineSource& source, const ReplLoopOptions& options = ReplLoopOptions());

// Load `code` as a chunk named `chunk_name` with the innermost loop's _ENV. Returns a lua status;
// the function (or the error) is on the stack.
int repl_load(lua_State* L, const std::string& code, const char* chunk_name);

// For Tab completion: push a table of the names the innermost loop's _ENV adds to the globals
// (empty at the top level).
void repl_push_env_names(lua_State* L);

// :quit from a nested loop: every loop ends, and the chunk running under it is abandoned.
void repl_request_quit();
bool repl_quit_requested();

// Ctrl-C while waiting at the prompt: the terminal source asks whether one came.
bool repl_take_interrupt();
// Install the SIGINT handler used at the prompt and while Lua runs in L, the program's Lua state
// (which the stdin line source's Tab completion reads too).
void repl_install_interrupt_handler(lua_State* L);
// Ctrl-C while Lua runs calls `break_in` (from the signal handler: it may only set flags and call
// lua_sethook). When it returns true it took the interrupt; otherwise the running code stops
// with the error "interrupted!" as before. `run_ended` is called when the outermost chunk ends
// (an interrupt it took may not have been delivered).
void repl_set_break_in(bool (*break_in)(lua_State* L), void (*run_ended)(lua_State* L));
// An error in code the REPL runs calls `on_error` with the error's message from the message
// handler, before the stack unwinds (the debugger's post-mortem); the thread's level 1 is the
// function that raised it. It must leave the stack as it found it.
void repl_set_error_observer(void (*on_error)(lua_State* L, const char* message));
// An interrupt that does not come as a signal to this thread (the Jupyter kernel takes SIGINT on a
// thread of its own): as Ctrl-C once, running Lua stops with "interrupted!"; never leaves the program.
void repl_deliver_interrupt();
// Ctrl-C twice within a second while code runs (the second may come at the stop the first made)
// leaves the program: a message on stderr, the terminal restored, exit status 130.
constexpr int REPL_EXIT_INTERRUPTED_TWICE = 130;
