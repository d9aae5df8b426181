// lua_save_load.cpp: torch.save and torch.load (the files: engine/io/state_file.h), and
// torch.save_png (engine/io/png_write.h), torch.save_npy and torch.load_npy (engine/io/npy.h).
//
//   torch.save({fc = {weight = w, bias = b}, step = 3, note = "run 1"}, "model.npz" [, {compress = true}])
//   sd = torch.load("model.npz")   -- {["fc.weight"] = w, ["fc.bias"] = b, step = 3, note = "run 1"}
//
// Saving flattens nested tables to dotted keys (an integer key is written as its digits, as it
// is: {w1, w2} saves "1" and "2"), in the order of a table's __pairs (a state_dict's) or else
// sorted; a value that is not a table is saved as "arr_0", the name
// numpy.savez gives an unnamed array. Loading gives the flat table, keys always strings.
#include <algorithm>
#include <charconv>
#include <cstring>
#include <string>
#include <vector>

#include "device.h"
#include "lua_tensor.h"
#include "lua_util.h"
#include "ops.h"
#include "npy.h"
#include "png_write.h"
#include "state_file.h"
#include "tapedeck_lua.h"

using namespace td;

namespace {

constexpr int MAX_NESTING = 64;

// Where a value sits, for messages: "the value at 'fc.bias'", "the value".
std::string at_key(const std::string& key) { return key.empty() ? "the value" : "the value at '" + key + "'"; }

// The key part a table key gives: a string as it is, an integer as its decimal digits.
StateKeyPart key_part(lua_State* L, int idx, const std::string& parent) {
    if (lua_type(L, idx) == LUA_TSTRING) {
        size_t n = 0;
        const char* s = lua_tolstring(L, idx, &n);
        if (n == 0) tdlua::arg_fail(1, "%s holds an empty key", parent.empty() ? "the table" : ("the table at '" + parent + "'").c_str());
        return StateKeyPart{std::string(s, n), false};
    }
    if (lua_isinteger(L, idx)) return StateKeyPart{std::to_string(lua_tointeger(L, idx)), true};
    tdlua::arg_fail(1, "%s has a key of type %s (keys are strings or integers)",
                    parent.empty() ? "the table" : ("the table at '" + parent + "'").c_str(), luaL_typename(L, idx));
}

// The entries of the table at idx as (key part, position of its value in `list`): in the order
// of its __pairs metamethod when it has one (a state_dict keeps PyTorch's key order), else
// sorted by key, so that a file does not depend on the order Lua happens to walk a table in.
std::vector<std::pair<StateKeyPart, int>> table_order(lua_State* L, int idx, int list, const std::string& parent) {
    luaL_checkstack(L, 6, "torch.save");
    bool has_pairs = luaL_getmetafield(L, idx, "__pairs") != LUA_TNIL;
    if (has_pairs) {   // __pairs(t) -> next, state, control
        lua_pushvalue(L, idx);
        lua_call(L, 1, 3);
    } else {
        lua_pushcfunction(L, [](lua_State* S) { return lua_next(S, 1) ? 2 : (lua_pushnil(S), 1); });
        lua_pushvalue(L, idx);
        lua_pushnil(L);
    }
    std::vector<std::pair<StateKeyPart, int>> order;
    while (true) {   // stack: next, state, control
        lua_pushvalue(L, -3);
        lua_pushvalue(L, -3);
        lua_pushvalue(L, -3);
        lua_call(L, 2, 2);   // next(state, control) -> key, value
        if (lua_isnil(L, -2)) {
            lua_pop(L, 5);
            break;
        }
        int at = static_cast<int>(order.size());
        order.emplace_back(key_part(L, -2, parent), at);
        lua_rawseti(L, list, at + 1);   // the value
        lua_replace(L, -2);             // the key is the next control
    }
    if (!has_pairs)
        std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first.text < b.first.text; });
    return order;
}

