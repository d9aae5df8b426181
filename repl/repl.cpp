// repl.cpp: lua.c's algorithm (docall with traceback, "return" first, <eof> means read more,
// Ctrl-C through a hook), with ':' commands parsed before Lua.
#include "repl.h"

#include <termios.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <lua.hpp>
#include <sstream>
#include <string>

#include "commands.h"
#include "repl_state.h"
#include "tapedeck_lua.h"
#include "value_text.h"

ReplState repl_state;

namespace {

// Written by the SIGINT handler, so they stay volatile sig_atomic_t globals (the rest of the
// program's state is in repl_state): a Ctrl-C that came while no Lua code ran (the prompt takes
// it), and the time (CLOCK_MONOTONIC) of the last one that came while code ran (Ctrl-C twice).
volatile sig_atomic_t g_interrupt_pending = 0;
volatile sig_atomic_t g_interrupt_seconds = 0;
volatile sig_atomic_t g_interrupt_nanoseconds = 0;

// Set from the signal handler; stops the running Lua code at its next instruction or call.
void stop_hook(lua_State* L, lua_Debug*) {
    lua_sethook(L, nullptr, 0, 0);
    luaL_error(L, "interrupted!");
}

long long monotonic_ns() {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);   // async-signal-safe
    return static_cast<long long>(now.tv_sec) * 1000000000LL + now.tv_nsec;
}

// From the signal handler: only async-signal-safe calls.
[[noreturn]] void leave_interrupted_twice() {
    if (repl_state.have_terminal_settings) tcsetattr(STDIN_FILENO, TCSANOW, &repl_state.terminal_settings);
    const char message[] = "\ntapedeck: interrupted twice within a second: leaving (exit status 130)\n";
    ssize_t written = write(STDERR_FILENO, message, sizeof message - 1);
    (void)written;
    _exit(REPL_EXIT_INTERRUPTED_TWICE);
}

// Ctrl-C: running Lua stops at its next instruction (or the debugger takes it); at the prompt
// the line is dropped. Only async-signal-safe calls: it runs in the signal handler.
void interrupt(long long now) {
    if (repl_state.lua_running && repl_state.L) {
        g_interrupt_seconds = static_cast<sig_atomic_t>(now / 1000000000LL);
        g_interrupt_nanoseconds = static_cast<sig_atomic_t>(now % 1000000000LL);
        if (repl_state.break_in && repl_state.break_in(repl_state.L)) return;
        int mask = LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT;
        lua_sethook(repl_state.L, stop_hook, mask, 1);
    } else {
        g_interrupt_pending = 1;
    }
}

void on_sigint(int) {
    long long now = monotonic_ns();
    long long last = static_cast<long long>(g_interrupt_seconds) * 1000000000LL + g_interrupt_nanoseconds;
    if (last > 0 && now - last < 1000000000LL) leave_interrupted_twice();
    interrupt(now);
}

// The level the traceback of an error starts at: 1, or past the frames of tapedeck's own Lua
// library (nn, optim) and the C calls between them when the error was raised inside it, so that a
// mistake of the user's (model[0]) shows the user's frames, not nn.lua's lines.
int first_user_level(lua_State* L) {
    lua_Debug ar;
    int first = 1;
    for (int level = 1; lua_getstack(L, level, &ar); ++level) {
        lua_getinfo(L, "S", &ar);
        bool in_c = ar.what[0] == 'C';
        bool in_library = strncmp(ar.source, TAPEDECK_LIBRARY_CHUNK, strlen(TAPEDECK_LIBRARY_CHUNK)) == 0;
        if (!in_c && !in_library) break;
        if (in_library) first = level + 1;
    }
    return first;
}

int message_handler(lua_State* L) {
    const char* message = lua_tostring(L, 1);
    if (!message) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
        message = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    std::string hint = tapedeck_error_hint(L, message);   // "attempt to call a nil value (method 'sume')"
    if (!hint.empty()) message = lua_pushfstring(L, "%s%s", message, hint.c_str());
    if (repl_state.error_observer) repl_state.error_observer(L, message);   // the post-mortem, before the stack unwinds
    int first_level = first_user_level(L);
    luaL_traceback(L, L, message, first_level);
    if (repl_state.innermost_loop && repl_state.innermost_loop->stack_base > 0) {
        // At a debugger stop: the frames of the stopped program are :where's, not this error's.
        lua_Debug ar;
        int depth = 0;
        while (lua_getstack(L, depth, &ar)) ++depth;
        int keep = depth - first_level - repl_state.innermost_loop->stack_base;   // frames from first_level up to the prompt's chunk
        std::string text = lua_tostring(L, -1);
        size_t at = text.find("\nstack traceback:");
        for (int frame = 0; at != std::string::npos && frame <= keep; ++frame) at = text.find('\n', at + 1);
        if (at != std::string::npos) {
            lua_pop(L, 1);
            lua_pushlstring(L, text.data(), at);
        }
    }
    return 1;
}

