// lua_tensor_ops.cpp: the everyday tensor functions, each both torch.f(x, ...) and x:f(...) unless
// said: creation (torch.tensor zeros ones full rand randn eye manual_seed; arange and the rest:
// lua_elementwise_ops.cpp), arithmetic and its operators (a + b, -a, a ^ p), elementwise
// comparisons, every one-tensor op of the op table, matrix products, shape views, cat, gather,
// the in-place ops (x:add_ ... x:copy_) and x:new_zeros and its kin. The tables at the end are
// registered in tapedeck_open (lua_tensor.cpp).
//
// [SECTION] creation
// [SECTION] arithmetic     add sub mul div pow, comparisons, masked_fill, the op table's one-tensor ops
// [SECTION] shape          t transpose reshape flatten unsqueeze squeeze expand narrow cat gather
// [SECTION] in-place       add_ sub_ mul_ masked_fill_ zero_ fill_ copy_; new_zeros new_ones new_full
// [SECTION] tables
#include <algorithm>
#include <string>
#include <vector>

#include "lua_tensor.h"

using namespace td;
using namespace tdlua;

namespace {

// ============================================================================================
// [SECTION] creation

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
// [SECTION] arithmetic

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

// add and sub's alpha (a + alpha b) from the options table at idx: keyword-only, as in PyTorch
// (torch.add(a, b, {alpha = 2})); 1 when not given. mul and div take nothing after their operands.
// An integer alpha is required when both operands are integers (int64 tensors or Lua integers).
double alpha_option(lua_State* L, int idx, Arith kind, const char* name) {
    if (lua_isnoneornil(L, idx)) return 1.0;
    bool takes_alpha = kind == ARITH_ADD || kind == ARITH_SUB;
    if (!takes_alpha) arg_fail(idx, "%s takes two operands, got a %s after them", name, type_name_of(L, idx));
    if (!lua_istable(L, idx) || test_tensor(L, idx))
        arg_fail(idx, "alpha is keyword-only, as in PyTorch: torch.%s(a, b, {alpha = 2}), got %s", name, type_name_of(L, idx));
    lua_getfield(L, idx, "alpha");
    int is_number = 0;
    double alpha = lua_isnil(L, -1) ? 1.0 : lua_tonumberx(L, -1, &is_number);
    bool integer = lua_isnil(L, -1) || lua_isinteger(L, -1);
    if (!lua_isnil(L, -1) && !is_number) arg_fail(idx, "alpha must be a number, got %s", type_name_of(L, -1));
    lua_pop(L, 1);
    auto integral = [&](int i) { return test_tensor(L, i) ? test_tensor(L, i)->dtype() == DTYPE_I64 : lua_isinteger(L, i); };
    if (!integer && integral(1) && integral(2))
        arg_fail(idx, "alpha must be an integer when both operands are integers, got %g (as PyTorch)", alpha);
    return alpha;
}

// a (+ - * /) b where either side may be a number; add and sub scale b by alpha.
int arith(lua_State* L, Arith kind, const char* name) {
    Tensor* a = test_tensor(L, 1);
    Tensor* b = test_tensor(L, 2);
    double alpha = alpha_option(L, 3, kind, name);
    Tensor scaled_b = b && alpha != 1.0 ? ops::mul_scalar(*b, alpha) : Tensor();
    if (scaled_b.defined()) b = &scaled_b;
    if (a && b) {
        switch (kind) {
            case ARITH_ADD: return push_tensor(L, ops::add(*a, *b));
            case ARITH_SUB: return push_tensor(L, ops::sub(*a, *b));
            case ARITH_MUL: return push_tensor(L, ops::mul(*a, *b));
            case ARITH_DIV: return push_tensor(L, ops::div(*a, *b));
        }
    }
    if (a && lua_type(L, 2) == LUA_TNUMBER) {
        double s = lua_tonumber(L, 2) * alpha;
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

int l_mm(lua_State* L) { return push_tensor(L, ops::mm(check_tensor(L, 1), check_tensor(L, 2))); }
int l_bmm(lua_State* L) { return push_tensor(L, ops::bmm(check_tensor(L, 1), check_tensor(L, 2))); }
int l_matmul(lua_State* L) { return push_tensor(L, ops::matmul(check_tensor(L, 1), check_tensor(L, 2))); }

// ============================================================================================
// [SECTION] shape

// flatten(x [, start_dim [, end_dim]]): dims start_dim..end_dim merged into one (default: all).
int l_flatten(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    int ndim = std::max(x.shape().ndim, 1);   // a 0-d tensor flattens as if it were [1]
    int start = lua_isnoneornil(L, 2) ? 0 : check_dim(L, 2, "flatten", ndim);
    int end = lua_isnoneornil(L, 3) ? ndim - 1 : check_dim(L, 3, "flatten", ndim);
    return push_view(L, ops::flatten(x, start, end), 1);
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

int l_gather(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    int dim = check_dim(L, 2, "gather", x.shape().ndim);
    return push_tensor(L, ops::gather(x, dim, check_tensor(L, 3)));
}

// ============================================================================================
// [SECTION] in-place

// add_ and sub_'s alpha: a number (x:add_(y, 0.5), tapedeck's spelling) or {alpha = 0.5} (PyTorch's).
double alpha_of(lua_State* L, int idx) {
    if (lua_isnoneornil(L, idx)) return 1.0;
    if (!lua_istable(L, idx) || test_tensor(L, idx)) return check_number(L, idx, "alpha");
    lua_getfield(L, idx, "alpha");
    int is_number = 0;
    double alpha = lua_isnil(L, -1) ? 1.0 : lua_tonumberx(L, -1, &is_number);
    if (!lua_isnil(L, -1) && !is_number) arg_fail(idx, "alpha must be a number, got %s", type_name_of(L, -1));
    lua_pop(L, 1);
    return alpha;
}

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

// ============================================================================================
// [SECTION] tables

}  // namespace

namespace tdlua {

const Binding* table_unary_bindings() {
    static const std::vector<Binding> bindings = [] {
        std::vector<Binding> list;
        for (int i = 0; i < OP_COUNT; ++i)
            if (op_is_simple_method(static_cast<OpId>(i))) list.push_back({op_table[i].name, l_table_unary, nullptr, nullptr, i});
        list.push_back({nullptr, nullptr});
        return list;
    }();
    return bindings.data();
}

const Binding tensor_op_functions[] = {
    {"add", l_add, "alpha"}, {"sub", l_sub, "alpha"}, {"mul", l_mul}, {"div", l_div}, {"pow", l_pow}, {"eq", l_eq},
    {"lt", l_lt}, {"le", l_le}, {"gt", l_gt}, {"ge", l_ge}, {"masked_fill", l_masked_fill},
    {"mm", l_mm}, {"bmm", l_bmm}, {"matmul", l_matmul},
    {"t", l_t}, {"transpose", l_transpose}, {"reshape", l_reshape}, {"flatten", l_flatten},
    {"unsqueeze", l_unsqueeze}, {"squeeze", l_squeeze},
    {"expand", l_expand}, {"narrow", l_narrow}, {"gather", l_gather},
    {"detach", l_detach},
    {nullptr, nullptr},
};

const Binding tensor_op_method_only[] = {
    {"add_", l_add_, "alpha"}, {"sub_", l_sub_, "alpha"}, {"mul_", l_mul_}, {"masked_fill_", l_masked_fill_}, {"zero_", l_zero_}, {"fill_", l_fill_},
    {"copy_", l_copy_}, {"new_zeros", l_new_zeros, CREATE_OPTIONS}, {"new_ones", l_new_ones, CREATE_OPTIONS},
    {"new_empty", l_new_zeros, CREATE_OPTIONS}, {"new_full", l_new_full, CREATE_OPTIONS},
    {nullptr, nullptr},
};

const Binding tensor_op_torch_only[] = {
    {"tensor", l_tensor, CREATE_OPTIONS}, {"zeros", l_zeros, CREATE_OPTIONS}, {"ones", l_ones, CREATE_OPTIONS},
    {"full", l_full, CREATE_OPTIONS}, {"rand", l_rand, CREATE_OPTIONS}, {"randn", l_randn, CREATE_OPTIONS},
    {"eye", l_eye, CREATE_OPTIONS}, {"manual_seed", l_manual_seed}, {"cat", l_cat},
    {nullptr, nullptr},
};

// Errors name the operation as the user wrote it: `a + b` is add, `-a` neg.
const Binding tensor_op_metamethods[] = {
    {"__add", l_add, nullptr, "add"}, {"__sub", l_sub, nullptr, "sub"}, {"__mul", l_mul, nullptr, "mul"}, {"__div", l_div, nullptr, "div"},
    {"__pow", l_pow, nullptr, "pow"}, {"__unm", l_neg, nullptr, "neg"},
    {nullptr, nullptr},
};

}  // namespace tdlua
