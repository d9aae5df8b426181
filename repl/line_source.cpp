// line_source.cpp: lines from a pipe (plain) or a terminal (readline callback + poll + completion).
#include "line_source.h"

#include <poll.h>
#include <readline/history.h>
#include <readline/readline.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <lua.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "completion.h"
#include "repl.h"
#include "repl_state.h"
#include "tapedeck_lua.h"

namespace {

// ---------------------------------------------------------------------------------------------
// Pipe: one line per read, no prompt, no echo.

class PipeLineSource : public LineSource {
public:
    bool read_line(const char*, std::string& line) override {
        line.clear();
        int c;
        while ((c = fgetc(stdin)) != EOF && c != '\n') line += static_cast<char>(c);
        return !(c == EOF && line.empty());
    }
};

// ---------------------------------------------------------------------------------------------
// Tab completion (completion.h: the words; readline asks for them one by one)

char* match_generator(const char* text, int state) {
    if (state == 0) {
        repl_state.matches = repl_completions(repl_state.L, text, repl_state.word_start == 0);
        repl_state.next_match = 0;
    }
    if (repl_state.next_match < repl_state.matches.size()) return strdup(repl_state.matches[repl_state.next_match++].c_str());
    return nullptr;
}

char** complete(const char* text, int start, int) {
    repl_state.word_start = start;
    rl_attempted_completion_over = 1;   // no file-name completion
    rl_completion_append_character = start == 0 && text[0] == ':' ? ' ' : '\0';   // ":graph " then its argument
    return rl_completion_matches(text, match_generator);
}

// ---------------------------------------------------------------------------------------------
// Terminal: readline's callback interface, polled, so waiting never blocks the idle callback.

class TerminalLineSource : public LineSource {
public:
    TerminalLineSource() {
        rl_readline_name = "tapedeck";
        rl_attempted_completion_function = complete;
        rl_completer_word_break_characters = const_cast<char*>(" \t\n\"'<>=;+-*/%^~#{}()[],");
        rl_catch_signals = 0;   // Ctrl-C is ours: it clears the line
        rl_variable_bind("enable-bracketed-paste", "off");
        const char* home = getenv("HOME");
        if (home) history_path_ = std::string(home) + "/.tapedeck_history";
        using_history();
        stifle_history(2000);
        if (!history_path_.empty() && read_history(history_path_.c_str()) != 0)
            write_history(history_path_.c_str());   // create it, so lines can be appended
    }

    ~TerminalLineSource() override {
        if (!history_path_.empty()) history_truncate_file(history_path_.c_str(), 2000);
    }

    bool read_line(const char* prompt, std::string& line) override {
        finished_ = false;
        at_eof_ = false;
        interrupted = false;
        current_ = this;
        repl_take_interrupt();   // a Ctrl-C that came while no prompt was up is not meant for this one
        cancelled_ = false;
        rl_callback_handler_install(prompt, on_line);
        struct Waiting {   // the prompt is on screen (print_message draws it again)
            bool& flag;
            explicit Waiting(bool& f) : flag(f) { flag = true; }
            ~Waiting() { flag = false; }
        } waiting(waiting_);
        while (!finished_) {
            struct pollfd fd = {STDIN_FILENO, POLLIN, 0};
            int ready = poll(&fd, 1, on_idle ? 15 : -1);
            bool ctrl_c = repl_take_interrupt();
            if (ctrl_c || cancelled_) {   // Ctrl-C at the prompt: drop the line (the loop drops the statement)
                rl_point = rl_end;   // keep what was typed on screen, then ^C and a new line
                rl_redisplay();
                rl_free_line_state();
                rl_callback_sigcleanup();
                rl_replace_line("", 0);
                rl_callback_handler_remove();
                printf(ctrl_c ? "^C\n" : "\n");
                fflush(stdout);
                line.clear();
                interrupted = true;
                return true;
            }
            if (ready > 0) rl_callback_read_char();
            else if (ready == 0 && on_idle) on_idle();
        }
        if (at_eof_) return false;
        line = line_;
        return true;
    }

    void cancel_read() override { cancelled_ = true; }

    void print_message(const std::string& text) override {
        if (waiting_) rl_clear_visible_line();
        fputs(text.c_str(), stdout);
        fflush(stdout);
        if (waiting_) {
            rl_on_new_line();
            rl_redisplay();
        }
    }

private:
    static void on_line(char* text) {
        TerminalLineSource* self = current_;
        rl_callback_handler_remove();
        self->finished_ = true;
        if (!text) {
            self->at_eof_ = true;
            printf("\n");
            return;
        }
        self->line_ = text;
        HIST_ENTRY* last = history_length > 0 ? history_get(history_base + history_length - 1) : nullptr;
        if (*text && !(last && strcmp(last->line, text) == 0)) {   // no repeated entries
            add_history(text);
            if (!self->history_path_.empty()) append_history(1, self->history_path_.c_str());
        }
        free(text);
    }

    static TerminalLineSource* current_;
    std::string history_path_;
    std::string line_;
    bool finished_ = false;
    bool at_eof_ = false;
    bool cancelled_ = false;
    bool waiting_ = false;
};

TerminalLineSource* TerminalLineSource::current_ = nullptr;

}  // namespace

std::unique_ptr<LineSource> line_source_for_stdin() {
    if (isatty(STDIN_FILENO)) return std::make_unique<TerminalLineSource>();
    return std::make_unique<PipeLineSource>();
}
