// lua_plan_values.cpp: the Lua values a frozen function reads — found while it is recorded (a
// call hook, a proxy for the globals), guarded at each call. lua_plan_values.h says the contract.
//
// [SECTION] recorder   the state of one recording, guards added, tables' fields
// [SECTION] hook       the call hook: functions whose result varies, upvalues, _ENV swapped
// [SECTION] globals    the proxy that notes global reads
// [SECTION] api        begin, end, check, describe, release
#include "lua_plan_values.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unordered_set>

#include "bindings_state.h"
#include "lua_util.h"
#include "plan.h"
#include "source_cache.h"
#include "tapedeck_lua.h"

namespace tdlua {

// ============================================================================================
// [SECTION] recorder

namespace {

constexpr int MAX_GUARDS = 256;          // per plan: more is said on stderr, not guarded
constexpr int MAX_TABLE_FIELDS = 32;     // a table with more values is said on stderr, not guarded

// The work table's slots (a registry table for the recording's Lua values).
enum WorkSlot { WORK_VALUES = 1, WORK_SWAPPED = 2, WORK_PROXY = 3, WORK_GLOBALS = 4 };

// A function whose result varies from call to call, and what to do instead.
struct VaryingFunction {
    lua_CFunction fn = nullptr;
    const char* name;
    const char* instead;
};

}  // namespace

struct LuaValueRecorder {
    lua_State* L = nullptr;
    lua_Hook old_hook = nullptr;
    int old_mask = 0, old_count = 0;
    int work_ref = LUA_NOREF;
    int swapped = 0;                                  // entries (function, index) in WORK_SWAPPED
    int base_depth = 0;                               // frames on the stack when the recording began
    std::unordered_set<const void*> seen_functions, seen_cells, seen_tables, library_tables;
    std::unordered_set<std::string> seen_globals;
    std::vector<LuaValueGuard> guards;
    std::vector<VaryingFunction> varying;
    bool said_overflow = false;
};

namespace {

bool is_scalar(int type) { return type == LUA_TNUMBER || type == LUA_TBOOLEAN || type == LUA_TSTRING; }

void push_work(lua_State* L, const LuaValueRecorder& r, int slot) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, r.work_ref);
    lua_rawgeti(L, -1, slot);
    lua_remove(L, -2);
}

// Adds a guard: the holder (function or table at holder_idx), the key (key_idx, 0: none) and the
// value at value_idx, as the recording saw it.
void add_guard(lua_State* L, LuaValueRecorder& r, LuaValueGuard guard, int holder_idx, int key_idx, int value_idx) {
    if (static_cast<int>(r.guards.size()) >= MAX_GUARDS) {
        if (!r.said_overflow)
            fprintf(stderr, "freeze: the function reads more than %d Lua numbers, booleans and strings; %s (%s) and "
                            "those after it are not guarded\n",
                    MAX_GUARDS, guard.name.c_str(), td::source_loc_str(guard.where).c_str());
        r.said_overflow = true;
        return;
    }
    holder_idx = lua_absindex(L, holder_idx);
    value_idx = lua_absindex(L, value_idx);
    if (key_idx) key_idx = lua_absindex(L, key_idx);
    push_work(L, r, WORK_VALUES);
    lua_Integer at = 3 * static_cast<lua_Integer>(r.guards.size());
    lua_pushvalue(L, holder_idx);
    lua_rawseti(L, -2, at + 1);
    if (key_idx) {
        lua_pushvalue(L, key_idx);
        lua_rawseti(L, -2, at + 2);
    }
    lua_pushvalue(L, value_idx);
    lua_rawseti(L, -2, at + 3);
    lua_pop(L, 1);
    r.guards.push_back(std::move(guard));
}

// The name of a table's field for people: "cfg.lr", "sizes[2]".
std::string field_name(lua_State* L, const std::string& table, int key_idx) {
    if (lua_type(L, key_idx) == LUA_TSTRING) return table + "." + lua_tostring(L, key_idx);
    return table + "[" + std::to_string(static_cast<long long>(lua_tointeger(L, key_idx))) + "]";
}

