// lua_tensor.cpp: the Tensor userdata and the `torch` table, in Lua's idiom (luaL_Reg tables).
//
// Bindings check arguments and call the engine; they hold no logic of their own. Every binding
// runs inside call_binding(), which turns a C++ error into a Lua error of the form
// "mm: shapes [20,20] and [10,1] do not match (rnn.lua:7)". Dims are 1-based, as in Lua and
// Torch7 (negative dims count from the end); dtype defaults to float32.
//
// [SECTION] plumbing       type checks, errors, pushing tensors, Lua's collector, source locator
// [SECTION] arguments      shapes, options, nested tables
// [SECTION] creation       torch.tensor zeros ones full rand randn eye manual_seed (arange: lua_elementwise_ops.cpp)
// [SECTION] ops            functions that are both torch.f(x, ...) and x:f(...)
// [SECTION] tensor         methods and fields that only tensors have
// [SECTION] torch          no_grad, graph, graphviz, tape, ...
// [SECTION] open           metatables and registration
#include <algorithm>
#include <chrono>
#include <cmath>
#include <climits>
#include <cstdarg>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "dot_export.h"
#include "format.h"
#include "node_names.h"
#include "plan.h"
#include "lua_util.h"
#include "lua_tensor.h"

#include "backend.h"
#include "device.h"
#include "tapedeck_lua.h"

using namespace td;
using namespace tdlua;

