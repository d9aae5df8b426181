// lua_reduce_shape_ops.cpp: the reductions (sum mean prod max min amax amin argmax argmin var std
// norm logsumexp cumsum topk sort) and the shape and product functions (stack split chunk unbind
// flip roll tile repeat unflatten expand_as view_as reshape_as index_select scatter scatter_add diag
// dot outer addmm einsum). The engine does the work (ops.h); these read the arguments.
//
// Arguments follow PyTorch: positional ones in PyTorch's order, keyword ones in a trailing options
// table under PyTorch's names (`x:sum(2, {keepdim = true})`, `x:sum{dim = 2}`); a table with a
// named field is an options table, a plain list ({1, 3}) is a value. An argument the function does
// not take is an error naming it. Dims are 1-based (negative from the end); a PyTorch tuple is
// several Lua returns (`values, indices = x:max(2)`).
//
// [SECTION] arguments   positional-or-keyword parameters, dims, sizes, lists of tensors
// [SECTION] reductions
// [SECTION] shape
// [SECTION] products
// [SECTION] tables      what tapedeck_open registers
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "lua_tensor.h"
#include "tapedeck_lua.h"

using namespace td;
using namespace tdlua;

// ============================================================================================
// [SECTION] arguments

// Declared in lua_tensor.h (the bindings of conv2d and max_pool2d read their arguments so too).
namespace tdlua {

static std::string param_list(const std::vector<Param>& params) {
    std::string s;
    for (size_t i = 0; i < params.size(); ++i) s += (i ? ", " : "") + std::string(params[i].name);
    return s.empty() ? "nothing else" : s;
}

std::vector<Slot> read_params(lua_State* L, const char* fn, int first, const std::vector<Param>& params) {
    int top = lua_gettop(L);
    while (top >= first && lua_isnil(L, top)) --top;   // trailing nils are not given
    int options = top >= first && is_options_table(L, top) ? top : 0;
    int last = options ? top - 1 : top;
    std::vector<Slot> slots(params.size());
    for (size_t i = 0; i < params.size(); ++i) {   // where each would go: what a missing one's error names
        slots[i].name = params[i].name;
        slots[i].arg = options && first + static_cast<int>(i) > last ? options : first + static_cast<int>(i);
    }
    for (int at = first; at <= last; ++at) {
        size_t i = static_cast<size_t>(at - first);
        if (i >= params.size())
            arg_fail(at, "%s takes at most %zu argument%s after the tensor (%s), got a %s here", fn, params.size(),
                     params.size() == 1 ? "" : "s", param_list(params).c_str(), type_name_of(L, at));
        if (!lua_isnil(L, at)) slots[i].at = at;
    }
    if (!options) return slots;
    lua_checkstack(L, static_cast<int>(params.size()) + 4);
    lua_pushnil(L);
    while (lua_next(L, options)) {
        const char* key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : nullptr;
        size_t i = 0;
        while (i < params.size() && !(key && (strcmp(key, params[i].name) == 0 ||
                                              (params[i].alias && strcmp(key, params[i].alias) == 0))))
            ++i;
        if (i == params.size()) {   // the bindings' check names it (a string key: an unknown option)
            std::string accepted;
            for (const Param& p : params) accepted += std::string(" ") + p.name + (p.alias ? std::string(" ") + p.alias : "");
            options_check(L, options, accepted.c_str());
            std::string shown = lua_isinteger(L, -2) ? "[" + std::to_string(lua_tointeger(L, -2)) + "]" : "?";
            arg_fail(options, "%s does not take '%s' (it takes %s)", fn, shown.c_str(), param_list(params).c_str());
        }
        if (slots[i].given()) arg_fail(options, "%s is given twice (by position and by name)", params[i].name);
        lua_pushvalue(L, -1);   // the value, kept on the stack under the iteration's key
        lua_insert(L, -3);
        slots[i] = Slot{lua_gettop(L) - 2, options, params[i].name};
        lua_pop(L, 1);
    }
    return slots;
}

}  // namespace tdlua