bool is_incomplete(lua_State* L, int status) {
    if (status != LUA_ERRSYNTAX) return false;
    size_t len;
    const char* message = lua_tolstring(L, -1, &len);
    const char* eof_mark = "<eof>";
    size_t mark_len = strlen(eof_mark);
    return len >= mark_len && strcmp(message + len - mark_len, eof_mark) == 0;
}

// Print the values on the stack above `base` with the global print (tensors via __tostring),
// tables as their contents (repl_value_text).
void print_results(lua_State* L, int base) {
    int n = lua_gettop(L) - base;
    if (n <= 0) return;
    luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
    for (int i = base + 1; i <= base + n; ++i) {
        if (lua_type(L, i) != LUA_TTABLE) continue;
        std::string text = repl_value_text(L, i);
        lua_pushlstring(L, text.data(), text.size());
        lua_replace(L, i);
    }
    lua_getglobal(L, "print");
    lua_insert(L, base + 1);
    if (lua_pcall(L, n, 0, 0) != LUA_OK)
        fprintf(stderr, "error calling 'print' (%s)\n", lua_tostring(L, -1));
}

// Read a line with Lua marked as not running, so that Ctrl-C drops the line rather than stopping
// code: a loop nested in a debugger stop waits inside running code.
bool read_waiting(LineSource& source, const char* prompt, std::string& line) {
    sig_atomic_t was_running = repl_state.lua_running;
    repl_state.lua_running = 0;
    bool ok = source.read_line(prompt, line);
    repl_state.lua_running = was_running;
    return ok;
}

// Makes `options` the innermost loop for as long as it runs (loops nest inside debugger stops).
struct InnermostLoop {
    const ReplLoopOptions* saved = repl_state.innermost_loop;
    explicit InnermostLoop(const ReplLoopOptions* options) { repl_state.innermost_loop = options; }
    ~InnermostLoop() { repl_state.innermost_loop = saved; }
};

// A syntax error's message on top of the stack gets tapedeck_syntax_hint's line below it, when
// the chunk's line it names is a Python habit (x[3:5], w -= 0.1).
void add_syntax_hint(lua_State* L, const std::string& chunk) {
    const char* message = lua_tostring(L, -1);
    if (!message) return;
    std::string hint = tapedeck_syntax_hint(chunk, message);
    if (hint.empty()) return;
    lua_pushfstring(L, "%s\n%s", message, hint.c_str());
    lua_replace(L, -2);
}

// The text of a script file (for the syntax hint); empty when it cannot be read again.
std::string file_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

}  // namespace

void repl_push_env_names(lua_State* L) {
    if (repl_state.innermost_loop && repl_state.innermost_loop->push_env_names) repl_state.innermost_loop->push_env_names(L);
    else lua_newtable(L);
}

void repl_request_quit() { repl_state.quit_requested = true; }
bool repl_quit_requested() { return repl_state.quit_requested; }
void repl_set_error_observer(void (*on_error)(lua_State* L, const char* message)) { repl_state.error_observer = on_error; }
void repl_set_break_in(bool (*break_in)(lua_State* L), void (*run_ended)(lua_State* L)) {
    repl_state.break_in = break_in;
    repl_state.run_ended = run_ended;
}

int repl_load(lua_State* L, const std::string& code, const char* chunk_name) {
    int status = luaL_loadbuffer(L, code.data(), code.size(), chunk_name);
    if (status == LUA_OK && repl_state.innermost_loop && repl_state.innermost_loop->env_ref != LUA_NOREF) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, repl_state.innermost_loop->env_ref);
        if (!lua_setupvalue(L, -2, 1)) lua_pop(L, 1);   // upvalue 1 of a main chunk is its _ENV
    }
    return status;
}

void repl_deliver_interrupt() { interrupt(monotonic_ns()); }

bool repl_take_interrupt() {
    if (!g_interrupt_pending) return false;
    g_interrupt_pending = 0;
    return true;
}

void repl_install_interrupt_handler(lua_State* L) {
    repl_state.L = L;
    repl_state.have_terminal_settings = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &repl_state.terminal_settings) == 0;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_sigint;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);   // no SA_RESTART: poll() at the prompt returns at once
}

