// completion.cpp: the words that complete what is typed, for every front end (the terminal's Tab,
// the Jupyter kernel's complete_request). Only reads tables (rawget, metatables): completing never
// runs user code.
#include "completion.h"

#include <cstring>
#include <lua.hpp>

#include "commands.h"
#include "repl.h"
#include "tapedeck_lua.h"

namespace {

const char* const LUA_KEYWORDS[] = {"and", "break", "do", "else", "elseif", "end", "false", "for", "function",
                                    "goto", "if", "in", "local", "nil", "not", "or", "repeat", "return", "then",
                                    "true", "until", "while", nullptr};

// Push the value a dotted path names ("a.b.c"), or nil; never calls metamethods. The first name
// is looked up among what the prompt adds to the globals (at a debugger stop: the stopped
// frame's locals and the stop's names), then among the globals.
void push_path(lua_State* L, const std::string& path) {
    size_t first_end = path.find_first_of(".:");
    repl_push_env_names(L);
    lua_pushstring(L, path.substr(0, first_end).c_str());
    bool in_env = lua_rawget(L, -2) != LUA_TNIL;
    lua_pop(L, 2);
    if (in_env) repl_push_env_names(L);
    else lua_pushglobaltable(L);
    size_t start = 0;
    while (start <= path.size()) {
        size_t dot = path.find_first_of(".:", start);
        std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        if (!lua_istable(L, -1)) {
            lua_pop(L, 1);
            lua_pushnil(L);
            return;
        }
        lua_pushlstring(L, key.data(), key.size());
        lua_rawget(L, -2);
        lua_remove(L, -2);
        if (dot == std::string::npos) return;
        start = dot + 1;
    }
}

// Add the string keys of the table at the top of the stack that start with `prefix`.
void add_keys(lua_State* L, std::vector<std::string>& matches, const std::string& head, const std::string& prefix, bool functions_only) {
    if (!lua_istable(L, -1)) return;
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        if (lua_type(L, -2) == LUA_TSTRING) {
            const char* key = lua_tostring(L, -2);
            bool wanted = !functions_only || lua_isfunction(L, -1);
            if (wanted && strncmp(key, prefix.c_str(), prefix.size()) == 0) matches.push_back(head + key);
        }
        lua_pop(L, 1);
    }
}

// The keys an object's metatable (on top of the stack) answers through __index: its __index table,
// or, when __index is a function (an nn module's class), the metatable itself and the tables its
// own metatables' __index fields chain to (the base classes' methods).
void add_index_keys(lua_State* L, std::vector<std::string>& matches, const std::string& head, const std::string& prefix, bool method) {
    int type = lua_getfield(L, -1, "__index");
    if (type == LUA_TTABLE) add_keys(L, matches, head, prefix, method);
    lua_pop(L, 1);
    if (type != LUA_TFUNCTION) return;
    lua_pushvalue(L, -1);
    for (int depth = 0; depth < 16 && lua_istable(L, -1); ++depth) {   // a class chain is short; a cycle stops
        add_keys(L, matches, head, prefix, method);
        if (!lua_getmetatable(L, -1)) break;
        lua_getfield(L, -1, "__index");
        lua_replace(L, -3);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
}

}  // namespace

std::vector<std::string> repl_completions(lua_State* L, const std::string& text, bool line_start) {
    std::vector<std::string> matches;
    if (line_start && !text.empty() && text[0] == ':') {
        for (const std::string& name : command_names())
            if (name.compare(0, text.size() - 1, text, 1) == 0) matches.push_back(":" + name);
        return matches;
    }
    size_t sep = text.find_last_of(".:");
    if (sep == std::string::npos) {
        lua_pushglobaltable(L);
        add_keys(L, matches, "", text, false);
        lua_pop(L, 1);
        repl_push_env_names(L);
        add_keys(L, matches, "", text, false);
        lua_pop(L, 1);
        for (const char* const* k = LUA_KEYWORDS; *k; ++k)
            if (strncmp(*k, text.c_str(), text.size()) == 0) matches.push_back(*k);
        return matches;
    }
    std::string object = text.substr(0, sep), prefix = text.substr(sep + 1), head = text.substr(0, sep + 1);
    bool method = text[sep] == ':';
    push_path(L, object);
    add_keys(L, matches, head, prefix, method);
    if (lua_getmetatable(L, -1)) {   // tensors: their methods table (and fields); tables: __index tables
        bool tensor = lua_getfield(L, -1, "methods") == LUA_TTABLE;
        if (tensor) {
            add_keys(L, matches, head, prefix, method);
            for (const char* const* f = TAPEDECK_TENSOR_FIELDS; *f && !method; ++f)
                if (strncmp(*f, prefix.c_str(), prefix.size()) == 0) matches.push_back(head + *f);
        }
        lua_pop(L, 1);
        if (!tensor) add_index_keys(L, matches, head, prefix, method);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return matches;
}