// Guards the numbers, booleans and strings at the top level of the table at idx (string and
// integer keys, read raw), named after `table`; each table once; none of the library's tables.
void guard_fields(lua_State* L, LuaValueRecorder& r, int idx, const std::string& table, td::SourceLoc where) {
    idx = lua_absindex(L, idx);
    const void* p = lua_topointer(L, idx);
    if (r.library_tables.count(p) || !r.seen_tables.insert(p).second) return;
    int count = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        count += is_scalar(lua_type(L, -1)) && (lua_type(L, -2) == LUA_TSTRING || lua_isinteger(L, -2));
        lua_pop(L, 1);
    }
    if (count > MAX_TABLE_FIELDS) {
        fprintf(stderr, "freeze: %s (%s) holds %d Lua numbers, booleans or strings: too many to guard at each call, "
                        "so a plan keeps the ones it read; pass what changes as a tensor argument\n",
                table.c_str(), td::source_loc_str(where).c_str(), count);
        return;
    }
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        if (is_scalar(lua_type(L, -1)) && (lua_type(L, -2) == LUA_TSTRING || lua_isinteger(L, -2))) {
            LuaValueGuard g;
            g.holder = LUA_VALUE_FIELD;
            g.name = field_name(L, table, lua_gettop(L) - 1);
            g.kind = "a field";
            g.where = where;
            add_guard(L, r, g, idx, lua_gettop(L) - 1, lua_gettop(L));
        }
        lua_pop(L, 1);
    }
}

// Adds the table on top and its tables (one level) to the library's.
void add_library_table(lua_State* L, LuaValueRecorder& r) {
    if (!lua_istable(L, -1)) return;
    r.library_tables.insert(lua_topointer(L, -1));
    int t = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, t)) {
        if (lua_istable(L, -1)) r.library_tables.insert(lua_topointer(L, -1));
        lua_pop(L, 1);
    }
}

// The tables of Lua's and tapedeck's libraries (math, torch, nn, F, dbg, viewer, the globals
// themselves, and their tables one level down): not the user's values. A module the user loads
// with require, and the globals' other tables, are the user's.
void collect_library_tables(lua_State* L, LuaValueRecorder& r) {
    static const char* const libraries[] = {"package", "coroutine", "table", "io",  "os",    "string",
                                            "math",    "utf8",      "debug", "nn",  "optim"};
    static const char* const globals[] = {"torch", "F", "dbg", "viewer"};
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
    r.library_tables.insert(lua_topointer(L, -1));
    for (const char* name : globals) {
        lua_getfield(L, -1, name);
        add_library_table(L, r);
        lua_settop(L, lua_gettop(L) - 1);
    }
    lua_pop(L, 1);
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    int loaded = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, loaded)) {
        const char* key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "";
        bool library = strncmp(key, "tapedeck", 8) == 0;
        for (const char* name : libraries) library = library || strcmp(key, name) == 0;
        if (library) add_library_table(L, r);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
}

// The C function at `path` ("math.random") in package.loaded, or null.
lua_CFunction loaded_function(lua_State* L, const char* module, const char* field) {
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_getfield(L, -1, module);
    lua_CFunction fn = nullptr;
    if (lua_istable(L, -1)) {
        lua_getfield(L, -1, field);
        fn = lua_tocfunction(L, -1);
        lua_pop(L, 1);
    }
    lua_pop(L, 2);
    return fn;
}

