// lua_name_hints.cpp: " (did you mean x:sum, torch.stack?)" after an error about a name that is
// not there: the tensor methods and the torch, nn and F functions whose names are close to it
// (tapedeck_lua.h: tapedeck_name_hint, tapedeck_error_hint).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "bindings_state.h"
#include "tapedeck_lua.h"

using namespace tdlua;

namespace {

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

// The string keys of the table at idx that are close to `name`, each written as prefix .. key.
void add_close_names(lua_State* L, int idx, const std::string& name, const char* prefix, std::vector<std::string>* out) {
    idx = lua_absindex(L, idx);
    if (!lua_istable(L, idx)) return;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING) continue;
        std::string key = lua_tostring(L, -1);
        int limit = name.size() <= 3 ? 1 : 2;
        bool close = edit_distance(key, name) <= limit ||
                     (name.size() >= 3 && (key.find(name) != std::string::npos || name.find(key) != std::string::npos) &&
                      key.size() >= 3);
        if (close) out->push_back(std::to_string(edit_distance(key, name) + 10) + prefix + key);   // sorted by distance
    }
}

}  // namespace

std::string tapedeck_name_hint(lua_State* L, const char* name) {
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
    std::sort(close.begin(), close.end());
    close.erase(std::unique(close.begin(), close.end()), close.end());
    if (close.empty()) return "";
    std::string hint = " (did you mean ";
    for (size_t i = 0; i < close.size() && i < 5; ++i) hint += (i ? ", " : "") + close[i].substr(2);   // drop the distance
    return hint + "?)";
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