namespace {

bool bool_arg(lua_State* L, const Slot& s, bool fallback) {
    if (!s.given()) return fallback;
    if (!lua_isboolean(L, s.at)) arg_fail(s.arg, "%s must be true or false, got %s", s.name, type_name_of(L, s.at));
    return lua_toboolean(L, s.at);
}

int64_t int_arg(lua_State* L, const Slot& s, int64_t fallback) {
    if (!s.given()) return fallback;
    int is_integer = 0;
    lua_Integer v = lua_tointegerx(L, s.at, &is_integer);
    if (!is_integer) arg_fail(s.arg, "%s must be an integer, got %s", s.name, type_name_of(L, s.at));
    return v;
}

double number_arg(lua_State* L, const Slot& s, double fallback) {
    if (!s.given()) return fallback;
    int is_number = 0;
    lua_Number v = lua_tonumberx(L, s.at, &is_number);
    if (!is_number) arg_fail(s.arg, "%s must be a number, got %s", s.name, type_name_of(L, s.at));
    return v;
}

Tensor& tensor_arg(lua_State* L, const Slot& s) {
    if (!s.given()) arg_fail(s.arg, "%s is required (a tensor)", s.name);
    Tensor* t = tapedeck_test_tensor(L, s.at);
    if (!t) arg_fail(s.arg, "%s must be a tensor, got %s", s.name, type_name_of(L, s.at));
    return *t;
}

void require(const Slot& s) {
    if (!s.given()) arg_fail(s.arg, "%s is required", s.name);
}

int dim_of(lua_State* L, int at, int arg, const char* fn, int ndim) {
    int is_integer = 0;
    lua_Integer v = lua_tointegerx(L, at, &is_integer);
    if (!is_integer) arg_fail(arg, "dim must be an integer, got %s", type_name_of(L, at));
    return dim_normalize(fn, v, ndim);
}

// One dim (1-based or negative), or `fallback` (0-based) when not given.
int dim_arg(lua_State* L, const Slot& s, const char* fn, int ndim, int fallback) {
    if (!s.given()) return fallback;
    return dim_of(L, s.at, s.arg, fn, ndim);
}

// Integers given as one number or a list {a, b, ...}.
std::vector<int64_t> integers_arg(lua_State* L, const Slot& s) {
    std::vector<int64_t> values;
    if (!s.given()) return values;
    if (lua_istable(L, s.at) && !tapedeck_test_tensor(L, s.at)) {
        lua_Integer n = luaL_len(L, s.at);
        for (lua_Integer i = 1; i <= n; ++i) {
            lua_geti(L, s.at, i);
            int is_integer = 0;
            lua_Integer v = lua_tointegerx(L, -1, &is_integer);
            if (!is_integer) arg_fail(s.arg, "%s: element %lld must be an integer, got %s", s.name, static_cast<long long>(i), type_name_of(L, -1));
            values.push_back(v);
            lua_pop(L, 1);
        }
        return values;
    }
    values.push_back(int_arg(L, s, 0));
    return values;
}

// Dims given as one number or a list {1, 3}, as a bitmask of 0-based dims; a dim given twice is an error.
uint32_t dims_arg(lua_State* L, const Slot& s, const char* fn, int ndim) {
    uint32_t mask = 0;
    for (int64_t d : integers_arg(L, s)) {
        uint32_t bit = 1u << dim_normalize(fn, d, ndim);
        if (mask & bit) arg_fail(s.arg, "dim %lld is given twice", static_cast<long long>(d));
        mask |= bit;
    }
    return mask;
}

std::vector<int> dim_list_arg(lua_State* L, const Slot& s, const char* fn, int ndim) {
    std::vector<int> dims;
    for (int64_t d : integers_arg(L, s)) dims.push_back(dim_normalize(fn, d, ndim));
    return dims;
}

// x converted to the `dtype` option first (PyTorch casts the input before reducing), or x.
Tensor with_dtype(lua_State* L, const Tensor& x, const Slot& s) {
    if (!s.given()) return x;
    DType dtype;
    const char* name = lua_type(L, s.at) == LUA_TSTRING ? lua_tostring(L, s.at) : nullptr;
    if (!name || !dtype_parse(name, &dtype))
        arg_fail(s.arg, "unknown dtype '%s' (use float32, float64 or int64)", name ? name : type_name_of(L, s.at));
    return dtype == x.dtype() ? x : ops::to(x, dtype);
}

int push_pair(lua_State* L, const Tensor& two_outputs) {
    push_tensor(L, two_outputs);
    push_tensor(L, Tensor(two_outputs.node.get(), 1));
    return 2;
}

// Views of the tensor at slot 1 (split, chunk, unbind), each linked to it (push_view), as one Lua
// table: a PyTorch list is a table (the convention; a tuple would be several returns).
int push_views(lua_State* L, const std::vector<Tensor>& xs) {
    lua_createtable(L, static_cast<int>(xs.size()), 0);
    for (size_t i = 0; i < xs.size(); ++i) {
        push_view(L, xs[i], 1);
        lua_rawseti(L, -2, static_cast<lua_Integer>(i) + 1);
    }
    return 1;
}

// A Lua list of tensors at stack slot idx.
std::vector<Tensor> tensor_list(lua_State* L, int idx) {
    if (!lua_istable(L, idx) || tapedeck_test_tensor(L, idx))
        arg_fail(idx, "expected a table of tensors, got %s", type_name_of(L, idx));
    std::vector<Tensor> xs;
    lua_Integer n = luaL_len(L, idx);
    for (lua_Integer i = 1; i <= n; ++i) {
        lua_geti(L, idx, i);
        Tensor* t = tapedeck_test_tensor(L, -1);
        if (!t) arg_fail(idx, "element %lld is a %s, not a tensor", static_cast<long long>(i), type_name_of(L, -1));
        xs.push_back(*t);
        lua_pop(L, 1);
    }
    if (xs.empty()) arg_fail(idx, "needs at least one tensor");
    return xs;
}

// Sizes given as numbers from slot `first` on, or one list: tile(2, 3), tile({2, 3}), repeat(...).
std::vector<int64_t> sizes_from(lua_State* L, const char* fn, int first) {
    std::vector<int64_t> sizes;
    int top = lua_gettop(L);
    if (top == first && lua_istable(L, first)) {
        if (is_options_table(L, first)) arg_fail(first, "%s takes sizes, as numbers or one list, not an options table", fn);
        return integers_arg(L, Slot{first, first, "size"});
    }
    for (int i = first; i <= top; ++i) sizes.push_back(check_integer(L, i, "size"));
    return sizes;
}

// ============================================================================================
// [SECTION] reductions

const Param KEEPDIM{"keepdim", "keepdims"};

// sum, mean, prod: (dim [, keepdim]) with {dtype =}; sum and mean take several dims, prod one.
int sum_like(lua_State* L, OpId op) {
    const char* fn = op_info(op).name;
    Tensor& x = check_tensor(L, 1);
    if (lua_gettop(L) == 1) return push_tensor(L, ops::reduce_all(op, x));   // x:sum(), the usual call, fast
    std::vector<Slot> a = read_params(L, fn, 2, {{"dim"}, KEEPDIM, {"dtype"}});
    Tensor input = with_dtype(L, x, a[2]);
    bool keepdim = bool_arg(L, a[1], false);
    int ndim = x.shape().ndim;
    if (!a[0].given()) {
        if (a[1].given()) return push_tensor(L, ops::reduce_dims(op, input, 0, keepdim));
        return push_tensor(L, ops::reduce_all(op, input));
    }
    if (op == OP_prod) return push_tensor(L, ops::reduce(op, input, dim_arg(L, a[0], fn, ndim, 0), keepdim));
    return push_tensor(L, ops::reduce_dims(op, input, dims_arg(L, a[0], fn, ndim), keepdim));
}

int l_sum(lua_State* L) { return sum_like(L, OP_sum); }
int l_mean(lua_State* L) { return sum_like(L, OP_mean); }
int l_prod(lua_State* L) { return sum_like(L, OP_prod); }

// max()/min(): the value; max(dim [, keepdim]): values and 1-based int64 indices.
int max_like(lua_State* L, OpId op) {
    const char* fn = op_info(op).name;
    Tensor& x = check_tensor(L, 1);
    if (tapedeck_test_tensor(L, 2))
        arg_fail(2, "%s of two tensors is elementwise: use torch.%s(a, b)", fn, op == OP_max ? "maximum" : "minimum");
    std::vector<Slot> a = read_params(L, fn, 2, {{"dim"}, KEEPDIM});
    if (!a[0].given()) {
        if (a[1].given()) arg_fail(a[1].arg, "keepdim needs a dim (%s() reduces every element)", fn);
        return push_tensor(L, ops::reduce_all(op, x));
    }
    return push_pair(L, ops::reduce(op, x, dim_arg(L, a[0], fn, x.shape().ndim, 0), bool_arg(L, a[1], false)));
}

int l_max(lua_State* L) { return max_like(L, OP_max); }
int l_min(lua_State* L) { return max_like(L, OP_min); }

// amax/amin(dim [, keepdim]): dims as one number or a list; none: every dim.
int amax_like(lua_State* L, OpId op) {
    const char* fn = op_info(op).name;
    Tensor& x = check_tensor(L, 1);
    std::vector<Slot> a = read_params(L, fn, 2, {{"dim"}, KEEPDIM});
    uint32_t mask = dims_arg(L, a[0], fn, x.shape().ndim);
    return push_tensor(L, ops::reduce_dims(op, x, mask, bool_arg(L, a[1], false)));
}

int l_amax(lua_State* L) { return amax_like(L, OP_amax); }
int l_amin(lua_State* L) { return amax_like(L, OP_amin); }

int arg_like(lua_State* L, OpId op, const char* fn) {
    Tensor& x = check_tensor(L, 1);
    std::vector<Slot> a = read_params(L, fn, 2, {{"dim"}, KEEPDIM});
    int dim = dim_arg(L, a[0], fn, x.shape().ndim, -1);
    return push_tensor(L, ops::arg_reduce(op, x, dim, bool_arg(L, a[1], false)));
}

int l_argmax(lua_State* L) { return arg_like(L, OP_max, "argmax"); }
int l_argmin(lua_State* L) { return arg_like(L, OP_min, "argmin"); }

// var/std(dim, unbiased, keepdim) or (unbiased) or {dim =, unbiased =, correction =, keepdim =}.
int var_like(lua_State* L, bool is_std) {
    const char* fn = is_std ? "std" : "var";
    Tensor& x = check_tensor(L, 1);
    int first = 2;
    Slot unbiased_first;
    if (lua_isboolean(L, 2)) {   // PyTorch's var(input, unbiased)
        unbiased_first = Slot{2, 2, "unbiased"};
        first = 3;
        if (lua_gettop(L) >= 3 && !is_options_table(L, 3))
            arg_fail(3, "%s(unbiased) takes nothing more but an options table, got %s", fn, type_name_of(L, 3));
    }
    std::vector<Slot> a = read_params(L, fn, first, {{"dim"}, {"unbiased"}, KEEPDIM, {"correction"}});
    if (unbiased_first.given()) {
        if (a[1].given()) arg_fail(a[1].arg, "unbiased is given twice");
        a[1] = unbiased_first;
    }
    if (a[1].given() && a[3].given()) arg_fail(a[3].arg, "give unbiased or correction, not both");
    double correction = a[3].given() ? number_arg(L, a[3], 1) : (bool_arg(L, a[1], true) ? 1 : 0);
    uint32_t mask = dims_arg(L, a[0], fn, x.shape().ndim);
    bool keepdim = bool_arg(L, a[2], false);
    if (is_std) return push_tensor(L, ops::std_dev(x, mask, correction, keepdim));
    return push_tensor(L, ops::var(x, mask, correction, keepdim));
}

int l_var(lua_State* L) { return var_like(L, false); }
int l_std(lua_State* L) { return var_like(L, true); }

// norm(p, dim, keepdim): p a number, math.huge or -math.huge, or "fro" (2).
int l_norm(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    std::vector<Slot> a = read_params(L, "norm", 2, {{"p"}, {"dim"}, KEEPDIM, {"dtype"}});
    double p = 2;
    if (a[0].given()) {
        if (lua_type(L, a[0].at) == LUA_TSTRING) {
            if (strcmp(lua_tostring(L, a[0].at), "fro") != 0)
                arg_fail(a[0].arg, "p must be a number, math.huge or \"fro\", got \"%s\"", lua_tostring(L, a[0].at));
        } else {
            p = number_arg(L, a[0], 2);
        }
    }
    Tensor input = with_dtype(L, x, a[3]);
    uint32_t mask = dims_arg(L, a[1], "norm", x.shape().ndim);
    if (p < 0 && std::isinf(p))
        return push_tensor(L, ops::reduce_dims(OP_amin, ops::unary(OP_abs, input), mask, bool_arg(L, a[2], false)));
    return push_tensor(L, ops::norm(input, p, mask, bool_arg(L, a[2], false)));
}

int l_logsumexp(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    std::vector<Slot> a = read_params(L, "logsumexp", 2, {{"dim"}, KEEPDIM});
    require(a[0]);
    return push_tensor(L, ops::logsumexp(x, dims_arg(L, a[0], "logsumexp", x.shape().ndim), bool_arg(L, a[1], false)));
}

int l_cumsum(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    std::vector<Slot> a = read_params(L, "cumsum", 2, {{"dim"}, {"dtype"}});
    require(a[0]);
    Tensor input = with_dtype(L, x, a[1]);
    return push_tensor(L, ops::cumsum(input, dim_arg(L, a[0], "cumsum", x.shape().ndim, 0)));
}

// topk(k, dim = -1, largest = true, sorted = true): values and 1-based indices. The result is
// always sorted (sorted = false lets it be in any order, and sorted order is one).
int l_topk(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    std::vector<Slot> a = read_params(L, "topk", 2, {{"k"}, {"dim"}, {"largest"}, {"sorted"}});
    require(a[0]);
    int64_t k = int_arg(L, a[0], 0);
    int dim = dim_arg(L, a[1], "topk", x.shape().ndim, x.shape().ndim - 1);
    bool largest = bool_arg(L, a[2], true);
    bool_arg(L, a[3], true);
    if (x.shape().ndim == 0) engine_fail("topk: the tensor is 0-d (a single number)");
    return push_pair(L, ops::topk(x, k, dim, largest));
}

// sort(dim = -1, descending = false, stable = false): values and 1-based indices; always stable.
int l_sort(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    std::vector<Slot> a = read_params(L, "sort", 2, {{"dim"}, {"descending"}, {"stable"}});
    int dim = dim_arg(L, a[0], "sort", x.shape().ndim, x.shape().ndim - 1);
    bool descending = bool_arg(L, a[1], false);
    bool_arg(L, a[2], false);
    if (x.shape().ndim == 0) engine_fail("sort: the tensor is 0-d (a single number)");
    return push_pair(L, ops::sort(x, dim, descending));
}

// ============================================================================================
// [SECTION] shape

// torch.stack({a, b, ...}, dim = 1): a new dim at `dim`.
int l_stack(lua_State* L) {
    std::vector<Tensor> xs = tensor_list(L, 1);
    std::vector<Slot> a = read_params(L, "stack", 2, {{"dim"}});
    return push_tensor(L, ops::stack(xs, dim_arg(L, a[0], "stack", xs[0].shape().ndim + 1, 0)));
}

// split(size, dim = 1): pieces of `size` (the last smaller); split({s1, s2, ...}, dim): those sizes.
int l_split(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    std::vector<Slot> a = read_params(L, "split", 2, {{"split_size_or_sections"}, {"dim"}});
    require(a[0]);
    int dim = dim_arg(L, a[1], "split", x.shape().ndim, 0);
    if (lua_istable(L, a[0].at)) return push_views(L, ops::split(x, integers_arg(L, a[0]), dim));
    return push_views(L, ops::split_size(x, int_arg(L, a[0], 0), dim));
}

int l_chunk(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    std::vector<Slot> a = read_params(L, "chunk", 2, {{"chunks"}, {"dim"}});
    require(a[0]);
    return push_views(L, ops::chunk(x, int_arg(L, a[0], 0), dim_arg(L, a[1], "chunk", x.shape().ndim, 0)));
}

int l_unbind(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    std::vector<Slot> a = read_params(L, "unbind", 2, {{"dim"}});
    return push_views(L, ops::unbind(x, dim_arg(L, a[0], "unbind", x.shape().ndim, 0)));
}

// flip(d1, d2, ...) or flip({d1, d2, ...}) or flip{dims = ...}.
int l_flip(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    Slot dims;
    if (lua_gettop(L) >= 2 && is_options_table(L, 2)) {
        dims = read_params(L, "flip", 2, {{"dims"}})[0];
    } else if (lua_gettop(L) > 2 || lua_type(L, 2) == LUA_TNUMBER) {
        uint32_t mask = 0;
        for (int i = 2; i <= lua_gettop(L); ++i) {
            uint32_t bit = 1u << dim_of(L, i, i, "flip", x.shape().ndim);
            if (mask & bit) arg_fail(i, "dim %lld is given twice", static_cast<long long>(lua_tointeger(L, i)));
            mask |= bit;
        }
        return push_tensor(L, ops::flip(x, mask));
    } else {
        dims = Slot{lua_isnoneornil(L, 2) ? 0 : 2, 2, "dims"};
    }
    require(dims);
    uint32_t mask = dims_arg(L, dims, "flip", x.shape().ndim);
    if (mask == 0) return push_tensor(L, x);   // flip({}): nothing to reverse
    return push_tensor(L, ops::flip(x, mask));
}

// roll(shifts, dims): numbers or lists of the same length; without dims, the flattened tensor rolls.
int l_roll(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    std::vector<Slot> a = read_params(L, "roll", 2, {{"shifts"}, {"dims"}});
    require(a[0]);
    return push_tensor(L, ops::roll(x, integers_arg(L, a[0]), dim_list_arg(L, a[1], "roll", x.shape().ndim)));
}

int l_tile(lua_State* L) { return push_tensor(L, ops::tile(check_tensor(L, 1), sizes_from(L, "tile", 2))); }
int l_repeat(lua_State* L) { return push_tensor(L, ops::repeat(check_tensor(L, 1), sizes_from(L, "repeat", 2))); }

// unflatten(dim, sizes): sizes a list, one of which may be -1.
int l_unflatten(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    std::vector<Slot> a = read_params(L, "unflatten", 2, {{"dim"}, {"sizes"}});
    require(a[0]);
    require(a[1]);
    int dim = dim_arg(L, a[0], "unflatten", x.shape().ndim, 0);
    if (!lua_istable(L, a[1].at)) arg_fail(a[1].arg, "sizes must be a list like {2, 3}, got %s", type_name_of(L, a[1].at));
    std::vector<int64_t> sizes = integers_arg(L, a[1]);
    if (sizes.size() > MAX_DIMS) arg_fail(a[1].arg, "at most %d sizes", MAX_DIMS);
    Shape shape;
    for (int64_t s : sizes) shape.dims[shape.ndim++] = s;
    return push_view(L, ops::unflatten(x, dim, shape), 1);
}

// x:expand_as(other), view_as, reshape_as: views of x with other's shape (reshape_as copies when
// x's layout cannot be viewed so, as reshape; view_as refuses then, as view).
int as_other(lua_State* L, const char* fn, OpId op) {
    Tensor& x = check_tensor(L, 1);
    std::vector<Slot> a = read_params(L, fn, 2, {{"other"}});
    const Shape& shape = tensor_arg(L, a[0]).shape();
    if (op == OP_expand) return push_view(L, ops::expand(x, shape), 1);
    return push_view(L, op == OP_reshape ? ops::reshape(x, shape) : ops::view(x, shape), 1);
}

int l_expand_as(lua_State* L) { return as_other(L, "expand_as", OP_expand); }
int l_view_as(lua_State* L) { return as_other(L, "view_as", OP_COUNT); }
int l_reshape_as(lua_State* L) { return as_other(L, "reshape_as", OP_reshape); }

int l_index_select(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    std::vector<Slot> a = read_params(L, "index_select", 2, {{"dim"}, {"index"}});
    require(a[0]);
    int dim = dim_arg(L, a[0], "index_select", x.shape().ndim, 0);
    return push_tensor(L, ops::index_select(x, dim, tensor_arg(L, a[1])));
}

// scatter(dim, index, src) with src a tensor or a number (PyTorch's value).
int l_scatter(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    std::vector<Slot> a = read_params(L, "scatter", 2, {{"dim"}, {"index"}, {"src", "value"}});
    require(a[0]);
    require(a[2]);
    int dim = dim_arg(L, a[0], "scatter", x.shape().ndim, 0);
    Tensor& index = tensor_arg(L, a[1]);
    if (lua_type(L, a[2].at) == LUA_TNUMBER)
        return push_tensor(L, ops::scatter(x, dim, index, ops::create(OP_full, index.shape(), x.dtype(), lua_tonumber(L, a[2].at))));
    Tensor& src = tensor_arg(L, a[2]);
    if (src.shape() != index.shape()) {   // PyTorch reads the corner of src the index covers
        Tensor fitted = src;
        bool fits = src.shape().ndim == index.shape().ndim;
        for (int d = 0; fits && d < src.shape().ndim; ++d) {
            fits = index.shape().dims[d] <= src.shape().dims[d];
            if (fits && index.shape().dims[d] < src.shape().dims[d]) fitted = ops::narrow(fitted, d, 0, index.shape().dims[d]);
        }
        if (!fits) arg_fail(a[2].arg, "index shape %s is larger than source shape %s", index.shape().str().c_str(), src.shape().str().c_str());
        return push_tensor(L, ops::scatter(x, dim, index, fitted));
    }
    return push_tensor(L, ops::scatter(x, dim, index, src));
}

int l_scatter_add(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    std::vector<Slot> a = read_params(L, "scatter_add", 2, {{"dim"}, {"index"}, {"src"}});
    require(a[0]);
    int dim = dim_arg(L, a[0], "scatter_add", x.shape().ndim, 0);
    return push_tensor(L, ops::scatter_add_into(x, dim, tensor_arg(L, a[1]), tensor_arg(L, a[2])));
}

int l_diag(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    std::vector<Slot> a = read_params(L, "diag", 2, {{"diagonal"}});
    return push_tensor(L, ops::diag(x, int_arg(L, a[0], 0)));
}

// ============================================================================================
// [SECTION] products

int l_dot(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    std::vector<Slot> a = read_params(L, "dot", 2, {{"other", "tensor"}});
    return push_tensor(L, ops::dot(x, tensor_arg(L, a[0])));
}

int l_outer(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    std::vector<Slot> a = read_params(L, "outer", 2, {{"vec2"}});
    return push_tensor(L, ops::outer(x, tensor_arg(L, a[0])));
}

// addmm(input, mat1, mat2, {beta = 1, alpha = 1}): beta input + alpha mat1 mat2.
int l_addmm(lua_State* L) {
    Tensor& input = check_tensor(L, 1);
    std::vector<Slot> a = read_params(L, "addmm", 2, {{"mat1"}, {"mat2"}, {"beta"}, {"alpha"}});
    if (a[2].given() && a[2].arg == a[2].at) arg_fail(a[2].at, "beta is a keyword argument: addmm(input, mat1, mat2, {beta = ...})");
    if (a[3].given() && a[3].arg == a[3].at) arg_fail(a[3].at, "alpha is a keyword argument: addmm(input, mat1, mat2, {alpha = ...})");
    return push_tensor(L, ops::addmm(input, tensor_arg(L, a[0]), tensor_arg(L, a[1]), number_arg(L, a[2], 1),
                                     number_arg(L, a[3], 1)));
}

// torch.einsum("ij,jk->ik", a, b) or torch.einsum("ij,jk->ik", {a, b}).
int l_einsum(lua_State* L) {
    const char* equation = check_string(L, 1, "equation");
    std::vector<Tensor> operands;
    if (lua_gettop(L) == 2 && lua_istable(L, 2) && !tapedeck_test_tensor(L, 2)) {
        operands = tensor_list(L, 2);
    } else {
        for (int i = 2; i <= lua_gettop(L); ++i) operands.push_back(check_tensor(L, i));
    }
    if (operands.empty()) arg_fail(2, "needs at least one tensor");
    return push_tensor(L, ops::einsum(equation, operands));
}

}  // namespace

