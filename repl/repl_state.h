// repl_state.h: the tapedeck program's mutable state, in one struct (the debugger core keeps its
// own: State in repl/debugger/debugger_internal.h). Only what the SIGINT handler writes stays
// apart, as volatile sig_atomic_t globals in repl.cpp: the one kind of object a signal handler may
// write.
#pragma once

#include <termios.h>

#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include "line_source.h"
#include "repl.h"

struct ReplState {
    // The program's Lua state: the one Ctrl-C stops, Tab completion reads and the stdin source is
    // made for. Set by repl_install_interrupt_handler, which main() calls first.
    lua_State* L = nullptr;
    // Where the REPL and debugger stops read lines: stdin, made on first use (main.cpp's
    // stdin_source(): a script that never stops never sets up readline). Ends in main.cpp's
    // shutdown(), not in static destruction.
    std::unique_ptr<LineSource> stdin_source;

    // ---- Running chunks (repl.cpp)
    volatile sig_atomic_t lua_running = 0;   // Lua code runs (no prompt waits): read by the SIGINT handler
    bool (*break_in)(lua_State* L) = nullptr;                                // repl_set_break_in
    void (*run_ended)(lua_State* L) = nullptr;
    void (*error_observer)(lua_State* L, const char* message) = nullptr;   // repl_set_error_observer
    const ReplLoopOptions* innermost_loop = nullptr;   // the loop whose line is running now
    bool quit_requested = false;                       // repl_request_quit: every loop ends
    // The terminal's settings, restored by the SIGINT handler when Ctrl-C twice leaves the program
    // (readline may have the terminal in raw mode).
    bool have_terminal_settings = false;
    struct termios terminal_settings;

    // ---- Tab completion (line_source.cpp)
    std::vector<std::string> matches;   // for the word being completed
    size_t next_match = 0;              // the next one readline asks for
    int word_start = 0;                 // where that word begins in rl_line_buffer
};

// The one instance (repl.cpp).
extern ReplState repl_state;
