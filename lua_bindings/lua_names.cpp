// lua_names.cpp: offers the engine the names the script gave its tensors (engine/core/node_names.h).
//
// Lua has no hook on assignment, so names are found by looking: at what the globals, and the
// locals of the script's frames running now, hold. A tensor held directly is named after the
// variable ("loss"); a module's parameters and buffers after the variable and PyTorch's key
// ("model.0.weight", as named_parameters() says it); a plain table's tensors after the path to
// them ("cache.h", "hs[3]"), two tables deep. A node keeps the first name of the best kind it was
// offered (node_names.h), so the globals go first, then the frames from the outermost in. Frames of the Lua-written library (nn, optim) are
// not looked at: their locals are the library's names ("input", "self"), not the user's.
// The variables that hold tensors and modules are looked at before any plain table is walked,
// and each table gives at most FIELDS_PER_TABLE of its fields: a script's 20,000 character codes
// in a table cannot use up the walk before the model after them is named.
#include <lua.hpp>

#include <string>

#include "lua_util.h"
#include "node_names.h"
#include "tapedeck_lua.h"

using namespace td;

namespace {

// Globals that are libraries, not the script's data.
const char* const LIBRARY_GLOBALS[] = {"_G", "string", "table", "math", "io", "os", "package", "debug", "coroutine",
                                       "utf8", "torch", "nn", "optim", "F", "viewer", "arg", "dbg", nullptr};

bool is_library_global(const std::string& key) {
    for (const char* const* k = LIBRARY_GLOBALS; *k; ++k)
        if (key == *k) return true;
    return false;
}

// Tables deeper than this below a variable are not looked into, and one walk looks at no more than
// WALK_BUDGET values: a script holding a million-entry table costs a bounded walk.
constexpr int TABLE_DEPTH = 2;
constexpr int WALK_BUDGET = 4000;
constexpr int FIELDS_PER_TABLE = 256;

// Which variables one pass over the globals and the frames names: those holding a tensor or a
// module, then those holding a plain table.
enum WalkPass { PASS_DIRECT, PASS_TABLES };

struct Walk {
    lua_State* L;
    WalkPass pass = PASS_DIRECT;
    int budget = WALK_BUDGET;
};

void offer_tensor(lua_State* L, int idx, const std::string& name, NameRank rank) {
    if (Tensor* t = tapedeck_test_tensor(L, idx)) node_name_offer(t->node.get(), t->output, name, rank);
}

bool has_metatable(lua_State* L, int idx) {
    if (!lua_getmetatable(L, idx)) return false;
    lua_pop(L, 1);
    return true;
}

bool is_module(lua_State* L, int idx) {
    if (lua_type(L, idx) != LUA_TTABLE || !lua_getmetatable(L, idx)) return false;
    lua_getfield(L, -1, "__is_module");
    bool yes = lua_toboolean(L, -1);
    lua_pop(L, 2);
    return yes;
}

// module:named_parameters() and module:named_buffers(), each {name, tensor} pair named
// "prefix.name" at `rank`. A module whose methods fail (a user's half-built module) is skipped.
void name_module_tensors(Walk& w, int idx, const std::string& prefix, NameRank rank) {
    lua_State* L = w.L;
    idx = lua_absindex(L, idx);
    for (const char* method : {"named_parameters", "named_buffers"}) {
        if (lua_getfield(L, idx, method) != LUA_TFUNCTION) {
            lua_pop(L, 1);
            continue;
        }
        lua_pushvalue(L, idx);
        if (lua_pcall(L, 1, 1, 0) != LUA_OK || lua_type(L, -1) != LUA_TTABLE) {
            lua_pop(L, 1);
            continue;
        }
        int list = lua_gettop(L);
        for (lua_Integer i = 1; lua_rawgeti(L, list, i) == LUA_TTABLE && --w.budget >= 0; ++i) {
            lua_rawgeti(L, -1, 1);
            lua_rawgeti(L, -2, 2);
            if (lua_type(L, -2) == LUA_TSTRING) offer_tensor(L, -1, prefix + "." + lua_tostring(L, -2), rank);
            lua_pop(L, 3);
        }
        lua_pop(L, 2);   // the nil (or non-table) that ended the list, and the list
    }
}

std::string field_name(const std::string& prefix, lua_State* L, int key_idx) {
    if (lua_type(L, key_idx) == LUA_TSTRING) return prefix + "." + lua_tostring(L, key_idx);
    if (lua_isinteger(L, key_idx)) return prefix + "[" + std::to_string(lua_tointeger(L, key_idx)) + "]";
    return "";
}

void name_value(Walk& w, int idx, const std::string& name, NameRank rank, int depth);

// The fields of a plain table, named "prefix.key" / "prefix[i]"; keys starting with '_' are the
// table's own business (a class's _order, _kinds) and are skipped.
void name_fields(Walk& w, int table, const std::string& prefix, int depth) {
    lua_State* L = w.L;
    table = lua_absindex(L, table);
    lua_pushnil(L);
    int fields = 0;
    while (lua_next(L, table) != 0) {
        if (--w.budget < 0 || ++fields > FIELDS_PER_TABLE) {
            lua_pop(L, 2);
            return;
        }
        bool hidden = lua_type(L, -2) == LUA_TSTRING && lua_tostring(L, -2)[0] == '_';
        std::string name = hidden ? "" : field_name(prefix, L, -2);
        if (!name.empty()) name_value(w, lua_gettop(L), name, NAME_FIELD, depth - 1);
        lua_pop(L, 1);
    }
}

// The value at idx, held by `name`: a tensor is named, a module names its parameters and
// buffers, a plain table its fields (while depth lasts).
void name_value(Walk& w, int idx, const std::string& name, NameRank rank, int depth) {
    lua_State* L = w.L;
    if (tapedeck_test_tensor(L, idx)) {
        offer_tensor(L, idx, name, rank);
    } else if (is_module(L, idx)) {
        // A module a variable holds gives module paths (model.fc1.weight); one reached through a
        // plain table's field (a list of blocks being built, h[1]) gives field names, which the
        // module path wins over whenever the walk meets both, in whatever order.
        name_module_tensors(w, idx, name, rank == NAME_FIELD ? NAME_FIELD : NAME_MODULE_PATH);
    } else if (lua_type(L, idx) == LUA_TTABLE && depth > 0 && !has_metatable(L, idx)) {
        name_fields(w, idx, name, depth);   // (a table with a metatable is an object of the script's own, not data)
    }
}

// A variable `name` holding the value at idx, named in the pass that takes its kind of value.
void name_variable(Walk& w, int idx, const std::string& name) {
    bool direct = tapedeck_test_tensor(w.L, idx) || is_module(w.L, idx);
    if (direct == (w.pass == PASS_DIRECT)) name_value(w, idx, name, NAME_VARIABLE, TABLE_DEPTH);
}

void name_globals(Walk& w) {
    lua_State* L = w.L;
    lua_pushglobaltable(L);
    int globals = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, globals) != 0 && --w.budget >= 0) {
        if (lua_type(L, -2) == LUA_TSTRING && !is_library_global(lua_tostring(L, -2)))
            name_variable(w, lua_gettop(L), lua_tostring(L, -2));
        lua_pop(L, 1);
    }
    lua_settop(L, globals - 1);
}