// A file's read method (io.stdin:read), or null.
lua_CFunction file_read_function(lua_State* L) {
    lua_CFunction fn = nullptr;
    luaL_getmetatable(L, LUA_FILEHANDLE);
    if (lua_istable(L, -1)) {
        lua_getfield(L, -1, "__index");
        if (lua_istable(L, -1)) {
            lua_getfield(L, -1, "read");
            fn = lua_tocfunction(L, -1);
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return fn;
}

void collect_varying_functions(lua_State* L, LuaValueRecorder& r) {
    const char* random_instead =
        "draw it outside and pass it as an argument (f(x, math.random(0, 3)): a plan per value, cached), or draw a "
        "tensor inside (torch.randint(low, high, {1}), torch.rand(...)) and keep the computation in tensors";
    const char* time_instead = "read it outside and pass it as an argument (a tensor argument when it changes every call)";
    const char* read_instead = "read outside the frozen function and pass what you read as an argument";
    r.varying = {
        {loaded_function(L, "math", "random"), "math.random", random_instead},
        {loaded_function(L, "os", "time"), "os.time", time_instead},
        {loaded_function(L, "os", "clock"), "os.clock", time_instead},
        {loaded_function(L, "os", "date"), "os.date", time_instead},
        {loaded_function(L, "io", "read"), "io.read", read_instead},
        {file_read_function(L), "a file's read", read_instead},
    };
}

// ============================================================================================
// [SECTION] hook

// The first line of the function (`ar`, "S") where `name` is used as a name (not as a field
// after `.` or `:`); the line it was defined on when the source cannot be read.
td::SourceLoc first_use(const lua_Debug& ar, const char* name) {
    td::SourceLoc loc;
    loc.file = td::source_file_intern(ar.short_src);
    loc.line = ar.linedefined;
    if (ar.source[0] != '@') return loc;
    const std::vector<std::string>* lines = td::source_lines(ar.source + 1);
    if (!lines) return loc;
    size_t length = strlen(name);
    auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    int last = std::min(ar.lastlinedefined, static_cast<int>(lines->size()));
    for (int line = std::max(1, ar.linedefined); line <= last; ++line) {
        const std::string& text = (*lines)[static_cast<size_t>(line - 1)];
        for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 1)) {
            bool joined_before = at > 0 && (word(text[at - 1]) || text[at - 1] == '.' || text[at - 1] == ':');
            bool joined_after = at + length < text.size() && word(text[at + length]);
            if (!joined_before && !joined_after) {
                loc.line = line;
                return loc;
            }
        }
    }
    return loc;
}

// The function at fn_idx reads globals through `_ENV` upvalue `index` (the value on top): when it
// is the globals table, the proxy takes its place until the recording ends.
void swap_env(lua_State* L, LuaValueRecorder& r, int fn_idx, int index) {
    push_work(L, r, WORK_GLOBALS);
    bool globals = lua_rawequal(L, -1, -2);
    lua_pop(L, 1);
    if (!globals || !r.seen_cells.insert(lua_upvalueid(L, fn_idx, index)).second) return;
    push_work(L, r, WORK_PROXY);
    lua_setupvalue(L, fn_idx, index);
    push_work(L, r, WORK_SWAPPED);
    lua_pushvalue(L, fn_idx);
    lua_rawseti(L, -2, 2 * r.swapped + 1);
    lua_pushinteger(L, index);
    lua_rawseti(L, -2, 2 * r.swapped + 2);
    lua_pop(L, 1);
    ++r.swapped;
}

int stack_depth(lua_State* L) {
    lua_Debug ar;
    int depth = 0;
    while (lua_getstack(L, depth, &ar)) ++depth;
    return depth;
}

// Whether the function called (level 0, `callee` its "S" info) is a closure written inside a
// function that runs in the recording, below it on the stack (`torch.no_grad(function() ... end)`
// inside the frozen function). Its upvalues are then that function's locals, which live for one
// call (nothing outside changes them between calls), or that function's own upvalues, noted when
// it was called: none is guarded again.
bool nested_in_recorded_frame(lua_State* L, const LuaValueRecorder& r, const lua_Debug& callee) {
    int inside = stack_depth(L) - r.base_depth;   // the frames the recording made, the callee's first
    lua_Debug ar;
    for (int level = 1; level < inside && lua_getstack(L, level, &ar); ++level) {
        lua_getinfo(L, "S", &ar);
        if (ar.what[0] == 'C' || strcmp(ar.source, callee.source) != 0) continue;
        bool around = ar.linedefined <= callee.linedefined && ar.lastlinedefined >= callee.lastlinedefined;
        bool same = ar.linedefined == callee.linedefined && ar.lastlinedefined == callee.lastlinedefined;
        if (around && !same) return true;
    }
    return false;
}

