// debugger_lua.cpp: the global `dbg` table — every debugger command from Lua, so scripts can set
// breakpoints with Lua predicates and actions, and step (`break` is a Lua keyword: break_on).
//
//   local id = dbg.break_on{op = "tanh", phase = "bwd", when = function(t) return t:max():item() > 1 end}
//   dbg.break_on{op = "mm", phase = "bwd", once = true, action = function(stop) print(stop.grad_input[1]) end}
//   dbg.break_on{fn = "MyReLU", phase = "bwd"}      -- a torch.Function, by name
//   dbg.step(), dbg.continue(), dbg.delete(id), dbg.breaks(), dbg.stopped(), dbg.command(":where")
#include <lua.hpp>

#include <cstring>
#include <stdexcept>
#include <string>

#include "debugger.h"
#include "debugger_internal.h"
#include "debugger_why.h"
#include "history.h"
#include "tensor_stats.h"
#include "tapedeck_lua.h"
#include "value_text.h"
#include "lua_util.h"

namespace {
using tdlua::set_integer;
using tdlua::set_number;
using tdlua::set_boolean;

// dbg.break_on's errors: thrown, so that run_guarded names the call and the user's line.
[[noreturn]] void break_fail(const std::string& message) { throw std::runtime_error("dbg.break_on: " + message); }

// Field `field` of the table (its value at idx) as a string: an error naming the field otherwise.
const char* field_string(lua_State* L, int idx, const char* field) {
    if (lua_type(L, idx) != LUA_TSTRING && lua_type(L, idx) != LUA_TNUMBER)
        break_fail(std::string(field) + " must be a string, got " + luaL_typename(L, idx));
    return lua_tostring(L, idx);
}

// The phase field: "fwd", "forward", "bwd", "backward", "both", "line".
uint8_t check_phase(lua_State* L, int idx, uint8_t fallback) {
    if (lua_isnil(L, idx)) return fallback;
    const char* p = field_string(L, idx, "phase");
    if (!strcmp(p, "fwd") || !strcmp(p, "forward")) return BREAK_FORWARD;
    if (!strcmp(p, "bwd") || !strcmp(p, "backward")) return BREAK_BACKWARD;
    if (!strcmp(p, "both")) return BREAK_BOTH;
    if (!strcmp(p, "line")) return BREAK_LINE;
    break_fail(std::string("phase must be \"fwd\", \"bwd\", \"both\" or \"line\", not \"") + p + "\"");
}

// A registry ref to the function in field `field` of the table at 1, or LUA_NOREF.
int function_field(lua_State* L, const char* field) {
    if (lua_getfield(L, 1, field) == LUA_TNIL) {
        lua_pop(L, 1);
        return LUA_NOREF;
    }
    if (!lua_isfunction(L, -1)) break_fail(std::string(field) + " must be a function, got " + luaL_typename(L, -1));
    return luaL_ref(L, LUA_REGISTRYINDEX);
}

const char BREAK_FIELDS[] = "op fn phase node line file when once action";

// The breakpoint's target from the fields op (2), node (3), line (4), file (5), fn (7).
void break_target(lua_State* L, Breakpoint& bp) {
    if (!lua_isnil(L, 2)) {
        bp.target = TARGET_OP;
        bp.function_name = field_string(L, 2, "op");
    } else if (!lua_isnil(L, 7)) {
        bp.target = TARGET_OP;
        bp.op = td::OP_function;
        bp.function_name = field_string(L, 7, "fn");
    } else if (!lua_isnil(L, 3)) {
        bp.target = TARGET_NODE;
        if (!lua_isinteger(L, 3)) break_fail(std::string("node must be an integer (a node id), got ") + luaL_typename(L, 3));
        bp.node_id = lua_tointeger(L, 3);
    } else if (!lua_isnil(L, 4)) {
        bp.target = TARGET_LINE;
        if (lua_isinteger(L, 4)) {
            bp.line = static_cast<int>(lua_tointeger(L, 4));
            bp.file = lua_isnil(L, 5) ? "" : field_string(L, 5, "file");
        } else {
            std::string spec = field_string(L, 4, "line");
            size_t colon = spec.rfind(':');
            if (colon == std::string::npos) break_fail("line must be a number or \"file.lua:12\"");
            bp.file = spec.substr(0, colon);
            bp.line = atoi(spec.c_str() + colon + 1);
        }
    }
}

// dbg.break_on{op=, phase=, node=, line=, file=, when=, once=, action=} -> id (run guarded: l_break_on)
int break_on(lua_State* L) {
    if (!lua_istable(L, 1))
        tdlua::arg_fail(1, "takes a table {op =, fn =, node =, line =, phase =, when =, once =, action =}, got %s",
                        tdlua::type_name_of(L, 1));
    tapedeck_check_options(L, 1, "dbg.break_on", BREAK_FIELDS);
    Breakpoint bp;
    lua_getfield(L, 1, "op");
    lua_getfield(L, 1, "node");
    lua_getfield(L, 1, "line");
    lua_getfield(L, 1, "file");
    lua_getfield(L, 1, "phase");   // 6
    lua_getfield(L, 1, "fn");      // 7: a torch.Function by name, maybe not defined yet
    break_target(L, bp);
    bp.phases = check_phase(L, 6, bp.target == TARGET_LINE ? BREAK_LINE : BREAK_BOTH);
    lua_getfield(L, 1, "once");
    bp.once = lua_toboolean(L, -1);
    lua_getfield(L, 1, "when");
    if (lua_isfunction(L, -1)) {
        bp.condition = CONDITION_LUA;
        bp.condition_text = "<Lua function>";
        lua_pushvalue(L, -1);
        bp.function_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    } else if (!lua_isnil(L, -1)) {   // as ':break ... if' takes it: "nan", "max > 1e3", Lua of t
        if (!dbg::parse_condition(field_string(L, -1, "when"), bp)) break_fail(std::string("bad condition '") + lua_tostring(L, -1) + "'");
    }
    if (bp.target == TARGET_ANY && bp.condition == CONDITION_NONE) break_fail("give op, fn, node, line or when");
    bp.action_ref = function_field(L, "action");
    std::string error;
    int id = debugger_break_add(L, bp, error);
    if (!id) break_fail(error);
    lua_pushinteger(L, id);
    return 1;
}

int l_break_on(lua_State* L) { return tdlua::run_guarded(L, break_on, "dbg.break_on"); }

// Fields of the table on top of the stack.
int l_breaks(lua_State* L) {
    const std::vector<Breakpoint>& breaks = debugger_breakpoints();
    lua_createtable(L, static_cast<int>(breaks.size()), 0);
    for (size_t i = 0; i < breaks.size(); ++i) {
        const Breakpoint& bp = breaks[i];
        lua_createtable(L, 0, 5);
        set_integer(L, "id", bp.id);
        set_boolean(L, "enabled", bp.enabled);
        set_integer(L, "hits", bp.hits);
        set_integer(L, "ignore", bp.ignore);
        set_boolean(L, "once", bp.once);
        lua_pushstring(L, bp.description.c_str());
        lua_setfield(L, -2, "description");
        lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
    return 1;
}

int l_delete(lua_State* L) {
    lua_pushboolean(L, debugger_break_delete(L, static_cast<int>(luaL_checkinteger(L, 1))));
    return 1;
}

int l_disable(lua_State* L) {
    lua_pushboolean(L, debugger_break_enable(static_cast<int>(luaL_checkinteger(L, 1)), false));
    return 1;
}

int l_enable(lua_State* L) {
    lua_pushboolean(L, debugger_break_enable(static_cast<int>(luaL_checkinteger(L, 1)), true));
    return 1;
}

int resume(lua_State* L, ResumeMode mode, const char* name) {
    std::string why;
    if (!debugger_resume(mode, &why)) return luaL_error(L, "dbg.%s: %s", name, why.c_str());
    return 0;
}

int l_step(lua_State* L) { return resume(L, RESUME_STEP, "step"); }
int l_stepi(lua_State* L) { return resume(L, RESUME_STEPI, "stepi"); }
int l_next(lua_State* L) { return resume(L, RESUME_NEXT, "next"); }
int l_finish(lua_State* L) { return resume(L, RESUME_FINISH, "finish"); }
// dbg.continue() at a stop resumes it; elsewhere it cancels a pending step or pause (false).
int l_continue(lua_State* L) {
    if (!debugger_stop()) {
        debugger_cancel_step();
        lua_pushboolean(L, 0);
        return 1;
    }
    resume(L, RESUME_CONTINUE, "continue");
    lua_pushboolean(L, 1);
    return 1;
}
int l_abort(lua_State* L) { return resume(L, RESUME_ABORT, "abort"); }

int l_pause(lua_State*) {
    debugger_pause();
    return 0;
}

// dbg.on_stop(f): f(stop) runs at every stop (that has no action of its own) instead of the
// prompt; dbg.on_stop(nil) brings the prompt back.
int l_on_stop(lua_State* L) {
    if (!lua_isnoneornil(L, 1)) luaL_checktype(L, 1, LUA_TFUNCTION);
    luaL_unref(L, LUA_REGISTRYINDEX, dbg::g.on_stop_ref);
    lua_settop(L, 1);
    dbg::g.on_stop_ref = lua_isnil(L, 1) ? LUA_NOREF : luaL_ref(L, LUA_REGISTRYINDEX);
    return 0;
}

int l_stopped(lua_State* L) {
    dbg::push_stop_names(L);
    return 1;
}

int l_where(lua_State* L) {
    lua_pushstring(L, debugger_where().c_str());
    return 1;
}

int l_banner(lua_State* L) {
    lua_pushstring(L, debugger_banner().c_str());
    return 1;
}

// dbg.inspect(t) -> {min, max, mean, std, sum, norm, absmax, count, nan, inf, histogram}
int l_inspect(lua_State* L) {
    td::Tensor* t = tapedeck_test_tensor(L, 1);
    if (!t) return luaL_error(L, "dbg.inspect: expected a tensor, got %s", luaL_typename(L, 1));
    td::TensorStats s = td::tensor_stats(t->value(), static_cast<int>(luaL_optinteger(L, 2, 16)));
    lua_createtable(L, 0, 11);
    set_number(L, "min", s.min);
    set_number(L, "max", s.max);
    set_number(L, "mean", s.mean);
    set_number(L, "std", s.std);
    set_number(L, "sum", s.sum);
    set_number(L, "norm", s.norm);
    set_number(L, "absmax", s.absmax);
    set_integer(L, "count", s.finite);
    set_integer(L, "nan", s.nan);
    set_integer(L, "inf", s.inf());
    lua_createtable(L, static_cast<int>(s.histogram.size()), 0);
    for (size_t i = 0; i < s.histogram.size(); ++i) {
        lua_pushinteger(L, s.histogram[i]);
        lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
    lua_setfield(L, -2, "histogram");
    return 1;
}

int l_watch(lua_State* L) {
    std::string error;
    int id = debugger_watch_add(L, luaL_checkstring(L, 1), &error);
    if (!id) return luaL_error(L, "dbg.watch: '%s' is not a Lua expression: %s", lua_tostring(L, 1), error.c_str());
    lua_pushinteger(L, id);
    return 1;
}

int l_unwatch(lua_State* L) {
    lua_pushboolean(L, debugger_watch_delete(static_cast<int>(luaL_checkinteger(L, 1))));
    return 1;
}

// dbg.command(":where") or dbg.command("where"): any ':' command.
int l_command(lua_State* L) {
    std::string line = luaL_checkstring(L, 1);
    size_t first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line[first] == ':') line = line.substr(first + 1);
    if (!dbg::g.front.run_command(L, line)) dbg::g.front.request_quit();
    return 0;
}

int l_run(lua_State* L) {
    const char* file = luaL_checkstring(L, 1);
    if (debugger_stop()) return luaL_error(L, "dbg.run: a run is stopped here; continue it first");
    int nargs = lua_gettop(L) - 1;
    if (luaL_loadfile(L, file) != LUA_OK)   // cannot open it, or a syntax error in it
        return luaL_error(L, "dbg.run: %s", repl_error_text(L, -1).c_str());
    lua_insert(L, 2);
    lua_call(L, nargs, LUA_MULTRET);
    return lua_gettop(L) - 1;
}

int l_attach(lua_State* L) {
    if (!dbg::g.get_source) return luaL_error(L, "dbg.attach: this program has no input for stops");
    debugger_attach(L, dbg::g.get_source, dbg::g.break_in_on_ctrl_c);
    return 0;
}

int l_detach(lua_State*) {
    debugger_detach();
    return 0;
}

int l_attached(lua_State* L) {
    lua_pushboolean(L, debugger_attached());
    return 1;
}

// dbg.hooks() -> {events = {"after", "group_done"}, lua_hook = bool, engine_observed = bool}: what
// the debugger costs the program now: the engine hook events it subscribed to (none while nothing
// can stop: a node then costs the engine one test), whether it has a Lua line hook set, and
// whether any observer at all wants engine events (the viewer's too).
// dbg.history([size]) -> {budget, bytes, copies, events, kept, newest, oldest, oldest_kept,
// recording[, rewound_to]}: the rewind history (:history; size "200MB", "off" sets the budget).
int l_history(lua_State* L) {
    if (!lua_isnoneornil(L, 1)) {
        size_t bytes = 0;
        std::string why;
        if (!td::history_parse_bytes(luaL_checkstring(L, 1), &bytes, &why)) {
            if (!why.empty()) return luaL_error(L, "dbg.history: %s", why.c_str());
            return luaL_error(L, "dbg.history: give a size (\"200MB\", \"1GB\", \"512KB\") or \"off\", not '%s'", lua_tostring(L, 1));
        }
        td::history_set_budget(bytes);
    }
    dbg::rewind_push_history_table(L);
    return 1;
}

int l_hooks(lua_State* L) {
    lua_createtable(L, 0, 3);
    lua_newtable(L);
    const struct { td::HookEvent event; const char* name; } names[] = {
        {td::HOOK_BEFORE, "before"}, {td::HOOK_AFTER, "after"}, {td::HOOK_GROUP_DONE, "group_done"}};
    int n = 0;
    for (const auto& e : names) {
        if (!(dbg::g.engine_events & td::hook_bit(e.event))) continue;
        lua_pushstring(L, e.name);
        lua_rawseti(L, -2, ++n);
    }
    lua_setfield(L, -2, "events");
    lua_pushboolean(L, dbg::g.line_hook && dbg::g.observer != 0);
    lua_setfield(L, -2, "lua_hook");
    lua_pushboolean(L, td::engine_observed());
    lua_setfield(L, -2, "engine_observed");
    return 1;
}

const luaL_Reg dbg_functions[] = {
    {"break_on", l_break_on}, {"breaks", l_breaks}, {"delete", l_delete}, {"disable", l_disable},
    {"enable", l_enable}, {"step", l_step}, {"stepi", l_stepi}, {"next", l_next}, {"finish", l_finish},
    {"continue", l_continue}, {"abort", l_abort}, {"pause", l_pause}, {"on_stop", l_on_stop}, {"stopped", l_stopped},
    {"where", l_where}, {"banner", l_banner}, {"inspect", l_inspect}, {"watch", l_watch},
    {"unwatch", l_unwatch}, {"command", l_command}, {"run", l_run}, {"attach", l_attach},
    {"detach", l_detach}, {"attached", l_attached}, {"hooks", l_hooks}, {"why", debugger_why_lua},
    {"gradcheck", dbg::lua_gradcheck}, {"diff", debugger_diff_lua}, {"history", l_history},
    {nullptr, nullptr},
};

}  // namespace

void debugger_open_lua(lua_State* L) {
    luaL_newlib(L, dbg_functions);
    tapedeck_declare_options(L, "dbg.break_on", BREAK_FIELDS);
    lua_setglobal(L, "dbg");
}
