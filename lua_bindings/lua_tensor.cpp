// lua_tensor.cpp: the Tensor userdata, the helpers every file of bindings shares, and the opening of
// the `torch` table (tapedeck_open), in Lua's idiom (tables of bindings).
//
// Bindings check arguments and call the engine; they hold no logic of their own. Every binding
// runs guarded (run_guarded, lua_util.h), which turns a C++ error into a Lua error of the form
// "mm: shapes [20,20] and [10,1] do not match (rnn.lua:7)". Dims are 1-based, as in Lua and
// Torch7 (negative dims count from the end); dtype defaults to float32.
//
// The bindings live by subject, each file with its tables of bindings (lua_tensor.h):
//   lua_tensor_ops.cpp      creation, arithmetic, comparisons, views of shape, in-place ops
//   lua_nn_ops.cpp          linear, conv2d, max_pool2d, softmax, losses, the fused LSTM
//   lua_elementwise_ops.cpp, lua_reduce_shape_ops.cpp, lua_views.cpp (indexing)
//   lua_conversions.cpp     item, totable, a < b; to, cpu, cuda, float, ...; devices
//   lua_autograd.cpp        backward, torch.autograd.grad, no_grad; lua_hooks.cpp: register_hook
//   lua_tape.cpp            node records, torch.graph, tape, graphviz, scope, ops, memory
//   lua_name_hints.cpp      "did you mean ...?" for a missing name
//
// [SECTION] plumbing       type checks, pushing tensors, Lua's collector, source locator
// [SECTION] arguments      dims, shapes, options, devices, requires_grad
// [SECTION] userdata       fields (x.grad, x.shape, ...), x[k] = v, size, tostring, __gc
// [SECTION] open           the tables of bindings, the metatables, the torch table
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <new>
#include <string>

#include "bindings_state.h"
#include "format.h"
#include "plan.h"
#include "lua_util.h"
#include "lua_tensor.h"

#include "device.h"
#include "tapedeck_lua.h"

using namespace td;
using namespace tdlua;

