// dap_variables.cpp: the variables of a stop as DAP shows them (dap_variables.h).
//
// [SECTION] references   containers and the Lua values they hold
// [SECTION] children     scopes, tables, tensors and their elements
// [SECTION] set          setVariable: a frame's variable, a stop's name, a field, a tensor element
#include "dap_variables.h"

#include <lua.hpp>

#include <algorithm>
#include <cstdio>

#include "debugger.h"
#include "format.h"
#include "node_names.h"
#include "repl.h"
#include "tapedeck_lua.h"
#include "tensor_stats.h"
#include "value_text.h"

using nlohmann::json;

namespace {

// At most this many children a level (a tensor's rows, a table's fields); an entry says how many more.
constexpr int64_t MOST_CHILDREN = 100;

// Numbers as the banners print them, with six digits.
std::string element_text(double x) { return td::number_text(x, 6); }

// A one-line value: long texts are cut.
std::string one_line(std::string text) {
    for (char& c : text)
        if (c == '\n') c = ' ';
    if (text.size() > 240) text = text.substr(0, 237) + "...";
    return text;
}

json plain(const std::string& name, const std::string& value, const std::string& type) {
    return json{{"name", name}, {"value", value}, {"type", type}, {"variablesReference", 0}};
}

}  // namespace

bool dap_select_frame(int frame) {
    std::string why;
    return frame < 0 || debugger_select_frame_at(frame, &why);
}

// ============================================================================================
// [SECTION] references

void DapVariables::note_startup_globals(lua_State* L) {
    lua_newtable(L);
    lua_pushglobaltable(L);
    for (lua_pushnil(L); lua_next(L, -2); lua_pop(L, 1)) {
        lua_pushvalue(L, -2);
        lua_pushboolean(L, 1);
        lua_rawset(L, -6);
    }
    lua_pop(L, 1);
    startup_globals_ref_ = luaL_ref(L, LUA_REGISTRYINDEX);
}

void DapVariables::clear(lua_State* L) {
    containers_.clear();
    if (holder_ref_ != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, holder_ref_);
    holder_ref_ = LUA_NOREF;
    held_ = 0;
}

int DapVariables::add_container(DapContainer c) {
    containers_.push_back(std::move(c));
    return static_cast<int>(containers_.size());
}

int DapVariables::add_scope(DapScope kind, int frame) {
    DapContainer c;
    c.kind = kind;
    c.frame = frame;
    return add_container(c);
}

int DapVariables::add_value(lua_State* L, int idx) {
    bool tensor = tapedeck_test_tensor(L, idx) != nullptr;
    if (!tensor && !lua_istable(L, idx)) return 0;
    idx = lua_absindex(L, idx);
    if (holder_ref_ == LUA_NOREF) {
        lua_newtable(L);
        holder_ref_ = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, holder_ref_);
    lua_pushvalue(L, idx);
    lua_rawseti(L, -2, ++held_);
    lua_pop(L, 1);
    DapContainer c;
    c.kind = DAP_VALUE;
    c.held = held_;
    return add_container(c);
}

const DapContainer* DapVariables::find(int reference) const {
    if (reference < 1 || reference > static_cast<int>(containers_.size())) return nullptr;
    return &containers_[reference - 1];
}

void DapVariables::push_held(lua_State* L, int held) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, holder_ref_);
    lua_rawgeti(L, -1, held);
    lua_remove(L, -2);
}

json DapVariables::variable(lua_State* L, const std::string& name, int idx) {
    idx = lua_absindex(L, idx);
    if (td::Tensor* t = tapedeck_test_tensor(L, idx)) {
        json v = plain(name, repl_tensor_summary(*t), "tensor");
        v["variablesReference"] = add_value(L, idx);
        return v;
    }
    json v = plain(name, one_line(repl_nested_value_text(L, idx)), luaL_typename(L, idx));
    if (lua_istable(L, idx)) v["variablesReference"] = add_value(L, idx);
    return v;
}