// A Lua function of the user's is called for the first time in this recording (it is at fn_idx,
// `ar` its "S" info): its upvalues are noted, but for those of a closure written inside a function
// running in the recording (nested_in_recorded_frame), of which only _ENV is.
void note_function(lua_State* L, LuaValueRecorder& r, int fn_idx, const lua_Debug& ar) {
    bool nested = nested_in_recorded_frame(L, r, ar);
    for (int i = 1;; ++i) {
        const char* name = lua_getupvalue(L, fn_idx, i);
        if (!name) break;
        int type = lua_type(L, -1);
        if (strcmp(name, "_ENV") == 0) {
            swap_env(L, r, fn_idx, i);
        } else if (!nested && (is_scalar(type) || type == LUA_TNIL || type == LUA_TTABLE) &&
                   r.seen_cells.insert(lua_upvalueid(L, fn_idx, i)).second) {
            td::SourceLoc where = first_use(ar, name);
            if (type == LUA_TTABLE) {
                guard_fields(L, r, -1, name, where);
            } else {
                LuaValueGuard g;
                g.holder = LUA_VALUE_UPVALUE;
                g.upvalue = i;
                g.name = name;
                g.kind = "an upvalue";
                g.where = where;
                add_guard(L, r, g, fn_idx, 0, -1);
            }
        }
        lua_pop(L, 1);
    }
}

// A call of a C function: refused when its result varies from call to call.
void note_c_call(lua_State* L, LuaValueRecorder& r, lua_CFunction fn) {
    for (const VaryingFunction& v : r.varying) {
        if (!v.fn || v.fn != fn) continue;
        std::string where = where_at(L, 1);
        td::plan_record_refuse("the function calls " + std::string(v.name) + (where.empty() ? "" : " at " + where) +
                               ", whose result changes from call to call: a plan would replay this call's result "
                               "every time. Instead, " + v.instead);
        return;
    }
}

// Whether the value at idx is an nn.Module instance (the fields Module:new gives every one).
bool is_module(lua_State* L, int idx) {
    if (lua_type(L, idx) != LUA_TTABLE) return false;
    bool order = lua_getfield(L, idx, "_order") == LUA_TTABLE;   // raw fields: no __index runs
    lua_pop(L, 1);
    if (!order) return false;
    lua_pushstring(L, "training");
    bool training = lua_rawget(L, idx) == LUA_TBOOLEAN;
    lua_pop(L, 1);
    return training;
}

// A call whose first argument (self) is an nn.Module (Module:__call, a forward, the library's or
// the user's): the module's own numbers, booleans and strings are guarded (its training flag, a
// Dropout's p, a LeakyReLU's negative_slope), named by its class, at the user's line that led to
// the call. Each module once.
void note_module_self(lua_State* L, LuaValueRecorder& r, lua_Debug* event) {
    const char* local = lua_getlocal(L, event, 1);
    if (!local) return;
    int self = lua_gettop(L);
    if (is_module(L, self) && !r.seen_tables.count(lua_topointer(L, self))) {
        std::string name = "a module";
        if (lua_getmetatable(L, self)) {
            lua_pushstring(L, "__name");
            if (lua_rawget(L, -2) == LUA_TSTRING) name = lua_tostring(L, -1);
            lua_pop(L, 2);
        }
        td::SourceLoc where;
        lua_Debug user;
        if (find_user_frame(L, 1, &user)) where = td::SourceLoc{td::source_file_intern(user.short_src), user.currentline};
        guard_fields(L, r, self, name, where);
    }
    lua_settop(L, self - 1);
}