// The shared helpers (lua_tensor.h) live in tdlua; the rest of the file is private.
namespace tdlua {

// ============================================================================================
// [SECTION] plumbing

BindingsState& bindings_state = *new BindingsState;

const char* const TENSOR_TYPE = "tapedeck.Tensor";

// The tensor at idx; nullptr when it is not one, or when Lua has already finalised it (a finaliser
// of another object may still reach it: Lua resurrects what finalisers can see).
Tensor* test_tensor(lua_State* L, int idx) {
    Tensor* t = static_cast<Tensor*>(tapedeck_test_udata(L, idx, bindings_state.tensor_metatable));
    return t && t->defined() ? t : nullptr;
}

Tensor& check_tensor(lua_State* L, int idx) {
    Tensor* t = test_tensor(L, idx);
    if (!t) arg_fail(idx, "tensor expected, got %s", type_name_of(L, idx));
    return *t;
}

// Lua's collector sees only the small userdata that hold tensors, not the engine bytes behind
// them (tensor storage, node records). The collector runs in generational mode (tapedeck_open):
// a temporary tensor dies young and is freed by a cheap minor collection, which is what an op
// loop makes by the thousand. Two rules keep the engine's memory bounded by what is reachable:
//  - each 256 KiB the engine makes is told to the collector as debt, so minor collections keep
//    pace with the engine, not with Lua's small allocations (a loop of views makes nodes and no
//    storage, and is collected as promptly as one of copies);
//  - a tensor that lives across a few collections (a loop's h, a parameter replaced each step)
//    turns old, and only a full collection frees it; Lua starts one when *its* heap doubles, which
//    small userdata hardly move. So a full collection also runs when the engine's live bytes (tensor
//    storage and node records: a long unroll of small tensors is mostly nodes) pass
//    full_collection_threshold(): Lua's own rule, measured in engine bytes.
constexpr size_t COLLECTOR_STEP_BYTES = 256u << 10;
constexpr size_t FULL_COLLECTION_FLOOR_BYTES = 64u << 20;

// Double what the last full collection left, at least 64 MiB, and at most halfway from there to
// the memory limit (garbage waiting for a collection must not make storage_new refuse).
size_t full_collection_threshold() {
    size_t after = bindings_state.live_bytes_after_full, limit = memory_limit_bytes();
    size_t doubled = std::max(2 * after, FULL_COLLECTION_FLOOR_BYTES);
    size_t halfway = after < limit ? after + (limit - after) / 2 : after;
    return std::min(doubled, halfway);
}

void tell_collector(lua_State* L) {
    size_t total = engine_bytes_allocated_total();
    size_t fresh = total - bindings_state.bytes_told_to_lua;
    if (fresh < COLLECTOR_STEP_BYTES) return;
    bindings_state.bytes_told_to_lua = total;
    if (engine_bytes_live() > full_collection_threshold()) {
        lua_gc(L, LUA_GCCOLLECT);
        bindings_state.live_bytes_after_full = engine_bytes_live();
    } else {
        lua_gc(L, LUA_GCSTEP, static_cast<int>(fresh >> 10));
    }
}

int push_tensor(lua_State* L, Tensor t) { return push_tensor_with_slots(L, std::move(t), 0); }

int push_tensor_with_slots(lua_State* L, Tensor t, int user_values) {
    if (t.defined() && value_freed(t.value()))   // a backward node's value found through the tape
        return luaL_error(L, "tensor #%I (%s %s): its value was %s", static_cast<lua_Integer>(t.id()), t.node->name(),
                          t.shape().str().c_str(), VALUE_FREED_TEXT);
    void* p = lua_newuserdatauv(L, sizeof(Tensor), user_values);
    new (p) Tensor(std::move(t));
    lua_rawgetp(L, LUA_REGISTRYINDEX, &bindings_state.tensor_metatable_key);
    lua_setmetatable(L, -2);
    tell_collector(L);
    return 1;
}

int return_self(lua_State* L) {
    lua_settop(L, 1);
    return 1;
}

// Nodes record the innermost Lua line that called an op. The file name is interned once per file.
SourceLoc locate_in_lua(void*) {
    BindingsState& s = bindings_state;
    lua_State* L = s.current_state;
    SourceLoc loc;
    if (!L) return loc;
    lua_Debug ar;
    if (!find_user_frame(L, 1, &ar)) return loc;
    if (s.locator_file < 0 || s.locator_file_name != ar.short_src) {
        s.locator_file_name = ar.short_src;
        s.locator_file = source_file_intern(ar.short_src);
    }
    loc.file = s.locator_file;
    loc.line = ar.currentline;
    return loc;
}

// ============================================================================================
// [SECTION] arguments

int check_dim(lua_State* L, int idx, const char* op_name, int ndim) {
    return dim_normalize(op_name, check_integer(L, idx, "dim"), ndim);
}

// Sizes given as d1, d2, ... (numbers from `first` on) or as one table {d1, d2, ...}.
// *next is set to the first argument after them.
Shape shape_from_args(lua_State* L, int first, int* next) {
    Shape s;
    if (lua_istable(L, first)) {
        lua_Integer n = luaL_len(L, first);
        if (n > MAX_DIMS) arg_fail(first, "at most %d dims", MAX_DIMS);
        for (lua_Integer i = 1; i <= n; ++i) {
            lua_geti(L, first, i);
            int is_integer = 0;
            s.dims[s.ndim++] = lua_tointegerx(L, -1, &is_integer);
            if (!is_integer) arg_fail(first, "size %lld must be an integer, got %s", static_cast<long long>(i), luaL_tolstring(L, -1, nullptr));
            lua_pop(L, 1);
        }
        *next = first + 1;
        return s;
    }
    int i = first;
    for (; lua_type(L, i) == LUA_TNUMBER; ++i) {
        if (s.ndim == MAX_DIMS) arg_fail(i, "at most %d dims", MAX_DIMS);
        s.dims[s.ndim++] = check_integer(L, i, "size");
    }
    *next = i;
    return s;
}

// A device: "cpu", "cuda" or "cuda:0" (or torch.device(...), which is that string). Whether a
// CUDA device is there is checked where a tensor is made or moved (op_call), with the reason.
// `idx` is the value's stack slot; `arg` the argument errors name (the options table it sits in).
Device device_from_arg(lua_State* L, int idx, int arg) {
    const char* name = lua_type(L, idx) == LUA_TSTRING ? lua_tostring(L, idx) : nullptr;
    Device device;
    if (!name || !device_parse(name, &device))
        arg_fail(arg, "unknown device '%s' (use \"cpu\" or \"cuda\")", name ? name : type_name_of(L, idx));
    return device;
}

Device default_device() { return bindings_state.default_device; }

// {requires_grad=true, dtype="float64", device="cpu"}; unknown keys are errors (options_check).
CreateOptions options_from_arg(lua_State* L, int idx, DType default_dtype, Device default_device) {
    CreateOptions o;
    o.dtype = default_dtype;
    o.device = default_device;
    if (lua_isnoneornil(L, idx)) return o;
    if (!lua_istable(L, idx)) arg_fail(idx, "options must be a table like {dtype=\"float64\"}, got %s", type_name_of(L, idx));
    idx = lua_absindex(L, idx);
    options_check(L, idx, CREATE_OPTIONS);
    lua_getfield(L, idx, "requires_grad");
    o.requires_grad = lua_toboolean(L, -1);
    if (lua_getfield(L, idx, "dtype") != LUA_TNIL) {
        const char* name = lua_tostring(L, -1);
        if (!name || !dtype_parse(name, &o.dtype))
            arg_fail(idx, "unknown dtype '%s' (use float32, float64 or int64)", name ? name : type_name_of(L, -1));
    }
    if (lua_getfield(L, idx, "device") != LUA_TNIL) o.device = device_from_arg(L, lua_gettop(L), idx);
    lua_pop(L, 3);
    return o;
}

void set_requires_grad(Tensor& t, bool flag) {
    if (flag && !dtype_is_float(t.dtype()))
        engine_fail("requires_grad: only float tensors can require gradients (this one is %s)", dtype_name(t.dtype()));
    if (!t.node->is_leaf())
        engine_fail("requires_grad: tensor #%lld was computed from others; only leaves can change requires_grad "
                    "(use detach() to make a leaf)",
                    static_cast<long long>(t.id()));
    node_set_requires_grad(t.node.get(), t.output, flag);
}

int push_created(lua_State* L, Tensor t, const CreateOptions& o) {
    if (o.requires_grad) set_requires_grad(t, true);
    return push_tensor(L, std::move(t));
}

// An integer that fits in an int (window sizes, strides, paddings): the value at stack index `at`,
// reported as argument `arg` (a field of an options table reports the table's argument).
int check_int(lua_State* L, int at, int arg, const char* what) {
    int is_integer = 0;
    lua_Integer v = lua_tointegerx(L, at, &is_integer);
    if (!is_integer) arg_fail(arg, "%s must be an integer, got %s", what, type_name_of(L, at));
    if (v < INT_MIN || v > INT_MAX) arg_fail(arg, "%s %lld is out of range", what, static_cast<long long>(v));
    return static_cast<int>(v);
}

// An in-place op's second operand: a tensor, or a number (a 0-d tensor of x's dtype).
// A number becomes a 0-d tensor of `like`'s dtype, except a fraction next to an int64 tensor,
// which stays float64 (so an in-place op refuses it rather than truncating it).
Tensor operand_of(lua_State* L, int idx, const Tensor& like) {
    if (lua_type(L, idx) == LUA_TNUMBER) {
        double x = lua_tonumber(L, idx);
        DType dtype = like.dtype() == DTYPE_I64 && !lua_isinteger(L, idx) && x != std::floor(x) ? DTYPE_F64 : like.dtype();
        return ops::create(OP_full, Shape{}, dtype, x);
    }
    return check_tensor(L, idx);
}

}  // namespace tdlua