// ============================================================================================
// [SECTION] children

namespace {

// The order the Stop scope lists the stop's names in; the rest follow by name.
int stop_name_rank(const std::string& name) {
    static const char* const ORDER[] = {"node", "out", "outputs", "inputs", "saved", "grad_output", "grad_input", "stop"};
    for (int i = 0; i < 8; ++i)
        if (name == ORDER[i]) return i;
    return 8;
}

}  // namespace

bool DapVariables::children(lua_State* L, int reference, json& out, std::string& error) {
    out = json::array();
    const DapContainer* found = find(reference);
    if (!found) {
        error = "no variables " + std::to_string(reference) + " (references last until the program moves on)";
        return false;
    }
    DapContainer c = *found;   // a copy: adding children grows the list
    int base = lua_gettop(L);
    bool ok = true;
    if (c.kind == DAP_VALUE) {
        push_held(L, c.held);
        if (tapedeck_test_tensor(L, -1)) tensor_children(L, c.held, out);
        else table_children(L, lua_gettop(L), out);
    } else if (c.kind == DAP_TENSOR_VALUES) {
        tensor_values(L, c, out);
    } else {
        ok = scope_children(L, c, out, error);
    }
    lua_settop(L, base);
    return ok;
}

bool DapVariables::scope_children(lua_State* L, const DapContainer& c, json& out, std::string& error) {
    if (c.kind == DAP_STOP) {
        debugger_push_stop_names(L);
        if (!lua_getmetatable(L, -1) || lua_getfield(L, -1, "__index") != LUA_TTABLE) {
            error = "not stopped";
            return false;
        }
        std::vector<std::string> names;
        for (lua_pushnil(L); lua_next(L, -2); lua_pop(L, 1))
            if (lua_type(L, -2) == LUA_TSTRING) names.push_back(lua_tostring(L, -2));
        names.erase(std::remove_if(names.begin(), names.end(), [](const std::string& n) { return n == "grad_in" || n == "grad_out"; }),
                    names.end());
        std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
            return stop_name_rank(a) != stop_name_rank(b) ? stop_name_rank(a) < stop_name_rank(b) : a < b;
        });
        for (const std::string& name : names) {
            lua_getfield(L, -1, name.c_str());
            out.push_back(variable(L, name, -1));
            lua_pop(L, 1);
        }
        return true;
    }
    if (c.kind == DAP_GLOBALS) {   // the script's own: sorted by name
        std::vector<std::string> names;
        lua_rawgeti(L, LUA_REGISTRYINDEX, startup_globals_ref_);
        lua_pushglobaltable(L);
        for (lua_pushnil(L); lua_next(L, -2); lua_pop(L, 1)) {
            if (lua_type(L, -2) != LUA_TSTRING) continue;
            lua_pushvalue(L, -2);
            if (lua_rawget(L, -5) == LUA_TNIL) names.push_back(lua_tostring(L, -3));
            lua_pop(L, 1);
        }
        std::sort(names.begin(), names.end());
        for (const std::string& name : names) {
            lua_getfield(L, -1, name.c_str());
            out.push_back(variable(L, name, -1));
            lua_pop(L, 1);
        }
        return true;
    }
    if (!dap_select_frame(c.frame) || !debugger_push_frame_variables(L)) {
        error = "this frame has no variables to show";
        return false;
    }
    lua_getfield(L, -1, c.kind == DAP_LOCALS ? "locals" : "upvalues");
    for (lua_Integer i = 1; i <= static_cast<lua_Integer>(lua_rawlen(L, -1)); ++i) {
        lua_rawgeti(L, -1, i);
        lua_rawgeti(L, -1, 1);
        std::string name = lua_tostring(L, -1);
        lua_rawgeti(L, -2, 2);
        out.push_back(variable(L, name, -1));
        lua_pop(L, 3);
    }
    return true;
}

