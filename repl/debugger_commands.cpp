// debugger_commands.cpp: the debugger's ':' commands. Messages for bad input are one line on
// stderr, and the session goes on.
#include "debugger_commands.h"

#include <lua.hpp>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "debugger.h"
#include "debugger_internal.h"
#include "repl.h"
#include "tapedeck_lua.h"

namespace {

void fail(const std::string& message) {
    fflush(stdout);
    fprintf(stderr, "%s\n", message.c_str());
    fflush(stderr);
}

// "3", "1 4", or "all" -> breakpoint ids; false (message printed) when a word is not an id.
bool parse_ids(const std::string& command, const std::string& args, const std::vector<int>& all, std::vector<int>& ids) {
    if (args.empty()) {
        fail(":" + command + " needs a breakpoint number (see :breaks) or 'all'");
        return false;
    }
    if (args == "all") {
        ids = all;
        return true;
    }
    for (const std::string& word : dbg::split_words(args, " \t,")) {
        char* stop = nullptr;
        long id = strtol(word.c_str(), &stop, 10);
        if (*stop != '\0' || id <= 0) {
            fail(":" + command + ": '" + word + "' is not a breakpoint number (see :breaks)");
            return false;
        }
        ids.push_back(static_cast<int>(id));
    }
    return true;
}

std::vector<int> breakpoint_ids() {
    std::vector<int> ids;
    for (const Breakpoint& bp : debugger_breakpoints()) ids.push_back(bp.id);
    return ids;
}

// Apply `action` to the listed breakpoints, naming those that do not exist.
bool for_each_break(const char* command, const std::string& args, bool (*action)(lua_State*, int), lua_State* L,
                    const char* done) {
    std::vector<int> ids;
    if (!parse_ids(command, args, breakpoint_ids(), ids)) return true;
    for (int id : ids) {
        if (action(L, id)) printf("breakpoint %d %s\n", id, done);
        else fail(std::string(":") + command + ": there is no breakpoint " + std::to_string(id) + " (see :breaks)");
    }
    return true;
}

bool resume(const char* command, ResumeMode mode) {
    if (!debugger_attached()) {
        fail(std::string(":") + command + ": the debugger is not attached (dbg.attach())");
        return true;
    }
    std::string why;
    if (!debugger_resume(mode, &why))
        fail(std::string(":") + command + ": not stopped; it resumes a stop (set one with :break, then run code)");
    return true;
}

}  // namespace

bool debugger_cmd_break(lua_State* L, const std::string& args) {
    if (args.empty()) {
        fputs(debugger_breaks_format().c_str(), stdout);
        printf("usage: :break [once] [fwd|bwd] [op] NAME | node N | FILE:LINE [if CONDITION]\n");
        return true;
    }
    Breakpoint bp;
    std::string error;
    if (!debugger_parse_break(L, args, bp, error)) {
        fail(":break: " + error);
        return true;
    }
    int id = debugger_break_add(L, bp, error);
    if (!id) {
        fail(":break: " + error);
        return true;
    }
    for (const Breakpoint& b : debugger_breakpoints())
        if (b.id == id) printf("breakpoint %d: %s\n", id, b.description.c_str());
    if (!debugger_attached()) fail("(the debugger is not attached: dbg.attach() to stop there)");
    return true;
}

bool debugger_cmd_breaks(lua_State*, const std::string&) {
    fputs(debugger_breaks_format().c_str(), stdout);
    return true;
}

bool debugger_cmd_delete(lua_State* L, const std::string& args) {
    return for_each_break("delete", args, debugger_break_delete, L, "deleted");
}

bool debugger_cmd_disable(lua_State* L, const std::string& args) {
    return for_each_break("disable", args, [](lua_State*, int id) { return debugger_break_enable(id, false); }, L,
                          "disabled");
}

bool debugger_cmd_enable(lua_State* L, const std::string& args) {
    return for_each_break("enable", args, [](lua_State*, int id) { return debugger_break_enable(id, true); }, L,
                          "enabled");
}

bool debugger_cmd_step(lua_State*, const std::string&) { return resume("step", RESUME_STEP); }
bool debugger_cmd_stepi(lua_State*, const std::string&) { return resume("stepi", RESUME_STEPI); }
bool debugger_cmd_next(lua_State*, const std::string&) { return resume("next", RESUME_NEXT); }
bool debugger_cmd_finish(lua_State*, const std::string&) { return resume("finish", RESUME_FINISH); }
bool debugger_cmd_continue(lua_State*, const std::string&) { return resume("continue", RESUME_CONTINUE); }
bool debugger_cmd_abort(lua_State*, const std::string&) { return resume("abort", RESUME_ABORT); }

bool debugger_cmd_run(lua_State* L, const std::string& args) {
    if (debugger_stop()) {
        fail(":run: a run is stopped here; :continue or :abort it first");
        return true;
    }
    std::vector<std::string> words = dbg::split_words(args);
    if (words.empty()) {
        fail(":run needs a script, as in :run scripts/rnn_cell.lua");
        return true;
    }
    lua_createtable(L, static_cast<int>(words.size()), 1);   // the global arg, as for `tapedeck FILE ARGS`
    for (size_t i = 0; i < words.size(); ++i) {
        lua_pushstring(L, words[i].c_str());
        lua_rawseti(L, -2, static_cast<lua_Integer>(i));
    }
    lua_setglobal(L, "arg");
    for (size_t i = 1; i < words.size(); ++i) lua_pushstring(L, words[i].c_str());
    repl_run_chunk(L, words[0], "", true, static_cast<int>(words.size()) - 1);
    return true;
}

bool debugger_cmd_where(lua_State*, const std::string&) {
    fputs(debugger_where().c_str(), stdout);
    return true;
}

bool debugger_cmd_inspect(lua_State* L, const std::string& args) {
    if (args.empty()) {
        fail(":inspect needs an expression, as in :inspect out or :inspect grad_input[1]");
        return true;
    }
    if (!repl_eval(L, args)) return true;
    if (td::Tensor* t = tapedeck_test_tensor(L, -1)) {
        fputs(debugger_inspect(*t).c_str(), stdout);
    } else {
        fail(":inspect: '" + args + "' is a " + luaL_typename(L, -1) + ", not a tensor");
    }
    lua_pop(L, 1);
    return true;
}

bool debugger_cmd_watch(lua_State* L, const std::string& args) {
    if (args.empty()) {
        fputs(debugger_watches_format().c_str(), stdout);
        return true;
    }
    std::string error;
    int id = debugger_watch_add(L, args, &error);
    if (!id) {
        fail(":watch: '" + args + "' is not a Lua expression: " + error);
        return true;
    }
    printf("watch %d: %s (printed at every stop)\n", id, args.c_str());
    return true;
}

bool debugger_cmd_unwatch(lua_State*, const std::string& args) {
    if (args == "all") {
        debugger_watch_clear();
        printf("no watches\n");
        return true;
    }
    char* stop = nullptr;
    long id = strtol(args.c_str(), &stop, 10);
    if (args.empty() || *stop != '\0') {
        fail(":unwatch needs a watch number (see :watch) or 'all'");
        return true;
    }
    if (debugger_watch_delete(static_cast<int>(id))) printf("watch %ld deleted\n", id);
    else fail(":unwatch: there is no watch " + std::to_string(id) + " (see :watch)");
    return true;
}