namespace {

// ============================================================================================
// [SECTION] userdata

int l_size(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    if (lua_isnoneornil(L, 2)) {
        push_shape(L, x.shape());
        return 1;
    }
    lua_pushinteger(L, x.shape().dims[check_dim(L, 2, "size", x.shape().ndim)]);
    return 1;
}

int l_dim(lua_State* L) {
    lua_pushinteger(L, check_tensor(L, 1).shape().ndim);
    return 1;
}

int l_numel(lua_State* L) {
    lua_pushinteger(L, check_tensor(L, 1).numel());
    return 1;
}

int l_is_tensor(lua_State* L) {
    lua_pushboolean(L, test_tensor(L, 1) != nullptr);
    return 1;
}

}  // namespace

void tdlua::push_shape(lua_State* L, const Shape& s) {
    lua_createtable(L, s.ndim, 0);
    for (int i = 0; i < s.ndim; ++i) {
        lua_pushinteger(L, s.dims[i]);
        lua_rawseti(L, -2, i + 1);
    }
    luaL_setmetatable(L, "tapedeck.Size");
}

namespace {

int size_tostring(lua_State* L) {
    std::string s = "[";
    lua_Integer n = luaL_len(L, 1);
    for (lua_Integer i = 1; i <= n; ++i) {
        lua_geti(L, 1, i);
        if (i > 1) s += ",";
        s += std::to_string(lua_tointeger(L, -1));
        lua_pop(L, 1);
    }
    lua_pushstring(L, (s + "]").c_str());
    return 1;
}

// x.T, x.mT, x.H, x.mH: PyTorch's transposes as views (real tensors: H is T, mH is mT). T reverses
// every dim (a 0-d or 1-d tensor is itself); mT swaps the last two (a 0-d tensor is itself); H
// needs a matrix, mH a matrix or a batch of them, as PyTorch. False when key is none of them.
bool push_transpose_field(lua_State* L, const Tensor& t, const char* key) {
    int ndim = t.shape().ndim;
    bool matrix_only = strcmp(key, "H") == 0, reverse_all = strcmp(key, "T") == 0 || matrix_only;
    if (!reverse_all && strcmp(key, "mT") != 0 && strcmp(key, "mH") != 0) return false;
    if (ndim == 0 || (ndim == 1 && strcmp(key, "T") == 0)) {
        lua_pushvalue(L, 1);
        return true;
    }
    if (matrix_only && ndim != 2)
        engine_fail("x.H is only for matrices (2-d tensors), got a %d-d tensor%s", ndim,
                    ndim > 2 ? "; for a batch of matrices use x.mH" : "");
    if (!reverse_all && ndim < 2) engine_fail("x.%s is only for matrices or batches of them, got a 1-d tensor", key);
    if (!reverse_all || ndim == 2) {
        push_view(L, ops::transpose(t, ndim - 2, ndim - 1), 1);
        return true;
    }
    Shape order;
    order.ndim = ndim;
    for (int i = 0; i < ndim; ++i) order.dims[i] = ndim - 1 - i;
    push_view(L, ops::permute(t, order), 1);
    return true;
}

int tensor_field(lua_State* L) {
    Tensor& t = check_tensor(L, 1);
    if (lua_isinteger(L, 2) || lua_istable(L, 2) || test_tensor(L, 2)) return index_read(L);   // t[i], t[{i, {a, b}}]: views
    const char* key = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : nullptr;
    if (!key) engine_fail("index: tensors are indexed by an integer, a table of indices and ranges, an int64 index tensor, a mask or a field name, not a %s", type_name_of(L, 2));
    const Output& out = t.node->outputs[t.output];
    if (strcmp(key, "shape") == 0) {
        push_shape(L, t.shape());
    } else if (strcmp(key, "grad") == 0) {
        if (plan_recording()) plan_record_note_grad_read(t, out.grad, locate_in_lua(nullptr));
        if (out.grad.defined()) push_tensor(L, out.grad);
        else lua_pushnil(L);
    } else if (strcmp(key, "requires_grad") == 0) {
        lua_pushboolean(L, out.requires_grad);
    } else if (strcmp(key, "grad_fn") == 0) {
        if (t.node->tracks_grad) tapedeck_push_node_record(L, t.node.get());
        else lua_pushnil(L);
    } else if (strcmp(key, "node") == 0) {
        lua_pushinteger(L, t.node->id);
    } else if (strcmp(key, "is_leaf") == 0) {
        lua_pushboolean(L, t.node->is_leaf());
    } else if (strcmp(key, "dtype") == 0) {
        lua_pushstring(L, dtype_name(t.dtype()));
    } else if (strcmp(key, "ndim") == 0) {
        lua_pushinteger(L, t.shape().ndim);
    } else if (strcmp(key, "device") == 0) {
        lua_pushstring(L, device_name(t.value().device()));
    } else if (strcmp(key, "is_cuda") == 0) {
        lua_pushboolean(L, t.value().device() == DEVICE_CUDA);
    } else if (strcmp(key, "data") == 0) {
        push_tensor(L, ops::unary(OP_detach, t));
    } else if (!push_transpose_field(L, t, key)) {   // a PyTorch spelling that would be nil: an error that says what is
        engine_fail("a tensor has no field or method '%s'%s", key, tapedeck_tensor_name_hint(L, key).c_str());
    }
    return 1;
}

// t.key: methods first (the fast path of every t:method() call), then fields; an error names the
// field the user wrote (x.mT on a vector: "mT: ...").
int tensor_index(lua_State* L) {
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1;
    lua_pop(L, 1);
    return run_guarded(L, tensor_field, lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "index");
}

// x[mask] = value, as PyTorch's grad_input[x < 0] = 0
int assign_masked(lua_State* L) {
    check_tensor(L, 1);
    Tensor mask = check_tensor(L, 2);
    double value = check_number(L, 3, "value");
    run_inplace(L, [&](Tensor& t) { ops::masked_fill_(t, mask, value); }, {});
    return 0;
}

int assign_requires_grad(lua_State* L) {
    set_requires_grad(check_tensor(L, 1), lua_toboolean(L, 3));
    return 0;
}

// x.grad = g (a tensor of x's shape) or nil
int assign_grad(lua_State* L) {
    Tensor& t = check_tensor(L, 1);
    {
        Output& out = t.node->outputs[t.output];
        if (plan_recording()) {
            if (lua_isnil(L, 3)) plan_record_note_grad_clear(t, locate_in_lua(nullptr));
            else plan_record_refuse("the function assigns a tensor to .grad (" + where_at(L, 1) +
                                    "); a plan can clear gradients (x.grad = nil) and accumulate them (backward), not set them");
        }
        if (lua_isnil(L, 3)) {
            out.grad = Tensor();
        } else {
            Tensor& g = check_tensor(L, 3);
            if (g.shape() != t.shape())
                engine_fail("grad: assigned gradient has shape %s but the tensor has shape %s", g.shape().str().c_str(),
                            t.shape().str().c_str());
            out.grad = g.value().is_contiguous() ? g : ops::contiguous(g);   // .grad owns row-major bytes (freeze adds into them)
        }
    }
    return 0;
}

int assign_unknown(lua_State* L) {
    const char* key = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : nullptr;
    engine_fail("tensor: cannot set field '%s' (only requires_grad and grad can be set, and x[i] = value, x[{i, j}] = value, x[mask] = value)",
                key ? key : luaL_typename(L, 2));
}

// x[k] = v: each assignment runs guarded under the name the user wrote.
int tensor_newindex(lua_State* L) {
    if (Tensor* key = test_tensor(L, 2)) {
        if (key->dtype() == DTYPE_I64) return run_guarded(L, index_assign, "x[index] = value");
        return run_guarded(L, assign_masked, "x[mask] = value");
    }
    if (lua_isinteger(L, 2) || lua_istable(L, 2)) return run_guarded(L, index_assign, "x[i] = value");
    const char* key = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "";
    if (strcmp(key, "requires_grad") == 0) return run_guarded(L, assign_requires_grad, "requires_grad");
    if (strcmp(key, "grad") == 0) return run_guarded(L, assign_grad, "grad");
    return run_guarded(L, assign_unknown, "tensor");
}

// Lets go of the node; the userdata stays an empty Tensor, which test_tensor refuses (it may be
// seen again by a later finaliser, or by a __gc called twice through debug.getmetatable).
int tensor_gc(lua_State* L) {
    Tensor* t = static_cast<Tensor*>(lua_touserdata(L, 1));
    if (!t || !lua_getmetatable(L, 1)) return 0;
    bool is_tensor = lua_topointer(L, -1) == bindings_state.tensor_metatable;
    lua_pop(L, 1);
    if (is_tensor) *t = Tensor();
    return 0;
}

int tensor_tostring(lua_State* L) {
    lua_pushstring(L, tensor_format(check_tensor(L, 1)).c_str());
    return 1;
}

int tensor_len(lua_State* L) {
    const Shape& s = check_tensor(L, 1).shape();
    if (s.ndim == 0) engine_fail("len: a 0-d tensor has no length");
    lua_pushinteger(L, s.dims[0]);
    return 1;
}

// ============================================================================================
// [SECTION] open

// Methods and fields that only tensors have (the rest: the tables of the files of bindings).
const Binding userdata_method_only[] = {
    {"size", l_size}, {"dim", l_dim}, {"numel", l_numel}, {"nelement", l_numel}, {nullptr, nullptr},
};
const Binding userdata_torch_only[] = {
    {"is_tensor", l_is_tensor, OPTIONS_TABLE_IS_VALUE}, {nullptr, nullptr},
};
const Binding userdata_metamethods[] = {
    {"__tostring", tensor_tostring, nullptr, "tostring"}, {"__len", tensor_len, nullptr, "len"}, {nullptr, nullptr},
};

int open_torch_table(lua_State* L) {
    lua_getglobal(L, "torch");
    return 1;
}

// The Tensor metatable, in the registry under TENSOR_TYPE: the metamethods, and as the upvalue of
// __index the table of methods (also metatable.methods, for tab completion).
void open_tensor_metatable(lua_State* L) {
    luaL_newmetatable(L, TENSOR_TYPE);
    bindings_state.tensor_metatable = lua_topointer(L, -1);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &bindings_state.tensor_metatable_key);
    // Errors name the operation as the user wrote it: `a + b` is add, `x[k] = v` is index assignment.
    register_bindings(L, tensor_op_metamethods, nullptr);
    register_bindings(L, conversion_metamethods, nullptr);
    register_bindings(L, userdata_metamethods, nullptr);
    lua_pushcfunction(L, tensor_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, tensor_newindex);
    lua_setfield(L, -2, "__newindex");
    lua_pushstring(L, TENSOR_TYPE);   // getmetatable(t) gives the type name: scripts cannot call __gc
    lua_setfield(L, -2, "__metatable");
    lua_newtable(L);   // methods
    for (const Binding* table : {tensor_op_functions, nn_op_functions, elementwise_tensor_functions, table_unary_bindings(),
                                 tensor_op_method_only, userdata_method_only, conversion_method_only, autograd_method_only,
                                 elementwise_method_only, reduce_shape_functions, reduce_shape_methods,
                                 view_tensor_functions, view_method_only, hook_method_only, tape_method_only})
        register_bindings(L, table, "x:");
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "methods");   // metatable.methods, for tab completion
    lua_pushcclosure(L, tensor_index, 1);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
}

