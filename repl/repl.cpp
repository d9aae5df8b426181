// repl.cpp: lua.c's algorithm (docall with traceback, "return" first, <eof> means read more,
// Ctrl-C through a hook), with ':' commands parsed before Lua.
#include "repl.h"

#include <csignal>
#include <cstdio>
#include <cstring>
#include <lua.hpp>

#include "commands.h"

namespace {

lua_State* g_running_state = nullptr;
volatile sig_atomic_t g_interrupt_pending = 0;
volatile sig_atomic_t g_lua_running = 0;

// Set from the signal handler; stops the running Lua code at its next instruction or call.
void stop_hook(lua_State* L, lua_Debug*) {
    lua_sethook(L, nullptr, 0, 0);
    luaL_error(L, "interrupted!");
}

void on_sigint(int) {
    if (g_lua_running && g_running_state) {
        int mask = LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT;
        lua_sethook(g_running_state, stop_hook, mask, 1);
    } else {
        g_interrupt_pending = 1;
    }
}

int message_handler(lua_State* L) {
    const char* message = lua_tostring(L, 1);
    if (!message) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
        message = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, message, 1);
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

// Print the values on the stack above `base` with the global print (tensors via __tostring).
void print_results(lua_State* L, int base) {
    int n = lua_gettop(L) - base;
    if (n <= 0) return;
    luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
    lua_getglobal(L, "print");
    lua_insert(L, base + 1);
    if (lua_pcall(L, n, 0, 0) != LUA_OK)
        fprintf(stderr, "error calling 'print' (%s)\n", lua_tostring(L, -1));
}

}  // namespace

bool repl_take_interrupt() {
    if (!g_interrupt_pending) return false;
    g_interrupt_pending = 0;
    return true;
}

void repl_install_interrupt_handler(lua_State* L) {
    g_running_state = L;
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
    sig_atomic_t was_running = g_lua_running;   // nested calls (a command evaluating an expression)
    g_interrupt_pending = 0;
    g_lua_running = 1;
    int status = lua_pcall(L, nargs, nresults, base);
    g_lua_running = was_running;
    if (!was_running && lua_gethook(L) == stop_hook)   // a Ctrl-C that came too late to stop anything;
        lua_sethook(L, nullptr, 0, 0);                  // a hook the user set (debug.sethook) stays
    lua_remove(L, base);
    return status;
}

void repl_report(lua_State* L) {
    fflush(stdout);   // what was printed before the error comes before it, also when both go to one file
    const char* message = lua_tostring(L, -1);
    fprintf(stderr, "%s\n", message ? message : "(error object is not a string)");
    fflush(stderr);
    lua_pop(L, 1);
}

int repl_run_chunk(lua_State* L, const std::string& source, const std::string& chunk_name, bool is_file, int nargs) {
    int status = is_file ? luaL_loadfile(L, source == "-" ? nullptr : source.c_str())
                         : luaL_loadbuffer(L, source.data(), source.size(), chunk_name.c_str());
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
    if (luaL_loadbuffer(L, code.data(), code.size(), "=stdin") != LUA_OK || repl_docall(L, 0, 1) != LUA_OK) {
        repl_report(L);
        return false;
    }
    return true;
}

void repl_loop(lua_State* L, LineSource& source) {
    std::string line;
    while (source.read_line("> ", line)) {
        if (source.interrupted) continue;   // Ctrl-C: the line is gone, a new prompt
        size_t first = line.find_first_not_of(" \t");
        if (first != std::string::npos && line[first] == ':') {
            bool keep_going = command_run(L, line.substr(first + 1));
            fflush(stdout);
            if (!keep_going) break;
            continue;
        }
        if (first != std::string::npos && line[first] == '=')   // "=x" is "return x", as in lua.c
            line = "return " + line.substr(first + 1);
        int base = lua_gettop(L);
        std::string with_return = "return " + line;
        int status = luaL_loadbuffer(L, with_return.data(), with_return.size(), "=stdin");
        bool dropped = false;
        if (status != LUA_OK) {
            lua_pop(L, 1);
            std::string chunk = line;
            for (;;) {   // a statement, maybe spanning lines
                status = luaL_loadbuffer(L, chunk.data(), chunk.size(), "=stdin");
                if (!is_incomplete(L, status)) break;
                std::string more;
                if (!source.read_line(">> ", more)) break;   // input ended: report the syntax error
                lua_pop(L, 1);
                if (source.interrupted) {   // Ctrl-C at ">>" drops the whole statement
                    dropped = true;
                    break;
                }
                chunk += "\n" + more;
            }
        }
        if (!dropped) {
            if (status == LUA_OK) status = repl_docall(L, 0, LUA_MULTRET);
            if (status == LUA_OK) print_results(L, base);
            else repl_report(L);
        }
        lua_settop(L, base);
    }
}