void DapVariables::table_children(lua_State* L, int idx, json& out) {
    std::vector<std::pair<lua_Integer, std::string>> keys;   // integer keys first, in order; then names
    for (lua_pushnil(L); lua_next(L, idx); lua_pop(L, 1)) {
        if (lua_isinteger(L, -2)) keys.emplace_back(lua_tointeger(L, -2), "");
        else if (lua_type(L, -2) == LUA_TSTRING) keys.emplace_back(LUA_MAXINTEGER, lua_tostring(L, -2));
    }
    if (keys.empty() && luaL_getmetafield(L, idx, "__len") != LUA_TNIL) {   // a proxy (grad_input): its entries by index
        lua_pop(L, 1);
        lua_Integer n = luaL_len(L, idx);
        for (lua_Integer i = 1; i <= n; ++i) keys.emplace_back(i, "");
    }
    std::sort(keys.begin(), keys.end());
    int64_t shown = 0;
    for (const auto& key : keys) {
        if (++shown > MOST_CHILDREN * 10) {
            out.push_back(plain("...", std::to_string(keys.size() - MOST_CHILDREN * 10) + " more", "string"));
            break;
        }
        bool named = key.first == LUA_MAXINTEGER;
        if (named) lua_getfield(L, idx, key.second.c_str());
        else lua_geti(L, idx, key.first);
        out.push_back(variable(L, named ? key.second : "[" + std::to_string(key.first) + "]", -1));
        lua_pop(L, 1);
    }
}

void DapVariables::tensor_children(lua_State* L, int held, json& out) {
    td::Tensor t = *tapedeck_test_tensor(L, -1);
    const td::Value& v = t.value();
    out.push_back(plain("shape", v.shape.str(), "string"));
    out.push_back(plain("dtype", td::dtype_name(v.dtype), "string"));
    out.push_back(plain("device", td::value_freed(v) ? "-" : v.device() == td::DEVICE_CPU ? "cpu" : "cuda", "string"));
    std::string label = td::node_label(t.node.get(), t.output);
    std::string node = "#" + std::to_string(t.node->id) + " " + t.node->shown_op();
    out.push_back(plain("node", label.empty() || label[0] == '#' ? node : node + " (" + label + ")", "string"));
    out.push_back(plain("requires_grad", t.requires_grad() ? "true" : "false", "boolean"));
    if (td::value_freed(v)) {
        out.push_back(plain("values", td::VALUE_FREED_TEXT, "string"));
        return;
    }
    td::TensorStats s = td::tensor_stats(v);
    for (auto [name, x] : {std::pair<const char*, double>{"min", s.min}, {"max", s.max}, {"mean", s.mean}, {"std", s.std}})
        out.push_back(plain(name, element_text(x), "number"));
    out.push_back(plain("nan", std::to_string(s.nan), "number"));
    out.push_back(plain("inf", std::to_string(s.inf()), "number"));
    const td::Tensor& grad = t.node->outputs[t.output].grad;
    if (grad.defined()) {
        tapedeck_push_tensor(L, grad);
        out.push_back(variable(L, "grad", -1));
        lua_pop(L, 1);
    }
    if (v.shape.ndim == 0) {
        out.push_back(plain("value", element_text(td::value_get(td::value_to_host(v), 0)), "number"));
        return;
    }
    DapContainer values;
    values.kind = DAP_TENSOR_VALUES;
    values.held = held;
    json entry = plain("values", v.shape.str() + " " + td::dtype_name(v.dtype), "values");
    entry["variablesReference"] = add_container(values);
    out.push_back(entry);
}

namespace {

// The row-major index of the element at 1-based `prefix` (followed by zeros), and the stride of
// the dim after it.
int64_t flat_index(const td::Shape& shape, const std::vector<int64_t>& prefix, int64_t* next_stride) {
    int64_t index = 0, stride = 1;
    for (int d = shape.ndim - 1; d >= 0; --d) {
        if (d == static_cast<int>(prefix.size())) *next_stride = stride;
        if (d < static_cast<int>(prefix.size())) index += (prefix[d] - 1) * stride;
        stride *= shape.dims[d];
    }
    return index;
}

}  // namespace