// ============================================================================================
// [SECTION] tables

namespace tdlua {

// Both torch.f(x, ...) and x:f(...).
#define DIM_KEEPDIM "dim keepdim keepdims"
const Binding reduce_shape_functions[] = {
    {"sum", l_sum, DIM_KEEPDIM " dtype"}, {"mean", l_mean, DIM_KEEPDIM " dtype"}, {"prod", l_prod, DIM_KEEPDIM " dtype"},
    {"max", l_max, DIM_KEEPDIM}, {"min", l_min, DIM_KEEPDIM}, {"amax", l_amax, DIM_KEEPDIM}, {"amin", l_amin, DIM_KEEPDIM},
    {"argmax", l_argmax, DIM_KEEPDIM}, {"argmin", l_argmin, DIM_KEEPDIM},
    {"var", l_var, "dim unbiased keepdim keepdims correction"}, {"std", l_std, "dim unbiased keepdim keepdims correction"},
    {"norm", l_norm, "p " DIM_KEEPDIM " dtype"}, {"logsumexp", l_logsumexp, DIM_KEEPDIM}, {"cumsum", l_cumsum, "dim dtype"},
    {"topk", l_topk, "k dim largest sorted"}, {"sort", l_sort, "dim descending stable"},
    {"split", l_split, "split_size_or_sections dim"}, {"chunk", l_chunk, "chunks dim"}, {"unbind", l_unbind, "dim"},
    {"flip", l_flip, "dims"}, {"roll", l_roll, "shifts dims"}, {"tile", l_tile}, {"unflatten", l_unflatten, "dim sizes"},
    {"index_select", l_index_select, "dim index"}, {"scatter", l_scatter, "dim index src value"},
    {"scatter_add", l_scatter_add, "dim index src"}, {"diag", l_diag, "diagonal"}, {"dot", l_dot, "other tensor"},
    {"outer", l_outer, "vec2"}, {"addmm", l_addmm, "mat1 mat2 beta alpha"},
    {nullptr, nullptr},
};
#undef DIM_KEEPDIM

// Only x:f(...), as in PyTorch (x:repeat is x["repeat"](x, ...) in Lua, `repeat` being a keyword).
const Binding reduce_shape_methods[] = {
    {"repeat", l_repeat}, {"expand_as", l_expand_as, "other"}, {"view_as", l_view_as, "other"},
    {"reshape_as", l_reshape_as, "other"},
    {nullptr, nullptr},
};

// Only torch.f(...).
const Binding reduce_shape_torch_functions[] = {
    {"stack", l_stack, "dim"}, {"einsum", l_einsum},
    {nullptr, nullptr},
};

}  // namespace tdlua
