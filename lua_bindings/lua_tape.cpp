// lua_tape.cpp: the tape and the engine as Lua sees them: node records (x.grad_fn, torch.graph,
// torch.tape), torch.graphviz, torch.scope (the module path the nodes record), torch.ops (the op
// table), and the engine's counters (torch.memory, set_memory_limit, memory_limit,
// reset_peak_memory, perf_counter). The tables at the end are registered in tapedeck_open
// (lua_tensor.cpp).
#include <chrono>
#include <string>

#include "backend.h"
#include "device.h"
#include "dot_export.h"
#include "fma_peak.h"
#include "format.h"
#include "lua_tensor.h"
#include "node_names.h"
#include "tapedeck_lua.h"

using namespace td;
using namespace tdlua;

namespace {

const char* const NODE_TYPE = "tapedeck.Node";

int node_record_tostring(lua_State* L) {
    lua_getfield(L, 1, "description");
    return 1;
}

// The list holds its nodes: building the tables allocates, and a collection step then may
// finalise the last tensor that held one of them.
void push_records(lua_State* L, const NodeList& nodes) {
    tapedeck_name_tensors(L);
    lua_createtable(L, static_cast<int>(nodes.size()), 0);
    for (size_t i = 0; i < nodes.size(); ++i) {
        tapedeck_push_node_record(L, nodes[i].get());
        lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
}

// torch.graph(x): the records of x's graph; its metatable ("tapedeck.Graph") lets a notebook draw it.
int l_graph(lua_State* L) {
    push_records(L, graph_collect(check_tensor(L, 1)));
    luaL_newmetatable(L, "tapedeck.Graph");   // __name is set: the kernel recognises the table by it
    lua_setmetatable(L, -2);
    return 1;
}

int l_tape(lua_State* L) {
    push_records(L, tape_nodes());
    return 1;
}

int l_graphviz(lua_State* L) {
    Tensor& t = check_tensor(L, 1);
    const char* path = lua_tostring(L, 2);
    if (!path) arg_fail(2, "expected a file name like \"graph.svg\", got %s", type_name_of(L, 2));
    tapedeck_name_tensors(L);
    graph_write(graph_collect(t), path);
    return 0;
}

// torch.scope(name, fn, ...): fn(...) with the nodes it records tagged as inside `name` (nested in
// the current scope). nn.Module calls run their forward this way; node records show the path.
int l_scope(lua_State* L) {
    const char* name = luaL_checkstring(L, 1);
    luaL_checktype(L, 2, LUA_TFUNCTION);
    int scope = scope_enter(name);
    int status = lua_pcall(L, lua_gettop(L) - 2, LUA_MULTRET, 0);
    scope_leave(scope);
    if (status != LUA_OK) return lua_error(L);   // the function's own error, unchanged
    return lua_gettop(L) - 1;
}

// torch.ops(): the op table, one record per op in ops.def order: {name, inputs (-1: a list),
// outputs, math, differentiable, internal (not called by its own name from Lua), from_table
// (x:name() and torch.name(x) are registered from the table), functional (called as F.name only)}.
int l_ops(lua_State* L) {
    lua_createtable(L, OP_COUNT, 0);
    for (int i = 0; i < OP_COUNT; ++i) {
        const OpInfo& info = op_table[i];
        lua_createtable(L, 0, 8);
        set_string(L, "name", info.name);
        set_integer(L, "inputs", info.n_inputs);
        set_integer(L, "outputs", info.max_outputs);
        set_string(L, "math", info.math);
        set_boolean(L, "differentiable", info.backward_rule != nullptr);
        set_boolean(L, "internal", (info.flags & OPF_INTERNAL) != 0);
        set_boolean(L, "from_table", op_is_simple_method(static_cast<OpId>(i)));
        set_boolean(L, "functional", (info.flags & OPF_FUNCTIONAL) != 0);
        // Per device: true when the backend has a kernel, else why not (backend.h).
        for (Device device : {DEVICE_CPU, DEVICE_CUDA}) {
            const char* missing = kernel_missing_reason(static_cast<OpId>(i), device);
            if (missing) lua_pushstring(L, missing);
            else lua_pushboolean(L, true);
            lua_setfield(L, -2, device_name(device));
        }
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

// torch.fma_peak(): FLOP/s of one core on independent float32 FMAs (fma_peak.h), ~0.1 s to measure.
int l_fma_peak(lua_State* L) {
    if (lua_gettop(L) > 0) tdlua::arg_fail(1, "fma_peak takes no arguments");
    lua_pushnumber(L, cpu_fma_peak_flops());
    return 1;
}

int l_perf_counter(lua_State* L) {
    auto now = std::chrono::steady_clock::now().time_since_epoch();
    lua_pushnumber(L, std::chrono::duration<double>(now).count());
    return 1;
}

// bytes held by tensor storages, the number of live nodes, and the most bytes held since
// torch.reset_peak_memory()
int l_memory(lua_State* L) {
    lua_pushinteger(L, static_cast<lua_Integer>(storage_bytes_live()));
    lua_pushinteger(L, tape_live_count());
    lua_pushinteger(L, static_cast<lua_Integer>(storage_bytes_peak()));
    return 3;
}

// torch.set_memory_limit(bytes): the most bytes tensor data may take at once (nil: the default,
// 3/4 of physical memory; 0, which would refuse every tensor, is an error); torch.memory_limit()
// reads it. Creating a tensor past it is an error naming the op and the sizes.
int l_set_memory_limit(lua_State* L) {
    int64_t bytes = lua_isnoneornil(L, 1) ? 0 : check_integer(L, 1, "bytes");
    if (bytes < 0) arg_fail(1, "bytes must not be negative, got %lld", static_cast<long long>(bytes));
    if (bytes == 0 && !lua_isnoneornil(L, 1))
        arg_fail(1, "a limit of 0 bytes would refuse every tensor; nil restores the default (3/4 of physical memory)");
    memory_set_limit_bytes(static_cast<size_t>(bytes));
    return 0;
}

int l_memory_limit(lua_State* L) {
    lua_pushinteger(L, static_cast<lua_Integer>(memory_limit_bytes()));
    return 1;
}

int l_reset_peak_memory(lua_State*) {
    storage_peak_reset();
    return 0;
}

}  // namespace

void tapedeck_push_node_record(lua_State* L, const td::Node* n) {
    lua_createtable(L, 0, 12);
    set_integer(L, "id", n->id);
    set_string(L, "op", n->name());
    set_string(L, "phase", n->phase == PHASE_FORWARD ? "forward" : "backward");
    set_integer(L, "group", n->group);
    lua_createtable(L, n->inputs.size(), 0);
    for (int i = 0; i < n->inputs.size(); ++i) {
        lua_pushinteger(L, n->inputs[i].id);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "inputs");
    if (n->outputs.size() > 0) {   // a custom backward that returned no gradient has none
        push_shape(L, n->outputs[0].value.shape);
        lua_setfield(L, -2, "shape");
        set_string(L, "dtype", dtype_name(n->outputs[0].value.dtype));
    }
    set_string(L, "scope", scope_path(n->scope));
    set_boolean(L, "history_start", n->history_start);
    set_boolean(L, "is_leaf", n->is_leaf());
    set_boolean(L, "requires_grad", n->outputs.size() > 0 && n->outputs[0].requires_grad);
    std::string name = node_bound_name(n);   // the script's name for it; nil when it has none
    if (!name.empty()) set_string(L, "name", name);
    set_integer(L, "outputs", n->outputs.size());
    set_string(L, "where", source_loc_str(n->where));
    set_integer(L, "line", n->where.line);
    set_string(L, "attrs", op_describe_attrs(n->op, n->attrs()));
    set_string(L, "math", n->info().math);
    set_string(L, "description", node_describe(n));
    luaL_setmetatable(L, NODE_TYPE);
}

namespace tdlua {

const Binding tape_torch_only[] = {
    {"graph", l_graph}, {"tape", l_tape}, {"graphviz", l_graphviz}, {"scope", l_scope, OPTIONS_TABLE_IS_VALUE}, {"ops", l_ops},
    {"memory", l_memory}, {"reset_peak_memory", l_reset_peak_memory}, {"set_memory_limit", l_set_memory_limit},
    {"memory_limit", l_memory_limit}, {"perf_counter", l_perf_counter}, {"fma_peak", l_fma_peak},
    {nullptr, nullptr},
};

// x:graph(), the same as torch.graph(x).
const Binding tape_method_only[] = {
    {"graph", l_graph},
    {nullptr, nullptr},
};

// The metatable of node records: tostring(record) is its description.
void open_node_records(lua_State* L) {
    luaL_newmetatable(L, NODE_TYPE);
    lua_pushcfunction(L, node_record_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pop(L, 1);
}

}  // namespace tdlua
