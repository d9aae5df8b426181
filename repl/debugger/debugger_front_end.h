// debugger_front_end.h: what the debugger core asks of the front end that drives it.
//
// A stop happens inside running code: the core waits there for the person's commands, reading
// them through the front end's line source and running them in the front end's loop, and it runs
// Lua the way the front end runs it (its message handler and traceback, its Ctrl-C, the innermost
// loop's _ENV). The terminal REPL (repl/repl.cpp) is one such front end: main.cpp hands its
// functions to debugger_set_front_end before anything runs. The core includes nothing of the
// front end; the front end includes this header for the line source and loop types it implements.
#pragma once

#include <cstdio>
#include <functional>
#include <string>

struct lua_State;

// Where a loop's lines come from (the terminal, a pipe; repl/line_source.cpp), kept apart from
// the loop that runs them.
class LineSource {
public:
    virtual ~LineSource() = default;
    // Read one line (without its newline). False at end of input.
    virtual bool read_line(const char* prompt, std::string& line) = 0;
    // True when the last read_line ended with Ctrl-C instead of Enter (the line is then empty):
    // the loop drops the statement it was reading, as a person pressing Ctrl-C at ">>" expects.
    bool interrupted = false;
    // Called about every 15 ms while waiting for input (terminal only).
    std::function<void()> on_idle;
    // Called from on_idle (a viewer's Continue button): the waiting read_line returns at once, as
    // after Ctrl-C (an empty line, `interrupted` set). A pipe never waits, so it has nothing to do.
    virtual void cancel_read() {}
    // Print `text` (whole lines) from on_idle (a breakpoint set in the viewer): a terminal clears
    // the prompt line, prints, and draws the prompt and what was typed again below.
    virtual void print_message(const std::string& text) {
        fputs(text.c_str(), stdout);
        fflush(stdout);
    }
};

// A line source whose lines come from a function: a front end that is no terminal (the notebook
// kernel's input prompt, the DAP session's requests).
class FunctionLineSource : public LineSource {
public:
    typedef bool (*ReadLine)(const char* prompt, std::string& line);
    explicit FunctionLineSource(ReadLine read) : read_(read) {}
    bool read_line(const char* prompt, std::string& line) override {
        interrupted = false;
        return read_(prompt, line);
    }

private:
    ReadLine read_;
};

// How one read-eval-print loop runs: the top level ("> "), or a debugger stop ("(tdb) ") whose
// chunks see the stopped frame's locals through their own _ENV. Loops nest (a stop is a loop
// inside a hook inside a running chunk); repl_eval uses the innermost loop's _ENV.
struct ReplLoopOptions {
    const char* prompt = "> ";
    const char* continuation = ">> ";
    int env_ref = -2;   // registry ref (LUA_NOREF = -2: none) of the table chunks get as _ENV
    bool (*should_leave)(void* user) = nullptr;   // asked after every line: true ends the loop
    void* user = nullptr;
    int stack_base = 0;   // Lua stack levels below the loop (a stop's program): left out of tracebacks
    // Push a table of what its _ENV adds to the globals (a stop's locals and names, with their
    // values), for Tab completion; it must not run user code.
    void (*push_env_names)(lua_State* L) = nullptr;
};

enum ReplEnd { REPL_END_INPUT, REPL_END_QUIT, REPL_END_LEFT };

struct DebuggerFrontEnd {
    // ---- Running Lua as the front end runs it
    // Call the function on top of the stack with `nargs` arguments below it, with the traceback
    // handler and Ctrl-C; returns a lua status, the results or the error message on the stack.
    int (*call)(lua_State* L, int nargs, int nresults) = nullptr;
    // Print the error on top of the stack and pop it.
    void (*report)(lua_State* L) = nullptr;
    // Load `code` as a chunk with the innermost loop's _ENV; a lua status, the function or the error on the stack.
    int (*load)(lua_State* L, const std::string& code, const char* chunk_name) = nullptr;
    // Evaluate an expression, leaving one value on the stack; false (the error reported) when it fails.
    bool (*eval)(lua_State* L, const std::string& expression) = nullptr;
    // Load and run a chunk (a script file when `is_file`), the `nargs` values on the stack its
    // arguments; the error reported. Returns a lua status.
    int (*run_chunk)(lua_State* L, const std::string& source, const std::string& chunk_name, bool is_file,
                     int nargs) = nullptr;
    // Run one ':' command line (without its ':'); false means leave.
    bool (*run_command)(lua_State* L, const std::string& line) = nullptr;

    // ---- The loop a stop's prompt runs, and quitting it
    ReplEnd (*loop)(lua_State* L, LineSource& source, const ReplLoopOptions& options) = nullptr;
    void (*request_quit)() = nullptr;   // :quit from a nested loop: every loop ends, the running chunk is abandoned
    bool (*quit_requested)() = nullptr;

    // ---- Where the front end tells the core of Ctrl-C and errors (null functions: it stops telling)
    // Ctrl-C while Lua runs calls `break_in` (from the signal handler); `run_ended` is called when
    // the outermost chunk ends.
    void (*set_break_in)(bool (*break_in)(lua_State* L), void (*run_ended)(lua_State* L)) = nullptr;
    // An error in code the front end runs calls `on_error` before the stack unwinds (the post-mortem).
    void (*set_error_observer)(void (*on_error)(lua_State* L, const char* message)) = nullptr;
};

// The front end the debugger's commands, stops and `dbg` table use. Set once, before any of them
// runs (attached or not: the ':' commands run either way).
void debugger_set_front_end(const DebuggerFrontEnd& front_end);