// The metatable of shapes (push_shape): they print as [2,3].
void open_size_metatable(lua_State* L) {
    luaL_newmetatable(L, "tapedeck.Size");
    lua_pushcfunction(L, size_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pop(L, 1);
}

// The tables of bindings whose functions are torch.f.
std::vector<const Binding*> torch_binding_tables() {
    return {tensor_op_functions, nn_op_functions, elementwise_tensor_functions, table_unary_bindings(),
            tensor_op_torch_only, nn_op_torch_only, userdata_torch_only, conversion_torch_only,
            autograd_torch_only, tape_torch_only, elementwise_torch_only, reduce_shape_functions,
            reduce_shape_torch_functions, view_tensor_functions, view_torch_only};
}

// The functions of the torch table on top of the stack, its subtables (autograd, backends) and
// its constants (version, the dtypes).
void fill_torch_table(lua_State* L) {
    for (const Binding* table : torch_binding_tables()) register_bindings(L, table, "torch.");
    tapedeck_open_function(L);
    tapedeck_open_plan(L);
    tapedeck_open_save_load(L);
    tapedeck_open_cuda(L);
    tapedeck_open_onnx(L);
    open_options(L);   // torch._options: the options check and registry, for the Lua-written library
    lua_newtable(L);   // torch.autograd
    register_bindings(L, autograd_functions, "torch.autograd.");
    tapedeck_open_gradcheck(L);
    lua_getfield(L, -2, "Function");   // torch.autograd.Function, PyTorch's spelling: the same torch.Function
    lua_setfield(L, -2, "Function");
    lua_setfield(L, -2, "autograd");
    lua_newtable(L);   // torch.backends: fused_lstm (nil: decided per call, nn_recurrent.lua)
    lua_setfield(L, -2, "backends");
    set_string(L, "version", "0.1");
    // dtype constants are the dtype names: t.dtype == torch.float64
    const char* const dtype_constants[][2] = {{"float32", "float32"}, {"float", "float32"}, {"float64", "float64"},
                                              {"double", "float64"}, {"int64", "int64"}, {"long", "int64"}};
    for (const auto& constant : dtype_constants) set_string(L, constant[0], constant[1]);
}

}  // namespace