// Appends the value at idx (a tensor, number, boolean, string or table of them) to `out` under
// `key`, reached through the table keys `path`; `open` holds the tables being walked, so a table
// that holds itself is an error, not a loop. An empty table is an entry of its own (its path).
void flatten(lua_State* L, int idx, const std::string& key, std::vector<StateKeyPart>& path, StateEntries& out,
             std::vector<const void*>& open) {
    idx = lua_absindex(L, idx);
    if (Tensor* t = tapedeck_test_tensor(L, idx)) {
        out.push_back(StateEntry{key, STATE_TENSOR, t->value(), "", path});
        return;
    }
    switch (lua_type(L, idx)) {
        case LUA_TNUMBER:
        case LUA_TBOOLEAN: {
            bool integer = lua_isinteger(L, idx) || lua_isboolean(L, idx);
            Value v = value_new(Shape{}, integer ? DTYPE_I64 : DTYPE_F64);
            if (lua_isboolean(L, idx)) *v.data<int64_t>() = lua_toboolean(L, idx);
            else if (integer) *v.data<int64_t>() = lua_tointeger(L, idx);
            else *v.data<double>() = lua_tonumber(L, idx);
            out.push_back(StateEntry{key, lua_isboolean(L, idx) ? STATE_BOOLEAN : STATE_NUMBER, v, "", path});
            return;
        }
        case LUA_TSTRING: {
            size_t n = 0;
            const char* s = lua_tolstring(L, idx, &n);
            out.push_back(StateEntry{key, STATE_STRING, Value(), std::string(s, n), path});
            return;
        }
        case LUA_TTABLE: break;
        default:
            tdlua::arg_fail(1, "%s is a %s (tensors, numbers, booleans, strings and tables of them are saved)", at_key(key).c_str(),
                            tdlua::type_name_of(L, idx));
    }
    const void* table = lua_topointer(L, idx);
    for (const void* t : open)
        if (t == table) tdlua::arg_fail(1, "%s is a table that holds itself", at_key(key).c_str());
    if (static_cast<int>(open.size()) >= MAX_NESTING) tdlua::arg_fail(1, "%s nests tables more than %d deep", at_key(key).c_str(), MAX_NESTING);
    open.push_back(table);
    lua_newtable(L);   // the values, in the order the keys were walked
    int list = lua_gettop(L);
    std::vector<std::pair<StateKeyPart, int>> order = table_order(L, idx, list, key);
    if (order.empty() && !path.empty()) out.push_back(StateEntry{"", STATE_TABLE, Value(), "", path});
    for (const auto& [part, at] : order) {
        lua_rawgeti(L, list, at + 1);
        path.push_back(part);
        flatten(L, -1, key.empty() ? part.text : key + "." + part.text, path, out, open);
        path.pop_back();
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    open.pop_back();
}

// A module is saved through its state_dict, as in PyTorch's idiom.
void refuse_module(lua_State* L) {
    if (lua_type(L, 1) != LUA_TTABLE) return;
    lua_getfield(L, 1, "state_dict");
    bool is_module = lua_type(L, -1) == LUA_TFUNCTION;
    lua_pop(L, 1);
    if (is_module) tdlua::arg_fail(1, "a module is saved as its weights: torch.save(model:state_dict(), path)");
}

// {compress = true}: deflate the .npz entries.
bool compress_option(lua_State* L, int idx) {
    if (lua_isnoneornil(L, idx)) return false;
    if (lua_type(L, idx) != LUA_TTABLE) tdlua::arg_fail(idx, "options must be a table ({compress = true}), got %s", tdlua::type_name_of(L, idx));
    tdlua::options_check(L, idx, "compress");
    lua_getfield(L, idx, "compress");
    if (!lua_isnil(L, -1) && !lua_isboolean(L, -1)) tdlua::arg_fail(idx, "compress must be true or false, got %s", tdlua::type_name_of(L, -1));
    bool compress = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return compress;
}

int l_save(lua_State* L) {
    const char* path = tdlua::check_string(L, 2, "path");
    bool compress = compress_option(L, 3);
    refuse_module(L);
    if (lua_isnone(L, 1)) tdlua::arg_fail(1, "the value to save is missing");
    StateEntries entries;
    std::vector<const void*> open;
    std::vector<StateKeyPart> path_parts;
    flatten(L, 1, lua_type(L, 1) == LUA_TTABLE && !tapedeck_test_tensor(L, 1) ? "" : "arr_0", path_parts, entries, open);
    state_save(entries, path, compress);
    return 0;
}

// Pushes the entry's value: a tensor (a fresh leaf), a number, a boolean, a string, an empty table.
int push_entry(lua_State* L, const StateEntry& e, Device device) {
    switch (e.kind) {
        case STATE_NUMBER:
            if (e.value.dtype == DTYPE_I64) lua_pushinteger(L, *e.value.data<int64_t>());
            else lua_pushnumber(L, *e.value.data<double>());
            return 1;
        case STATE_BOOLEAN: lua_pushboolean(L, *e.value.data<int64_t>() != 0); return 1;
        case STATE_STRING:
        case STATE_METADATA: lua_pushlstring(L, e.text.data(), e.text.size()); return 1;
        case STATE_TABLE: lua_newtable(L); return 1;
        case STATE_TENSOR: break;
    }
    Tensor t = ops::create(OP_zeros, e.value.shape, e.value.dtype);
    std::memcpy(t.value().raw(), e.value.raw(), static_cast<size_t>(e.value.numel()) * dtype_size(e.value.dtype));
    if (device != DEVICE_CPU) t = ops::unary(OP_detach, ops::to_device(t, device));   // map_location: a leaf there
    return tapedeck_push_tensor(L, t);
}

// Pushes a key part: an integer key as the integer it was.
void push_key_part(lua_State* L, const StateKeyPart& part) {
    long long value = 0;
    auto [stop, error] = std::from_chars(part.text.data(), part.text.data() + part.text.size(), value);
    if (part.integer && error == std::errc() && stop == part.text.data() + part.text.size()) lua_pushinteger(L, value);
    else lua_pushlstring(L, part.text.data(), part.text.size());
}

std::string key_of(const std::vector<StateKeyPart>& path) {
    std::string key;
    for (const StateKeyPart& part : path) key += (key.empty() ? "" : ".") + part.text;
    return key;
}

// Puts the entry into the table at `top` where its path says (making the tables on the way), or
// under its key when it has no path.
void place_entry(lua_State* L, int top, const StateEntry& e, const char* file, Device device) {
    lua_pushvalue(L, top);
    size_t last = e.path.empty() ? 0 : e.path.size() - 1;
    std::string where;
    for (size_t i = 0; i < last; ++i) {   // stack: the table the next part is looked up in
        where += (where.empty() ? "" : ".") + e.path[i].text;
        push_key_part(L, e.path[i]);
        lua_pushvalue(L, -1);
        int type = lua_rawget(L, -3);
        if (type == LUA_TNIL) {
            lua_pop(L, 1);
            lua_newtable(L);
            lua_pushvalue(L, -2);
            lua_pushvalue(L, -2);
            lua_rawset(L, -5);   // table[part] = the new table
        } else if (type != LUA_TTABLE || tapedeck_test_tensor(L, -1)) {
            engine_fail("torch.load: %s: the file's nesting record puts '%s' inside '%s', which is not a table", file,
                        e.key.c_str(), where.c_str());
        }
        lua_replace(L, -3);
        lua_pop(L, 1);
    }
    if (e.path.empty()) lua_pushlstring(L, e.key.data(), e.key.size());
    else push_key_part(L, e.path[last]);
    lua_pushvalue(L, -1);
    if (lua_rawget(L, -3) != LUA_TNIL)
        engine_fail("torch.load: %s: the entry '%s' is in the file twice (by the nesting record)", file,
                    e.key.empty() ? key_of(e.path).c_str() : e.key.c_str());
    lua_pop(L, 1);
    push_entry(L, e, device);
    lua_rawset(L, -3);
    lua_pop(L, 1);
}

// torch.load(path) -> the saved table, nested as it was saved (a .safetensors file's own
// metadata is not in it: torch.load_metadata).
//   {map_location = "cpu" | "cuda" | "cuda:0"}: where the tensors go (the device is checked before
//   the file is read); {weights_only = true | false}: accepted, and the same either way (tapedeck's
//   files hold tensors, numbers and strings, never code to run).
int l_load(lua_State* L) {
    const char* path = tdlua::check_string(L, 1, "path");
    Device device = DEVICE_CPU;
    if (lua_istable(L, 2)) {   // checked against "map_location weights_only" before this runs
        if (lua_getfield(L, 2, "map_location") != LUA_TNIL) device = tdlua::device_from_arg(L, -1, 2);
        if (lua_getfield(L, 2, "weights_only") != LUA_TNIL && !lua_isboolean(L, -1))
            tdlua::arg_fail(2, "weights_only must be true or false, got %s", tdlua::type_name_of(L, -1));
        lua_pop(L, 2);
        if (device == DEVICE_CUDA) cuda_require("map_location");   // no GPU: said before reading
    }
    StateEntries entries = state_load(path);
    lua_createtable(L, 0, static_cast<int>(entries.size()));
    int top = lua_gettop(L);
    for (const StateEntry& e : entries)
        if (e.kind != STATE_METADATA) place_entry(L, top, e, path, device);
    return 1;
}

// torch.load_metadata(path) -> the file's own metadata: the "__metadata__" strings of a .safetensors
// file that tapedeck did not write as entries ({format = "pt"}); an empty table otherwise.
int l_load_metadata(lua_State* L) {
    StateEntries entries = state_load(tdlua::check_string(L, 1, "path"));
    lua_newtable(L);
    for (const StateEntry& e : entries) {
        if (e.kind != STATE_METADATA) continue;
        lua_pushlstring(L, e.key.data(), e.key.size());
        lua_pushlstring(L, e.text.data(), e.text.size());
        lua_rawset(L, -3);
    }
    return 1;
}

// {layout = "CHW" | "HWC"}: which 3-d layout the image has (needed only when both could be).
PngLayout png_layout_option(lua_State* L, int idx) {
    if (lua_isnoneornil(L, idx)) return PNG_LAYOUT_AUTO;
    if (lua_type(L, idx) != LUA_TTABLE) tdlua::arg_fail(idx, "options must be a table ({layout = \"HWC\"}), got %s", tdlua::type_name_of(L, idx));
    PngLayout layout = PNG_LAYOUT_AUTO;
    tdlua::options_check(L, idx, "layout");
    lua_pushnil(L);
    while (lua_next(L, idx)) {   // only layout, after options_check
        const char* value = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
        if (strcmp(value, "CHW") == 0) layout = PNG_LAYOUT_CHW;
        else if (strcmp(value, "HWC") == 0) layout = PNG_LAYOUT_HWC;
        else tdlua::arg_fail(idx, "layout must be \"CHW\" or \"HWC\", got %s", lua_type(L, -1) == LUA_TSTRING ? value : tdlua::type_name_of(L, -1));
        lua_pop(L, 1);
    }
    return layout;
}

// torch.save_png(image, path [, {layout = "HWC"}]): an image tensor as a PNG file (png_write.h).
int l_save_png(lua_State* L) {
    Tensor* t = tapedeck_test_tensor(L, 1);
    if (!t) tdlua::arg_fail(1, "the image must be a tensor, got %s", tdlua::type_name_of(L, 1));
    const char* path = tdlua::check_string(L, 2, "path");
    png_save(t->value(), path, png_layout_option(L, 3));
    return 0;
}

int l_save_npy(lua_State* L) {
    Tensor* t = tapedeck_test_tensor(L, 1);
    if (!t) tdlua::arg_fail(1, "tensor expected, got %s", tdlua::type_name_of(L, 1));
    npy_save(t->value(), tdlua::check_string(L, 2, "path"));
    return 0;
}

int l_load_npy(lua_State* L) {
    Value v = npy_load(tdlua::check_string(L, 1, "path"));
    Tensor t = ops::create(OP_zeros, v.shape, v.dtype);
    std::memcpy(t.value().raw(), v.raw(), static_cast<size_t>(v.numel()) * dtype_size(v.dtype));
    return tapedeck_push_tensor(L, t);
}

const tdlua::Binding save_load_functions[] = {
    {"save_npy", l_save_npy}, {"load_npy", l_load_npy},
    {"save", l_save, "compress", "torch.save"}, {"load", l_load, "map_location weights_only", "torch.load"},
    {"load_metadata", l_load_metadata, nullptr, "torch.load_metadata"}, {"save_png", l_save_png, "layout"},
    {nullptr, nullptr},
};

}  // namespace

void tapedeck_open_save_load(lua_State* L) { tdlua::register_bindings(L, save_load_functions, "torch."); }
