// debugger_stop.cpp: the stopped context — what the stop prompt sees and what the stop prints.
//
// [SECTION] sources      script files by chunk name, and the text of a line
// [SECTION] frames       the Lua stack at the stop; the script frame's locals and upvalues
// [SECTION] names        node, inputs, out, outputs, saved, grad_output, grad_input, stop; editing out and grad_input
// [SECTION] env          the _ENV of stop-prompt chunks: locals, then the stop's names, then globals
// [SECTION] banner       what a stop prints, :where, the watches
// [SECTION] inspect      the :inspect text (statistics from tensor_stats.h)
#include <lua.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include "debugger_internal.h"
#include "history.h"
#include "node_names.h"
#include "plan.h"
#include "source_cache.h"
#include "tensor_stats.h"
#include "tapedeck_lua.h"
#include "value_text.h"
#include "format.h"

using namespace td;

namespace dbg {

namespace {

// ============================================================================================
// [SECTION] sources

std::set<std::string>& seen_paths() {
    static std::set<std::string> paths;
    return paths;
}

// The file a chunk name ("@path") or a short_src ("path", ".../end/of/path") names.
std::string path_of(const std::string& file) {
    if (!file.empty() && file[0] == '@') return file.substr(1);
    if (file.compare(0, 3, "...") == 0) {
        std::string tail = file.substr(3);
        for (const std::string& p : seen_paths())
            if (p.size() >= tail.size() && p.compare(p.size() - tail.size(), tail.size(), tail) == 0) return p;
        return "";
    }
    return file;
}

}  // namespace

void note_source(const std::string& chunk_name) {
    if (!chunk_name.empty() && chunk_name[0] == '@') seen_paths().insert(chunk_name.substr(1));
}

const std::vector<std::string>* source_file_lines(const std::string& file) {
    std::string path = path_of(file);
    if (path.empty() || path == "stdin") return nullptr;
    return td::source_lines(path);
}

std::string source_line_text(const std::string& file, int line) {
    std::string path = path_of(file);
    if (path.empty() || path == "stdin") return "";
    return td::source_line_text(path, line);
}

// ============================================================================================
// [SECTION] frames

bool is_library_source(const std::string& source) {
    return source.compare(0, strlen(TAPEDECK_LIBRARY_CHUNK), TAPEDECK_LIBRARY_CHUNK) == 0;
}

void capture_frames(lua_State* T, DebugStop& stop, int first_level) {
    lua_Debug ar;
    for (int level = first_level; lua_getstack(T, level, &ar); ++level) {
        lua_getinfo(T, "Sln", &ar);
        DebugFrame f;
        f.source = ar.source ? ar.source : "";
        f.short_src = ar.short_src;
        f.line = ar.currentline;
        f.name = ar.name ? ar.name : "";
        f.what = ar.what ? ar.what : "";
        f.line_defined = ar.linedefined;
        note_source(f.source);
        int index = static_cast<int>(stop.frames.size());
        if (stop.frame < 0 && f.line > 0 && f.what != "C" && !is_library_source(f.source)) stop.frame = index;
        stop.frames.push_back(f);
    }
}

namespace {

// Appends {name, value} to the list at absolute index `list`, the value taken from the top of L.
void append_named(lua_State* L, int list, const char* name, int* n) {
    lua_createtable(L, 2, 0);
    lua_pushstring(L, name);
    lua_rawseti(L, -2, 1);
    lua_insert(L, -2);
    lua_rawseti(L, -2, 2);
    lua_rawseti(L, list, ++*n);
}

}  // namespace

void push_live_frame_variables(lua_State* L, lua_State* T, lua_Debug* ar) {
    lua_createtable(L, 0, 2);
    lua_newtable(L);   // locals
    int n = 0;
    for (int i = 1;; ++i) {
        const char* name = lua_getlocal(T, ar, i);
        if (!name) break;
        if (T != L) lua_xmove(T, L, 1);
        if (name[0] == '(') {   // "(temporary)", "(for state)", "(C temporary)"
            lua_pop(L, 1);
            continue;
        }
        append_named(L, lua_gettop(L) - 1, name, &n);
    }
    lua_setfield(L, -2, "locals");
    lua_newtable(L);   // upvalues
    lua_getinfo(T, "f", ar);
    if (T != L) lua_xmove(T, L, 1);
    int function = lua_gettop(L);
    n = 0;
    for (int i = 1;; ++i) {
        const char* name = lua_getupvalue(L, function, i);
        if (!name) break;
        if (name[0] == '\0' || strcmp(name, "_ENV") == 0) {   // C functions' upvalues have no names
            lua_pop(L, 1);
            continue;
        }
        append_named(L, function - 1, name, &n);
    }
    lua_pop(L, 1);   // the function
    lua_setfield(L, -2, "upvalues");
}

namespace {

// The activation record of the stop's script frame as the stack is now (frames above it come
// and go while the prompt evaluates; those below it do not).
bool script_frame(const DebugStop& stop, lua_Debug& ar) {
    if (stop.frame < 0 || stop.snapshot_ref != LUA_NOREF) return false;
    int level = stack_depth(stop.thread) - (static_cast<int>(stop.frames.size()) - stop.frame);
    return level >= 0 && lua_getstack(stop.thread, level, &ar);
}

// The index of the innermost active local called `name` in the frame, or 0.
int find_local(lua_State* T, lua_Debug& ar, const char* name) {
    int found = 0;
    for (int i = 1;; ++i) {
        const char* n = lua_getlocal(T, &ar, i);
        if (!n) break;
        lua_pop(T, 1);
        if (strcmp(n, name) == 0) found = i;
    }
    return found;
}

// The index of the frame function's upvalue called `name` (not _ENV), or 0.
int find_upvalue(lua_State* T, lua_Debug& ar, const char* name) {
    if (strcmp(name, "_ENV") == 0) return 0;
    lua_getinfo(T, "f", &ar);
    int found = 0;
    for (int i = 1; !found; ++i) {
        const char* n = lua_getupvalue(T, -1, i);
        if (!n) break;
        lua_pop(T, 1);
        if (strcmp(n, name) == 0) found = i;
    }
    lua_pop(T, 1);
    return found;
}

// Push the snapshot's {name, value} entry of the selected frame's variable `name` (the innermost
// local of that name, else the upvalue); false (nothing pushed) when it has none.
bool push_snapshot_entry(lua_State* L, const DebugStop& stop, const char* name) {
    if (stop.frame < 0) return false;
    lua_rawgeti(L, LUA_REGISTRYINDEX, stop.snapshot_ref);
    lua_rawgeti(L, -1, stop.frame + 1);
    lua_remove(L, -2);
    for (const char* kind : {"locals", "upvalues"}) {
        lua_getfield(L, -1, kind);
        for (lua_Integer i = static_cast<lua_Integer>(lua_rawlen(L, -1)); i >= 1; --i) {
            lua_rawgeti(L, -1, i);
            lua_rawgeti(L, -1, 1);
            bool same = strcmp(lua_tostring(L, -1), name) == 0;
            lua_pop(L, 1);
            if (same) {
                lua_replace(L, -3);
                lua_pop(L, 1);
                return true;
            }
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return false;
}

// Push the value of the frame's variable `name` onto L; false when it has none.
bool push_frame_variable(lua_State* L, const DebugStop& stop, const char* name) {
    if (stop.snapshot_ref != LUA_NOREF) {
        if (!push_snapshot_entry(L, stop, name)) return false;
        lua_rawgeti(L, -1, 2);
        lua_remove(L, -2);
        return true;
    }
    lua_Debug ar;
    lua_State* T = stop.thread;
    if (!script_frame(stop, ar)) return false;
    if (int i = find_local(T, ar, name)) {
        lua_getlocal(T, &ar, i);
    } else if (int u = find_upvalue(T, ar, name)) {
        lua_getinfo(T, "f", &ar);
        lua_getupvalue(T, -1, u);
        lua_remove(T, -2);
    } else {
        return false;
    }
    if (T != L) lua_xmove(T, L, 1);
    return true;
}

// Set the frame's variable `name` to the value at L's index idx; false when it has none.
bool set_frame_variable(lua_State* L, const DebugStop& stop, const char* name, int idx) {
    if (stop.snapshot_ref != LUA_NOREF) {   // after unwinding only the snapshot is left to change
        idx = lua_absindex(L, idx);
        if (!push_snapshot_entry(L, stop, name)) return false;
        lua_pushvalue(L, idx);
        lua_rawseti(L, -2, 2);
        lua_pop(L, 1);
        return true;
    }
    lua_Debug ar;
    lua_State* T = stop.thread;
    if (!script_frame(stop, ar)) return false;
    int i = find_local(T, ar, name);
    int u = i ? 0 : find_upvalue(T, ar, name);
    if (!i && !u) return false;
    lua_pushvalue(L, idx);
    if (T != L) lua_xmove(L, T, 1);
    if (i) {
        lua_setlocal(T, &ar, i);
    } else {
        lua_getinfo(T, "f", &ar);
        lua_insert(T, -2);
        lua_setupvalue(T, -2, u);
        lua_pop(T, 1);
    }
    return true;
}

// ============================================================================================
// [SECTION] names

// The stop a proxy or env belongs to, when it is still the current one.
DebugStop* live_stop(lua_State* L, int serial_index) {
    lua_Integer serial = lua_tointeger(L, serial_index);
    return g.stop && g.stop->serial == static_cast<uint64_t>(serial) ? g.stop : nullptr;
}

// A tensor for an input edge: the producing node's output when it is alive, else a copy of the value.
Tensor input_tensor(const Edge& e) {
    if (value_freed(e.value())) engine_fail("input #%lld: its value was %s", static_cast<long long>(e.id), VALUE_FREED_TEXT);
    Node* producer = e.node() ? e.node() : tape_find(e.id);
    if (producer && producer->outputs[e.output].value.storage.get() == e.value().storage.get())
        return Tensor(producer, e.output);
    Value host = value_to_host(e.value());
    std::vector<double> values(static_cast<size_t>(host.numel()));
    for (int64_t i = 0; i < host.numel(); ++i) values[static_cast<size_t>(i)] = value_get(host, i);
    return ops::to_device(ops::from_values(host.shape, host.dtype, values.data()), e.value().device());
}

// What a backward rule reads (OPF_SAVES_*), named as the op's math line names them.
struct SavedTensor {
    const char* name;
    int input;   // -1: output 0
};

std::vector<SavedTensor> saved_of(const Node* node) {
    std::vector<SavedTensor> saved;
    uint32_t flags = node->info().flags;
    bool unary = node->inputs.size() == 1;
    if (flags & OPF_SAVES_IN0) saved.push_back({unary ? "x" : "a", 0});
    if ((flags & OPF_SAVES_IN1) && node->inputs.size() > 1) saved.push_back({"b", 1});
    if (flags & OPF_SAVES_OUT0) saved.push_back({"y", -1});
    return saved;
}

void set_field_tensor(lua_State* L, const char* field, const Tensor& t) {
    if (t.defined()) tapedeck_push_tensor(L, t);
    else lua_pushnil(L);
    lua_setfield(L, -2, field);
}

// Overwrite output `output` of the node with the value at idx (a tensor of its shape, or a number).
// The new elements are written on the host: into dst itself on the CPU, else into a host copy
// that value_write_from_host then puts on dst's device.
void overwrite_output(lua_State* L, Node* node, int output, int idx) {
    const Value& dst = node->outputs[output].value;
    if (lua_type(L, idx) == LUA_TNUMBER) {
        double x = lua_tonumber(L, idx);
        Value host = dst.device() == DEVICE_CPU ? dst : value_new(dst.shape, dst.dtype);
        for (int64_t i = 0; i < host.numel(); ++i) value_set(host, i, x);
        if (host.storage.get() != dst.storage.get()) value_write_from_host(dst, host);
    } else {
        Tensor* t = tapedeck_test_tensor(L, idx);
        if (!t) luaL_error(L, "out: assign a tensor of shape %s or a number, not a %s", dst.shape.str().c_str(), luaL_typename(L, idx));
        if (t->shape() != dst.shape)
            luaL_error(L, "out: the new value has shape %s, the output has shape %s", t->shape().str().c_str(), dst.shape.str().c_str());
        Value src = value_to_host(t->value());
        Value host = dst.device() == DEVICE_CPU ? dst : value_new(dst.shape, dst.dtype);
        for (int64_t i = 0; i < host.numel(); ++i) value_set(host, i, value_get(src, i));
        if (host.storage.get() != dst.storage.get()) value_write_from_host(dst, host);
    }
    node->edited |= EDITED_OUTPUT;
}

// grad_input[i] = value at idx: the gradient flowing on to input i (a tensor, a number, or nil).
void replace_grad(lua_State* L, DebugStop& stop, lua_Integer i, int idx) {
    Node* node = stop.node.get();
    if (plan_replay_recorded_id(node))   // the replayed nodes hold no autograd graph to send another gradient along
        luaL_error(L, "grad_input[%d]: the gradients of a frozen call cannot be replaced at a stop (edit them in the "
                      "eager function, %s.fn)", static_cast<int>(i), plan_replay_current()->called->name.c_str());
    if (i < 1 || i > node->inputs.size())
        luaL_error(L, "grad_input[%d]: the node has %d input%s", static_cast<int>(i), node->inputs.size(), node->inputs.size() == 1 ? "" : "s");
    const Edge& e = node->inputs[static_cast<int>(i - 1)];
    if (!e.node() || !e.node()->outputs[e.output].requires_grad)
        luaL_error(L, "grad_input[%d]: input %d (#%d) needs no gradient", static_cast<int>(i), static_cast<int>(i), static_cast<int>(e.id));
    Tensor& slot = stop.pass->group.grad_inputs[i - 1];
    DType dtype = slot.defined() ? slot.dtype() : e.value().dtype;
    Tensor grad;
    if (lua_type(L, idx) == LUA_TNUMBER) {
        grad = ops::create(OP_full, e.value().shape, dtype, lua_tonumber(L, idx));
    } else if (Tensor* t = tapedeck_test_tensor(L, idx)) {
        if (t->shape() != e.value().shape)
            luaL_error(L, "grad_input[%d]: the new gradient has shape %s, input %d has shape %s", static_cast<int>(i),
                       t->shape().str().c_str(), static_cast<int>(i), e.value().shape.str().c_str());
        grad = ops::unary(OP_clone, *t);   // a copy: the pass may take it over as a leaf's .grad
        if (grad.dtype() != dtype) grad = ops::to(grad, dtype);
    } else if (!lua_isnil(L, idx)) {
        luaL_error(L, "grad_input[%d]: assign a tensor, a number or nil, not a %s", static_cast<int>(i), luaL_typename(L, idx));
    }
    slot = grad;
    node->edited |= EDITED_GRAD;
    history_note_group_edited(node);   // :back later shows the gradient that flowed on
}

// The grad_input proxy: upvalue 1 is the serial of its stop.
DebugStop& proxy_stop(lua_State* L) {
    DebugStop* stop = live_stop(L, lua_upvalueindex(1));
    if (!stop) luaL_error(L, "grad_input: its stop has ended");
    return *stop;
}

int grad_input_index(lua_State* L) {
    DebugStop& stop = proxy_stop(L);
    lua_Integer i = lua_tointeger(L, 2);
    if (i < 1 || i > stop.node->inputs.size()) return 0;
    const Tensor& grad = stop.pass->group.grad_inputs[i - 1];
    if (!grad.defined()) return 0;
    return tapedeck_push_tensor(L, grad);
}

int grad_input_newindex(lua_State* L) {
    DebugStop& stop = proxy_stop(L);
    if (!lua_isinteger(L, 2)) return luaL_error(L, "grad_input: index it by input number (1, 2, ...)");
    replace_grad(L, stop, lua_tointeger(L, 2), 3);
    return 0;
}

int grad_input_len(lua_State* L) {
    lua_pushinteger(L, proxy_stop(L).node->inputs.size());
    return 1;
}

// "{tensor [20,10] float32 #26 mm, nil}": one entry per input, as a table prints (value_text.h).
int grad_input_tostring(lua_State* L) {
    DebugStop& stop = proxy_stop(L);
    std::string s = "{";
    for (int i = 0; i < stop.node->inputs.size(); ++i) {
        const Tensor& grad = stop.pass->group.grad_inputs[i];
        s += (i ? ", " : "") + (grad.defined() ? repl_tensor_summary(grad) : std::string("nil"));
    }
    lua_pushstring(L, (s + "}").c_str());
    return 1;
}

void push_grad_input_proxy(lua_State* L, const DebugStop& stop) {
    lua_newtable(L);
    lua_createtable(L, 0, 4);
    const luaL_Reg methods[] = {{"__index", grad_input_index}, {"__newindex", grad_input_newindex}, {"__len", grad_input_len},
                                {"__tostring", grad_input_tostring}, {nullptr, nullptr}};
    lua_pushinteger(L, static_cast<lua_Integer>(stop.serial));
    luaL_setfuncs(L, methods, 1);
    lua_setmetatable(L, -2);
}

const char* kind_name(StopKind kind) {
    switch (kind) {
        case STOP_NODE: return "node";
        case STOP_GROUP: return "group";
        case STOP_LINE: return "line";
        case STOP_POST_MORTEM: return "post-mortem";
    }
    return "?";
}

// Build the names table of a stop.
void push_new_names(lua_State* L, DebugStop& stop) {
    lua_createtable(L, 0, 10);
    Node* node = stop.node.get();
    lua_createtable(L, 0, 8);   // stop
    lua_pushstring(L, kind_name(stop.kind));
    lua_setfield(L, -2, "kind");
    lua_pushstring(L, stop.phase == PHASE_FORWARD ? "forward" : "backward");
    lua_setfield(L, -2, "phase");
    lua_pushstring(L, stop.reason.c_str());
    lua_setfield(L, -2, "reason");
    lua_pushinteger(L, stop.breakpoint);
    lua_setfield(L, -2, "breakpoint");
    lua_pushstring(L, stop.why.c_str());
    lua_setfield(L, -2, "why");
    if (stop.kind == STOP_POST_MORTEM) {
        lua_pushstring(L, stop.error.c_str());
        lua_setfield(L, -2, "error");
    }
    if (stop.frame >= 0) {
        lua_pushstring(L, stop.frames[stop.frame].short_src.c_str());
        lua_setfield(L, -2, "file");
        lua_pushinteger(L, stop.frames[stop.frame].line);
        lua_setfield(L, -2, "line");
    }
    lua_setfield(L, -2, "stop");
    if (!node) return;
    tapedeck_push_node_record(L, node);
    lua_setfield(L, -2, "node");
    lua_createtable(L, node->inputs.size(), 0);
    for (int i = 0; i < node->inputs.size(); ++i) {
        tapedeck_push_tensor(L, input_tensor(node->inputs[i]));
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "inputs");
    if (node->outputs.size() > 0) set_field_tensor(L, "out", Tensor(node, 0));
    lua_createtable(L, node->outputs.size(), 0);
    for (int i = 0; i < node->outputs.size(); ++i) {
        tapedeck_push_tensor(L, Tensor(node, i));
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "outputs");
    lua_newtable(L);
    for (const SavedTensor& s : saved_of(node))
        set_field_tensor(L, s.name, s.input < 0 ? Tensor(node, 0) : input_tensor(node->inputs[s.input]));
    lua_setfield(L, -2, "saved");
    if (node->phase == PHASE_BACKWARD)
        if (Node* forward = tape_find(node->group)) {
            tapedeck_push_node_record(L, forward);
            lua_setfield(L, -2, "group");
        }
    if (stop.kind != STOP_GROUP) return;
    const BackwardGroup& group = stop.pass->group;
    // PyTorch's names (a module's backward hook gets grad_input, grad_output): grad_output is
    // what arrived at the node's output, grad_input what its rule sends to each input.
    if (node->outputs.size() == 1) {
        set_field_tensor(L, "grad_output", group.grad_outputs[0]);
    } else {
        lua_newtable(L);
        for (int i = 0; i < node->outputs.size(); ++i) {
            if (group.grad_outputs[i].defined()) tapedeck_push_tensor(L, group.grad_outputs[i]);
            else lua_pushnil(L);
            lua_rawseti(L, -2, i + 1);
        }
        lua_setfield(L, -2, "grad_output");
    }
    push_grad_input_proxy(L, stop);
    lua_setfield(L, -2, "grad_input");
    // The names before PyTorch's, kept so that old scripts run: grad_in = grad_output,
    // grad_out = grad_input (the same tensor, the same editable table).
    lua_getfield(L, -1, "grad_output");
    lua_setfield(L, -2, "grad_in");
    lua_getfield(L, -1, "grad_input");
    lua_setfield(L, -2, "grad_out");
}

// Whether `name` can be written as a Lua variable (a name, not a keyword): "att", not "model.fc1.weight".
bool is_lua_name(const std::string& name) {
    static const std::set<std::string> keywords = {"and", "break", "do", "else", "elseif", "end", "false", "for",
                                                   "function", "goto", "if", "in", "local", "nil", "not", "or",
                                                   "repeat", "return", "then", "true", "until", "while"};
    if (name.empty() || isdigit(static_cast<unsigned char>(name[0]))) return false;
    for (char c : name)
        if (!isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
    return !keywords.count(name);
}

// The forward names table of `stop` (push_forward_names), made now.
void push_new_forward_names(lua_State* L, const DebugStop& stop) {
    lua_newtable(L);
    Node* forward = stop_forward_node(stop);
    if (!forward) return;
    auto offer = [&](const std::string& name, const std::function<Tensor()>& tensor) {
        if (!is_lua_name(name)) return;
        if (lua_getfield(L, -1, name.c_str()) != LUA_TNIL) {
            lua_pop(L, 1);
            return;
        }
        lua_pop(L, 1);
        try {
            tapedeck_push_tensor(L, tensor());
        } catch (const std::exception&) {   // an input whose value was freed: no name for it
            return;
        }
        lua_setfield(L, -2, name.c_str());
    };
    for (int i = 0; i < forward->outputs.size(); ++i) offer(node_bound_name(forward, i), [&] { return Tensor(forward, i); });
    for (const Edge& e : forward->inputs) {
        Node* producer = e.node() ? e.node() : tape_find(e.id);
        if (producer) offer(node_bound_name(producer, e.output), [&] { return input_tensor(e); });
    }
}

// Whether `name` is the table of the gradients sent to the inputs (or its old alias).
bool is_grad_input_name(const char* name) { return strcmp(name, "grad_input") == 0 || strcmp(name, "grad_out") == 0; }

// The names table of the current stop (g.stop_names), made once per stop.
void push_names(lua_State* L, DebugStop& stop) {
    if (rewind_push_names(L, stop)) return;   // :back: the rewound event's names
    if (g.stop_names.stop_serial != stop.serial) {
        luaL_unref(L, LUA_REGISTRYINDEX, g.stop_names.ref);
        push_new_names(L, stop);
        g.stop_names.ref = luaL_ref(L, LUA_REGISTRYINDEX);
        g.stop_names.stop_serial = stop.serial;
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, g.stop_names.ref);
}

}  // namespace

Node* stop_forward_node(const DebugStop& stop) {
    Node* node = stop.node.get();
    if (!node || stop.rewound_to || stop.phase != PHASE_BACKWARD) return nullptr;
    if (stop.kind == STOP_GROUP) return node;
    if (stop.kind == STOP_NODE && node->phase == PHASE_BACKWARD) return tape_find(node->group);
    return nullptr;
}

void push_forward_names(lua_State* L, const DebugStop& stop) {
    if (g.forward_names.stop_serial != stop.serial) {
        luaL_unref(L, LUA_REGISTRYINDEX, g.forward_names.ref);
        push_new_forward_names(L, stop);
        g.forward_names.ref = luaL_ref(L, LUA_REGISTRYINDEX);
        g.forward_names.stop_serial = stop.serial;
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, g.forward_names.ref);
}

namespace {

// `name = value` at the prompt for one of the stop's names: out and grad_input can be edited.
void assign_stop_name(lua_State* L, DebugStop& stop, const char* name, int idx) {
    if (stop.rewound_to)
        luaL_error(L, "%s: editing is only at the live stop (the view is rewound %d back): :forward to return", name,
                   static_cast<int>(stop.live_event - stop.rewound_to));
    if (strcmp(name, "out") == 0) {
        if (stop.kind != STOP_NODE)
            luaL_error(L, "out: at a backward group the forward pass is over; replace the gradients with grad_input[i] = ...");
        overwrite_output(L, stop.node.get(), 0, idx);
        return;
    }
    if (is_grad_input_name(name) && stop.kind == STOP_GROUP) {
        if (!lua_istable(L, idx)) luaL_error(L, "%s: assign %s[i] = tensor, or a table of them", name, name);
        for (int i = 1; i <= stop.node->inputs.size(); ++i) {
            lua_rawgeti(L, idx, i);
            replace_grad(L, stop, i, lua_gettop(L));
            lua_pop(L, 1);
        }
        return;
    }
    luaL_error(L, "%s is read-only at a stop (out and grad_input[i] can be assigned)", name);
}

// When `name` is one of the stop's names, assign it (or raise why not) and return true.
bool assign_if_stop_name(lua_State* L, DebugStop& stop, const char* name, int idx) {
    push_names(L, stop);
    bool is_name = lua_getfield(L, -1, name) != LUA_TNIL;
    lua_pop(L, 2);
    if (is_name) assign_stop_name(L, stop, name, idx);
    return is_name;
}

// ============================================================================================
// [SECTION] env

// __index of a stop env: upvalue 1 = the stop's serial.
int env_index(lua_State* L) {
    DebugStop* stop = live_stop(L, lua_upvalueindex(1));
    if (stop && lua_type(L, 2) == LUA_TSTRING) {
        if (stop_forward_node(*stop)) {   // a backward stop: the names its banner uses come first
            push_forward_names(L, *stop);
            lua_pushvalue(L, 2);
            if (lua_rawget(L, -2) != LUA_TNIL) return 1;
            lua_pop(L, 2);
        }
        if (push_frame_variable(L, *stop, lua_tostring(L, 2))) return 1;
        push_names(L, *stop);
        lua_pushvalue(L, 2);
        if (lua_rawget(L, -2) != LUA_TNIL) return 1;
        lua_pop(L, 2);
    }
    lua_pushglobaltable(L);
    lua_pushvalue(L, 2);
    lua_gettable(L, -2);
    return 1;
}

int env_newindex(lua_State* L) {
    DebugStop* stop = live_stop(L, lua_upvalueindex(1));
    if (stop && lua_type(L, 2) == LUA_TSTRING) {
        const char* name = lua_tostring(L, 2);
        if (set_frame_variable(L, *stop, name, 3) || assign_if_stop_name(L, *stop, name, 3)) return 0;
    }
    lua_pushglobaltable(L);
    lua_pushvalue(L, 2);
    lua_pushvalue(L, 3);
    lua_settable(L, -3);
    return 0;
}

}  // namespace

int env_create(lua_State* L, DebugStop& stop) {
    lua_newtable(L);
    lua_createtable(L, 0, 2);
    const luaL_Reg methods[] = {{"__index", env_index}, {"__newindex", env_newindex}, {nullptr, nullptr}};
    lua_pushinteger(L, static_cast<lua_Integer>(stop.serial));
    luaL_setfuncs(L, methods, 1);
    lua_setmetatable(L, -2);
    return luaL_ref(L, LUA_REGISTRYINDEX);
}

void env_release(lua_State* L, int ref) { luaL_unref(L, LUA_REGISTRYINDEX, ref); }

void stop_names_release(lua_State* L) {
    luaL_unref(L, LUA_REGISTRYINDEX, g.stop_names.ref);
    g.stop_names = StopTableRef();
    luaL_unref(L, LUA_REGISTRYINDEX, g.forward_names.ref);
    g.forward_names = StopTableRef();
}

namespace {

// `stop.out = x` and `stop.grad_input = {...}` on the table an action gets edit as at the prompt;
// other new fields are the caller's own. Upvalue 1: the stop's serial.
int names_proxy_newindex(lua_State* L) {
    DebugStop* stop = live_stop(L, lua_upvalueindex(1));
    const char* name = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : nullptr;
    if (stop && name && assign_if_stop_name(L, *stop, name, 3)) return 0;
    lua_rawset(L, 1);
    return 0;
}

}  // namespace

namespace {

// Copies every entry of the table on top of L into the table at `table`, and pops it.
void copy_entries_into(lua_State* L, int table) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, table);
    }
    lua_pop(L, 1);
}

}  // namespace

void copy_frame_variables_into(lua_State* L, int table) {
    for (const char* kind : {"upvalues", "locals"}) {   // later locals of the same name shadow earlier ones, as in Lua
        lua_getfield(L, -1, kind);
        for (lua_Integer i = 1; i <= static_cast<lua_Integer>(lua_rawlen(L, -1)); ++i) {
            lua_rawgeti(L, -1, i);
            lua_rawgeti(L, -1, 1);
            lua_rawgeti(L, -2, 2);
            lua_rawset(L, table);
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
}

void push_env_names(lua_State* L) {
    lua_newtable(L);
    if (!g.stop) return;
    int table = lua_gettop(L);
    push_names(L, *g.stop);
    copy_entries_into(L, table);
    if (push_frame_variables(L, *g.stop)) copy_frame_variables_into(L, table);
    if (stop_forward_node(*g.stop)) {   // a backward stop's forward names come first (env_index)
        push_forward_names(L, *g.stop);
        copy_entries_into(L, table);
    }
}

bool push_frame_variables(lua_State* L, const DebugStop& stop) {
    if (stop.frame < 0) return false;
    if (stop.snapshot_ref != LUA_NOREF) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, stop.snapshot_ref);
        lua_rawgeti(L, -1, stop.frame + 1);
        lua_remove(L, -2);
        return true;
    }
    lua_Debug ar;
    if (!script_frame(stop, ar)) return false;
    push_live_frame_variables(L, stop.thread, &ar);
    return true;
}

void push_stop_names(lua_State* L) {
    if (!g.stop) {
        lua_pushnil(L);
        return;
    }
    lua_newtable(L);   // a proxy: reads from the names, writes edit the stop
    lua_createtable(L, 0, 2);
    push_names(L, *g.stop);
    lua_setfield(L, -2, "__index");
    lua_pushinteger(L, static_cast<lua_Integer>(g.stop->serial));
    lua_pushcclosure(L, names_proxy_newindex, 1);
    lua_setfield(L, -2, "__newindex");
    lua_setmetatable(L, -2);
}

// ============================================================================================
// [SECTION] banner

namespace {

std::string location(const std::string& file, int line) {
    std::string s = file + ":" + std::to_string(line);
    std::string text = source_line_text(file, line);
    return text.empty() ? s : s + "  " + text;
}

std::string node_location(const Node* node) {
    if (node->where.file < 0) return "";
    return "  (" + location(source_file_name(node->where.file), node->where.line) + ")";
}

// How a node is shown: "next_h (#10 tanh)" when the script named it (or its inputs, "h2h + i2h
// (#9 add)"), else "#9 add" (node_names.h).
std::string node_text(const Node* node, int output = 0) {
    std::string id = "#" + std::to_string(node->id) + " " + node->shown_op();
    std::string label = node_label(node, output);
    return label[0] == '#' ? id : label + " (" + id + ")";
}

// "∂" of a node for a gradient's name: "dloss", "d(h2h + i2h)", "d#9". A name the banner already
// uses for another node (`att = att:softmax(-1)`: input and output are both att) gets its id.
std::string d_of(const Node* node, int output = 0, const std::string& taken = "") {
    std::string label = node ? node_label(node, output) : "?";
    if (node && label == taken && label[0] != '#') label += "#" + std::to_string(node->id);
    return label.find(' ') == std::string::npos ? "d" + label : "d(" + label + ")";
}

// "h2h + i2h (#9 add) [20,1]": an input by its producer.
std::string edge_text(const Edge& e) {
    Node* producer = e.node() ? e.node() : tape_find(e.id);
    std::string s = producer ? node_text(producer, e.output) : "#" + std::to_string(e.id);
    return s + " " + e.value().shape.str();
}

std::string join_inputs(const Node* node) {
    std::string s;
    for (int i = 0; i < node->inputs.size(); ++i) s += (i ? ", " : "") + edge_text(node->inputs[i]);
    return s.empty() ? "(none)" : s;
}

std::string backward_ids(const Node* node) {
    std::string s;
    for (const Ref<Node>& b : node->backward_nodes()) s += (s.empty() ? "#" : ",#") + std::to_string(b->id);
    return s;
}

// Where the gradient arriving at a node came from.
std::string arriving_from(const DebugStop& stop, const Tensor& grad) {
    Node* p = grad.node.get();
    if (stop.node.get() == stop.pass->root) return p->phase == PHASE_BACKWARD ? "the seed of backward()" : "given to backward()";
    std::string s = "from #" + std::to_string(p->id) + " " + p->name();
    if (p->phase == PHASE_FORWARD) return s + ", set at a debugger stop";
    if (p->group == stop.node->id) return s + ", gradients added here";
    Node* group = tape_find(p->group);
    return s + ", backward of " + (group ? node_text(group) : "#" + std::to_string(p->group));
}

// The right side of a gradient rule, as the grads-out line puts it after the gradient's name:
// "dA = grad · Bᵀ" -> "= grad · Bᵀ", "each input x_i: dx_i = ..." -> "= ..."; "no gradient (...)" as it is.
std::string rule_right_side(const char* rule) {
    if (!rule) return "= ?";
    std::string text = rule;
    if (text.rfind("each input ", 0) == 0 && text.find(": ") != std::string::npos) text = text.substr(text.find(": ") + 2);
    size_t equals = text.find(" = ");
    if (text.empty() || text[0] != 'd' || equals == std::string::npos) return text;
    return text.substr(equals + 1);
}

// "= grad * (1 - y^2)   (#25 tanh_backward)": the forward op's rule for input `input`, then the
// recorded backward node that produced the gradient (the id :stepi and :break node stop at).
bool is_word_char(char c) { return isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// "pow_tensor(P, e)": a label that is one call, which needs no parentheses around it.
bool is_call(const std::string& label) {
    size_t open = label.find('(');
    if (open == std::string::npos || open == 0 || !is_word_char(label[open - 1])) return false;
    int depth = 0;
    for (size_t i = open; i < label.size(); ++i) {
        depth += label[i] == '(' ? 1 : label[i] == ')' ? -1 : 0;
        if (depth == 0) return i + 1 == label.size();
    }
    return false;
}

// The rule with the letters of the op's saved tensors replaced by the script's names for them:
// "grad * (1 - y^2)" -> "grad * (1 - next_h^2)", "grad · Bᵀ" -> "grad · W_xᵀ". A letter whose
// tensor has no name stays a letter (the saved line says which tensor it is).
std::string rule_with_names(const std::string& rule, const Node* node) {
    std::string out = rule;
    for (const SavedTensor& t : saved_of(node)) {
        if (strlen(t.name) != 1) continue;
        std::string label;
        if (t.input < 0) {
            label = node_label(node);
        } else {
            const Edge& e = node->inputs[t.input];
            Node* producer = e.node() ? e.node() : tape_find(e.id);
            label = producer ? node_label(producer, e.output) : "";
        }
        if (label.empty() || label[0] == '#') continue;
        if (label.find(' ') != std::string::npos && !is_call(label)) label = "(" + label + ")";
        std::string replaced;
        for (size_t i = 0; i < out.size(); ++i) {
            char c = out[i];
            bool letter = tolower(static_cast<unsigned char>(c)) == t.name[0];
            bool alone = (i == 0 || (!is_word_char(out[i - 1]) && out[i - 1] != '\'')) &&
                         (i + 1 == out.size() || !is_word_char(out[i + 1]));
            replaced += letter && alone ? label : std::string(1, c);
        }
        out = replaced;
    }
    for (size_t twice = out.find("ᵀᵀ"); twice != std::string::npos; twice = out.find("ᵀᵀ"))
        out.erase(twice, 2 * strlen("ᵀ"));   // (xᵀ)ᵀ is x
    return out;
}

std::string produced_by(const DebugStop& stop, int input, const Tensor& grad) {
    const BackwardGroup& group = stop.pass->group;
    std::string rule = rule_with_names(rule_right_side(op_grad_rule(stop.node->op, input, &stop.node->attrs())), stop.node.get());
    for (int i = 0; i < stop.node->outputs.size(); ++i)
        if (group.grad_outputs[i].defined() && group.grad_outputs[i].same_as(grad)) return rule + "   (passed on unchanged)";
    Node* p = grad.node.get();
    std::string producer = "#" + std::to_string(p->id) + " " + p->name();
    if (p->phase == PHASE_FORWARD) return "= " + producer + "   (edited at this stop)";
    return rule + "   (" + producer + ")";
}

void add_line(std::string& s, const char* label, const std::string& text) {
    char head[16];
    snprintf(head, sizeof head, "  %-10s", label);
    s += head + text + "\n";
}

std::string group_banner(const DebugStop& stop) {
    const Node* node = stop.node.get();
    const BackwardGroup& group = stop.pass->group;
    std::string root = d_of(stop.pass->root);
    std::string ids = backward_ids(node);
    std::string s = "[" + stop.reason + "] backward" + (ids.empty() ? "" : " " + ids) + "  grad of " +
                    node_text(node) + node_location(node) + "\n";
    std::string outs;
    for (int i = 0; i < node->outputs.size(); ++i) outs += (i ? ", " : "") + node_text(node, i) + " " + node->outputs[i].value.shape.str();
    add_line(s, "forward", "in: " + join_inputs(node) + "   out: " + outs);
    std::string saved;
    for (const SavedTensor& t : saved_of(node))
        saved += (saved.empty() ? "" : ", ") + std::string(t.name) + " = " +
                 (t.input < 0 ? node_text(node) + " " + node->outputs[0].value.shape.str() : edge_text(node->inputs[t.input]));
    if (!saved.empty()) add_line(s, "saved", saved);
    for (int i = 0; i < node->outputs.size(); ++i) {
        const Tensor& grad = group.grad_outputs[i];
        if (!grad.defined()) continue;
        std::string label = root + "/" + d_of(node, i) + (node->outputs.size() > 1 && node_bound_name(node, i).empty() ? "." + std::to_string(i + 1) : "");
        add_line(s, "grad in", label + " " + grad.shape().str() + "   (" + arriving_from(stop, grad) + ")");
    }
    for (int i = 0; i < node->inputs.size(); ++i) {
        const Tensor& grad = group.grad_inputs[i];
        const Edge& input = node->inputs[i];
        Node* producer = input.node() ? input.node() : tape_find(input.id);
        std::string label = root + "/" + (producer ? d_of(producer, input.output, node_label(node)) : "d#" + std::to_string(input.id));
        std::string text = grad.defined() ? label + " " + grad.shape().str() + "   " + produced_by(stop, i, grad)
                                          : label + " -   (none: the input needs no gradient)";
        add_line(s, i == 0 ? "grads out" : "", text);
    }
    return s;
}

std::string node_banner(const DebugStop& stop) {
    const Node* node = stop.node.get();
    std::string s = "[" + stop.reason + "] " + (node->phase == PHASE_FORWARD ? "forward" : "backward") + " #" +
                    std::to_string(node->id) + " " + node->name();
    std::string attrs = op_describe_attrs(node->op, node->attrs());
    if (!attrs.empty()) s += "(" + attrs + ")";
    if (node->phase == PHASE_BACKWARD) {
        Node* forward = tape_find(node->group);
        s += "  grad of " + (forward ? node_text(forward) : "#" + std::to_string(node->group));
    }
    s += node_location(node) + "\n";
    add_line(s, "in", join_inputs(node));
    for (int i = 0; i < node->outputs.size(); ++i) {
        const Value& v = node->outputs[i].value;
        std::string out_name = node_bound_name(node, i);
        add_line(s, "out", (out_name.empty() ? "" : out_name + " ") + "#" + std::to_string(node->id) + (node->outputs.size() > 1 ? "." + std::to_string(i + 1) : "") +
                               " " + v.shape.str() + " " + dtype_name(v.dtype) + repl_device_text(v) + (i == 0 ? std::string("   ") + node->info().math : ""));
    }
    return s;
}

std::string line_banner(const DebugStop& stop) {
    if (stop.frame < 0) return "[" + stop.reason + "] (no Lua code)\n";
    const DebugFrame& f = stop.frames[stop.frame];
    return "[" + stop.reason + "] " + location(f.short_src, f.line) + "\n";
}

// The post-mortem banner: where it failed (the selected frame) and the error's message.
std::string post_mortem_banner(const DebugStop& stop) {
    std::string s = "[" + stop.reason + "] ";
    if (stop.frame >= 0) s += location(stop.frames[stop.frame].short_src, stop.frames[stop.frame].line) + "\n";
    else s += "(no Lua frame of the script)\n";
    std::string message = stop.error.substr(0, stop.error.find('\n'));
    add_line(s, "error", message);
    for (int i = 0; i < stop.frame; ++i) {   // failed inside nn or optim: say where (:down goes there)
        if (!is_library_source(stop.frames[i].source)) continue;
        add_line(s, "raised in", frame_text(stop.frames[i]));
        break;
    }
    return s;
}

}  // namespace

std::string frame_text(const DebugFrame& f) {
    std::string s = f.short_src;
    if (f.line > 0) s += ":" + std::to_string(f.line);
    s += ": in ";
    if (f.what == "main") s += "main chunk";
    else if (!f.name.empty()) s += "function '" + f.name + "'";
    else s += f.what == "C" ? "?" : "function <" + f.short_src + ":" + std::to_string(f.line_defined) + ">";
    if (is_library_source(f.source)) s += "  (tapedeck's library code)";
    return s;
}

namespace {

// "steps 8, 9" / "step 8" / "no step of its own (the passes folded it away)": where :plan runs it.
std::string plan_steps_text(const std::vector<int>& steps) {
    if (steps.empty()) return "no step of its own in :plan (a pass folded, fused or removed it)";
    std::string s = steps.size() == 1 ? ":plan step " : ":plan steps ";
    for (size_t i = 0; i < steps.size(); ++i) s += (i ? ", " : "") + std::to_string(steps[i]);
    return s;
}

// A stop inside a frozen call (plan_run's debug replay): the plan, and the node the step was
// recorded from, by the id :plan and `:break node N` use. "" elsewhere.
std::string frozen_text(const DebugStop& stop) {
    const PlanReplayStep* replay = plan_replay_current();
    if (!replay || !stop.node || replay->node != stop.node.get()) return "";
    const Plan& called = *replay->called;
    std::string s = called.name + ": ";
    if (stop.kind == STOP_GROUP)
        return s + "backward group of recorded #" + std::to_string(replay->recorded_id) + " " + stop.node->name() + "; " +
               plan_steps_text(plan_steps_replaying(called, replay->recorded_id, true));
    s += "recorded #" + std::to_string(replay->recorded_id);
    if (replay->recorded_group) s += " (backward group of recorded #" + std::to_string(replay->recorded_group) + ")";
    return s + "; " + plan_steps_text(plan_steps_replaying(called, replay->recorded_id, false));
}

}  // namespace

}  // namespace dbg

using namespace dbg;

std::string debugger_banner() {
    const DebugStop* stop = g.stop;
    if (!stop) return "";
    tapedeck_name_tensors(stop->thread);   // what the script's variables hold now names the nodes shown
    if (stop->rewound_to) return rewind_banner(*stop);
    std::string s;
    switch (stop->kind) {
        case STOP_GROUP: s = group_banner(*stop); break;
        case STOP_NODE: s = node_banner(*stop); break;
        case STOP_LINE: s = line_banner(*stop); break;
        case STOP_POST_MORTEM: s = post_mortem_banner(*stop); break;
    }
    std::string frozen = frozen_text(*stop);
    if (!frozen.empty()) add_line(s, "frozen", frozen);
    if (!stop->why.empty()) add_line(s, "why", stop->why);
    return s;
}

std::string debugger_where() {
    const DebugStop* stop = g.stop;
    if (!stop) return "not stopped (nothing is running)\n";
    std::string s = "Lua stack, innermost first";
    if (stop->snapshot_ref != LUA_NOREF) s += " (as it was at the error; it has unwound since)";
    s += ":\n";
    for (size_t i = 0; i < stop->frames.size(); ++i)
        s += (static_cast<int>(i) == stop->frame ? "=> " : "   ") + frame_text(stop->frames[i]) + "\n";
    if (stop->frames.empty()) s += "   (no Lua code is running)\n";
    s += "tape: ";
    const PlanReplayStep* replay = plan_replay_current();
    if (replay && stop->node && replay->node == stop->node.get()) {
        s += std::string(stop->phase == PHASE_BACKWARD ? "backward" : "forward") + " inside frozen call " +
             replay->called->name + ", at step " + std::to_string(replay->step + 1) + " of the " +
             std::to_string(replay->plan->steps.size()) + " its recording replays";
    } else if (stop->pass) {
        s += "backward pass from #" + std::to_string(stop->pass->root->id) + ", at node " +
             std::to_string(stop->pass->position + 1) + " of the " + std::to_string(stop->pass->order->size()) +
             " it visits";
        if (stop->kind == STOP_NODE) s += ", inside its group";
    } else {
        s += "forward";
    }
    if (stop->node) s += "; stopped at #" + std::to_string(stop->node->id) + " " + stop->node->name();
    s += "; next id #" + std::to_string(tape_next_id()) + "\n";
    return s;
}

namespace dbg {

namespace {

// "  watch 2  expr = value": the watch evaluated with env_ref as _ENV (LUA_NOREF: the innermost
// loop's), its value as :p prints it.
std::string format_watch(lua_State* L, const Watch& w, int env_ref) {
    std::string code = "return " + w.expression;
    std::string value;
    int status = env_ref == LUA_NOREF ? g.front.load(L, code, "=watch") : luaL_loadbuffer(L, code.data(), code.size(), "=watch");
    if (status == LUA_OK) {
        if (env_ref != LUA_NOREF) {
            lua_rawgeti(L, LUA_REGISTRYINDEX, env_ref);
            lua_setupvalue(L, -2, 1);
        }
        if (lua_pcall(L, 0, 1, 0) == LUA_OK) value = debugger_format_value(L, -1);
        else value = "error: " + repl_error_text(L, -1);
    } else {
        value = "error: " + repl_error_text(L, -1);
    }
    lua_pop(L, 1);
    return "  watch " + std::to_string(w.id) + "  " + w.expression + " = " + value + "\n";
}

}  // namespace

std::string watch_text(lua_State* L, int id) {
    for (const Watch& w : g.watches)
        if (w.id == id) return format_watch(L, w, LUA_NOREF);
    return "";
}

void print_stop(lua_State* L, int env_ref) {
    std::string s = debugger_banner();
    for (const Watch& w : g.watches) s += format_watch(L, w, env_ref);
    fputs(s.c_str(), stdout);
    fflush(stdout);
}

}  // namespace dbg

// ============================================================================================
// [SECTION] inspect

std::string debugger_inspect(const Tensor& t) {
    const int bins = 16;
    if (value_freed(t.value())) return "#" + std::to_string(t.id()) + " " + t.node->name() + ": " + VALUE_FREED_TEXT + "\n";
    TensorStats s = tensor_stats(t.value(), bins);
    const Node* node = t.node.get();
    std::string out = "#" + std::to_string(node->id) + " " + node->name() + (node->outputs.size() > 1 ? "." + std::to_string(t.output + 1) : "") +
                      " " + t.shape().str() + " " + dtype_name(t.dtype()) + repl_device_text(t.value()) +
                      (node->where.file >= 0 ? "  (" + source_loc_str(node->where) + ")" : "") + "\n";
    if (s.finite == 0) {
        out += "  no finite elements";
    } else {
        out += "  min " + number_text(s.min) + "  max " + number_text(s.max) + "  mean " + number_text(s.mean) + "  std " +
               number_text(s.std);
    }
    out += "  (" + std::to_string(t.numel()) + " element" + (t.numel() == 1 ? "" : "s") + ")\n";
    out += "  NaN " + std::to_string(s.nan) + "  Inf " + std::to_string(s.inf()) + "\n";
    if (s.finite > 1 && s.max > s.min) {
        static const char* const BARS[] = {" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
        int64_t most = *std::max_element(s.histogram.begin(), s.histogram.end());
        std::string bars;
        for (int64_t c : s.histogram) bars += BARS[c == 0 ? 0 : 1 + static_cast<int>((c * 8 - 1) / most)];
        out += "  histogram " + number_text(s.min) + " |" + bars + "| " + number_text(s.max) + "  (" + std::to_string(bins) +
               " bins, tallest " + std::to_string(most) + ")\n";
    }
    return out;
}