// F's functions that are torch's (the library sets F.relu = torch.relu): the same bindings
// registered again into F (on top of the stack), so that their errors say F.relu, as called.
// The rows are found once (every state's F is the same library's) and live as long as the process.
void register_functional_aliases(lua_State* L) {
    static std::vector<Binding> aliases;
    if (aliases.empty()) {
        lua_getglobal(L, "torch");
        for (const Binding* table : torch_binding_tables())
            for (const Binding* b = table; b->name; ++b) {
                lua_getfield(L, -2, b->name);
                lua_getfield(L, -2, b->name);
                if (lua_iscfunction(L, -1) && lua_rawequal(L, -1, -2)) aliases.push_back(*b);
                lua_pop(L, 2);
            }
        lua_pop(L, 1);
        aliases.push_back({nullptr, nullptr});
    }
    register_bindings(L, aliases.data(), "F.");
}

// ------------------------------------------------------------------------------------------
// public

const char* const TAPEDECK_TENSOR_FIELDS[] = {"shape", "grad", "requires_grad", "grad_fn", "node", "is_leaf", "dtype", "ndim",
                                              "device", "is_cuda", "data", "T", "mT", "H", "mH", nullptr};

td::Tensor* tapedeck_test_tensor(lua_State* L, int idx) { return test_tensor(L, idx); }
bool tapedeck_is_finalised_tensor(lua_State* L, int idx) {
    Tensor* t = static_cast<Tensor*>(tapedeck_test_udata(L, idx, bindings_state.tensor_metatable));
    return t && !t->defined();
}

