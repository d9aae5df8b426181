// lua_options.cpp: the one check of options tables (see lua_util.h). A function declares the keys
// its options table takes (a Binding's `options`, or torch._options.declare for the Lua-written
// library); every key given is checked against them, and an unknown one is an error naming the
// function as the user called it, the key, a near miss and the keys it takes. Each declaration is
// entered in the options registry (the Lua registry's "tapedeck.options": called name -> keys), so
// that a test can walk every function that takes options.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "lua_util.h"
#include "tapedeck_lua.h"

namespace tdlua {

namespace {

const char* const REGISTRY_KEY = "tapedeck.options";

std::vector<std::string> split_keys(const char* accepted) {
    std::vector<std::string> keys;
    for (const char* p = accepted ? accepted : ""; *p;) {
        while (*p == ' ') ++p;
        const char* start = p;
        while (*p && *p != ' ') ++p;
        if (p > start) keys.emplace_back(start, p);
    }
    return keys;
}

size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<size_t> previous(b.size() + 1), current(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) previous[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        current[0] = i;
        for (size_t j = 1; j <= b.size(); ++j)
            current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
        std::swap(previous, current);
    }
    return previous[b.size()];
}

// A key as the message shows it: the name, or [1.5], [true] for a key that is not a string.
std::string key_text(lua_State* L, int idx) {
    if (lua_type(L, idx) == LUA_TSTRING) return lua_tostring(L, idx);
    lua_pushvalue(L, idx);   // luaL_tolstring on a copy: a number key is not converted in place
    std::string text = "[" + std::string(luaL_tolstring(L, -1, nullptr)) + "]";
    lua_pop(L, 2);
    return text;
}

// The name the running binding was reached by: its table's prefix and its name ("x:add").
std::string called_name(lua_State* L) {
    const Binding* b = static_cast<const Binding*>(lua_touserdata(L, lua_upvalueindex(1)));
    const char* prefix = lua_type(L, lua_upvalueindex(2)) == LUA_TSTRING ? lua_tostring(L, lua_upvalueindex(2)) : "";
    return std::string(prefix) + (b ? b->name : "?");
}

}  // namespace

// Whether `key` (len bytes) is one of the space-separated `accepted` keys; no allocation, as every
// call with an options table runs it.
static bool is_accepted(const char* accepted, const char* key, size_t len) {
    for (const char* p = accepted ? accepted : ""; *p;) {
        while (*p == ' ') ++p;
        const char* start = p;
        while (*p && *p != ' ') ++p;
        if (static_cast<size_t>(p - start) == len && len && memcmp(start, key, len) == 0) return true;
    }
    return false;
}

// Checks the keys of the table at idx (absolute); integer keys are its list part (positional
// values, as torch.freeze{f, strict = true} has). The first unknown one: an OptionError naming
// called() (computed only then), and argument `arg` after the name unless it is 0.
template <class Called>
static void check_keys(lua_State* L, int idx, Called called, int arg, const char* accepted) {
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_isinteger(L, -1)) continue;
        size_t len = 0;
        const char* name = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : nullptr;
        if (name && is_accepted(accepted, name, len)) continue;
        std::string key = key_text(L, -1);
        lua_pop(L, 1);
        std::string who = called();
        std::string message = options_unknown_message(who, key, accepted);
        if (arg) message = who + ": argument " + std::to_string(arg) + ": " + message.substr(who.size() + 2);
        throw OptionError(message);
    }
}

namespace {

// torch._options.check(called, opts, accepted): opts nil or a table whose keys are all accepted
// (a list of names, or one space-separated string); returns opts, or {} for nil.
int l_options_check(lua_State* L) {
    const char* called = check_string(L, 1, "the function's name");
    if (lua_isnoneornil(L, 2)) {
        lua_newtable(L);
        return 1;
    }
    if (!lua_istable(L, 2) || tapedeck_test_tensor(L, 2))
        throw OptionError(std::string(called) + ": options must be a table like {key = value}, got " + type_name_of(L, 2));
    std::string accepted;
    if (lua_type(L, 3) == LUA_TTABLE) {
        for (lua_Integer i = 1; lua_geti(L, 3, i) == LUA_TSTRING; ++i, lua_pop(L, 1)) accepted += std::string(lua_tostring(L, -1)) + " ";
        lua_pop(L, 1);
    } else {
        accepted = check_string(L, 3, "the accepted keys");
    }
    check_keys(L, 2, [&] { return std::string(called); }, 0, accepted.c_str());
    lua_settop(L, 2);
    return 1;
}

int l_options_declare(lua_State* L) {
    options_declare(L, check_string(L, 1, "the function's name"), check_string(L, 2, "the accepted keys"));
    return 0;
}

// torch._options.registry(): a copy of the registry, called name -> list of its keys.
int l_options_registry(lua_State* L) {
    lua_newtable(L);
    lua_getfield(L, LUA_REGISTRYINDEX, REGISTRY_KEY);
    if (!lua_istable(L, -1)) return lua_pop(L, 1), 1;
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        std::vector<std::string> keys = split_keys(lua_tostring(L, -1));
        lua_pop(L, 1);
        lua_pushvalue(L, -1);
        lua_createtable(L, static_cast<int>(keys.size()), 0);
        for (size_t i = 0; i < keys.size(); ++i) {
            lua_pushstring(L, keys[i].c_str());
            lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
        }
        lua_settable(L, -5);
    }
    lua_pop(L, 1);
    return 1;
}

}  // namespace

