// lua_util.h: what every binding file shares — bindings that run guarded (a C++ error becomes a
// Lua error naming the function the user called and the user's file:line), argument checks that
// say which argument is wrong, and the user's position on the Lua stack.
//
//   const tdlua::Binding functions[] = {{"save_npy", l_save_npy}, {nullptr, nullptr}};
//   tdlua::register_bindings(L, functions);      // into the table on top of the stack
//   ... inside a binding:
//   const char* path = tdlua::check_string(L, 2, "path");   // "save_npy: argument 2: path must be a string, got table (x.lua:3)"
#pragma once

#include <lua.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace tdlua {

// A bad argument; the guard prefixes the function's name and appends the user's file:line.
struct ArgError : std::runtime_error {
    using std::runtime_error::runtime_error;
};
[[noreturn]] __attribute__((format(printf, 2, 3))) void arg_fail(int index, const char* format, ...);

// A binding's `options` when its last argument may be a table with named fields that is a value,
// not options (a dict of tensors to save): such a table is not checked.
inline constexpr char OPTIONS_TABLE_IS_VALUE[] = "(a value)";

struct Binding {
    const char* name;                   // the field: the name the user calls it by ("save_npy", "timeit")
    lua_CFunction fn;
    const char* options = nullptr;      // the keys its options table takes, space-separated ("alpha",
                                        // "dim keepdim dtype"): the trailing table with a named field is
                                        // checked against them before fn runs (nullptr: it takes none)
    const char* call_name = nullptr;    // what errors start with when not `name` (metamethods: "__add" -> "add")
    int data = 0;                       // for a function serving several bindings (the op of a
                                        // binding made from the op table): binding_data(L) inside fn
};
// Sets each binding (up to the {nullptr, nullptr} row) as a field of the table on top of the stack.
// `prefix` is how the user reaches the table ("torch.", "x:", "F.", "torch.onnx."): option errors
// name the function so ("x:add"), and each binding is entered in the options registry under that
// name. nullptr (metamethods, a fixed arity): no options check.
void register_bindings(lua_State* L, const Binding* bindings, const char* prefix);
// The `data` of the binding running now (call from inside its fn).
int binding_data(lua_State* L);
// Runs fn(L) guarded as `name` (what register_bindings does for each call): an ArgError becomes
// "name: argument N: ... (file.lua:12)", another std::exception "its message (file.lua:12)",
// prefixed with "name: " unless it starts so already. Lua errors fn raises pass through unchanged.
int run_guarded(lua_State* L, lua_CFunction fn, const char* name);

// ------------------------------------------------------------------------------------------
// Options tables: the one check (lua_options.cpp). Every options table is checked by its keys
// against the keys its function declares (a Binding's `options`; the Lua-written library declares
// its own through torch._options), with one message:
//   "x:add: argument 3: unknown option 'alpah' (did you mean 'alpha'? it takes alpha) (x.lua:3)"

// An options error: the whole message, the function named as the user called it.
struct OptionError : std::runtime_error {
    using std::runtime_error::runtime_error;
};
// The message for an unknown `key` of `called`'s options (accepted: space-separated, or nullptr
// for none), without the file:line: "called: unknown option 'key' (did you mean ...? it takes ...)".
std::string options_unknown_message(const std::string& called, const std::string& key, const char* accepted);
// Checks every key of the table at idx against `accepted` (space-separated; nullptr: none) for
// the binding running now (named as the user reached it, e.g. "torch.add"); throws OptionError.
void options_check(lua_State* L, int idx, const char* accepted);
// Whether the value at idx is an options table: a plain table (no metatable: not a module or an
// optimizer) with a field that is not a list element ({1, 2} is a value, {stride = 2} options).
bool is_options_table(lua_State* L, int idx);
// Enters `called` (e.g. "nn.Linear") with its accepted keys in the options registry.
void options_declare(lua_State* L, const char* called, const char* accepted);
// torch._options: check(called, opts, accepted), declare(called, accepted), registry() for the
// Lua-written library and the tests; into the table on top of the stack.
void open_options(lua_State* L);

// Whether a frame runs code of the Lua-written library (nn, optim): positions skip those frames to
// name the user's line that called the library.
bool is_library_frame(const lua_Debug& ar);
// Fills `ar` ("S" and "l") for the innermost frame at or above `level` that is the user's code
// (not the library's, and with a current line); false when there is none. Every op made from nn
// or optim walks up through their frames, so a library frame costs only "S", not its line.
bool find_user_frame(lua_State* L, int level, lua_Debug* ar);
// "file.lua:12" of the innermost frame at or above `level` that is the user's code (frames of the
// Lua-written library, nn and optim, are skipped); empty when there is none.
std::string where_at(lua_State* L, int level);

// Fields of the table on top of the stack (t[key] = value), for the functions that return a
// table of results (dbg.why, dbg.diff, viewer.model, f:passes(), ...).
inline void set_string(lua_State* L, const char* key, const std::string& value) {
    lua_pushlstring(L, value.data(), value.size());
    lua_setfield(L, -2, key);
}
inline void set_number(lua_State* L, const char* key, double value) {
    lua_pushnumber(L, value);
    lua_setfield(L, -2, key);
}
inline void set_integer(lua_State* L, const char* key, lua_Integer value) {
    lua_pushinteger(L, value);
    lua_setfield(L, -2, key);
}
inline void set_boolean(lua_State* L, const char* key, bool value) {
    lua_pushboolean(L, value);
    lua_setfield(L, -2, key);
}

// The state's main thread: it outlives every coroutine, so what is released when an engine object
// dies (a registry reference) is released through it.
lua_State* main_thread(lua_State* L);

// "tensor" for a tensor, else Lua's type name (a finalised tensor says so).
const char* type_name_of(lua_State* L, int idx);
// Checked arguments: an ArgError naming argument `idx` and `what` when the value is not one.
int64_t check_integer(lua_State* L, int idx, const char* what);
double check_number(lua_State* L, int idx, const char* what);
const char* check_string(lua_State* L, int idx, const char* what);

}  // namespace tdlua