void DapVariables::tensor_values(lua_State* L, const DapContainer& c, json& out) {
    push_held(L, c.held);
    td::Tensor t = *tapedeck_test_tensor(L, -1);
    td::Value v = td::value_to_host(t.value());
    int depth = static_cast<int>(c.prefix.size());
    int64_t stride = 1;
    int64_t base = flat_index(v.shape, c.prefix, &stride);
    int64_t count = v.shape.dims[depth];
    for (int64_t i = 0; i < count && i < MOST_CHILDREN; ++i) {
        std::string name = "[" + std::to_string(i + 1) + "]";
        if (depth + 1 == v.shape.ndim) {
            out.push_back(plain(name, element_text(td::value_get(v, base + i)), "number"));
            continue;
        }
        DapContainer row = c;
        row.prefix.push_back(i + 1);
        std::string text;
        if (depth + 2 == v.shape.ndim) {   // a row of numbers: its first ones
            int64_t row_count = v.shape.dims[depth + 1];
            for (int64_t j = 0; j < row_count && j < 4; ++j) text += (j ? ", " : "") + element_text(td::value_get(v, base + i * stride + j));
            text = "[" + text + (row_count > 4 ? ", ...]" : "]");
        } else {
            td::Shape rest;
            for (int d = depth + 1; d < v.shape.ndim; ++d) rest.dims[rest.ndim++] = v.shape.dims[d];
            text = rest.str();
        }
        json entry = plain(name, text, "values");
        entry["variablesReference"] = add_container(row);
        out.push_back(entry);
    }
    if (count > MOST_CHILDREN)
        out.push_back(plain("...", std::to_string(count - MOST_CHILDREN) + " more (evaluate the tensor's slice to see them)", "string"));
}

// ============================================================================================
// [SECTION] set

namespace {

// Push the value of the Lua expression `text` (in the stop's context); false with `error` set.
bool eval_value(lua_State* L, const std::string& text, std::string& error) {
    int base = lua_gettop(L);
    int status = repl_load(L, "return " + text, "=value");
    if (status == LUA_OK) status = repl_docall(L, 0, 1);
    if (status != LUA_OK) {
        std::string message = repl_error_text(L, -1);
        error = message.substr(0, message.find('\n'));
        lua_settop(L, base);
        return false;
    }
    return true;
}

int settable_call(lua_State* L) {   // (table, key, value): t[key] = value, metamethods and all
    lua_settable(L, 1);
    return 0;
}

// t[key] = value for the table at `table`, the key and value on top (popped); false with `error` set.
bool protected_set(lua_State* L, int table, std::string& error) {
    lua_pushcfunction(L, settable_call);
    lua_pushvalue(L, table);
    lua_rotate(L, -4, 2);   // settable_call, table, key, value
    if (lua_pcall(L, 3, 0, 0) != LUA_OK) {
        error = repl_error_text(L, -1);
        lua_pop(L, 1);
        return false;
    }
    return true;
}

// "[3]" -> 3; anything else is a name.
bool index_name(const std::string& name, lua_Integer* index) {
    if (name.size() < 3 || name.front() != '[' || name.back() != ']') return false;
    char* end = nullptr;
    long long n = strtoll(name.c_str() + 1, &end, 10);
    if (end != name.c_str() + name.size() - 1) return false;
    *index = n;
    return true;
}

// Write element `index` (row-major) of t: in place, the history told first (rewind keeps the old bytes).
void tensor_set_element(const td::Tensor& t, int64_t index, double x) {
    const td::Value& dst = t.value();
    td::engine_notify_before_write(nullptr, dst.storage.get());
    if (dst.device() == td::DEVICE_CPU) {
        td::value_set(dst, index, x);
        return;
    }
    td::Value host = td::value_contiguous(td::value_to_host(dst));
    td::value_set(host, index, x);
    td::value_write_from_host(dst, host);
}

// A variable of the selected frame, through the stop's _ENV (a local, else an upvalue, else a global).
bool set_frame_variable(lua_State* L, const std::string& name, int new_value, std::string& error) {
    int status = repl_load(L, name + " = ...", "=setVariable");
    if (status == LUA_OK) {
        lua_pushvalue(L, new_value);
        status = repl_docall(L, 1, 0);
    }
    if (status == LUA_OK) return true;
    error = repl_error_text(L, -1);
    lua_pop(L, 1);
    return false;
}

// Element `name` ("[3]") of the row `prefix` of tensor t := the number at new_value; its value as
// it now reads pushed.
bool set_tensor_element(lua_State* L, const td::Tensor& t, std::vector<int64_t> prefix, const std::string& name,
                        int new_value, std::string& error) {
    const td::Shape& shape = t.value().shape;
    lua_Integer index = 0;
    if (!index_name(name, &index) || index < 1 || static_cast<int>(prefix.size()) + 1 != shape.ndim || index > shape.dims[prefix.size()]) {
        error = name + " is a row: expand it to change its elements";
        return false;
    }
    if (!lua_isnumber(L, new_value)) {
        error = "an element takes a number, not a " + std::string(luaL_typename(L, new_value));
        return false;
    }
    prefix.push_back(index);
    int64_t stride = 1;
    int64_t at = flat_index(shape, prefix, &stride);
    tensor_set_element(t, at, lua_tonumber(L, new_value));
    lua_pushnumber(L, td::value_get(td::value_to_host(t.value()), at));
    return true;
}

}  // namespace

