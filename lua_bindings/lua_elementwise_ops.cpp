// lua_elementwise_ops.cpp: PyTorch's everyday creation and elementwise functions:
// arange linspace empty *_like randperm randint multinomial, tril triu, maximum minimum where ne,
// clamp (number or tensor bounds) clamp_min clamp_max, and the activations of F
// (torch.nn.functional): leaky_relu elu gelu silu softplus. isnan, isinf and isfinite come from
// the op table (lua_tensor_ops.cpp: table_unary_bindings, every one-tensor elementwise op).
//
// Conventions (docs/lua_api.md): positional arguments in PyTorch's order, keyword arguments in a
// trailing options table under PyTorch's names; an argument a function does not take is an error
// naming it; indices are 1-based. The tables at the end are registered in tapedeck_open.
//
// [SECTION] arguments      optional parameters by position or by name, numbers beside tensors
// [SECTION] creation       torch.arange linspace empty zeros_like ... randperm randint
// [SECTION] elementwise    maximum minimum where ne clamp clamp_min clamp_max tril triu multinomial
// [SECTION] functional     F.leaky_relu F.elu F.gelu F.silu F.softplus
// [SECTION] tables
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "lua_tensor.h"

using namespace td;
using namespace tdlua;

namespace {

// ============================================================================================
// [SECTION] arguments

// Where a function's optional parameters are: by position from stack slot `first` on, or by name
// in an options table after the positional ones. An unknown key, a parameter given both ways, or
// an argument past the last parameter is an error naming it.
struct OptionalArgs {
    static constexpr int MAX = 4;
    int at[MAX] = {};    // stack slot of each parameter's value; 0 when not given (or nil)
    int arg[MAX] = {};   // the argument an error about it names (the options table for a key)
};

OptionalArgs optional_args(lua_State* L, int first, std::initializer_list<const char*> names) {
    OptionalArgs a;
    int n = static_cast<int>(names.size());
    int top = lua_gettop(L);
    int options = 0;
    if (top >= first && lua_type(L, top) == LUA_TTABLE) options = top--;
    if (top - first + 1 > n) {
        std::string list;
        for (const char* name : names) list += std::string(list.empty() ? "" : ", ") + name;
        arg_fail(first + n, "one argument too many, got %s (the parameters after the tensor are %s)",
                 type_name_of(L, first + n), list.c_str());
    }
    for (int i = first; i <= top; ++i) {
        if (lua_isnil(L, i)) continue;
        a.at[i - first] = i;
        a.arg[i - first] = i;
    }
    if (!options) return a;
    std::string accepted;
    for (const char* name : names) accepted += std::string(accepted.empty() ? "" : " ") + name;
    options_check(L, options, accepted.c_str());
    int i = 0;
    for (const char* name : names) {
        if (lua_getfield(L, options, name) == LUA_TNIL) {
            lua_pop(L, 1);
        } else if (a.at[i]) {
            arg_fail(options, "%s is given twice: as argument %d and as an option", name, a.at[i]);
        } else {
            a.at[i] = lua_gettop(L);
            a.arg[i] = options;
        }
        ++i;
    }
    return a;
}

double number_arg(lua_State* L, const OptionalArgs& a, int i, const char* what, double default_value) {
    if (!a.at[i]) return default_value;
    if (lua_type(L, a.at[i]) != LUA_TNUMBER) arg_fail(a.arg[i], "%s must be a number, got %s", what, type_name_of(L, a.at[i]));
    return lua_tonumber(L, a.at[i]);
}

int64_t integer_arg(lua_State* L, const OptionalArgs& a, int i, const char* what, int64_t default_value) {
    if (!a.at[i]) return default_value;
    int is_integer = 0;
    lua_Integer v = lua_tointegerx(L, a.at[i], &is_integer);
    if (!is_integer) arg_fail(a.arg[i], "%s must be an integer, got %s", what, type_name_of(L, a.at[i]));
    return v;
}

bool boolean_arg(lua_State* L, const OptionalArgs& a, int i, const char* what, bool default_value) {
    if (!a.at[i]) return default_value;
    if (lua_type(L, a.at[i]) != LUA_TBOOLEAN) arg_fail(a.arg[i], "%s must be true or false, got %s", what, type_name_of(L, a.at[i]));
    return lua_toboolean(L, a.at[i]);
}

// Nothing after argument `last`.
void no_more_args(lua_State* L, int last) {
    if (lua_gettop(L) > last) arg_fail(last + 1, "one argument too many, got %s", type_name_of(L, last + 1));
}

// The tensor at idx, or a number there as a 0-d tensor beside `like`, as PyTorch wraps a number:
// like's dtype, except a fraction (or a Lua float) beside an int64 tensor, which is float32.
Tensor tensor_or_number(lua_State* L, int idx, const Tensor* like, const char* what) {
    if (Tensor* t = test_tensor(L, idx)) return *t;
    if (lua_type(L, idx) != LUA_TNUMBER) arg_fail(idx, "%s must be a tensor or a number, got %s", what, type_name_of(L, idx));
    DType dtype = like ? like->dtype() : (lua_isinteger(L, idx) ? DTYPE_I64 : DTYPE_F32);
    if (dtype == DTYPE_I64 && !lua_isinteger(L, idx)) dtype = DTYPE_F32;
    return ops::create(OP_full, Shape{}, dtype, lua_tonumber(L, idx));
}

// ============================================================================================
// [SECTION] creation

// torch.arange(end), arange(start, end [, step]) [, options]: PyTorch's count and values; int64
// when every number is a Lua integer, else float32 (unless options say the dtype).
int l_arange(lua_State* L) {
    int numbers = 0;
    while (numbers < 3 && lua_type(L, numbers + 1) == LUA_TNUMBER) ++numbers;
    if (numbers == 0) arg_fail(1, "end must be a number, got %s", type_name_of(L, 1));
    bool integers = true;
    for (int i = 1; i <= numbers; ++i) integers = integers && lua_isinteger(L, i);
    CreateOptions o = options_from_arg(L, numbers + 1, integers ? DTYPE_I64 : DTYPE_F32);
    no_more_args(L, numbers + 1);
    double start = numbers >= 2 ? lua_tonumber(L, 1) : 0;
    double end = numbers >= 2 ? lua_tonumber(L, 2) : lua_tonumber(L, 1);
    double step = numbers == 3 ? lua_tonumber(L, 3) : 1;
    return push_created(L, ops::arange_range(start, end, step, o.dtype, o.device), o);
}

// torch.linspace(start, end, steps [, options]): steps values from start to end (both included).
int l_linspace(lua_State* L) {
    double start = check_number(L, 1, "start");
    double end = check_number(L, 2, "end");
    int64_t steps = check_integer(L, 3, "steps");
    if (steps < 0) arg_fail(3, "steps must not be negative, got %lld", static_cast<long long>(steps));
    CreateOptions o = options_from_arg(L, 4, DTYPE_F32);
    no_more_args(L, 4);
    return push_created(L, ops::create_range(OP_linspace, Shape{steps}, o.dtype, start, end, o.device), o);
}

// torch.empty(d1, ... [, options]): uninitialised in PyTorch; zeros here (always defined values).
int l_empty(lua_State* L) {
    int next;
    Shape shape = shape_from_args(L, 1, &next);
    CreateOptions o = options_from_arg(L, next, DTYPE_F32);
    no_more_args(L, next);
    return push_created(L, ops::create(OP_zeros, shape, o.dtype, 0, o.device), o);
}

// zeros_like(x [, options]) and the others: x's shape, and its dtype unless options say another.
int create_like(lua_State* L, OpId op, bool with_value) {
    Tensor& x = check_tensor(L, 1);
    double value = with_value ? check_number(L, 2, "fill_value") : 0;
    int options = with_value ? 3 : 2;
    CreateOptions o = options_from_arg(L, options, x.dtype(), x.value().device());
    no_more_args(L, options);
    if ((op == OP_rand || op == OP_randn) && !dtype_is_float(o.dtype))
        arg_fail(lua_isnoneornil(L, options) ? 1 : options, "needs a float dtype, got %s", dtype_name(o.dtype));
    return push_created(L, ops::create(op, x.shape(), o.dtype, value, o.device), o);
}

int l_zeros_like(lua_State* L) { return create_like(L, OP_zeros, false); }
int l_ones_like(lua_State* L) { return create_like(L, OP_ones, false); }
int l_full_like(lua_State* L) { return create_like(L, OP_full, true); }
int l_rand_like(lua_State* L) { return create_like(L, OP_rand, false); }
int l_randn_like(lua_State* L) { return create_like(L, OP_randn, false); }

// torch.randperm(n [, options]): 1..n in a random order (1-based, as every index here), int64.
int l_randperm(lua_State* L) {
    int64_t n = check_integer(L, 1, "n");
    if (n < 0) arg_fail(1, "n must not be negative, got %lld", static_cast<long long>(n));
    CreateOptions o = options_from_arg(L, 2, DTYPE_I64);
    no_more_args(L, 2);
    return push_created(L, ops::create(OP_randperm, Shape{n}, o.dtype, 0, o.device), o);
}

// torch.randint(low, high, size [, options]) or randint(high, size [, options]): whole numbers
// uniform in [low, high) (low defaults to 0), int64 unless options say another dtype.
int l_randint(lua_State* L) {
    int numbers = 0;
    while (numbers < 2 && lua_type(L, numbers + 1) == LUA_TNUMBER) ++numbers;
    if (numbers == 0) arg_fail(1, "high must be an integer, got %s", type_name_of(L, 1));
    int64_t low = numbers == 2 ? check_integer(L, 1, "low") : 0;
    int64_t high = check_integer(L, numbers, "high");
    int size_arg = numbers + 1;
    if (!lua_istable(L, size_arg)) arg_fail(size_arg, "size must be a table like {2, 3}, got %s", type_name_of(L, size_arg));
    int next;
    Shape shape = shape_from_args(L, size_arg, &next);
    CreateOptions o = options_from_arg(L, next, DTYPE_I64);
    no_more_args(L, next);
    if (low >= high) arg_fail(numbers, "high (%lld) must be greater than low (%lld)", static_cast<long long>(high), static_cast<long long>(low));
    return push_created(L, ops::create_range(OP_randint, shape, o.dtype, static_cast<double>(low), static_cast<double>(high), o.device), o);
}

// ============================================================================================
// [SECTION] elementwise

int l_maximum(lua_State* L) {
    no_more_args(L, 2);
    return push_tensor(L, ops::maximum(check_tensor(L, 1), check_tensor(L, 2)));
}

int l_minimum(lua_State* L) {
    no_more_args(L, 2);
    return push_tensor(L, ops::minimum(check_tensor(L, 1), check_tensor(L, 2)));
}

// torch.where(condition, a, b): a where condition is non-zero (any dtype), else b; a and b may be
// numbers.
int where_of(lua_State* L, int condition, int a, int b) {
    Tensor& c = check_tensor(L, condition);
    Tensor* ta = test_tensor(L, a);
    Tensor* tb = test_tensor(L, b);
    Tensor x = tensor_or_number(L, a, ta ? ta : tb, "input");
    Tensor y = tensor_or_number(L, b, tb ? tb : &x, "other");
    return push_tensor(L, ops::where(c, x, y));
}

int l_where(lua_State* L) {
    if (lua_gettop(L) == 1)
        arg_fail(2, "where(condition) alone (the indices of non-zero elements) is not supported; give where(condition, input, other)");
    no_more_args(L, 3);
    return where_of(L, 1, 2, 3);
}

int l_where_method(lua_State* L) {   // x:where(condition, y) is torch.where(condition, x, y), as PyTorch
    no_more_args(L, 3);
    return where_of(L, 2, 1, 3);
}

// x:ne(y): 1 where x ~= y, else 0 (in the float dtype); y a tensor or a number.
int l_ne(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    no_more_args(L, 2);
    if (lua_type(L, 2) == LUA_TNUMBER) {   // a float number beside an int64 tensor compares in float64
        DType dtype = x.dtype() == DTYPE_I64 && !lua_isinteger(L, 2) ? DTYPE_F64 : x.dtype();
        return push_tensor(L, ops::compare(OP_ne, x, ops::create(OP_full, Shape{}, dtype, lua_tonumber(L, 2))));
    }
    return push_tensor(L, ops::compare(OP_ne, x, check_tensor(L, 2)));
}

// A clamp bound at stack slot idx: none (nil), a number, or a tensor.
struct Bound {
    bool given = false;
    double number = 0;
    Tensor* tensor = nullptr;
};

Bound bound_at(lua_State* L, int idx, int arg, const char* what) {
    Bound b;
    if (!idx || lua_isnil(L, idx)) return b;
    b.given = true;
    b.tensor = test_tensor(L, idx);
    if (!b.tensor && lua_type(L, idx) != LUA_TNUMBER)
        arg_fail(arg, "%s must be a number or a tensor, got %s", what, type_name_of(L, idx));
    if (!b.tensor) b.number = lua_tonumber(L, idx);
    return b;
}

// x clamped to the bounds: numbers give the clamp op; a tensor bound gives clamp_min / clamp_max
// (a number beside it becomes a 0-d tensor of x's dtype).
Tensor clamp_with(lua_State* L, const Tensor& x, const Bound& lo, const Bound& hi) {
    if (!lo.tensor && !hi.tensor) {
        return ops::clamp(x, lo.given ? lo.number : -INFINITY, hi.given ? hi.number : INFINITY);
    }
    (void)L;
    Tensor lo_t = lo.tensor ? *lo.tensor : ops::create(OP_full, Shape{}, x.dtype(), lo.number);
    Tensor hi_t = hi.tensor ? *hi.tensor : ops::create(OP_full, Shape{}, x.dtype(), hi.number);
    return ops::clamp_tensor(x, lo.given ? &lo_t : nullptr, hi.given ? &hi_t : nullptr);
}

// clamp(x, min, max) or clamp(x, {min =, max =}); a missing bound is no bound; bounds are numbers
// or tensors (broadcast with x).
int l_clamp(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    OptionalArgs a = optional_args(L, 2, {"min", "max"});
    Bound lo = bound_at(L, a.at[0], a.arg[0], "min"), hi = bound_at(L, a.at[1], a.arg[1], "max");
    if (!lo.given && !hi.given) arg_fail(2, "give min, max or both, as clamp{min=0}");
    return push_tensor(L, clamp_with(L, x, lo, hi));
}

int clamp_one_side(lua_State* L, bool is_min) {
    Tensor& x = check_tensor(L, 1);
    const char* what = is_min ? "min" : "max";
    OptionalArgs a = optional_args(L, 2, {what});
    Bound b = bound_at(L, a.at[0], a.arg[0], what);
    if (!b.given) arg_fail(2, "%s must be a number or a tensor, got nothing", what);
    return push_tensor(L, is_min ? clamp_with(L, x, b, Bound()) : clamp_with(L, x, Bound(), b));
}

int l_clamp_min(lua_State* L) { return clamp_one_side(L, true); }
int l_clamp_max(lua_State* L) { return clamp_one_side(L, false); }

// tril(x [, diagonal]) / triu: diagonal 0 is the main one, positive above it, negative below.
int triangle(lua_State* L, OpId op) {
    Tensor& x = check_tensor(L, 1);
    OptionalArgs a = optional_args(L, 2, {"diagonal"});
    return push_tensor(L, ops::triangle(op, x, integer_arg(L, a, 0, "diagonal", 0)));
}

int l_tril(lua_State* L) { return triangle(L, OP_tril); }
int l_triu(lua_State* L) { return triangle(L, OP_triu); }

// multinomial(probs, num_samples [, replacement]) or (probs, n, {replacement = true}): 1-based int64.
int l_multinomial(lua_State* L) {
    Tensor& probs = check_tensor(L, 1);
    OptionalArgs a = optional_args(L, 2, {"num_samples", "replacement"});
    if (!a.at[0]) arg_fail(2, "num_samples must be an integer, got nothing");
    int64_t n = integer_arg(L, a, 0, "num_samples", 0);
    return push_tensor(L, ops::multinomial(probs, n, boolean_arg(L, a, 1, "replacement", false)));
}

// ============================================================================================
// [SECTION] functional

int l_leaky_relu(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    OptionalArgs a = optional_args(L, 2, {"negative_slope"});
    return push_tensor(L, ops::activation(OP_leaky_relu, x, number_arg(L, a, 0, "negative_slope", 0.01)));
}

int l_elu(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    OptionalArgs a = optional_args(L, 2, {"alpha"});
    return push_tensor(L, ops::activation(OP_elu, x, number_arg(L, a, 0, "alpha", 1.0)));
}

// gelu(x [, {approximate = "none" | "tanh"}]) (or the string as argument 2)
int l_gelu(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    OptionalArgs a = optional_args(L, 2, {"approximate"});
    double tanh_form = 0;
    if (a.at[0]) {
        const char* name = lua_type(L, a.at[0]) == LUA_TSTRING ? lua_tostring(L, a.at[0]) : nullptr;
        if (!name || (strcmp(name, "none") != 0 && strcmp(name, "tanh") != 0))
            arg_fail(a.arg[0], "approximate must be \"none\" or \"tanh\", got %s", name ? name : type_name_of(L, a.at[0]));
        tanh_form = strcmp(name, "tanh") == 0 ? 1 : 0;
    }
    return push_tensor(L, ops::activation(OP_gelu, x, tanh_form));
}

int l_silu(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    no_more_args(L, 1);
    return push_tensor(L, ops::activation(OP_silu, x));
}

int l_softplus(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    OptionalArgs a = optional_args(L, 2, {"beta", "threshold"});
    return push_tensor(L, ops::activation(OP_softplus, x, number_arg(L, a, 0, "beta", 1), number_arg(L, a, 1, "threshold", 20)));
}

}  // namespace