void note_call(lua_State* L, LuaValueRecorder& r, lua_Debug* event) {
    if (!lua_checkstack(L, 12)) return;
    lua_Debug ar = *event;
    lua_getinfo(L, "f", &ar);
    int fn = lua_gettop(L);
    if (lua_iscfunction(L, fn)) {
        note_c_call(L, r, lua_tocfunction(L, fn));
    } else {
        note_module_self(L, r, event);
        if (r.seen_functions.insert(lua_topointer(L, fn)).second) {
            lua_pushvalue(L, fn);
            lua_getinfo(L, ">S", &ar);
            if (!is_library_frame(ar)) note_function(L, r, fn, ar);
        }
    }
    lua_settop(L, fn - 1);
}

// The recording's hook: calls are noted; every event the hook it replaced asked for goes on to it.
void on_call_hook(lua_State* L, lua_Debug* ar) {
    LuaValueRecorder* r = bindings_state.lua_value_recorder;
    if (!r) return;
    lua_Hook old = r->old_hook;
    int wanted = r->old_mask;
    if (r->L == L && (ar->event == LUA_HOOKCALL || ar->event == LUA_HOOKTAILCALL)) note_call(L, *r, ar);
    int bit = ar->event == LUA_HOOKTAILCALL ? LUA_MASKCALL : 1 << ar->event;
    if (old && (wanted & bit)) old(L, ar);
}

// ============================================================================================
// [SECTION] globals

// proxy[key] (upvalue 1: the globals): the global as the code would read it; the first read of
// each name notes it, at the line that read it.
int proxy_index(lua_State* L) {
    lua_settop(L, 2);
    lua_pushvalue(L, 2);
    lua_gettable(L, lua_upvalueindex(1));
    LuaValueRecorder* r = bindings_state.lua_value_recorder;
    if (!r || lua_type(L, 2) != LUA_TSTRING || !r->seen_globals.insert(lua_tostring(L, 2)).second) return 1;
    int type = lua_type(L, 3);
    if (!is_scalar(type) && type != LUA_TNIL && type != LUA_TTABLE) return 1;
    lua_Debug ar;
    td::SourceLoc where;
    if (find_user_frame(L, 1, &ar)) {
        where.file = td::source_file_intern(ar.short_src);
        where.line = ar.currentline;
    }
    if (type == LUA_TTABLE) {
        guard_fields(L, *r, 3, lua_tostring(L, 2), where);
    } else {
        LuaValueGuard g;
        g.holder = LUA_VALUE_GLOBAL;
        g.name = lua_tostring(L, 2);
        g.kind = "a global";
        g.where = where;
        add_guard(L, *r, g, lua_upvalueindex(1), 2, 3);
    }
    lua_settop(L, 3);
    return 1;
}

// proxy[key] = value: the global is set.
int proxy_newindex(lua_State* L) {
    lua_settop(L, 3);
    lua_settable(L, lua_upvalueindex(1));
    return 0;
}

// Pushes a new proxy for the globals table.
void push_proxy(lua_State* L) {
    lua_newtable(L);
    lua_createtable(L, 0, 2);
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
    lua_pushcclosure(L, proxy_index, 1);
    lua_setfield(L, -2, "__index");
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
    lua_pushcclosure(L, proxy_newindex, 1);
    lua_setfield(L, -2, "__newindex");
    lua_setmetatable(L, -2);
}