bool DapVariables::set(lua_State* L, int reference, const std::string& name, const std::string& value, json& out,
                       std::string& error) {
    const DapContainer* found = find(reference);
    if (!found) {
        error = "no variables " + std::to_string(reference) + " (references last until the program moves on)";
        return false;
    }
    DapContainer c = *found;
    const DebugStop* stop = debugger_stop();
    if (stop && stop->rewound_to) {
        error = "the view is rewound (stepBack): values can be changed at the live stop only";
        return false;
    }
    int base = lua_gettop(L);
    bool in_frame = c.kind == DAP_LOCALS || c.kind == DAP_UPVALUES;
    if (!dap_select_frame(in_frame ? c.frame : -1)) {
        error = "no Lua frame " + std::to_string(c.frame) + " at this stop";
        return false;
    }
    if (!eval_value(L, value, error)) return false;
    int new_value = lua_gettop(L);
    bool ok;
    if (in_frame) {
        ok = set_frame_variable(L, name, new_value, error);
    } else if (c.kind == DAP_TENSOR_VALUES) {
        push_held(L, c.held);
        ok = set_tensor_element(L, *tapedeck_test_tensor(L, -1), c.prefix, name, new_value, error);
        if (ok) new_value = lua_gettop(L);
    } else {   // a field of the globals, of the stop's names (out, grad_input: the stop's edit), of a table
        if (c.kind == DAP_GLOBALS) lua_pushglobaltable(L);
        else if (c.kind == DAP_STOP) debugger_push_stop_names(L);
        else push_held(L, c.held);
        lua_Integer index = 0;
        if (tapedeck_test_tensor(L, -1)) {
            error = name + " is what the tensor is, not a value to change: expand `values` to change an element";
            ok = false;
        } else {
            int table = lua_gettop(L);
            bool by_index = c.kind == DAP_VALUE && index_name(name, &index);
            if (by_index) lua_pushinteger(L, index);
            else lua_pushstring(L, name.c_str());
            lua_pushvalue(L, new_value);
            ok = protected_set(L, table, error);
            if (ok) {   // what it holds now (grad_input[i] keeps a copy of what it was given)
                if (by_index) lua_geti(L, table, index);
                else lua_getfield(L, table, name.c_str());
                new_value = lua_gettop(L);
            }
        }
    }
    if (ok) out = variable(L, name, new_value);
    lua_settop(L, base);
    return ok;
}