// The shared helpers (lua_tensor.h) live in tdlua; the rest of the file is private.
namespace tdlua {

// ============================================================================================
// [SECTION] plumbing

const char* const TENSOR_TYPE = "tapedeck.Tensor";
const char* const NODE_TYPE = "tapedeck.Node";
const char* const GRAD_MODE_TYPE = "tapedeck.GradMode";
int g_tensor_metatable_key;             // address used as the registry key of the metatable
const void* g_tensor_metatable = nullptr;
lua_State* g_current_state = nullptr;   // the thread whose binding is running (for the locator)
size_t g_bytes_told_to_lua = 0;

// The tensor at idx; nullptr when it is not one, or when Lua has already finalised it (a finaliser
// of another object may still reach it: Lua resurrects what finalisers can see).
Tensor* test_tensor(lua_State* L, int idx) {
    Tensor* t = static_cast<Tensor*>(tapedeck_test_udata(L, idx, g_tensor_metatable));
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
size_t g_live_bytes_after_full = 0;

// Double what the last full collection left, at least 64 MiB, and at most halfway from there to
// the memory limit (garbage waiting for a collection must not make storage_new refuse).
size_t full_collection_threshold() {
    size_t after = g_live_bytes_after_full, limit = memory_limit_bytes();
    size_t doubled = std::max(2 * after, FULL_COLLECTION_FLOOR_BYTES);
    size_t halfway = after < limit ? after + (limit - after) / 2 : after;
    return std::min(doubled, halfway);
}

void tell_collector(lua_State* L) {
    size_t total = engine_bytes_allocated_total();
    size_t fresh = total - g_bytes_told_to_lua;
    if (fresh < COLLECTOR_STEP_BYTES) return;
    g_bytes_told_to_lua = total;
    if (engine_bytes_live() > full_collection_threshold()) {
        lua_gc(L, LUA_GCCOLLECT);
        g_live_bytes_after_full = engine_bytes_live();
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
    lua_rawgetp(L, LUA_REGISTRYINDEX, &g_tensor_metatable_key);
    lua_setmetatable(L, -2);
    tell_collector(L);
    return 1;
}

// Nodes record the innermost Lua line that called an op. The file name is interned once per file.
SourceLoc locate_in_lua(void*) {
    static std::string last_name;
    static int last_file = -1;
    lua_State* L = g_current_state;
    SourceLoc loc;
    if (!L) return loc;
    lua_Debug ar;
    if (!find_user_frame(L, 1, &ar)) return loc;
    if (last_file < 0 || last_name != ar.short_src) {
        last_name = ar.short_src;
        last_file = source_file_intern(ar.short_src);
    }
    loc.file = last_file;
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

namespace {
Device g_default_device = DEVICE_CPU;
}

Device default_device() { return g_default_device; }

// {requires_grad=true, dtype="float64", device="cpu"}; unknown keys are errors (a typo must not pass silently).
CreateOptions options_from_arg(lua_State* L, int idx, DType default_dtype, Device default_device) {
    CreateOptions o;
    o.dtype = default_dtype;
    o.device = default_device;
    if (lua_isnoneornil(L, idx)) return o;
    if (!lua_istable(L, idx)) arg_fail(idx, "options must be a table like {dtype=\"float64\"}, got %s", type_name_of(L, idx));
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        const char* key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
        if (strcmp(key, "requires_grad") == 0) {
            o.requires_grad = lua_toboolean(L, -1);
        } else if (strcmp(key, "dtype") == 0) {
            const char* name = lua_tostring(L, -1);
            if (!name || !dtype_parse(name, &o.dtype))
                arg_fail(idx, "unknown dtype '%s' (use float32, float64 or int64)", name ? name : type_name_of(L, -1));
        } else if (strcmp(key, "device") == 0) {
            o.device = device_from_arg(L, lua_gettop(L), idx);
        } else {
            arg_fail(idx, "unknown option '%s' (expected requires_grad, dtype or device)", key);
        }
        lua_pop(L, 1);
    }
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

// A nested table of numbers: first find the shape along the first elements, then read every
// element, checking that the nesting is rectangular.
void nested_shape(lua_State* L, int idx, Shape& shape) {
    lua_pushvalue(L, idx);
    while (lua_istable(L, -1)) {
        if (shape.ndim == MAX_DIMS) arg_fail(1, "nested deeper than %d levels", MAX_DIMS);
        lua_Integer n = luaL_len(L, -1);
        shape.dims[shape.ndim++] = n;
        if (n == 0) break;
        lua_geti(L, -1, 1);
        lua_remove(L, -2);
    }
    lua_pop(L, 1);
}

void nested_values(lua_State* L, int idx, const Shape& shape, int depth, std::string& path, std::vector<double>& out) {
    if (depth == shape.ndim) {
        int is_number = 0;
        double v = lua_tonumberx(L, idx, &is_number);
        if (!is_number) arg_fail(1, "expected a number at %s, got %s", path.empty() ? "top level" : path.c_str(), type_name_of(L, idx));
        out.push_back(v);
        return;
    }
    if (!lua_istable(L, idx) || luaL_len(L, idx) != shape.dims[depth])
        arg_fail(1, "ragged nested table: %s should be a table of %lld elements", path.empty() ? "the top level" : path.c_str(),
                 static_cast<long long>(shape.dims[depth]));
    size_t path_len = path.size();
    for (lua_Integer i = 1; i <= shape.dims[depth]; ++i) {
        lua_geti(L, idx, i);
        path += "[" + std::to_string(i) + "]";
        nested_values(L, lua_gettop(L), shape, depth + 1, path, out);
        path.resize(path_len);
        lua_pop(L, 1);
    }
}

}  // namespace tdlua

namespace {

// ============================================================================================
// [SECTION] creation

int l_tensor(lua_State* L) {
    CreateOptions o = options_from_arg(L, 2, DTYPE_F32);
    Shape shape;
    std::vector<double> values;
    if (lua_type(L, 1) == LUA_TNUMBER) {
        values.push_back(lua_tonumber(L, 1));
    } else if (lua_istable(L, 1)) {
        nested_shape(L, 1, shape);
        std::string path;
        nested_values(L, 1, shape, 0, path, values);
    } else if (Tensor* t = test_tensor(L, 1)) {   // torch.tensor(t): a new leaf with a copy
        Tensor copy = ops::to_device(ops::unary(OP_clone, ops::unary(OP_detach, *t)), o.device);
        if (lua_isnoneornil(L, 2)) o.dtype = t->dtype();
        return push_created(L, copy.dtype() == o.dtype ? copy : ops::to(copy, o.dtype), o);
    } else {
        arg_fail(1, "expected a number or a (nested) table of numbers, got %s", type_name_of(L, 1));
    }
    return push_created(L, ops::from_values(shape, o.dtype, values.data(), o.device), o);
}

int create_with(lua_State* L, OpId op, DType default_dtype) {
    int next;
    Shape shape = shape_from_args(L, 1, &next);
    CreateOptions o = options_from_arg(L, next, default_dtype);
    return push_created(L, ops::create(op, shape, o.dtype, 0, o.device), o);
}

int l_zeros(lua_State* L) { return create_with(L, OP_zeros, DTYPE_F32); }
int l_ones(lua_State* L) { return create_with(L, OP_ones, DTYPE_F32); }
int l_rand(lua_State* L) { return create_with(L, OP_rand, DTYPE_F32); }
int l_randn(lua_State* L) { return create_with(L, OP_randn, DTYPE_F32); }

int l_full(lua_State* L) {
    if (!lua_istable(L, 1)) arg_fail(1, "size must be a table like {2, 3}, got %s", type_name_of(L, 1));
    int next;
    Shape shape = shape_from_args(L, 1, &next);
    double value = check_number(L, next, "fill value");
    CreateOptions o = options_from_arg(L, next + 1, DTYPE_F32);
    return push_created(L, ops::create(OP_full, shape, o.dtype, value, o.device), o);
}

int l_eye(lua_State* L) {
    int64_t n = check_integer(L, 1, "n");
    int opts = 2;
    int64_t m = n;
    if (lua_type(L, 2) == LUA_TNUMBER) {
        m = check_integer(L, 2, "m");
        opts = 3;
    }
    CreateOptions o = options_from_arg(L, opts, DTYPE_F32);
    return push_created(L, ops::create(OP_eye, Shape{n, m}, o.dtype, 0, o.device), o);
}

int l_manual_seed(lua_State* L) {
    engine_manual_seed(static_cast<uint64_t>(check_integer(L, 1, "seed")));
    return 0;
}

// ============================================================================================
// [SECTION] ops

enum Arith { ARITH_ADD, ARITH_SUB, ARITH_MUL, ARITH_DIV };

}  // namespace

namespace tdlua {
// t beside the number at number_idx, as PyTorch promotes: an int64 tensor with a float number
// (1.5, 2.0, 1e308, NaN) computes in float32; with an integer number it stays int64.
Tensor promoted_for_number(lua_State* L, int number_idx, const Tensor& t) {
    if (t.dtype() == DTYPE_I64 && !lua_isinteger(L, number_idx)) return ops::to(t, DTYPE_F32);
    return t;
}
}  // namespace tdlua

namespace {

// a (+ - * /) b where either side may be a number.
int arith(lua_State* L, Arith kind, const char* name) {
    Tensor* a = test_tensor(L, 1);
    Tensor* b = test_tensor(L, 2);
    if (a && b) {
        switch (kind) {
            case ARITH_ADD: return push_tensor(L, ops::add(*a, *b));
            case ARITH_SUB: return push_tensor(L, ops::sub(*a, *b));
            case ARITH_MUL: return push_tensor(L, ops::mul(*a, *b));
            case ARITH_DIV: return push_tensor(L, ops::div(*a, *b));
        }
    }
    if (a && lua_type(L, 2) == LUA_TNUMBER) {
        double s = lua_tonumber(L, 2);
        Tensor x = promoted_for_number(L, 2, *a);
        switch (kind) {
            case ARITH_ADD: return push_tensor(L, ops::add_scalar(x, s));
            case ARITH_SUB: return push_tensor(L, ops::add_scalar(x, -s));
            case ARITH_MUL: return push_tensor(L, ops::mul_scalar(x, s));
            case ARITH_DIV: return push_tensor(L, ops::div_scalar(x, s));
        }
    }
    if (b && lua_type(L, 1) == LUA_TNUMBER) {
        double s = lua_tonumber(L, 1);
        Tensor x = promoted_for_number(L, 1, *b);
        switch (kind) {
            case ARITH_ADD: return push_tensor(L, ops::add_scalar(x, s));
            case ARITH_SUB: return push_tensor(L, ops::rsub_scalar(x, s));
            case ARITH_MUL: return push_tensor(L, ops::mul_scalar(x, s));
            case ARITH_DIV: return push_tensor(L, ops::rdiv_scalar(x, s));
        }
    }
    engine_fail("%s: expects tensors or numbers, got %s and %s", name, type_name_of(L, 1), type_name_of(L, 2));
}

int l_add(lua_State* L) { return arith(L, ARITH_ADD, "add"); }
int l_sub(lua_State* L) { return arith(L, ARITH_SUB, "sub"); }
int l_mul(lua_State* L) { return arith(L, ARITH_MUL, "mul"); }
int l_div(lua_State* L) { return arith(L, ARITH_DIV, "div"); }

int l_pow(lua_State* L) {
    Tensor* x = test_tensor(L, 1);
    Tensor* p = test_tensor(L, 2);
    // int64 ^ a Lua integer stays int64; a Lua float makes it float32 (as PyTorch)
    if (x && lua_type(L, 2) == LUA_TNUMBER) return push_tensor(L, ops::pow(promoted_for_number(L, 2, *x), lua_tonumber(L, 2)));
    if (x && p) return push_tensor(L, ops::pow_tensor(*x, *p));
    if (p && lua_type(L, 1) == LUA_TNUMBER)
        return push_tensor(L, ops::rpow_scalar(lua_tonumber(L, 1), promoted_for_number(L, 1, *p)));
    engine_fail("pow: expects tensors or numbers, got %s and %s", type_name_of(L, 1), type_name_of(L, 2));
}

// a:eq(b), a:lt(b), ...: b a tensor or a number; the result is 1 where the relation holds, else 0.
int compare_binding(lua_State* L, OpId op) {
    Tensor& a = check_tensor(L, 1);
    if (lua_type(L, 2) == LUA_TNUMBER) {   // a float number beside an int64 tensor compares in float64
        DType dtype = a.dtype() == DTYPE_I64 && !lua_isinteger(L, 2) ? DTYPE_F64 : a.dtype();
        return push_tensor(L, ops::compare(op, a, ops::create(OP_full, Shape{}, dtype, lua_tonumber(L, 2))));
    }
    return push_tensor(L, ops::compare(op, a, check_tensor(L, 2)));
}
int l_eq(lua_State* L) { return compare_binding(L, OP_eq); }
int l_lt(lua_State* L) { return compare_binding(L, OP_lt); }
int l_le(lua_State* L) { return compare_binding(L, OP_le); }
int l_gt(lua_State* L) { return compare_binding(L, OP_gt); }
int l_ge(lua_State* L) { return compare_binding(L, OP_ge); }

// x:masked_fill(mask, value): value where mask is nonzero (mask broadcasts to x), else x.
int l_masked_fill(lua_State* L) {
    return push_tensor(L, ops::masked_fill(check_tensor(L, 1), check_tensor(L, 2), check_number(L, 3, "value")));
}

int l_neg(lua_State* L) { return push_tensor(L, ops::neg(check_tensor(L, 1))); }   // `-x`
int l_detach(lua_State* L) { return push_tensor(L, ops::unary(OP_detach, check_tensor(L, 1))); }

// x:sin(), torch.sin(x), ...: every elementwise op of one tensor without attributes, registered
// from the op table (op_is_simple_method), so that a new one needs no binding.
int l_table_unary(lua_State* L) {
    OpId op = static_cast<OpId>(tdlua::binding_data(L));
    if (lua_gettop(L) > 1) arg_fail(2, "%s takes only the tensor, got %s", op_info(op).name, type_name_of(L, 2));
    return push_tensor(L, ops::unary(op, check_tensor(L, 1)));
}

// The bindings made from the op table, for x:f() and torch.f(x).
const Binding* table_unary_bindings() {
    static const std::vector<Binding> bindings = [] {
        std::vector<Binding> list;
        for (int i = 0; i < OP_COUNT; ++i)
            if (op_is_simple_method(static_cast<OpId>(i))) list.push_back({op_table[i].name, l_table_unary, nullptr, i});
        list.push_back({nullptr, nullptr});
        return list;
    }();
    return bindings.data();
}

int l_mm(lua_State* L) { return push_tensor(L, ops::mm(check_tensor(L, 1), check_tensor(L, 2))); }
int l_bmm(lua_State* L) { return push_tensor(L, ops::bmm(check_tensor(L, 1), check_tensor(L, 2))); }
int l_matmul(lua_State* L) { return push_tensor(L, ops::matmul(check_tensor(L, 1), check_tensor(L, 2))); }

// torch.linear(x, w, b): x wᵀ + b (b may be nil), nn.Linear's forward.
int l_linear(lua_State* L) {
    Tensor bias = lua_isnoneornil(L, 3) ? Tensor() : check_tensor(L, 3);
    return push_tensor(L, ops::linear(check_tensor(L, 1), check_tensor(L, 2), bias));
}

}  // namespace

namespace tdlua {
// An integer that fits in an int (window sizes, strides, paddings): the value at stack index `at`,
// reported as argument `arg` (a field of an options table reports the table's argument).
int check_int(lua_State* L, int at, int arg, const char* what) {
    int is_integer = 0;
    lua_Integer v = lua_tointegerx(L, at, &is_integer);
    if (!is_integer) arg_fail(arg, "%s must be an integer, got %s", what, type_name_of(L, at));
    if (v < INT_MIN || v > INT_MAX) arg_fail(arg, "%s %lld is out of range", what, static_cast<long long>(v));
    return static_cast<int>(v);
}
}  // namespace tdlua

namespace {

// A size along H and W (kernel_size, stride, padding, dilation): a number for both, or a list
// {h, w}, as PyTorch's int or tuple. Each must fit an int; the engine checks the ranges.
void size_pair_arg(lua_State* L, const Slot& s, int* h, int* w) {
    if (lua_type(L, s.at) == LUA_TNUMBER) {   // 2 or 2.0; 1.5 is an error
        *h = *w = check_int(L, s.at, s.arg, s.name);
        return;
    }
    if (!lua_istable(L, s.at) || test_tensor(L, s.at) || luaL_len(L, s.at) != 2 || is_options_table(L, s.at))
        arg_fail(s.arg, "%s must be an integer or a list {h, w} of two, got %s", s.name, type_name_of(L, s.at));
    lua_geti(L, s.at, 1);
    lua_geti(L, s.at, 2);
    if (lua_type(L, -2) != LUA_TNUMBER || lua_type(L, -1) != LUA_TNUMBER)
        arg_fail(s.arg, "%s must be an integer or a list {h, w} of two integers, got {%s, %s}", s.name,
                 type_name_of(L, -2), type_name_of(L, -1));
    *h = check_int(L, -2, s.arg, s.name);
    *w = check_int(L, -1, s.arg, s.name);
    lua_pop(L, 2);
}

// conv2d(input, weight, bias, stride, padding, dilation, groups), PyTorch's order, or any of them
// after the weight in a trailing options table: x:conv2d(w, {padding = 1}). padding may be
// "valid" (0) or "same" (the output keeps H and W; stride 1 only, as PyTorch).
int l_conv2d(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    Tensor& weight = check_tensor(L, 2);
    std::vector<Slot> a = read_params(L, "conv2d", 3, {{"bias"}, {"stride"}, {"padding"}, {"dilation"}, {"groups"}});
    Tensor* bias = a[0].given() ? test_tensor(L, a[0].at) : nullptr;
    if (a[0].given() && !bias) arg_fail(a[0].arg, "bias must be a tensor or nil, got %s", type_name_of(L, a[0].at));
    Window2d window;
    if (a[1].given()) size_pair_arg(L, a[1], &window.stride_h, &window.stride_w);
    bool same = false;
    if (a[2].given() && lua_type(L, a[2].at) == LUA_TSTRING) {
        const char* mode = lua_tostring(L, a[2].at);
        same = strcmp(mode, "same") == 0;
        if (!same && strcmp(mode, "valid") != 0)
            arg_fail(a[2].arg, "padding must be a size, {h, w}, \"valid\" or \"same\", got '%s'", mode);
    } else if (a[2].given()) {
        size_pair_arg(L, a[2], &window.padding_h, &window.padding_w);
    }
    if (a[3].given()) size_pair_arg(L, a[3], &window.dilation_h, &window.dilation_w);
    if (a[4].given()) {
        if (lua_type(L, a[4].at) != LUA_TNUMBER) arg_fail(a[4].arg, "groups must be an integer, got %s", type_name_of(L, a[4].at));
        window.groups = check_int(L, a[4].at, a[4].arg, "groups");
    }
    Tensor b = bias ? *bias : Tensor();
    return push_tensor(L, same ? ops::conv2d_same(x, weight, b, window) : ops::conv2d(x, weight, b, window));
}

// max_pool2d(input, kernel_size, stride = kernel_size, padding = 0, dilation = 1, ceil_mode =
// false, return_indices = false), PyTorch's order, or by name in a trailing options table.
// return_indices: also the 1-based index of each maximum in its H*W plane (int64).
int l_max_pool2d(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    std::vector<Slot> a = read_params(L, "max_pool2d", 2, {{"kernel_size"}, {"stride"}, {"padding"}, {"dilation"},
                                                           {"ceil_mode"}, {"return_indices"}});
    if (!a[0].given()) arg_fail(a[0].arg, "kernel_size is required (an integer or a list {h, w})");
    Window2d window;
    size_pair_arg(L, a[0], &window.kernel_h, &window.kernel_w);
    window.stride_h = window.kernel_h, window.stride_w = window.kernel_w;
    if (a[1].given()) size_pair_arg(L, a[1], &window.stride_h, &window.stride_w);
    if (a[2].given()) size_pair_arg(L, a[2], &window.padding_h, &window.padding_w);
    if (a[3].given()) size_pair_arg(L, a[3], &window.dilation_h, &window.dilation_w);
    for (int i : {4, 5})
        if (a[i].given() && !lua_isboolean(L, a[i].at))
            arg_fail(a[i].arg, "%s must be true or false, got %s", a[i].name, type_name_of(L, a[i].at));
    window.ceil_mode = a[4].given() && lua_toboolean(L, a[4].at);
    bool return_indices = a[5].given() && lua_toboolean(L, a[5].at);
    Tensor values = ops::max_pool2d(x, window);
    push_tensor(L, values);
    if (!return_indices) return 1;
    push_tensor(L, Tensor(values.node.get(), 1));
    return 2;
}

// flatten(x [, start_dim [, end_dim]]): dims start_dim..end_dim merged into one (default: all).
int l_flatten(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    int ndim = std::max(x.shape().ndim, 1);   // a 0-d tensor flattens as if it were [1]
    int start = lua_isnoneornil(L, 2) ? 0 : check_dim(L, 2, "flatten", ndim);
    int end = lua_isnoneornil(L, 3) ? ndim - 1 : check_dim(L, 3, "flatten", ndim);
    return push_view(L, ops::flatten(x, start, end), 1);
}

int return_self(lua_State* L) {
    lua_settop(L, 1);
    return 1;
}

int l_t(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    int ndim = x.shape().ndim;
    if (ndim < 2) return return_self(L);   // as PyTorch: t() of a 0-d or 1-d tensor is the tensor
    if (ndim > 2) engine_fail("t: expects a tensor of at most 2 dims, got %s (use transpose(d1, d2))", x.shape().str().c_str());
    return push_view(L, ops::transpose(x, 0, 1), 1);
}

int l_transpose(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    int ndim = x.shape().ndim;
    return push_view(L, ops::transpose(x, check_dim(L, 2, "transpose", ndim), check_dim(L, 3, "transpose", ndim)), 1);
}

int l_reshape(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    int next;
    Shape shape = shape_from_args(L, 2, &next);
    return push_view(L, ops::reshape(x, shape), 1);
}

int l_unsqueeze(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    return push_view(L, ops::unsqueeze(x, check_dim(L, 2, "unsqueeze", x.shape().ndim + 1)), 1);
}

int l_squeeze(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    if (lua_isnoneornil(L, 2)) return push_view(L, ops::squeeze(x, -1), 1);
    return push_view(L, ops::squeeze(x, check_dim(L, 2, "squeeze", x.shape().ndim)), 1);
}

int l_expand(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    int next;
    Shape shape = shape_from_args(L, 2, &next);
    for (int i = 0; i < shape.ndim; ++i) {   // -1 keeps the size, as in PyTorch
        int j = i - (shape.ndim - x.shape().ndim);
        if (shape.dims[i] == -1 && j >= 0) shape.dims[i] = x.shape().dims[j];
    }
    return push_view(L, ops::expand(x, shape), 1);
}

int l_cat(lua_State* L) {
    if (!lua_istable(L, 1)) arg_fail(1, "expected a table of tensors, got %s", type_name_of(L, 1));
    std::vector<Tensor> xs;
    lua_Integer n = luaL_len(L, 1);
    for (lua_Integer i = 1; i <= n; ++i) {
        lua_geti(L, 1, i);
        Tensor* t = test_tensor(L, -1);
        if (!t) arg_fail(1, "element %lld is a %s, not a tensor", static_cast<long long>(i), type_name_of(L, -1));
        xs.push_back(*t);
        lua_pop(L, 1);
    }
    if (xs.empty()) arg_fail(1, "needs at least one tensor");
    int dim = lua_isnoneornil(L, 2) ? 0 : check_dim(L, 2, "cat", xs[0].shape().ndim);
    return push_tensor(L, ops::cat(xs, dim));
}

// narrow(x, dim, start, length): start is 1-based; a negative start counts from the end (-1: the last).
int l_narrow(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    int dim = check_dim(L, 2, "narrow", x.shape().ndim);
    int64_t start = check_integer(L, 3, "start");
    int64_t length = check_integer(L, 4, "length");
    int64_t size = x.shape().dims[dim];
    if (start == 0 || start < -size || start > size + 1)
        arg_fail(3, "start %lld out of range for size %lld along dim %d (expected 1..%lld, or -%lld..-1 from the end)",
                 static_cast<long long>(start), static_cast<long long>(size), dim + 1, static_cast<long long>(size + 1),
                 static_cast<long long>(size));
    return push_view(L, ops::narrow(x, dim, start > 0 ? start - 1 : size + start, length), 1);
}

int l_softmax(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    return push_tensor(L, ops::softmax(x, check_dim(L, 2, "softmax", x.shape().ndim)));
}

int l_log_softmax(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    return push_tensor(L, ops::log_softmax(x, check_dim(L, 2, "log_softmax", x.shape().ndim)));
}

int l_gather(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    int dim = check_dim(L, 2, "gather", x.shape().ndim);
    return push_tensor(L, ops::gather(x, dim, check_tensor(L, 3)));
}

}  // namespace

namespace tdlua {
// A loss's reduction: nothing (the mean), "mean" or "sum", or an options table {reduction = "sum"}.
Reduction reduction_from_arg(lua_State* L, int idx) {
    if (lua_isnoneornil(L, idx)) return REDUCTION_MEAN;
    const char* name = nullptr;
    if (lua_type(L, idx) == LUA_TSTRING) {
        name = lua_tostring(L, idx);
    } else if (lua_istable(L, idx)) {
        lua_pushnil(L);
        while (lua_next(L, idx)) {
            const char* key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
            if (strcmp(key, "reduction") != 0) arg_fail(idx, "unknown option '%s' (expected reduction)", key);
            if (lua_type(L, -1) != LUA_TSTRING)
                arg_fail(idx, "reduction must be \"mean\" or \"sum\", got %s", type_name_of(L, -1));
            name = lua_tostring(L, -1);
            lua_pop(L, 1);
        }
        if (!name) return REDUCTION_MEAN;
    } else {
        arg_fail(idx, "expected \"mean\", \"sum\" or {reduction = \"sum\"}, got %s", type_name_of(L, idx));
    }
    if (strcmp(name, "mean") == 0) return REDUCTION_MEAN;
    if (strcmp(name, "sum") == 0) return REDUCTION_SUM;
    arg_fail(idx, "unknown reduction '%s' (use \"mean\" or \"sum\")", name);
}
}  // namespace tdlua

namespace {

int l_mse_loss(lua_State* L) {
    Tensor& input = check_tensor(L, 1);
    Tensor& target = check_tensor(L, 2);
    return push_tensor(L, ops::mse_loss(input, target, reduction_from_arg(L, 3)));
}

// cross_entropy, nll_loss, multi_margin_loss: (scores, labels [, reduction]).
int class_loss(lua_State* L, OpId op) {
    Tensor& scores = check_tensor(L, 1);
    Tensor& labels = check_tensor(L, 2);
    return push_tensor(L, ops::class_loss(op, scores, labels, reduction_from_arg(L, 3)));
}

int l_cross_entropy(lua_State* L) { return class_loss(L, OP_cross_entropy); }
int l_nll_loss(lua_State* L) { return class_loss(L, OP_nll_loss); }
int l_multi_margin_loss(lua_State* L) { return class_loss(L, OP_multi_margin_loss); }

// x converted to `dtype`; x itself (argument 1) when it has that dtype already, as PyTorch's x.to().
int push_converted(lua_State* L, const Tensor& x, DType dtype) {
    if (dtype != x.dtype()) return push_tensor(L, ops::to(x, dtype));
    lua_pushvalue(L, 1);
    return 1;
}

// x:to(dtype), x:to(device), x:to(device, dtype), x:to{dtype = ..., device = ...}, x:to(other_tensor)
// (other's dtype and device). x itself when nothing changes, as PyTorch's x.to(); a move between
// devices is the to_device op, recorded (its gradient is the copy back).
int l_to(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    DType dtype = x.dtype();
    Device device = x.value().device();
    int top = lua_gettop(L);
    if (top < 2) arg_fail(2, "expected a dtype, a device, a tensor or {dtype = ..., device = ...}");
    for (int i = 2; i <= top; ++i) {
        Device named;
        if (Tensor* other = test_tensor(L, i)) {
            dtype = other->dtype();
            device = other->value().device();
        } else if (lua_istable(L, i)) {
            CreateOptions options = options_from_arg(L, i, dtype, device);
            if (options.requires_grad) arg_fail(i, "to does not take requires_grad (use x:requires_grad_())");
            dtype = options.dtype;
            device = options.device;
        } else if (lua_type(L, i) == LUA_TSTRING && device_parse(lua_tostring(L, i), &named)) {
            device = named;
        } else if (lua_type(L, i) != LUA_TSTRING || !dtype_parse(lua_tostring(L, i), &dtype)) {
            arg_fail(i, "expected a dtype (float32, float64, int64) or a device (cpu, cuda), got %s",
                     lua_type(L, i) == LUA_TSTRING ? lua_tostring(L, i) : type_name_of(L, i));
        }
    }
    if (device == x.value().device()) return push_converted(L, x, dtype);
    Tensor moved = ops::to_device(x, device);
    return push_tensor(L, dtype == moved.dtype() ? moved : ops::to(moved, dtype));
}

// x:cpu() and x:cuda(): x on that device (x itself when it is there already).
int move_to(lua_State* L, Device device, const char* name) {
    Tensor& x = check_tensor(L, 1);
    if (lua_gettop(L) > 1) arg_fail(2, "%s takes only the tensor, got %s", name, type_name_of(L, 2));
    if (x.value().device() == device) {
        lua_pushvalue(L, 1);
        return 1;
    }
    return push_tensor(L, ops::to_device(x, device));
}
int l_cpu(lua_State* L) { return move_to(L, DEVICE_CPU, "cpu"); }
int l_cuda(lua_State* L) { return move_to(L, DEVICE_CUDA, "cuda"); }

// torch.set_default_device(device): where creation functions make tensors when not told
// (PyTorch 2's); torch.get_default_device() reads it.
int l_set_default_device(lua_State* L) {
    Device device = device_from_arg(L, 1, 1);
    if (device != DEVICE_CPU) cuda_require("set_default_device");
    g_default_device = device;
    return 0;
}
int l_get_default_device(lua_State* L) {
    lua_pushstring(L, device_name(g_default_device));
    return 1;
}

// torch.device("cpu"): the device's name, as dtypes are their names (t.device == torch.device("cpu")).
int l_device(lua_State* L) {
    lua_pushstring(L, device_name(device_from_arg(L, 1, 1)));
    return 1;
}

int convert(lua_State* L, DType dtype) { return push_converted(L, check_tensor(L, 1), dtype); }

int l_float(lua_State* L) { return convert(L, DTYPE_F32); }
int l_double(lua_State* L) { return convert(L, DTYPE_F64); }
int l_long(lua_State* L) { return convert(L, DTYPE_I64); }

// ============================================================================================
// [SECTION] tensor

}  // namespace

namespace tdlua {
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

double alpha_of(lua_State* L, int idx) { return lua_isnoneornil(L, idx) ? 1.0 : check_number(L, idx, "alpha"); }


int l_add_(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    Tensor y = operand_of(L, 2, x);
    double alpha = alpha_of(L, 3);
    run_inplace(L, [&](Tensor& t) { ops::add_(t, y, alpha); }, {&y});
    return return_self(L);
}

int l_sub_(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    Tensor y = operand_of(L, 2, x);
    double alpha = alpha_of(L, 3);
    run_inplace(L, [&](Tensor& t) { ops::sub_(t, y, alpha); }, {&y});
    return return_self(L);
}

int l_mul_(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    Tensor y = operand_of(L, 2, x);
    run_inplace(L, [&](Tensor& t) { ops::mul_(t, y); }, {&y});
    return return_self(L);
}

int l_masked_fill_(lua_State* L) {
    check_tensor(L, 1);
    Tensor mask = check_tensor(L, 2);
    double value = check_number(L, 3, "value");
    run_inplace(L, [&](Tensor& t) { ops::masked_fill_(t, mask, value); }, {});
    return return_self(L);
}

int l_zero_(lua_State* L) {
    check_tensor(L, 1);
    run_inplace(L, [](Tensor& t) { ops::zero_(t); }, {});
    return return_self(L);
}

int l_fill_(lua_State* L) {
    check_tensor(L, 1);
    double value = check_number(L, 2, "value");
    run_inplace(L, [&](Tensor& t) { ops::fill_(t, value); }, {});
    return return_self(L);
}

int l_copy_(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    Tensor src = operand_of(L, 2, x);
    run_inplace(L, [&](Tensor& t) { ops::copy_(t, src); }, {&src});
    return return_self(L);
}

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

// Element i of v, a host value (value_to_host first).
void push_element(lua_State* L, const Value& v, int64_t i) {
    if (v.dtype == DTYPE_I64) lua_pushinteger(L, static_cast<const int64_t*>(v.storage->data)[value_storage_index(v, i)]);
    else lua_pushnumber(L, value_get(v, i));
}

int l_item(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    if (x.numel() != 1)
        engine_fail("item: tensor #%lld has %lld elements (shape %s); item() needs exactly one",
                    static_cast<long long>(x.id()), static_cast<long long>(x.numel()), x.shape().str().c_str());
    if (plan_recording()) plan_record_note_values(x, locate_in_lua(nullptr), "item()");
    push_element(L, value_to_host(x.value()), 0);
    return 1;
}

void push_nested(lua_State* L, const Value& v, int dim, int64_t offset) {
    if (dim == v.shape.ndim) {
        push_element(L, v, offset);
        return;
    }
    int64_t stride = 1;
    for (int i = dim + 1; i < v.shape.ndim; ++i) stride *= v.shape.dims[i];
    lua_createtable(L, static_cast<int>(v.shape.dims[dim]), 0);
    for (int64_t i = 0; i < v.shape.dims[dim]; ++i) {
        push_nested(L, v, dim + 1, offset + i * stride);
        lua_rawseti(L, -2, i + 1);
    }
}

int l_totable(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    if (plan_recording()) plan_record_note_values(x, locate_in_lua(nullptr), "totable()");
    push_nested(L, value_to_host(x.value()), 0, 0);   // one host copy for a device tensor
    return 1;
}

// a < b and a <= b (also a > b, a >= b, which Lua turns around): one-element tensors or numbers,
// a boolean. While freezing, the truth is a guard (it may decide an if).
int compare_scalars(lua_State* L, CompareOp op) {
    Tensor* a = test_tensor(L, 1);
    Tensor* b = test_tensor(L, 2);
    const char* symbol = op == COMPARE_LT ? "<" : "<=";
    auto scalar = [&](int idx, Tensor* t) {
        if (!t) return check_number(L, idx, "operand");
        if (t->numel() != 1)
            engine_fail("compare: tensor #%lld has %lld elements; %s needs one (use lt/le/gt/ge for elementwise "
                        "comparisons)",
                        static_cast<long long>(t->id()), static_cast<long long>(t->numel()), symbol);
        return value_get(value_to_host(t->value()), 0);
    };
    double x = scalar(1, a), y = scalar(2, b);
    bool truth = op == COMPARE_LT ? x < y : x <= y;
    if (plan_recording()) {
        auto side = [&](Tensor* t, double v) {
            if (t) return "#" + std::to_string(t->id());
            char buffer[32];
            snprintf(buffer, sizeof buffer, "%.6g", v);
            return std::string(buffer);
        };
        std::string text = side(a, x) + " " + symbol + " " + side(b, y);
        Tensor* subject = a ? a : b;
        Tensor* other = a ? b : nullptr;
        plan_record_note_compare(*subject, op, a == nullptr, other, a ? y : x, truth, locate_in_lua(nullptr), text);
    }
    lua_pushboolean(L, truth);
    return 1;
}

int l_less(lua_State* L) { return compare_scalars(L, COMPARE_LT); }
int l_less_equal(lua_State* L) { return compare_scalars(L, COMPARE_LE); }

// {create_graph =, retain_graph =} at idx into options (retain_graph is accepted: the recorded
// graph is kept anyway, nodes live while something reaches them).
void backward_options_from(lua_State* L, int idx, BackwardOptions* options, bool* allow_unused) {
    if (lua_isnoneornil(L, idx)) return;
    if (!lua_istable(L, idx)) arg_fail(idx, "options must be a table like {create_graph = true}, got %s", type_name_of(L, idx));
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        const char* key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
        if (strcmp(key, "create_graph") == 0) options->create_graph = lua_toboolean(L, -1);
        else if (strcmp(key, "retain_graph") == 0) {}
        else if (allow_unused && strcmp(key, "allow_unused") == 0) *allow_unused = lua_toboolean(L, -1);
        else if (allow_unused && strcmp(key, "grad_outputs") == 0) {}   // read by the caller
        else arg_fail(idx, "unknown option '%s' (expected create_graph or retain_graph%s)", key,
                      allow_unused ? ", grad_outputs or allow_unused" : "");
        lua_pop(L, 1);
    }
}

// x:backward(), x:backward(grad), x:backward(grad, {create_graph = true}), x:backward{create_graph = true}
int l_backward(lua_State* L) {
    Tensor root = check_tensor(L, 1);   // a copy: the pass must not see x rebased under it
    int options_at = 3;
    Tensor* grad = nullptr;
    if (lua_istable(L, 2) && !test_tensor(L, 2)) options_at = 2;
    else if (!lua_isnoneornil(L, 2)) grad = &check_tensor(L, 2);
    if (!lua_isnone(L, options_at + 1)) arg_fail(options_at + 1, "backward takes a gradient and an options table, got more");
    BackwardOptions options;
    backward_options_from(L, options_at, &options, nullptr);
    backward(root, grad, options);
    return 0;
}

// Tensors given as one tensor or a table of tensors, at idx.
std::vector<Tensor> tensor_list_arg(lua_State* L, int idx, const char* what) {
    std::vector<Tensor> list;
    if (Tensor* t = test_tensor(L, idx)) {
        list.push_back(*t);
        return list;
    }
    if (!lua_istable(L, idx)) arg_fail(idx, "%s must be a tensor or a table of tensors, got %s", what, type_name_of(L, idx));
    lua_Integer n = luaL_len(L, idx);
    for (lua_Integer i = 1; i <= n; ++i) {
        lua_geti(L, idx, i);
        Tensor* t = test_tensor(L, -1);
        if (!t) arg_fail(idx, "%s: element %lld is a %s, not a tensor", what, static_cast<long long>(i), type_name_of(L, -1));
        list.push_back(*t);
        lua_pop(L, 1);
    }
    if (list.empty()) arg_fail(idx, "%s is an empty table", what);
    return list;
}

// torch.autograd.grad(outputs, inputs, {grad_outputs =, create_graph =, allow_unused =}): the
// gradients of the outputs (summed, each weighted by its grad_output) with respect to each input,
// as several return values (PyTorch's tuple); .grad is left alone.
int l_autograd_grad(lua_State* L) {
    std::vector<Tensor> outputs = tensor_list_arg(L, 1, "outputs");
    std::vector<Tensor> inputs = tensor_list_arg(L, 2, "inputs");
    BackwardOptions options;
    bool allow_unused = false;
    backward_options_from(L, 3, &options, &allow_unused);
    if (!lua_isnone(L, 4)) arg_fail(4, "grad takes outputs, inputs and an options table, got more");
    std::vector<Tensor> grad_outputs;
    if (lua_istable(L, 3) && lua_getfield(L, 3, "grad_outputs") != LUA_TNIL) grad_outputs = tensor_list_arg(L, lua_gettop(L), "grad_outputs");
    if (!grad_outputs.empty() && grad_outputs.size() != outputs.size())
        arg_fail(3, "grad_outputs has %zu tensors for %zu outputs", grad_outputs.size(), outputs.size());
    for (const Tensor& input : inputs)
        if (!input.requires_grad()) engine_fail("grad: input #%lld does not require grad", static_cast<long long>(input.id()));
    Tensor root = outputs[0];
    const Tensor* seed = grad_outputs.empty() ? nullptr : &grad_outputs[0];
    Tensor weighted;
    if (outputs.size() > 1) {   // one root: sum over outputs of sum(output * grad_output)
        {
            NoGradGuard restore_mode;   // saves the mode; the sum is recorded with autograd on
            set_grad_enabled(true);
            for (size_t i = 0; i < outputs.size(); ++i) {
                Tensor term = grad_outputs.empty() ? outputs[i] : ops::mul(outputs[i], grad_outputs[i]);
                term = ops::reduce_all(OP_sum, term);
                weighted = weighted.defined() ? ops::add(weighted, term) : term;
            }
        }
        root = weighted;
        seed = nullptr;
    }
    std::vector<Tensor> captured;
    options.capture = &inputs;
    options.captured = &captured;
    backward(root, seed, options);
    for (size_t i = 0; i < inputs.size(); ++i) {
        if (captured[i].defined()) {
            push_tensor(L, captured[i]);
        } else if (allow_unused) {
            lua_pushnil(L);
        } else {
            engine_fail("grad: input %zu (#%lld) was not used to compute the outputs (pass {allow_unused = true} to get nil)",
                        i + 1, static_cast<long long>(inputs[i].id()));
        }
    }
    return static_cast<int>(inputs.size());
}

// Conveniences PyTorch users reach for.
int l_type_as(lua_State* L) { return push_converted(L, check_tensor(L, 1), check_tensor(L, 2).dtype()); }
int l_int(lua_State* L) { return push_converted(L, check_tensor(L, 1), DTYPE_I64); }   // no int32: int64
// x:bool(): 1 where x is non-zero, else 0, in float32 (there is no bool dtype; masks take any dtype)
int l_bool(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    return push_tensor(L, ops::to(ops::compare_scalar(OP_ne, x, 0), DTYPE_F32));
}

// x:new_zeros(sizes, opts), new_ones, new_empty, new_full(sizes, value, opts): x's dtype unless opts say
int new_like(lua_State* L, OpId op) {
    Tensor& x = check_tensor(L, 1);
    int next;
    Shape shape = shape_from_args(L, 2, &next);
    double value = 0;
    if (op == OP_full) value = check_number(L, next++, "fill value");
    CreateOptions o = options_from_arg(L, next, x.dtype(), x.value().device());
    if (!lua_isnone(L, next + 1)) arg_fail(next + 1, "unexpected argument (sizes, %soptions)", op == OP_full ? "value, " : "");
    return push_created(L, ops::create(op, shape, o.dtype, value, o.device), o);
}
int l_new_zeros(lua_State* L) { return new_like(L, OP_zeros); }
int l_new_ones(lua_State* L) { return new_like(L, OP_ones); }
int l_new_full(lua_State* L) { return new_like(L, OP_full); }

int l_retain_grad(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    if (!x.requires_grad()) engine_fail("retain_grad: tensor #%lld does not require grad", static_cast<long long>(x.id()));
    x.node->retains_grad = true;
    return return_self(L);
}

int l_requires_grad_(lua_State* L) {
    set_requires_grad(check_tensor(L, 1), lua_isnoneornil(L, 2) ? true : lua_toboolean(L, 2));
    return return_self(L);
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
    } else {
        lua_pushnil(L);   // as Lua does for a missing field; calling it gets a hint (tapedeck_name_hint)
    }
    return 1;
}

// t.key: methods first (the fast path of every t:method() call), then fields.
int tensor_index(lua_State* L) {
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1;
    lua_pop(L, 1);
    return run_guarded(L, tensor_field, "index");
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
    bool is_tensor = lua_topointer(L, -1) == g_tensor_metatable;
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
// [SECTION] torch

int grad_mode_close(lua_State* L) {
    bool* saved = static_cast<bool*>(luaL_checkudata(L, 1, GRAD_MODE_TYPE));
    set_grad_enabled(*saved);
    return 0;
}

// torch.no_grad(fn, ...) calls fn with autograd off and returns its results; torch.no_grad()
// returns a guard for `local _ <close> = torch.no_grad()`.
int run_with_grad_mode(lua_State* L, bool enabled) {
    bool saved = grad_enabled();
    if (lua_isnoneornil(L, 1)) {
        bool* guard = static_cast<bool*>(lua_newuserdatauv(L, sizeof(bool), 0));
        *guard = saved;
        luaL_setmetatable(L, GRAD_MODE_TYPE);
        set_grad_enabled(enabled);
        return 1;
    }
    if (lua_type(L, 1) != LUA_TFUNCTION) arg_fail(1, "expected a function (or nothing), got %s", type_name_of(L, 1));
    int nargs = lua_gettop(L) - 1;
    set_grad_enabled(enabled);
    int status = lua_pcall(L, nargs, LUA_MULTRET, 0);
    set_grad_enabled(saved);
    if (status != LUA_OK) return lua_error(L);   // the function's own error, unchanged
    return lua_gettop(L);
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

int l_no_grad(lua_State* L) { return run_with_grad_mode(L, false); }
int l_enable_grad(lua_State* L) { return run_with_grad_mode(L, true); }

int l_is_grad_enabled(lua_State* L) {
    lua_pushboolean(L, grad_enabled());
    return 1;
}

int l_set_grad_enabled(lua_State* L) {
    set_grad_enabled(lua_toboolean(L, 1));
    return 0;
}

// torch.autograd.keep_backward_graph([keep]): whether backward passes keep the nodes they record
// (engine_keep_backward_graph); returns the setting as it was, and sets it when given a boolean.
int l_keep_backward_graph(lua_State* L) {
    bool was = engine_keeps_backward_graph_setting();
    if (lua_gettop(L) > 1) arg_fail(2, "expects at most one argument (true or false), got %d", lua_gettop(L));
    if (lua_gettop(L) == 1) {
        if (!lua_isboolean(L, 1)) arg_fail(1, "keep must be true or false, got %s", luaL_typename(L, 1));
        engine_keep_backward_graph(lua_toboolean(L, 1));
    }
    lua_pushboolean(L, was);
    return 1;
}

// torch._lstm(xw, h0, c0, w_hh): nn.LSTM's fused layer (ops.def's lstm); h and the state
// (nn_recurrent.lua). torch._steps_watched(): whether its steps may be looked at (engine_steps_watched).
int l_lstm(lua_State* L) {
    Tensor h = ops::lstm(check_tensor(L, 1), check_tensor(L, 2), check_tensor(L, 3), check_tensor(L, 4));
    push_tensor(L, h);
    push_tensor(L, Tensor(h.node.get(), 1));
    return 2;
}

int l_steps_watched(lua_State* L) {
    lua_pushboolean(L, engine_steps_watched());
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

int l_graph(lua_State* L) {
    push_records(L, graph_collect(check_tensor(L, 1)));
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

int l_is_tensor(lua_State* L) {
    lua_pushboolean(L, test_tensor(L, 1) != nullptr);
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

// torch.set_memory_limit(bytes): the most bytes tensor data may take at once (nil or 0: the
// default, 3/4 of physical memory); torch.memory_limit() reads it. Creating a tensor past it is an
// error naming the op and the sizes in GB.
int l_set_memory_limit(lua_State* L) {
    int64_t bytes = lua_isnoneornil(L, 1) ? 0 : check_integer(L, 1, "bytes");
    if (bytes < 0) arg_fail(1, "bytes must not be negative, got %lld", static_cast<long long>(bytes));
    memory_set_limit_bytes(static_cast<size_t>(bytes));
    return 0;
}

// torch.ops(): the op table, one record per op in ops.def order: {name, inputs (-1: a list),
// outputs, math, differentiable, internal (not called by its own name from Lua), from_table
// (x:name() and torch.name(x) are registered from the table), functional (called as F.name only)}.
int l_ops(lua_State* L) {
    lua_createtable(L, OP_COUNT, 0);
    for (int i = 0; i < OP_COUNT; ++i) {
        const OpInfo& info = op_table[i];
        lua_createtable(L, 0, 8);
        lua_pushstring(L, info.name);
        lua_setfield(L, -2, "name");
        lua_pushinteger(L, info.n_inputs);
        lua_setfield(L, -2, "inputs");
        lua_pushinteger(L, info.max_outputs);
        lua_setfield(L, -2, "outputs");
        lua_pushstring(L, info.math);
        lua_setfield(L, -2, "math");
        lua_pushboolean(L, info.backward_rule != nullptr);
        lua_setfield(L, -2, "differentiable");
        lua_pushboolean(L, (info.flags & OPF_INTERNAL) != 0);
        lua_setfield(L, -2, "internal");
        lua_pushboolean(L, op_is_simple_method(static_cast<OpId>(i)));
        lua_setfield(L, -2, "from_table");
        lua_pushboolean(L, (info.flags & OPF_FUNCTIONAL) != 0);
        lua_setfield(L, -2, "functional");
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

int l_memory_limit(lua_State* L) {
    lua_pushinteger(L, static_cast<lua_Integer>(memory_limit_bytes()));
    return 1;
}

int l_reset_peak_memory(lua_State*) {
    storage_peak_reset();
    return 0;
}

int node_tostring(lua_State* L) {
    lua_getfield(L, 1, "description");
    return 1;
}

// ============================================================================================
// [SECTION] open

// Both torch.f(x, ...) and x:f(...).
const Binding tensor_functions[] = {
    {"add", l_add}, {"sub", l_sub}, {"mul", l_mul}, {"div", l_div}, {"pow", l_pow}, {"eq", l_eq},
    {"lt", l_lt}, {"le", l_le}, {"gt", l_gt}, {"ge", l_ge}, {"masked_fill", l_masked_fill},
    {"mm", l_mm}, {"bmm", l_bmm}, {"matmul", l_matmul}, {"linear", l_linear}, {"conv2d", l_conv2d},
    {"max_pool2d", l_max_pool2d},
    {"t", l_t}, {"transpose", l_transpose}, {"reshape", l_reshape}, {"flatten", l_flatten},
    {"unsqueeze", l_unsqueeze}, {"squeeze", l_squeeze},
    {"expand", l_expand}, {"narrow", l_narrow},
    {"softmax", l_softmax}, {"log_softmax", l_log_softmax}, {"gather", l_gather},
    {"mse_loss", l_mse_loss}, {"cross_entropy", l_cross_entropy}, {"nll_loss", l_nll_loss},
    {"multi_margin_loss", l_multi_margin_loss},
    {"detach", l_detach},
    {nullptr, nullptr},
};

const Binding method_only[] = {
    {"add_", l_add_}, {"sub_", l_sub_}, {"mul_", l_mul_}, {"masked_fill_", l_masked_fill_}, {"zero_", l_zero_}, {"fill_", l_fill_},
    {"copy_", l_copy_}, {"size", l_size}, {"dim", l_dim}, {"numel", l_numel}, {"item", l_item},
    {"totable", l_totable}, {"tolist", l_totable}, {"nelement", l_numel}, {"type_as", l_type_as}, {"int", l_int},
    {"bool", l_bool}, {"new_zeros", l_new_zeros}, {"new_ones", l_new_ones}, {"new_empty", l_new_zeros},
    {"new_full", l_new_full}, {"backward", l_backward}, {"retain_grad", l_retain_grad},
    {"requires_grad_", l_requires_grad_}, {"to", l_to}, {"cpu", l_cpu}, {"cuda", l_cuda}, {"float", l_float}, {"double", l_double},
    {"long", l_long},
    {nullptr, nullptr},
};

const Binding torch_only[] = {
    {"tensor", l_tensor}, {"zeros", l_zeros}, {"ones", l_ones}, {"full", l_full}, {"rand", l_rand},
    {"randn", l_randn}, {"eye", l_eye}, {"manual_seed", l_manual_seed},
    {"cat", l_cat}, {"no_grad", l_no_grad}, {"scope", l_scope}, {"enable_grad", l_enable_grad},
    {"is_grad_enabled", l_is_grad_enabled}, {"set_grad_enabled", l_set_grad_enabled},
    {"graph", l_graph}, {"tape", l_tape}, {"ops", l_ops}, {"device", l_device},
    {"set_default_device", l_set_default_device}, {"get_default_device", l_get_default_device}, {"graphviz", l_graphviz}, {"is_tensor", l_is_tensor},
    {"perf_counter", l_perf_counter}, {"memory", l_memory}, {"reset_peak_memory", l_reset_peak_memory}, {"backward", l_backward},
    {"set_memory_limit", l_set_memory_limit}, {"memory_limit", l_memory_limit},
    {"_lstm", l_lstm}, {"_steps_watched", l_steps_watched},
    {nullptr, nullptr},
};

// Errors name the operation as the user wrote it: `a + b` is add, `x[k] = v` is index assignment.
const Binding tensor_metamethods[] = {
    {"__add", l_add, "add"}, {"__sub", l_sub, "sub"}, {"__mul", l_mul, "mul"}, {"__div", l_div, "div"},
    {"__pow", l_pow, "pow"}, {"__unm", l_neg, "neg"}, {"__tostring", tensor_tostring, "tostring"},
    {"__len", tensor_len, "len"}, {"__lt", l_less, "compare"}, {"__le", l_less_equal, "compare"},
    {nullptr, nullptr},
};

int open_torch_table(lua_State* L) {
    lua_getglobal(L, "torch");
    return 1;
}

}  // namespace

// ------------------------------------------------------------------------------------------
// public

td::Tensor* tapedeck_test_tensor(lua_State* L, int idx) { return test_tensor(L, idx); }
bool tapedeck_is_finalised_tensor(lua_State* L, int idx) {
    Tensor* t = static_cast<Tensor*>(tapedeck_test_udata(L, idx, g_tensor_metatable));
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
lua_State* tapedeck_current_state() { return g_current_state; }
void tapedeck_set_current_state(lua_State* L) { g_current_state = L; }

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
    lua_rawgetp(L, LUA_REGISTRYINDEX, &g_tensor_metatable_key);
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

void tapedeck_push_node_record(lua_State* L, const td::Node* n) {
    lua_createtable(L, 0, 12);
    lua_pushinteger(L, n->id);
    lua_setfield(L, -2, "id");
    lua_pushstring(L, n->name());
    lua_setfield(L, -2, "op");
    lua_pushstring(L, n->phase == PHASE_FORWARD ? "forward" : "backward");
    lua_setfield(L, -2, "phase");
    lua_pushinteger(L, n->group);
    lua_setfield(L, -2, "group");
    lua_createtable(L, n->inputs.size(), 0);
    for (int i = 0; i < n->inputs.size(); ++i) {
        lua_pushinteger(L, n->inputs[i].id);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "inputs");
    if (n->outputs.size() > 0) {   // a custom backward that returned no gradient has none
        push_shape(L, n->outputs[0].value.shape);
        lua_setfield(L, -2, "shape");
        lua_pushstring(L, dtype_name(n->outputs[0].value.dtype));
        lua_setfield(L, -2, "dtype");
    }
    lua_pushstring(L, scope_path(n->scope).c_str());
    lua_setfield(L, -2, "scope");
    lua_pushboolean(L, n->history_start);
    lua_setfield(L, -2, "history_start");
    lua_pushboolean(L, n->is_leaf());
    lua_setfield(L, -2, "is_leaf");
    lua_pushboolean(L, n->outputs.size() > 0 && n->outputs[0].requires_grad);
    lua_setfield(L, -2, "requires_grad");
    std::string name = node_bound_name(n);   // the script's name for it; nil when it has none
    if (!name.empty()) {
        lua_pushstring(L, name.c_str());
        lua_setfield(L, -2, "name");
    }
    lua_pushinteger(L, n->outputs.size());
    lua_setfield(L, -2, "outputs");
    lua_pushstring(L, source_loc_str(n->where).c_str());
    lua_setfield(L, -2, "where");
    lua_pushinteger(L, n->where.line);
    lua_setfield(L, -2, "line");
    lua_pushstring(L, op_describe_attrs(n->op, n->attrs()).c_str());
    lua_setfield(L, -2, "attrs");
    lua_pushstring(L, n->info().math);
    lua_setfield(L, -2, "math");
    lua_pushstring(L, node_describe(n).c_str());
    lua_setfield(L, -2, "description");
    luaL_setmetatable(L, NODE_TYPE);
}

void tapedeck_open(lua_State* L) {
    lua_gc(L, LUA_GCGEN, 0, 0);   // most tensors die young: minor collections (tell_collector says why)
    // Tensor metatable: methods table as the upvalue of __index.
    luaL_newmetatable(L, TENSOR_TYPE);
    g_tensor_metatable = lua_topointer(L, -1);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &g_tensor_metatable_key);
    register_bindings(L, tensor_metamethods);
    lua_pushcfunction(L, tensor_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, tensor_newindex);
    lua_setfield(L, -2, "__newindex");
    lua_pushstring(L, TENSOR_TYPE);   // getmetatable(t) gives the type name: scripts cannot call __gc
    lua_setfield(L, -2, "__metatable");
    lua_newtable(L);   // methods
    register_bindings(L, tensor_functions);
    register_bindings(L, elementwise_tensor_functions);
    register_bindings(L, table_unary_bindings());
    register_bindings(L, method_only);
    register_bindings(L, elementwise_method_only);
    register_bindings(L, reduce_shape_functions);
    register_bindings(L, reduce_shape_methods);
    register_bindings(L, view_tensor_functions);
    register_bindings(L, view_method_only);
    register_bindings(L, hook_method_only);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "methods");   // metatable.methods, for tab completion
    lua_pushcclosure(L, tensor_index, 1);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);

    open_hook_handles(L);
    luaL_newmetatable(L, "tapedeck.Size");
    lua_pushcfunction(L, size_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pop(L, 1);

    luaL_newmetatable(L, NODE_TYPE);
    lua_pushcfunction(L, node_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pop(L, 1);

    luaL_newmetatable(L, GRAD_MODE_TYPE);
    lua_pushcfunction(L, grad_mode_close);
    lua_setfield(L, -2, "__close");
    lua_pop(L, 1);

    lua_newtable(L);   // torch
    register_bindings(L, tensor_functions);
    register_bindings(L, elementwise_tensor_functions);
    register_bindings(L, table_unary_bindings());
    register_bindings(L, torch_only);
    register_bindings(L, elementwise_torch_only);
    register_bindings(L, reduce_shape_functions);
    register_bindings(L, reduce_shape_torch_functions);
    register_bindings(L, view_tensor_functions);
    register_bindings(L, view_torch_only);
    tapedeck_open_function(L);
    tapedeck_open_plan(L);
    tapedeck_open_save_load(L);
    tapedeck_open_cuda(L);
    tapedeck_open_onnx(L);
    static const Binding autograd_functions[] = {{"grad", l_autograd_grad},
                                                     {"backward", l_backward},
                                                     {"keep_backward_graph", l_keep_backward_graph},
                                                     {nullptr, nullptr}};
    lua_newtable(L);   // torch.autograd
    register_bindings(L, autograd_functions);
    tapedeck_open_gradcheck(L);
    lua_setfield(L, -2, "autograd");
    lua_newtable(L);   // torch.backends: fused_lstm (nil: decided per call, nn_recurrent.lua)
    lua_setfield(L, -2, "backends");
    lua_pushstring(L, "0.1");
    lua_setfield(L, -2, "version");
    // dtype constants are the dtype names: t.dtype == torch.float64
    const char* const dtype_constants[][2] = {{"float32", "float32"}, {"float", "float32"}, {"float64", "float64"},
                                              {"double", "float64"}, {"int64", "int64"}, {"long", "int64"}};
    for (const auto& constant : dtype_constants) {
        lua_pushstring(L, constant[1]);
        lua_setfield(L, -2, constant[0]);
    }
    lua_setglobal(L, "torch");

    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, open_torch_table);
    lua_setfield(L, -2, "tapedeck");
    lua_pop(L, 1);

    g_current_state = L;
    engine_set_locator(locate_in_lua, nullptr);
    tapedeck_open_library(L);
    lua_getglobal(L, "F");   // torch.nn.functional, made by the library just opened
    register_bindings(L, elementwise_functional);
    lua_pop(L, 1);
}
