// lua_views.cpp: views from Lua, Torch7-style indexing, and writing through views.
//
// A view (x:t(), x:narrow(...), x[i], ...) is a Tensor userdata whose user value is the userdata of
// the tensor it was taken from (its base: the first one in the chain, never a view itself). A write
// through the view that autograd must see (the view, the base or the written value requires grad)
// is recorded on the base: assign_(base, new values of the region) rebases the base's handle, as
// PyTorch rebases the base's history, and the view is taken again from the new base. Writes that
// autograd need not see go straight into the shared storage.
//
// [SECTION] views and their bases
// [SECTION] indexing       t[i], t[{i, j}], t[{ {}, {2, 4} }], t[{ {1, -1, 2} }]
// [SECTION] bindings
#include <cmath>
#include <cstring>

#include "lua_tensor.h"
#include "plan.h"
#include "tapedeck_lua.h"

using namespace td;

namespace tdlua {

// ============================================================================================
// [SECTION] views and their bases

int push_view(lua_State* L, Tensor view, int base_idx) {
    base_idx = lua_absindex(L, base_idx);
    const Tensor& base = check_tensor(L, base_idx);
    bool shares = view.value().storage.get() == base.value().storage.get();
    if (!shares) return push_tensor(L, std::move(view));   // reshape copied: not a view
    push_tensor_with_slots(L, std::move(view), 1);
    if (lua_getiuservalue(L, base_idx, 1) != LUA_TUSERDATA) {   // the base is no view: it is the root
        lua_pop(L, 1);
        lua_pushvalue(L, base_idx);
    }
    lua_setiuservalue(L, -2, 1);
    return 1;
}

// The stack slot of the root base of the view at idx (pushed), or 0 (nothing pushed) when it is none.
static int push_base_of(lua_State* L, int idx) {
    if (lua_getiuservalue(L, idx, 1) != LUA_TUSERDATA || !test_tensor(L, -1)) {   // none: not a view
        lua_pop(L, 1);
        return 0;
    }
    return lua_gettop(L);
}

// The write through `view` (a Lua view of the base at base_idx) with autograd: the region's new
// values are assigned into the base, whose handle moves to the write; `view` is taken again.
static void assign_through(Tensor& base, Tensor& view, const Tensor& values) {
    if (!base.value().is_contiguous())
        engine_fail("writing through a view of a tensor that is itself laid out as a view (#%lld): clone() the base "
                    "first",
                    static_cast<long long>(base.id()));
    OpAttrs region = ops::region_of_view(view, base);
    Tensor fitted = values;
    if (fitted.dtype() != base.dtype()) fitted = ops::to(fitted, base.dtype());
    if (fitted.shape() != region.shape) fitted = ops::expand(fitted, region.shape);
    ops::assign_(base, fitted, region);
    view = ops::as_strided(base, region);
}

static bool any_requires_grad(std::initializer_list<const Tensor*> tensors) {
    for (const Tensor* t : tensors)
        if (t && t->defined() && t->requires_grad()) return true;
    return false;
}

void run_inplace(lua_State* L, const std::function<void(Tensor&)>& op, std::initializer_list<const Tensor*> operands) {
    Tensor& x = check_tensor(L, 1);
    int base_idx = grad_enabled() ? push_base_of(L, 1) : 0;
    if (!base_idx) {
        op(x);
        return;
    }
    Tensor& base = check_tensor(L, base_idx);
    bool tracked = x.requires_grad() || base.requires_grad() || any_requires_grad(operands);
    if (!tracked) {
        op(x);
    } else {
        Tensor updated = ops::unary(OP_clone, x);   // the view's new values, computed on a copy
        op(updated);
        assign_through(base, x, updated);
    }
    lua_pop(L, 1);
}

// ============================================================================================
// [SECTION] indexing

namespace {

// A 1-based index (negative: from the end) along a dim of `size`, as a 0-based one.
int64_t index_along(int64_t i, int64_t size, int dim) {
    int64_t at = i < 0 ? i + size : i - 1;
    if (at < 0 || at >= size)
        engine_fail("index %lld out of range for dim %d of size %lld", static_cast<long long>(i), dim + 1,
                    static_cast<long long>(size));
    return at;
}

// One entry of t[{...}] applied at `dim` of x: a number selects (the dim goes), {} keeps all,
// {a}, {a, b} or {a, b, step} takes a range (inclusive, 1-based, negative from the end). Returns
// the dim the next entry applies to.
// `user_dim` is the dim as the user counts it (a number before it removed a dim).
int apply_index_entry(lua_State* L, int entry, Tensor& x, int dim, int user_dim) {
    if (dim >= x.shape().ndim)
        engine_fail("index: too many indices for a tensor of shape %s", x.shape().str().c_str());
    int64_t size = x.shape().dims[dim];
    if (lua_isinteger(L, entry)) {
        x = ops::select(x, dim, index_along(lua_tointeger(L, entry), size, user_dim));
        return dim;
    }
    if (!lua_istable(L, entry))
        engine_fail("index: each index is an integer or a range table {first, last[, step]}, got %s",
                    type_name_of(L, entry));
    lua_Integer n = luaL_len(L, entry);
    if (n > 3) engine_fail("index: a range is {first, last[, step]}, got %lld numbers", static_cast<long long>(n));
    int64_t bounds[3] = {1, -1, 1};
    for (lua_Integer k = 1; k <= n; ++k) {
        lua_geti(L, entry, k);
        if (!lua_isinteger(L, -1)) engine_fail("index: range entries must be integers, got %s", type_name_of(L, -1));
        bounds[k - 1] = lua_tointeger(L, -1);
        lua_pop(L, 1);
    }
    if (n == 1) bounds[1] = bounds[0];
    if (bounds[2] <= 0) engine_fail("index: a range's step must be positive, got %lld", static_cast<long long>(bounds[2]));
    if (size == 0) return dim + 1;
    int64_t first = index_along(bounds[0], size, user_dim), last = index_along(bounds[1], size, user_dim);
    int64_t span = last < first ? 0 : last - first + 1;
    x = ops::narrow(x, dim, first, span);
    if (bounds[2] != 1 && span > 1) {   // every step-th element: a longer stride along dim (of a copy when
        Tensor packed = ops::contiguous(x);  // x is not contiguous: then the result is no view of t)
        OpAttrs region;
        region.shape = x.shape();
        region.shape.dims[dim] = (span - 1) / bounds[2] + 1;
        region.strides.ndim = region.shape.ndim;
        shape_contiguous_strides(x.shape(), region.strides.dims);
        region.strides.dims[dim] *= bounds[2];
        x = ops::as_strided(packed, region);
    }
    return dim + 1;
}

// The view that t[key] names, for an integer key or a table of entries.
Tensor index_view(lua_State* L, const Tensor& t, int key) {
    Tensor x = t;
    if (lua_isinteger(L, key)) {
        if (x.shape().ndim == 0) engine_fail("index: a 0-d tensor has no elements to index (use item())");
        apply_index_entry(L, key, x, 0, 0);
        return x;
    }
    lua_Integer n = luaL_len(L, key);
    int dim = 0;
    for (lua_Integer k = 1; k <= n; ++k) {
        lua_geti(L, key, k);
        dim = apply_index_entry(L, lua_gettop(L), x, dim, static_cast<int>(k) - 1);
        lua_pop(L, 1);
    }
    return x;
}

}  // namespace

// The 1-based positions (int64, 1-d) where `mask`, broadcast to `shape`, is non-zero, counted over
// the flattened shape. The mask's values decide the result's size: a frozen function records
// them as a guard (a replay with another mask fails loudly instead of reusing these positions).
// The mask is read on the host; the positions go to the mask's device.
static Tensor mask_positions(const Tensor& mask, const Shape& shape, const char* what) {
    Shape full = broadcast_shapes(what, mask.shape(), shape);
    if (full != shape)
        engine_fail("%s: a mask of shape %s does not fit a tensor of shape %s", what, mask.shape().str().c_str(),
                    shape.str().c_str());
    if (plan_recording()) plan_record_note_values(mask, locate_in_lua(nullptr), what);
    Value m = value_contiguous(value_to_host(ops::expand(mask, shape).value()));
    std::vector<double> positions;
    for (int64_t i = 0; i < m.numel(); ++i)
        if (value_get(m, i) != 0) positions.push_back(static_cast<double>(i + 1));
    Shape s{static_cast<int64_t>(positions.size())};
    return ops::to_device(ops::from_values(s, DTYPE_I64, positions.data()), mask.value().device());
}

// t[index]'s shape: the index's shape, then t's dims after the first.
static Shape indexed_shape(const Tensor& t, const Tensor& index) {
    Shape s = index.shape();
    if (s.ndim + t.shape().ndim - 1 > MAX_DIMS)
        engine_fail("a %d-d index into a %d-d tensor would give more than %d dims", s.ndim, t.shape().ndim, MAX_DIMS);
    for (int d = 1; d < t.shape().ndim; ++d) s.dims[s.ndim++] = t.shape().dims[d];
    return s;
}

// t[index] with an int64 tensor: index_select along dim 1 (a copy); the index may have any shape,
// which replaces dim 1 (as PyTorch's t[index]).
static Tensor index_with_tensor(const Tensor& t, const Tensor& index) {
    if (t.shape().ndim == 0) engine_fail("index: a 0-d tensor has no elements to index (use item())");
    Tensor flat = index.shape().ndim == 1 ? index : ops::reshape(index, Shape{index.numel()});
    Shape s = indexed_shape(t, index);
    Tensor picked = ops::index_select(t, 0, flat);
    if (index.shape().ndim == 1) return picked;
    return ops::reshape(picked, s);
}

int index_read(lua_State* L) {
    Tensor& t = check_tensor(L, 1);
    if (Tensor* key = test_tensor(L, 2)) {
        if (key->dtype() == DTYPE_I64) return push_tensor(L, index_with_tensor(t, *key));
        // t[mask]: the elements where mask is non-zero, in order (masked_select: a 1-d copy)
        Tensor flat = ops::reshape(t, Shape{t.numel()});
        return push_tensor(L, ops::index_select(flat, 0, mask_positions(*key, t.shape(), "index")));
    }
    return push_view(L, index_view(L, t, 2), 1);
}

// Writes `value` into the view of slot 1 that `view` is: recorded on the base when autograd must
// see it (see the file's comment), else straight into the storage.
static void write_view(lua_State* L, Tensor& t, Tensor view, const Tensor& value);

// t[index] = value with an int64 index: each indexed slice along dim 1 is assigned in turn (the
// value broadcasts to t[index]'s shape; with repeated indices the last write wins, as PyTorch).
static void assign_with_index(lua_State* L, Tensor& t, const Tensor& index, const Tensor& value) {
    if (t.shape().ndim == 0) engine_fail("a 0-d tensor has no elements to index (use fill_)");
    Value positions = value_contiguous(value_to_host(index.value()));   // read on the host
    Shape target = indexed_shape(t, index);
    Tensor values = ops::expand(value, target);
    Tensor rows = ops::reshape(ops::contiguous(values), Shape{positions.numel(), t.numel() / std::max<int64_t>(t.shape().dims[0], 1)});
    int64_t size = t.shape().dims[0];
    for (int64_t i = 0; i < positions.numel(); ++i) {
        int64_t at = positions.data<int64_t>()[i];
        if (at == 0 || at < -size || at > size)
            engine_fail("index %lld out of range for dim 1 of size %lld", static_cast<long long>(at), static_cast<long long>(size));
        Tensor slice = ops::select(t, 0, at > 0 ? at - 1 : size + at);
        write_view(L, t, slice, ops::reshape(ops::select(rows, 0, i), slice.shape()));
    }
}

// t[key] = value: a number or a tensor (broadcast to the indexed region).
int index_assign(lua_State* L) {
    Tensor& t = check_tensor(L, 1);
    Tensor value = lua_type(L, 3) == LUA_TNUMBER ? operand_of(L, 3, t) : check_tensor(L, 3);
    if (Tensor* key = test_tensor(L, 2)) {
        if (key->dtype() != DTYPE_I64) engine_fail("a tensor index is an int64 index or a mask (x[mask] = number)");
        Tensor index = *key;
        assign_with_index(L, t, index, value);
        return 0;
    }
    write_view(L, t, index_view(L, t, 2), value);
    return 0;
}

static void write_view(lua_State* L, Tensor& t, Tensor view, const Tensor& value) {
    if (value.dtype() == DTYPE_F64 && t.dtype() == DTYPE_I64)   // a fraction into int64: refused as copy_ does
        engine_fail("the tensor is int64 but the value is float64; an int64 tensor holds whole numbers only");
    int base_idx = push_base_of(L, 1);
    Tensor* base = base_idx ? &check_tensor(L, base_idx) : &t;
    bool tracked = grad_enabled() && (t.requires_grad() || base->requires_grad() || value.requires_grad());
    if (!tracked) {
        ops::copy_(view, value);
    } else if (base_idx) {   // t is a view itself: write into the root, then take t again from it
        OpAttrs t_region = ops::region_of_view(t, *base);
        assign_through(*base, view, value);
        t = ops::as_strided(*base, t_region);
    } else {
        assign_through(t, view, value);
    }
    if (base_idx) lua_pop(L, 1);
}

// ============================================================================================
// [SECTION] bindings

namespace {

int l_permute(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    int next;
    Shape dims = shape_from_args(L, 2, &next);
    if (!lua_isnone(L, next)) arg_fail(next, "permute takes the dims only, got %s", type_name_of(L, next));
    for (int i = 0; i < dims.ndim; ++i) dims.dims[i] = dim_normalize("permute", dims.dims[i], x.shape().ndim);
    return push_view(L, ops::permute(x, dims), 1);
}

int l_select(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    int dim = check_dim(L, 2, "select", x.shape().ndim);
    int64_t index = index_along(check_integer(L, 3, "index"), x.shape().dims[dim], dim);
    return push_view(L, ops::select(x, dim, index), 1);
}

int l_view(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    int next;
    Shape shape = shape_from_args(L, 2, &next);
    return push_view(L, ops::view(x, shape), 1);
}

int l_contiguous(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    if (x.value().is_contiguous()) {
        lua_settop(L, 1);
        return 1;
    }
    return push_tensor(L, ops::contiguous(x));
}

int l_is_contiguous(lua_State* L) {
    lua_pushboolean(L, check_tensor(L, 1).value().is_contiguous());
    return 1;
}

// x:stride() is every dim's stride (a table), x:stride(d) one of them: elements, as PyTorch.
int l_stride(lua_State* L) {
    const Value& v = check_tensor(L, 1).value();
    if (!lua_isnoneornil(L, 2)) {
        lua_pushinteger(L, v.stride(check_dim(L, 2, "stride", v.shape.ndim)));
        return 1;
    }
    lua_createtable(L, v.shape.ndim, 0);
    for (int d = 0; d < v.shape.ndim; ++d) {
        lua_pushinteger(L, v.stride(d));
        lua_rawseti(L, -2, d + 1);
    }
    return 1;
}

int l_storage_offset(lua_State* L) {
    lua_pushinteger(L, check_tensor(L, 1).value().offset);
    return 1;
}

// torch.equal(a, b): same shape and every element equal (a Lua boolean; `==` on tensors compares
// the handles, as Lua's == must return a boolean).
int l_equal(lua_State* L) {
    Value a = value_to_host(check_tensor(L, 1).value()), b = value_to_host(check_tensor(L, 2).value());
    bool same = a.shape == b.shape;
    for (int64_t i = 0; same && i < a.numel(); ++i) same = value_get(a, i) == value_get(b, i);
    lua_pushboolean(L, same);
    return 1;
}

// torch.allclose(a, b, {rtol = 1e-5, atol = 1e-8, equal_nan = false}): |a - b| <= atol + rtol |b|
// everywhere, with broadcasting, as PyTorch.
int l_allclose(lua_State* L) {
    const Tensor &a = check_tensor(L, 1), &b = check_tensor(L, 2);
    double rtol = 1e-5, atol = 1e-8;
    bool equal_nan = false;
    if (!lua_isnoneornil(L, 3)) {
        if (!lua_istable(L, 3)) arg_fail(3, "options must be a table like {rtol = 1e-4}, got %s", type_name_of(L, 3));
        options_check(L, 3, "rtol atol equal_nan");
        lua_pushnil(L);
        while (lua_next(L, 3)) {
            const char* key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
            if (strcmp(key, "rtol") == 0) rtol = check_number(L, -1, "rtol");
            else if (strcmp(key, "atol") == 0) atol = check_number(L, -1, "atol");
            else if (strcmp(key, "equal_nan") == 0) equal_nan = lua_toboolean(L, -1);
            lua_pop(L, 1);
        }
    }
    if (!lua_isnone(L, 4)) arg_fail(4, "allclose takes two tensors and an options table, got a 4th argument");
    Shape shape = broadcast_shapes("allclose", a.shape(), b.shape());
    Value x = value_contiguous(value_to_host(ops::expand(a, shape).value()));
    Value y = value_contiguous(value_to_host(ops::expand(b, shape).value()));
    bool close = true;
    for (int64_t i = 0; close && i < x.numel(); ++i) {
        double p = value_get(x, i), q = value_get(y, i);
        if (std::isnan(p) || std::isnan(q)) close = equal_nan && std::isnan(p) && std::isnan(q);
        else close = p == q || std::fabs(p - q) <= atol + rtol * std::fabs(q);
    }
    lua_pushboolean(L, close);
    return 1;
}

}  // namespace

const Binding view_tensor_functions[] = {
    {"permute", l_permute}, {"select", l_select}, {nullptr, nullptr},
};
const Binding view_method_only[] = {
    {"view", l_view}, {"contiguous", l_contiguous}, {"is_contiguous", l_is_contiguous}, {"stride", l_stride},
    {"storage_offset", l_storage_offset}, {nullptr, nullptr},
};
const Binding view_torch_only[] = {
    {"equal", l_equal}, {"allclose", l_allclose, "rtol atol equal_nan"}, {nullptr, nullptr},
};

}  // namespace tdlua