// The locals of each of the script's frames now running, outermost first. `self` names nothing: a
// module method's self is better named from the variable that holds the module.
void name_frame_locals(Walk& w) {
    lua_State* L = w.L;
    lua_Debug ar;
    int levels = 0;
    while (lua_getstack(L, levels, &ar)) ++levels;
    for (int level = levels - 1; level >= 0 && w.budget > 0; --level) {
        lua_getstack(L, level, &ar);
        lua_getinfo(L, "S", &ar);
        if (ar.what[0] == 'C' || tdlua::is_library_frame(ar)) continue;
        for (int i = 1;; ++i) {
            const char* local = lua_getlocal(L, &ar, i);
            if (!local) break;
            std::string name = local;
            if (name[0] != '(' && name != "self") name_variable(w, lua_gettop(L), name);
            lua_pop(L, 1);
        }
    }
}

}  // namespace

void tapedeck_name_tensors(lua_State* L, size_t newest) {
    if (!L || !lua_checkstack(L, 40)) return;
    int top = lua_gettop(L);
    Walk w{L};
    for (WalkPass pass : {PASS_DIRECT, PASS_TABLES}) {
        w.pass = pass;
        name_globals(w);
        name_frame_locals(w);
    }
    lua_settop(L, top);
    node_names_from_assignments(newest);   // what no variable holds any more: the line that assigned it
}