int repl_docall(lua_State* L, int nargs, int nresults) {
    int base = lua_gettop(L) - nargs;
    lua_pushcfunction(L, message_handler);
    lua_insert(L, base);
    sig_atomic_t was_running = repl_state.lua_running;   // nested calls (a command evaluating an expression)
    g_interrupt_pending = 0;
    repl_state.lua_running = 1;
    int status = lua_pcall(L, nargs, nresults, base);
    repl_state.lua_running = was_running;
    if (!was_running && lua_gethook(L) == stop_hook)   // a Ctrl-C that came too late to stop anything;
        lua_sethook(L, nullptr, 0, 0);                  // a hook the user set (debug.sethook) stays
    if (!was_running && repl_state.run_ended) repl_state.run_ended(L);
    lua_remove(L, base);
    return status;
}

void repl_report(lua_State* L) {
    if (repl_state.quit_requested) {   // the error that abandons running code after :quit at a stop
        lua_pop(L, 1);
        return;
    }
    fflush(stdout);   // what was printed before the error comes before it, also when both go to one file
    const char* message = lua_tostring(L, -1);
    fprintf(stderr, "%s\n", message ? message : "(error object is not a string)");
    fflush(stderr);
    lua_pop(L, 1);
}

int repl_run_chunk(lua_State* L, const std::string& source, const std::string& chunk_name, bool is_file, int nargs) {
    int status = is_file ? luaL_loadfile(L, source == "-" ? nullptr : source.c_str())
                         : luaL_loadbuffer(L, source.data(), source.size(), chunk_name.c_str());
    if (status == LUA_ERRSYNTAX) add_syntax_hint(L, is_file ? (source == "-" ? "" : file_text(source)) : source);
    if (status == LUA_OK) {
        if (nargs > 0) lua_insert(L, -(nargs + 1));
        status = repl_docall(L, nargs, 0);
    } else if (nargs > 0) {
        lua_insert(L, -(nargs + 1));
        lua_pop(L, nargs);
    }
    if (status != LUA_OK) repl_report(L);
    return status;
}

bool repl_eval(lua_State* L, const std::string& expression) {
    std::string code = "return " + expression;
    if (repl_load(L, code, "=stdin") != LUA_OK || repl_docall(L, 0, 1) != LUA_OK) {
        repl_report(L);
        return false;
    }
    return true;
}

ReplEnd repl_loop(lua_State* L, LineSource& source, const ReplLoopOptions& options) {
    InnermostLoop innermost(&options);
    std::string line;
    while (read_waiting(source, options.prompt, line)) {
        if (repl_state.quit_requested) return REPL_END_QUIT;
        if (options.should_leave && options.should_leave(options.user)) return REPL_END_LEFT;
        if (source.interrupted) continue;   // Ctrl-C: the line is gone, a new prompt
        size_t first = line.find_first_not_of(" \t");
        if (first != std::string::npos && line[first] == ':') {
            bool keep_going = command_run(L, line.substr(first + 1));
            fflush(stdout);
            if (!keep_going) repl_state.quit_requested = true;
            if (repl_state.quit_requested) return REPL_END_QUIT;
            if (options.should_leave && options.should_leave(options.user)) return REPL_END_LEFT;
            continue;
        }
        if (first != std::string::npos && line[first] == '=')   // "=x" is "return x", as in lua.c
            line = "return " + line.substr(first + 1);
        int base = lua_gettop(L);
        std::string with_return = "return " + line;
        int status = repl_load(L, with_return, "=stdin");
        bool dropped = false;
        std::string chunk = line;
        if (status != LUA_OK) {
            lua_pop(L, 1);
            for (;;) {   // a statement, maybe spanning lines
                status = repl_load(L, chunk, "=stdin");
                if (!is_incomplete(L, status)) break;
                std::string more;
                if (!read_waiting(source, options.continuation, more)) break;   // input ended: report the syntax error
                lua_pop(L, 1);
                if (source.interrupted) {   // Ctrl-C at ">>" drops the whole statement
                    dropped = true;
                    break;
                }
                chunk += "\n" + more;
            }
        }
        if (!dropped) {
            if (status == LUA_ERRSYNTAX) add_syntax_hint(L, chunk);
            if (status == LUA_OK) status = repl_docall(L, 0, LUA_MULTRET);
            if (status == LUA_OK) print_results(L, base);
            else repl_report(L);
        }
        lua_settop(L, base);
        if (repl_state.quit_requested) return REPL_END_QUIT;
        if (options.should_leave && options.should_leave(options.user)) return REPL_END_LEFT;
    }
    return REPL_END_INPUT;
}
