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
// Tab completion: globals, then fields after '.', methods after ':' (tensor methods included).
// Only reads tables (rawget, metatables): completing never runs user code.

const char* const LUA_KEYWORDS[] = {"and", "break", "do", "else", "elseif", "end", "false", "for", "function",
                                    "goto", "if", "in", "local", "nil", "not", "or", "repeat", "return", "then",
                                    "true", "until", "while", nullptr};

// Push the value a dotted path names ("a.b.c"), or nil; never calls metamethods. The first name
// is looked up among what the prompt adds to the globals (at a debugger stop: the stopped
// frame's locals and the stop's names), then among the globals.
void push_path(lua_State* L, const std::string& path) {
    size_t first_end = path.find_first_of(".:");
    repl_push_env_names(L);
    lua_pushstring(L, path.substr(0, first_end).c_str());
    bool in_env = lua_rawget(L, -2) != LUA_TNIL;
    lua_pop(L, 2);
    if (in_env) repl_push_env_names(L);
    else lua_pushglobaltable(L);
    size_t start = 0;
    while (start <= path.size()) {
        size_t dot = path.find_first_of(".:", start);
        std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        if (!lua_istable(L, -1)) {
            lua_pop(L, 1);
            lua_pushnil(L);
            return;
        }
        lua_pushlstring(L, key.data(), key.size());
        lua_rawget(L, -2);
        lua_remove(L, -2);
        if (dot == std::string::npos) return;
        start = dot + 1;
    }
}

// Add the string keys of the table at the top of the stack that start with `prefix`.
void add_keys(lua_State* L, const std::string& head, const std::string& prefix, bool functions_only) {
    if (!lua_istable(L, -1)) return;
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        if (lua_type(L, -2) == LUA_TSTRING) {
            const char* key = lua_tostring(L, -2);
            bool wanted = !functions_only || lua_isfunction(L, -1);
            if (wanted && strncmp(key, prefix.c_str(), prefix.size()) == 0) repl_state.matches.push_back(head + key);
        }
        lua_pop(L, 1);
    }
}

// The keys an object's metatable (on top of the stack) answers through __index: its __index table,
// or, when __index is a function (an nn module's class), the metatable itself and the tables its
// own metatables' __index fields chain to (the base classes' methods).
void add_index_keys(lua_State* L, const std::string& head, const std::string& prefix, bool method) {
    int type = lua_getfield(L, -1, "__index");
    if (type == LUA_TTABLE) add_keys(L, head, prefix, method);
    lua_pop(L, 1);
    if (type != LUA_TFUNCTION) return;
    lua_pushvalue(L, -1);
    for (int depth = 0; depth < 16 && lua_istable(L, -1); ++depth) {   // a class chain is short; a cycle stops
        add_keys(L, head, prefix, method);
        if (!lua_getmetatable(L, -1)) break;
        lua_getfield(L, -1, "__index");
        lua_replace(L, -3);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
}

// `text` is the word before the cursor; `line_start` says it begins the line (':' commands).
void collect_matches(const std::string& text, bool line_start) {
    lua_State* L = repl_state.L;
    repl_state.matches.clear();
    if (line_start && !text.empty() && text[0] == ':') {
        for (const std::string& name : command_names())
            if (name.compare(0, text.size() - 1, text, 1) == 0) repl_state.matches.push_back(":" + name);
        return;
    }
    size_t sep = text.find_last_of(".:");
    if (sep == std::string::npos) {
        lua_pushglobaltable(L);
        add_keys(L, "", text, false);
        lua_pop(L, 1);
        repl_push_env_names(L);
        add_keys(L, "", text, false);
        lua_pop(L, 1);
        for (const char* const* k = LUA_KEYWORDS; *k; ++k)
            if (strncmp(*k, text.c_str(), text.size()) == 0) repl_state.matches.push_back(*k);
        return;
    }
    std::string object = text.substr(0, sep), prefix = text.substr(sep + 1), head = text.substr(0, sep + 1);
    bool method = text[sep] == ':';
    push_path(L, object);
    add_keys(L, head, prefix, method);
    if (lua_getmetatable(L, -1)) {   // tensors: their methods table (and fields); tables: __index tables
        bool tensor = lua_getfield(L, -1, "methods") == LUA_TTABLE;
        if (tensor) {
            add_keys(L, head, prefix, method);
            for (const char* const* f = TAPEDECK_TENSOR_FIELDS; *f && !method; ++f)
                if (strncmp(*f, prefix.c_str(), prefix.size()) == 0) repl_state.matches.push_back(head + *f);
        }
        lua_pop(L, 1);
        if (!tensor) add_index_keys(L, head, prefix, method);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
}

char* match_generator(const char* text, int state) {
    if (state == 0) {
        collect_matches(text, repl_state.word_start == 0);
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