bool is_options_table(lua_State* L, int idx) {
    if (!lua_istable(L, idx)) return false;
    if (lua_getmetatable(L, idx)) {   // an object (a module, an optimizer), not options
        lua_pop(L, 1);
        return false;
    }
    idx = lua_absindex(L, idx);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        bool named = !lua_isinteger(L, -2);
        lua_pop(L, 1);
        if (named) {
            lua_pop(L, 1);
            return true;
        }
    }
    return false;
}

std::string options_unknown_message(const std::string& called, const std::string& key, const char* accepted) {
    std::vector<std::string> keys = split_keys(accepted);
    if (keys.empty()) return called + ": unknown option '" + key + "' (" + called + " takes no options)";
    // A near miss: at most two edits away (a quarter of the name for a long one), or one name
    // inside the other ('causal' for is_causal); the closest wins.
    const std::string* best = nullptr;
    size_t best_distance = SIZE_MAX;
    for (const std::string& k : keys) {
        size_t d = edit_distance(key, k);
        bool inside = std::min(k.size(), key.size()) >= 3 && (k.find(key) != std::string::npos || key.find(k) != std::string::npos);
        bool near = (d <= std::max<size_t>(2, k.size() / 4) && d < std::max(k.size(), key.size())) || inside;
        if (near && d < best_distance) best = &k, best_distance = d;
    }
    std::string list;
    for (const std::string& k : keys) list += (list.empty() ? "" : ", ") + k;
    return called + ": unknown option '" + key + "' (" + (best ? "did you mean '" + *best + "'? " : "") + "it takes " + list + ")";
}

void options_check(lua_State* L, int idx, const char* accepted) {
    idx = lua_absindex(L, idx);
    if (lua_getmetatable(L, idx)) {   // an object (x:to(model)), whose fields are not options
        lua_getfield(L, -1, "__name");
        std::string kind = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "table with a metatable";
        lua_pop(L, 2);
        std::string who = called_name(L);
        std::string list;
        for (const std::string& k : split_keys(accepted)) list += (list.empty() ? "" : ", ") + k;
        throw OptionError(who + ": argument " + std::to_string(idx) + " is a " + kind + ", not an options table" +
                          (list.empty() ? "" : " (its options: " + list + ")"));
    }
    check_keys(L, idx, [L] { return called_name(L); }, idx, accepted);
}

void options_declare(lua_State* L, const char* called, const char* accepted) {
    luaL_getsubtable(L, LUA_REGISTRYINDEX, REGISTRY_KEY);
    lua_pushstring(L, accepted);
    lua_setfield(L, -2, called);
    lua_pop(L, 1);
}

void open_options(lua_State* L) {
    static const Binding functions[] = {
        {"check", l_options_check, OPTIONS_TABLE_IS_VALUE}, {"declare", l_options_declare}, {"registry", l_options_registry},
        {nullptr, nullptr},
    };
    lua_newtable(L);
    register_bindings(L, functions, "torch._options.");
    lua_setfield(L, -2, "_options");
}

}  // namespace tdlua

// The error is raised after the catch block has ended (it unwinds as an exception of its own).
void tapedeck_check_options(lua_State* L, int idx, const char* called, const char* accepted) {
    idx = lua_absindex(L, idx);
    std::string message;
    try {
        tdlua::check_keys(L, idx, [called] { return std::string(called); }, 0, accepted);
        return;
    } catch (const tdlua::OptionError& e) {
        message = e.what();
    }
    std::string where = tdlua::where_at(L, 1);
    if (!where.empty()) message += " (" + where + ")";
    lua_pushstring(L, message.c_str());
    lua_error(L);
}

void tapedeck_declare_options(lua_State* L, const char* called, const char* accepted) { tdlua::options_declare(L, called, accepted); }