// ============================================================================================
// [SECTION] tables

namespace tdlua {

const Binding elementwise_tensor_functions[] = {   // torch.f(x, ...) and x:f(...)
    {"maximum", l_maximum}, {"minimum", l_minimum}, {"ne", l_ne}, {"clamp", l_clamp, "min max"},
    {"clamp_min", l_clamp_min, "min"}, {"clamp_max", l_clamp_max, "max"}, {"tril", l_tril, "diagonal"},
    {"triu", l_triu, "diagonal"}, {"multinomial", l_multinomial, "num_samples replacement"},
    {nullptr, nullptr},
};

const Binding elementwise_torch_only[] = {
    {"arange", l_arange, CREATE_OPTIONS}, {"linspace", l_linspace, CREATE_OPTIONS}, {"empty", l_empty, CREATE_OPTIONS},
    {"zeros_like", l_zeros_like, CREATE_OPTIONS}, {"ones_like", l_ones_like, CREATE_OPTIONS},
    {"full_like", l_full_like, CREATE_OPTIONS}, {"rand_like", l_rand_like, CREATE_OPTIONS},
    {"randn_like", l_randn_like, CREATE_OPTIONS}, {"randperm", l_randperm, CREATE_OPTIONS},
    {"randint", l_randint, CREATE_OPTIONS}, {"where", l_where},
    {nullptr, nullptr},
};

const Binding elementwise_method_only[] = {
    {"where", l_where_method},
    {nullptr, nullptr},
};

const Binding elementwise_functional[] = {   // F.f (torch.nn.functional) only, as in PyTorch
    {"leaky_relu", l_leaky_relu, "negative_slope"}, {"elu", l_elu, "alpha"}, {"gelu", l_gelu, "approximate"},
    {"silu", l_silu}, {"softplus", l_softplus, "beta threshold"},
    {nullptr, nullptr},
};

}  // namespace tdlua