// Puts the globals back in the _ENV upvalues the proxy took (those still holding it).
void restore_envs(lua_State* L, LuaValueRecorder& r) {
    push_work(L, r, WORK_SWAPPED);
    int swapped = lua_gettop(L);
    push_work(L, r, WORK_PROXY);
    int proxy = lua_gettop(L);
    for (int k = 0; k < r.swapped; ++k) {
        lua_rawgeti(L, swapped, 2 * k + 1);
        lua_rawgeti(L, swapped, 2 * k + 2);
        int index = static_cast<int>(lua_tointeger(L, -1));
        lua_pop(L, 1);
        if (lua_getupvalue(L, -1, index) && lua_rawequal(L, -1, proxy)) {
            lua_pop(L, 1);
            lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
            lua_setupvalue(L, -2, index);
        } else {
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    lua_settop(L, swapped - 1);
}

}  // namespace

// ============================================================================================
// [SECTION] api

void lua_values_record_begin(lua_State* L, int first, int n, const std::vector<std::string>& names) {
    if (bindings_state.lua_value_recorder) return;   // one recording at a time (plan_record_begin refuses more)
    auto* r = new LuaValueRecorder();
    r->L = L;
    lua_createtable(L, 4, 0);
    lua_newtable(L);
    lua_rawseti(L, -2, WORK_VALUES);
    lua_newtable(L);
    lua_rawseti(L, -2, WORK_SWAPPED);
    push_proxy(L);
    lua_rawseti(L, -2, WORK_PROXY);
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
    lua_rawseti(L, -2, WORK_GLOBALS);
    r->work_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    collect_library_tables(L, *r);
    collect_varying_functions(L, *r);
    td::SourceLoc where;
    lua_Debug ar;
    if (find_user_frame(L, 1, &ar)) {
        where.file = td::source_file_intern(ar.short_src);
        where.line = ar.currentline;
    }
    for (int i = 0; i < n; ++i)
        if (lua_istable(L, first + i))
            guard_fields(L, *r, first + i, i < static_cast<int>(names.size()) ? names[i] : "argument " + std::to_string(i + 1),
                         where);
    r->base_depth = stack_depth(L);
    r->old_hook = lua_gethook(L);
    r->old_mask = lua_gethookmask(L);
    r->old_count = lua_gethookcount(L);
    bindings_state.lua_value_recorder = r;
    lua_sethook(L, on_call_hook, r->old_mask | LUA_MASKCALL, r->old_count);
}

namespace {

void push_current(lua_State* L, int values, const LuaValueGuard& g, lua_Integer k);
bool same_value(lua_State* L, int a, int b);
std::string value_text(lua_State* L, int idx);

// The guards whose value the call itself changed (a counter it increments) are dropped, each
// said in `changed` when it is now a number, boolean or string: the function changes them, so
// they differ at every call, and a replay runs no Lua code to change them (a tensor the call
// stored in a nil upvalue, `loss = ...`, is one of its results: dropped, not said). The rest go into a table of their own (LuaValueGuards::values_ref).
LuaValueGuards keep_unchanged(lua_State* L, LuaValueRecorder& r, std::vector<std::string>* changed) {
    LuaValueGuards out;
    push_work(L, r, WORK_VALUES);
    int values = lua_gettop(L);
    lua_newtable(L);
    int kept = lua_gettop(L);
    for (size_t k = 0; k < r.guards.size(); ++k) {
        lua_Integer at = 3 * static_cast<lua_Integer>(k);
        push_current(L, values, r.guards[k], static_cast<lua_Integer>(k));
        lua_rawgeti(L, values, at + 3);
        if (!same_value(L, -1, -2)) {
            const LuaValueGuard& g = r.guards[k];
            if (changed && is_scalar(lua_type(L, -2)))   // a tensor put in a nil upvalue is a result, not state
                changed->push_back(g.name + " (" + g.kind + ", " + td::source_loc_str(g.where) + "; " + value_text(L, -1) +
                                   " when the call began, " + value_text(L, -2) + " after it)");
            lua_pop(L, 2);
            continue;
        }
        lua_pop(L, 2);
        lua_Integer to = 3 * static_cast<lua_Integer>(out.list.size());
        for (int j = 1; j <= 3; ++j) {
            lua_rawgeti(L, values, at + j);
            lua_rawseti(L, kept, to + j);
        }
        out.list.push_back(std::move(r.guards[k]));
    }
    if (!out.list.empty()) out.values_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_settop(L, values - 1);
    return out;
}

}  // namespace

LuaValueGuards lua_values_record_end(lua_State* L, std::vector<std::string>* changed) {
    LuaValueRecorder* r = bindings_state.lua_value_recorder;
    if (!r) return LuaValueGuards();
    if (lua_gethook(L) == on_call_hook) lua_sethook(L, r->old_hook, r->old_mask, r->old_count);
    restore_envs(L, *r);
    bindings_state.lua_value_recorder = nullptr;
    LuaValueGuards out = keep_unchanged(L, *r, changed);
    luaL_unref(L, LUA_REGISTRYINDEX, r->work_ref);
    delete r;
    return out;
}

namespace {

// Pushes guard k's current value (values: the guards' table, at an absolute index).
void push_current(lua_State* L, int values, const LuaValueGuard& g, lua_Integer k) {
    lua_rawgeti(L, values, 3 * k + 1);
    if (g.holder == LUA_VALUE_UPVALUE) {
        if (!lua_getupvalue(L, -1, g.upvalue)) lua_pushnil(L);
    } else {
        lua_rawgeti(L, values, 3 * k + 2);
        if (g.holder == LUA_VALUE_GLOBAL) lua_gettable(L, -2);
        else lua_rawget(L, -2);
    }
    lua_remove(L, -2);
}

bool same_value(lua_State* L, int a, int b) {
    if (lua_rawequal(L, a, b)) return true;
    return lua_type(L, a) == LUA_TNUMBER && lua_type(L, b) == LUA_TNUMBER && std::isnan(lua_tonumber(L, a)) &&
           std::isnan(lua_tonumber(L, b));
}

// A value for people: strings quoted.
std::string value_text(lua_State* L, int idx) {
    if (lua_type(L, idx) == LUA_TSTRING) return std::string("\"") + lua_tostring(L, idx) + "\"";
    std::string text = luaL_tolstring(L, idx, nullptr);
    lua_pop(L, 1);
    return text;
}

}  // namespace

int lua_values_check(lua_State* L, const LuaValueGuards& guards) {
    if (guards.list.empty()) return -1;
    lua_rawgeti(L, LUA_REGISTRYINDEX, guards.values_ref);
    int values = lua_gettop(L);
    int failed = -1;
    for (size_t k = 0; k < guards.list.size() && failed < 0; ++k) {
        push_current(L, values, guards.list[k], static_cast<lua_Integer>(k));
        lua_rawgeti(L, values, 3 * static_cast<lua_Integer>(k) + 3);
        if (!same_value(L, -1, -2)) failed = static_cast<int>(k);
        lua_pop(L, 2);
    }
    lua_settop(L, values - 1);
    return failed;
}

std::string lua_values_describe_change(lua_State* L, const LuaValueGuards& guards, int index) {
    const LuaValueGuard& g = guards.list[static_cast<size_t>(index)];
    lua_rawgeti(L, LUA_REGISTRYINDEX, guards.values_ref);
    int values = lua_gettop(L);
    lua_rawgeti(L, values, 3 * static_cast<lua_Integer>(index) + 3);
    std::string then = value_text(L, -1);
    push_current(L, values, g, index);
    std::string now = value_text(L, -1);
    lua_settop(L, values - 1);
    std::string where = g.where.file >= 0 ? ", " + td::source_loc_str(g.where) : "";
    return g.name + " (" + g.kind + where + ") was " + then + " when recorded, now " + now;
}

void lua_values_release(lua_State* L, LuaValueGuards& guards) {
    if (guards.values_ref != LUA_NOREF && L) luaL_unref(L, LUA_REGISTRYINDEX, guards.values_ref);
    guards.values_ref = LUA_NOREF;
    guards.list.clear();
}

}  // namespace tdlua
