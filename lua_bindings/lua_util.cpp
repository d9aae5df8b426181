// lua_util.cpp: guarded bindings, argument checks and the user's position (see lua_util.h).
#include "lua_util.h"

#include <cstdarg>
#include <cstring>

#include "tapedeck_lua.h"

namespace tdlua {

void arg_fail(int index, const char* format, ...) {
    char buffer[512];
    va_list args;
    va_start(args, format);
    vsnprintf(buffer, sizeof buffer, format, args);
    va_end(args);
    throw ArgError("argument " + std::to_string(index) + ": " + buffer);
}

bool is_library_frame(const lua_Debug& ar) {
    return strncmp(ar.source, TAPEDECK_LIBRARY_CHUNK, strlen(TAPEDECK_LIBRARY_CHUNK)) == 0;
}

bool find_user_frame(lua_State* L, int level, lua_Debug* ar) {
    for (; lua_getstack(L, level, ar); ++level) {
        lua_getinfo(L, "S", ar);
        if (ar->what[0] == 'C' || is_library_frame(*ar)) continue;   // C functions have no line
        lua_getinfo(L, "l", ar);
        if (ar->currentline > 0) return true;
    }
    return false;
}

std::string where_at(lua_State* L, int level) {
    lua_Debug ar;
    if (!find_user_frame(L, level, &ar)) return "";
    return std::string(ar.short_src) + ":" + std::to_string(ar.currentline);
}

// The Lua error is raised after the catch block has ended (it unwinds as an exception of its own).
int run_guarded(lua_State* L, lua_CFunction fn, const char* name) {
    std::string message;
    tapedeck_set_current_state(L);
    try {
        return fn(L);
    } catch (const OptionError& e) {   // names the function as the user called it already
        message = e.what();
    } catch (const ArgError& e) {
        message = std::string(name) + ": " + e.what();
        // x.mm(w) (Python's habit) passes w alone: the missing argument is the other tensor
        if (lua_gettop(L) == 1 && lua_type(L, 1) == LUA_TUSERDATA && message.find("got no value") != std::string::npos)
            message += std::string(" (if you wrote x.") + name + "(...): a method call in Lua uses ':', as in x:" + name +
                       "(...))";
    } catch (const std::exception& e) {   // an engine error names its op: one inside another (pow_tensor
        message = e.what();                 // in pow, add in linear) also gets the function the user called
        size_t length = strlen(name);
        if (length && (message.compare(0, length, name) != 0 || message.compare(length, 1, ":") != 0))
            message = std::string(name) + ": " + message;
    }
    std::string where = where_at(L, 1);
    if (!where.empty()) message += " (" + where + ")";
    lua_pushstring(L, message.c_str());
    return lua_error(L);
}

// A binding reached through a table with a prefix: its trailing options table (the last argument
// that is not nil, when it has a named field) is checked against the keys it declares, then it runs.
static int call_checked(lua_State* L) {
    const Binding* b = static_cast<const Binding*>(lua_touserdata(L, lua_upvalueindex(1)));
    int top = lua_gettop(L);
    while (top > 0 && lua_isnil(L, top)) --top;
    if (top > 0 && b->options != OPTIONS_TABLE_IS_VALUE && is_options_table(L, top)) options_check(L, top, b->options);
    return b->fn(L);
}

// Every binding is a closure over its Binding record (and its table's prefix), called through here.
static int call_binding(lua_State* L) {
    const Binding* b = static_cast<const Binding*>(lua_touserdata(L, lua_upvalueindex(1)));
    bool checked = lua_type(L, lua_upvalueindex(2)) == LUA_TSTRING;
    return run_guarded(L, checked ? call_checked : b->fn, b->call_name ? b->call_name : b->name);
}

int binding_data(lua_State* L) {   // fn runs inside call_binding's C call: its upvalue is the Binding
    return static_cast<const Binding*>(lua_touserdata(L, lua_upvalueindex(1)))->data;
}

void register_bindings(lua_State* L, const Binding* bindings, const char* prefix) {
    for (const Binding* b = bindings; b->name; ++b) {
        lua_pushlightuserdata(L, const_cast<Binding*>(b));
        if (prefix) lua_pushstring(L, prefix);
        lua_pushcclosure(L, call_binding, prefix ? 2 : 1);
        lua_setfield(L, -2, b->name);
        if (prefix && b->options && b->options != OPTIONS_TABLE_IS_VALUE)
            options_declare(L, (std::string(prefix) + b->name).c_str(), b->options);
    }
}

lua_State* main_thread(lua_State* L) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
    lua_State* main = lua_tothread(L, -1);
    lua_pop(L, 1);
    return main;
}

const char* type_name_of(lua_State* L, int idx) {
    if (tapedeck_test_tensor(L, idx)) return "tensor";
    if (tapedeck_is_finalised_tensor(L, idx)) return "a tensor already finalised by Lua's collector (seen from another __gc)";
    return luaL_typename(L, idx);
}

int64_t check_integer(lua_State* L, int idx, const char* what) {
    int is_integer = 0;
    lua_Integer v = lua_tointegerx(L, idx, &is_integer);
    if (!is_integer) arg_fail(idx, "%s must be an integer, got %s", what, type_name_of(L, idx));
    return v;
}

double check_number(lua_State* L, int idx, const char* what) {
    int is_number = 0;
    lua_Number v = lua_tonumberx(L, idx, &is_number);
    if (!is_number) arg_fail(idx, "%s must be a number, got %s", what, type_name_of(L, idx));
    return v;
}

const char* check_string(lua_State* L, int idx, const char* what) {
    if (lua_type(L, idx) != LUA_TSTRING) arg_fail(idx, "%s must be a string, got %s", what, type_name_of(L, idx));
    return lua_tostring(L, idx);
}

}  // namespace tdlua
