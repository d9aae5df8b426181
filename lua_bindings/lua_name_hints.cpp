// lua_name_hints.cpp: " (did you mean x:sum, torch.stack?)" after an error about a name that is
// not there: the tensor methods and the torch, nn and F functions whose names are close to it
// (tapedeck_lua.h: tapedeck_name_hint, tapedeck_error_hint, tapedeck_tensor_name_hint), or, for a
// name PyTorch has and tapedeck spells otherwise (x:numpy()), tapedeck's spelling of it; and the
// same closeness for the Lua-written library (a module's missing field: require "tapedeck.hints").
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "bindings_state.h"
#include "tapedeck_lua.h"

using namespace tdlua;

namespace {

// PyTorch's (and NumPy's) names that tapedeck spells otherwise, with tapedeck's spelling: a hint
// for these names says it instead of the names that merely look alike (numpy is not numel).
struct OtherSpelling {
    const char* name;
    const char* spelling;
};
const OtherSpelling OTHER_SPELLINGS[] = {
    {"numpy", "x:totable() gives the values as a Lua table, torch.save_npy(x, path) writes a .npy file NumPy reads"},
    {"from_numpy", "torch.tensor(table) makes a tensor of a Lua table, torch.load_npy(path) reads a .npy file"},
    {"astype", "x:to(dtype), e.g. x:to(torch.float64)"},
    {"type", "x.dtype is the dtype, x:to(dtype) converts"},
    {"ndimension", "x:dim() or x.ndim"},
    {"concat", "torch.cat({a, b} [, dim])"},
    {"concatenate", "torch.cat({a, b} [, dim])"},
    {"argsort", "x:sort() returns the values and their 1-based indices"},
    {"Tensor", "torch.tensor(table) or torch.empty(size)"},
    {"FloatTensor", "torch.tensor(table) or torch.empty(size) (float32 is the default dtype)"},
    {"inference_mode", "torch.no_grad(fn)"},
};

// " (in tapedeck: ...)" when `name` is one of OTHER_SPELLINGS, else empty.
std::string other_spelling_hint(const char* name) {
    for (const OtherSpelling& row : OTHER_SPELLINGS)
        if (strcmp(row.name, name) == 0) return std::string(" (in tapedeck: ") + row.spelling + ")";
    return "";
}

// Edit distance between a and b, capped: small names only.
int edit_distance(const std::string& a, const std::string& b) {
    std::vector<int> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int>(j);
    for (size_t i = 1; i <= a.size(); ++i) {
        int diagonal = row[0];
        row[0] = static_cast<int>(i);
        for (size_t j = 1; j <= b.size(); ++j) {
            int above = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = above;
        }
    }
    return row[b.size()];
}

// Adds prefix .. key to out when key is close to name (a small edit, or one holds the other).
void add_if_close(const std::string& key, const std::string& name, const char* prefix, std::vector<std::string>* out) {
    int limit = name.size() <= 3 ? 1 : 2;
    bool close = edit_distance(key, name) <= limit ||
                 (name.size() >= 3 && (key.find(name) != std::string::npos || name.find(key) != std::string::npos) &&
                  key.size() >= 3);
    if (close) out->push_back(std::to_string(edit_distance(key, name) + 10) + prefix + key);   // sorted by distance
}

// The string keys of the table at idx that are close to `name`, each written as prefix .. key.
void add_close_names(lua_State* L, int idx, const std::string& name, const char* prefix, std::vector<std::string>* out) {
    idx = lua_absindex(L, idx);
    if (!lua_istable(L, idx)) return;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) == LUA_TSTRING) add_if_close(lua_tostring(L, -1), name, prefix, out);
    }
}

// " (did you mean a, b?)" of the closest five of `close` (each "NN" distance .. name), or empty.
std::string did_you_mean(std::vector<std::string> close) {
    std::sort(close.begin(), close.end());
    close.erase(std::unique(close.begin(), close.end()), close.end());
    if (close.empty()) return "";
    std::string hint = " (did you mean ";
    for (size_t i = 0; i < close.size() && i < 5; ++i) hint += (i ? ", " : "") + close[i].substr(2);   // drop the distance
    return hint + "?)";
}

// hints.close_names(name, candidates): " (did you mean a, b?)" for the strings of the list
// `candidates` close to name, or "" (nn.lua's missing module fields).
int l_close_names(lua_State* L) {
    std::string name = luaL_checkstring(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    std::vector<std::string> close;
    for (lua_Integer i = 1, n = luaL_len(L, 2); i <= n; ++i) {
        if (lua_geti(L, 2, i) == LUA_TSTRING) add_if_close(lua_tostring(L, -1), name, "", &close);
        lua_pop(L, 1);
    }
    std::string hint = did_you_mean(close);
    lua_pushlstring(L, hint.data(), hint.size());
    return 1;
}

}  // namespace

void tapedeck_open_hints(lua_State* L) {
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_newtable(L);
    lua_pushcfunction(L, l_close_names);
    lua_setfield(L, -2, "close_names");
    lua_setfield(L, -2, "tapedeck.hints");
    lua_pop(L, 1);
}

std::string tapedeck_tensor_name_hint(lua_State* L, const char* name) {
    std::string other = other_spelling_hint(name);
    if (!other.empty()) return other;
    lua_getglobal(L, "F");   // x:silu(): PyTorch has F.silu only, and so does tapedeck
    bool functional = false;
    if (lua_istable(L, -1)) {
        functional = lua_getfield(L, -1, name) == LUA_TFUNCTION;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    if (functional) return std::string(" (F.") + name + "(x): PyTorch has it in torch.nn.functional only)";
    std::vector<std::string> close;
    lua_rawgetp(L, LUA_REGISTRYINDEX, &bindings_state.tensor_metatable_key);
    lua_getfield(L, -1, "methods");
    add_close_names(L, -1, name, "x:", &close);
    lua_pop(L, 2);
    for (const char* const* field = TAPEDECK_TENSOR_FIELDS; *field; ++field) add_if_close(*field, name, "x.", &close);
    return did_you_mean(close);
}

std::string tapedeck_name_hint(lua_State* L, const char* name) {
    std::string other = other_spelling_hint(name);
    if (!other.empty()) return other;
    std::vector<std::string> close;
    lua_rawgetp(L, LUA_REGISTRYINDEX, &bindings_state.tensor_metatable_key);
    lua_getfield(L, -1, "methods");
    add_close_names(L, -1, name, "x:", &close);
    lua_pop(L, 2);
    lua_getglobal(L, "torch");
    add_close_names(L, -1, name, "torch.", &close);
    if (lua_istable(L, -1)) {
        lua_getfield(L, -1, "nn");
        add_close_names(L, -1, name, "nn.", &close);
        lua_getfield(L, -1, "functional");
        add_close_names(L, -1, name, "F.", &close);
        lua_pop(L, 2);
    }
    lua_pop(L, 1);
    return did_you_mean(close);
}

std::string tapedeck_error_hint(lua_State* L, const char* message) {
    static const char* const patterns[] = {"attempt to call a nil value (method '", "attempt to call a nil value (field '",
                                           "attempt to call a nil value (global '", "attempt to index a nil value (field '",
                                           "attempt to index a nil value (global '"};
    std::string text = message;
    for (const char* pattern : patterns) {
        size_t at = text.find(pattern);
        if (at == std::string::npos) continue;
        size_t start = at + strlen(pattern), end = text.find('\'', start);
        if (end == std::string::npos) return "";
        return tapedeck_name_hint(L, text.substr(start, end - start).c_str());
    }
    return "";
}