void* tapedeck_test_udata(lua_State* L, int idx, const void* metatable) {
    void* p = lua_touserdata(L, idx);
    if (!p || !lua_getmetatable(L, idx)) return nullptr;
    bool same = lua_topointer(L, -1) == metatable;
    lua_pop(L, 1);
    return same ? p : nullptr;
}
int tapedeck_push_tensor(lua_State* L, td::Tensor t) { return push_tensor(L, std::move(t)); }
std::string tapedeck_where(lua_State* L, int level) { return where_at(L, level); }
lua_State* tapedeck_current_state() { return bindings_state.current_state; }
void tapedeck_set_current_state(lua_State* L) { bindings_state.current_state = L; }

void tapedeck_open(lua_State* L) {
    lua_gc(L, LUA_GCGEN, 0, 0);   // most tensors die young: minor collections (tell_collector says why)
    open_tensor_metatable(L);
    open_hook_handles(L);
    open_size_metatable(L);
    open_node_records(L);
    open_grad_mode(L);

    lua_newtable(L);   // torch
    fill_torch_table(L);
    lua_setglobal(L, "torch");
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, open_torch_table);
    lua_setfield(L, -2, "tapedeck");
    lua_pop(L, 1);

    bindings_state.current_state = L;
    engine_set_locator(locate_in_lua, nullptr);
    tapedeck_open_library(L);
    lua_getglobal(L, "F");   // torch.nn.functional, made by the library just opened
    register_bindings(L, elementwise_functional, "F.");
    register_functional_aliases(L);
    lua_pop(L, 1);
}
