// debugger_commands.cpp: the debugger's ':' commands. Messages for bad input are one line on
// stderr, and the session goes on.
#include "debugger_commands.h"

#include <lua.hpp>

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <vector>

#include "debugger.h"
#include "debugger_internal.h"
#include "tapedeck_lua.h"
#include "value_text.h"
#include "text_util.h"

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
    for (const std::string& word : text_split_words(args, " \t,")) {
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
    if (!debugger_stop()) fail(std::string(":") + command + ": not stopped; it resumes a stop (set one with :break, then run code)");
    else if (!debugger_resume(mode, &why)) fail(std::string(":") + command + ": " + why);
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
    std::vector<std::string> words = text_split_words(args);
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
    dbg::g.front.run_chunk(L, words[0], "", true, static_cast<int>(words.size()) - 1);
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
    if (!dbg::g.front.eval(L, args)) return true;
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
    if (debugger_stop()) fputs(dbg::watch_text(L, id).c_str(), stdout);
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

// ---- pdb's commands: frames, source, values, until, ignore, post-mortem

namespace {

// "", or a positive count: :up 2. False (message printed) otherwise.
bool parse_count(const char* command, const std::string& args, int& count) {
    count = 1;
    if (args.empty()) return true;
    char* end = nullptr;
    long n = strtol(args.c_str(), &end, 10);
    if (*end != '\0' || n <= 0) {
        fail(std::string(":") + command + ": expected a number of frames (as in :" + command + " 2), not '" + args + "'");
        return false;
    }
    count = static_cast<int>(n);
    return true;
}

// After :up/:down: the selected frame, as pdb prints it, and its line.
void print_selected_frame() {
    const DebugStop* stop = debugger_stop();
    const DebugFrame& f = stop->frames[stop->frame];
    std::string text = dbg::source_line_text(f.source[0] == '@' ? f.source : f.short_src, f.line);
    printf("=> %s\n", dbg::frame_text(f).c_str());
    if (!text.empty()) printf("   %s\n", text.c_str());
}

bool select_frame(const char* command, const std::string& args, int direction) {
    int count;
    if (!parse_count(command, args, count)) return true;
    std::string why;
    if (!debugger_select_frame(direction * count, &why)) fail(std::string(":") + command + ": " + why);
    else print_selected_frame();
    return true;
}

// A positive number (a line, a breakpoint id); false when the word is not one.
bool parse_positive_number(const std::string& word, int& number) {
    char* end = nullptr;
    long n = strtol(word.c_str(), &end, 10);
    if (word.empty() || *end != '\0' || n <= 0) return false;
    number = static_cast<int>(n);
    return true;
}

}  // namespace

bool debugger_cmd_up(lua_State*, const std::string& args) { return select_frame("up", args, 1); }
bool debugger_cmd_down(lua_State*, const std::string& args) { return select_frame("down", args, -1); }

bool debugger_cmd_list(lua_State*, const std::string& args) {
    const char* usage = ":list: expected nothing (around the line, then onward), a line N, or a range FIRST,LAST (as in :list 10,20)";
    std::vector<std::string> words = text_split_words(args, " \t,");
    int first = 0, last = 0;
    if (words.size() > 2 || (!words.empty() && !parse_positive_number(words[0], first)) ||
        (words.size() == 2 && !parse_positive_number(words[1], last))) {
        fail(std::string(usage) + ", not '" + args + "'");
        return true;
    }
    int around = 0;
    if (words.size() == 1) {   // around line N
        around = first;
        first = 0;
    } else if (words.size() == 2 && last < first) {
        fail(":list: the range " + args + " ends before it starts");
        return true;
    }
    std::string text, why;
    if (!debugger_list(around, first, last, text, &why)) fail(":list: " + why);
    else fputs(text.c_str(), stdout);
    return true;
}

bool debugger_cmd_locals(lua_State* L, const std::string& args) {
    if (!args.empty()) {
        fail(":locals takes no arguments (it lists the selected frame's variables; :p EXPR prints one)");
        return true;
    }
    fputs(debugger_locals(L).c_str(), stdout);
    return true;
}

bool debugger_cmd_print(lua_State* L, const std::string& args) {
    if (args.empty()) {
        fail(":p needs an expression, as in :p x or :p model.fc1");
        return true;
    }
    int base = lua_gettop(L);
    if (dbg::g.front.load(L, "return " + args, "=stdin") != LUA_OK) {
        fail(":p: '" + args + "' is not a Lua expression: " + repl_error_text(L, -1));
        lua_settop(L, base);
        return true;
    }
    if (dbg::g.front.call(L, 0, LUA_MULTRET) != LUA_OK) {
        dbg::g.front.report(L);
        lua_settop(L, base);
        return true;
    }
    std::string out;
    for (int i = base + 1; i <= lua_gettop(L); ++i) out += (i > base + 1 ? "\t" : "") + debugger_format_value(L, i);
    if (lua_gettop(L) == base) out = "(no value)";
    printf("%s\n", out.c_str());
    lua_settop(L, base);
    return true;
}

bool debugger_cmd_until(lua_State*, const std::string& args) {
    int line = 0;
    if (!args.empty() && !parse_positive_number(args, line)) {
        fail(":until: expected nothing (the next line after this one) or a line number, not '" + args + "'");
        return true;
    }
    std::string why;
    if (!debugger_resume_until(line, &why)) fail(":until: " + why);
    return true;
}

bool debugger_cmd_ignore(lua_State*, const std::string& args) {
    std::vector<std::string> words = text_split_words(args);
    int id = 0, count = -1;
    char* end = nullptr;
    if (words.size() == 2) count = static_cast<int>(strtol(words[1].c_str(), &end, 10));
    if (words.size() != 2 || !parse_positive_number(words[0], id) || *end != '\0' || count < 0) {
        fail(":ignore needs a breakpoint number and a count, as in :ignore 1 3 (the next 3 hits do not stop)");
        return true;
    }
    if (!debugger_break_ignore(id, count)) {
        fail(":ignore: there is no breakpoint " + words[0] + " (see :breaks)");
        return true;
    }
    if (count == 0) printf("breakpoint %d stops at its next hit\n", id);
    else printf("breakpoint %d ignores its next %d hit%s\n", id, count, count == 1 ? "" : "s");
    return true;
}

bool debugger_cmd_post_mortem(lua_State* L, const std::string& args) {
    if (!args.empty()) {
        fail(":pm takes no arguments (it stops in the frame where the last error happened)");
        return true;
    }
    if (!debugger_attached()) {
        fail(":pm: the debugger is not attached (dbg.attach()), so no error was kept");
        return true;
    }
    std::string why;
    if (!debugger_post_mortem_last_error(L, &why)) fail(":pm: " + why);
    return true;
}
