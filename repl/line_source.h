// line_source.h: where the REPL's lines come from, kept apart from the loop that runs them.
//
// A pipe (or file) on stdin is read line by line with no prompt and no echo, so transcripts
// can be tested. A terminal is read through readline's callback interface with poll(): while it
// waits for a key, an idle callback runs (the viewer draws its frames there).
#pragma once

#include <cstdio>
#include <functional>
#include <memory>
#include <string>

struct lua_State;

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

// stdin is a terminal: readline with history (~/.tapedeck_history) and tab completion over the
// globals, table fields and tensor methods of the program's Lua state (the one
// repl_install_interrupt_handler was given). Otherwise: plain lines, no prompt.
std::unique_ptr<LineSource> line_source_for_stdin();
