// view_ops.cpp: views (ops that share their input's storage under another layout), regions
// (writing through a view), and the functions that make them.
//
// A view's kernel copies nothing: it sets the output's layout (offset and strides, tensor.h) from
// the input's. It runs again on every replay of a frozen plan, so a plan's views follow whatever
// buffers the plan binds. Layouts are device-free: these kernels serve every backend, and so do
// the copy kernels (value_copy_elements runs the values' device's copy: backend.h).
//
// A region is a view described by its numbers: shape, strides and offset (`start`) relative to a
// contiguous tensor. It is how autograd writes through a view: `x[i] = v`, or an in-place op on a
// view of x, records assign_(x, v) on x itself (x's history then includes the write, as PyTorch
// rebases it), and the view is taken again from the new x with as_strided.
//
// [SECTION] shape rules
// [SECTION] layout kernels   view_*: set the output's layout
// [SECTION] copy kernels     contiguous, region_scatter, assign_
// [SECTION] backward rules
// [SECTION] ops::
#include <algorithm>
#include <cstring>

#include "kernels_cpu.h"
#include "tape.h"

namespace td {

namespace {

const Value& in(const ShapeCall& c, int i) { return *c.inputs[i]; }
const Value& in(const KernelCall& c, int i) { return *c.inputs[i]; }
Value& out(const KernelCall& c) { return *c.outputs[0]; }

void check_dim(const ShapeCall& c, int dim, int ndim) {
    if (dim < 0 || dim >= ndim)
        engine_fail("%s: dim %lld out of range for a %d-d tensor", c.op_name, static_cast<long long>(dim) + 1, ndim);
}

// The strides of x (contiguous or not) into out[0..ndim).
void strides_of(const Value& x, int64_t* out) {
    for (int d = 0; d < x.shape.ndim; ++d) out[d] = x.stride(d);
}

// The last element of a region (shape, strides from `start`) fits in `numel` elements; strides and
// start are non-negative; nothing overflows. Checked by the rules of every region op (a plan file
// can hold any numbers).
void check_region(const ShapeCall& c, const OpAttrs& a, int64_t numel) {
    if (a.strides.ndim != a.shape.ndim)
        engine_fail("%s: a region of shape %s needs %d strides, got %d", c.op_name, a.shape.str().c_str(), a.shape.ndim,
                    a.strides.ndim);
    int64_t region_numel = 0;
    if (!shape_numel_fits(a.shape, &region_numel)) engine_fail("%s: bad region shape %s", c.op_name, a.shape.str().c_str());
    if (a.start < 0) engine_fail("%s: negative region offset %lld", c.op_name, static_cast<long long>(a.start));
    int64_t last = a.start;
    for (int d = 0; d < a.shape.ndim; ++d) {
        int64_t step = 0;
        if (a.strides.dims[d] < 0) engine_fail("%s: negative stride in %s", c.op_name, a.strides.str().c_str());
        if (a.shape.dims[d] > 0 &&
            (__builtin_mul_overflow(a.shape.dims[d] - 1, a.strides.dims[d], &step) || __builtin_add_overflow(last, step, &last)))
            engine_fail("%s: region %s strides %s overflows", c.op_name, a.shape.str().c_str(), a.strides.str().c_str());
    }
    if (region_numel > 0 && last >= numel)
        engine_fail("%s: region %s (strides %s, offset %lld) reaches element %s of a tensor of %lld", c.op_name,
                    a.shape.str().c_str(), a.strides.str().c_str(), static_cast<long long>(a.start),
                    one_based(last).c_str(), static_cast<long long>(numel));
}

// The region of `base` (contiguous) that a region's attributes describe, as a value sharing its storage.
Value region_of(const Value& base, const OpAttrs& a, const char* op_name) {
    if (base.strided()) engine_fail("%s: the region's base must be contiguous", op_name);
    Value v = base;
    v.shape = a.shape;
    view_set_layout(v, base.offset + a.start, a.strides.dims);
    return v;
}

}  // namespace

// ============================================================================================
// [SECTION] shape rules

void shape_permute(ShapeCall& c) {
    const Shape& x = in(c, 0).shape;
    const Shape& order = c.attrs.shape;
    bool seen[MAX_DIMS] = {};
    bool valid = order.ndim == x.ndim;
    for (int i = 0; valid && i < order.ndim; ++i) {
        int64_t d = order.dims[i];
        valid = d >= 0 && d < x.ndim && !seen[d];
        if (valid) seen[d] = true;
    }
    if (!valid) {
        std::string dims;
        for (int i = 0; i < order.ndim; ++i) dims += (i ? "," : "") + one_based(order.dims[i]);
        engine_fail("%s: dims (%s) are not a permutation of the %d dims of %s", c.op_name, dims.c_str(), x.ndim,
                    x.str().c_str());
    }
    Shape s = x;
    for (int i = 0; i < x.ndim; ++i) s.dims[i] = x.dims[order.dims[i]];
    c.set_output(0, s, in(c, 0).dtype);
}

void shape_select(ShapeCall& c) {
    const Shape& x = in(c, 0).shape;
    check_dim(c, c.attrs.dim, x.ndim);
    int64_t size = x.dims[c.attrs.dim];
    if (c.attrs.start < 0 || c.attrs.start >= size)
        engine_fail("%s: index %s out of range for size %lld along dim %d", c.op_name, one_based(c.attrs.start).c_str(),
                    static_cast<long long>(size), c.attrs.dim + 1);
    Shape s;
    for (int d = 0; d < x.ndim; ++d)
        if (d != c.attrs.dim) s.dims[s.ndim++] = x.dims[d];
    c.set_output(0, s, in(c, 0).dtype);
}

void shape_region(ShapeCall& c) {
    check_region(c, c.attrs, in(c, 0).numel());
    c.set_output(0, c.attrs.shape, in(c, 0).dtype);
}

void shape_region_scatter(ShapeCall& c) {
    check_region(c, c.attrs, in(c, 0).numel());
    if (in(c, 1).shape != c.attrs.shape)
        engine_fail("%s: the values have shape %s but the region has shape %s", c.op_name, in(c, 1).shape.str().c_str(),
                    c.attrs.shape.str().c_str());
    c.set_output(0, in(c, 0).shape, in(c, 0).dtype);
}

void shape_assign(ShapeCall& c) {
    shape_region_scatter(c);
    if (in(c, 1).dtype != in(c, 0).dtype)
        engine_fail("%s: the values are %s but the tensor is %s", c.op_name, dtype_name(in(c, 1).dtype),
                    dtype_name(in(c, 0).dtype));
}

// ============================================================================================
// [SECTION] layout kernels

void view_detach(const KernelCall& c) {
    int64_t strides[MAX_DIMS];
    strides_of(in(c, 0), strides);
    view_set_layout(out(c), in(c, 0).offset, strides);
}

void view_transpose(const KernelCall& c) {
    int64_t strides[MAX_DIMS];
    strides_of(in(c, 0), strides);
    std::swap(strides[c.attrs.dim], strides[c.attrs.dim2]);
    view_set_layout(out(c), in(c, 0).offset, strides);
}

void view_permute(const KernelCall& c) {
    const Value& x = in(c, 0);
    int64_t strides[MAX_DIMS];
    for (int i = 0; i < x.shape.ndim; ++i) strides[i] = x.stride(static_cast<int>(c.attrs.shape.dims[i]));
    view_set_layout(out(c), x.offset, strides);
}

void view_narrow(const KernelCall& c) {
    const Value& x = in(c, 0);
    int64_t strides[MAX_DIMS];
    strides_of(x, strides);
    view_set_layout(out(c), x.offset + c.attrs.start * x.stride(c.attrs.dim), strides);
}

void view_select(const KernelCall& c) {
    const Value& x = in(c, 0);
    int64_t strides[MAX_DIMS];
    int n = 0;
    for (int d = 0; d < x.shape.ndim; ++d)
        if (d != c.attrs.dim) strides[n++] = x.stride(d);
    view_set_layout(out(c), x.offset + c.attrs.start * x.stride(c.attrs.dim), strides);
}

void view_unsqueeze(const KernelCall& c) {
    const Value& x = in(c, 0);
    int64_t strides[MAX_DIMS];
    int dim = c.attrs.dim;
    for (int d = 0, j = 0; d < x.shape.ndim + 1; ++d) {
        if (d == dim) strides[d] = dim < x.shape.ndim ? x.stride(dim) * x.shape.dims[dim] : 1;   // size 1: any value
        else strides[d] = x.stride(j++);
    }
    view_set_layout(out(c), x.offset, strides);
}

void view_squeeze(const KernelCall& c) {
    const Value& x = in(c, 0);
    int64_t strides[MAX_DIMS];
    int n = 0;
    for (int d = 0; d < x.shape.ndim; ++d) {
        bool drop = x.shape.dims[d] == 1 && (c.attrs.all || d == c.attrs.dim);
        if (!drop) strides[n++] = x.stride(d);
    }
    view_set_layout(out(c), x.offset, strides);
}

void view_expand(const KernelCall& c) {
    const Value& x = in(c, 0);
    const Shape& to = out(c).shape;
    int64_t strides[MAX_DIMS];
    int lead = to.ndim - x.shape.ndim;
    for (int d = 0; d < to.ndim; ++d) {
        int xd = d - lead;
        bool repeated = xd < 0 || (x.shape.dims[xd] == 1 && to.dims[d] != 1);
        strides[d] = repeated ? 0 : x.stride(xd);
    }
    view_set_layout(out(c), x.offset, strides);
}

// PyTorch's rule for viewing a strided tensor with a new shape: each run of input dims that are
// contiguous with one another can be split or merged freely; false when the new shape would need
// elements of two runs in one dim (then reshape copies first, and view is an error).
bool view_strides_for(const Value& x, const Shape& to, int64_t* strides) {
    if (!x.strided() || x.numel() == 0) {
        shape_contiguous_strides(to, strides);
        return true;
    }
    const Shape& from = x.shape;
    int view_d = to.ndim - 1;
    int64_t chunk_base_stride = x.stride(from.ndim - 1);
    int64_t tensor_numel = 1, view_numel = 1;
    for (int tensor_d = from.ndim - 1; tensor_d >= 0; --tensor_d) {
        tensor_numel *= from.dims[tensor_d];
        bool run_ends = tensor_d == 0 || (from.dims[tensor_d - 1] != 1 &&
                                          x.stride(tensor_d - 1) != tensor_numel * chunk_base_stride);
        if (!run_ends) continue;
        while (view_d >= 0 && (view_numel < tensor_numel || to.dims[view_d] == 1)) {
            strides[view_d] = view_numel * chunk_base_stride;
            view_numel *= to.dims[view_d];
            --view_d;
        }
        if (view_numel != tensor_numel) return false;
        if (tensor_d > 0) {
            chunk_base_stride = x.stride(tensor_d - 1);
            tensor_numel = 1;
            view_numel = 1;
        }
    }
    return view_d == -1;
}

void view_reshape(const KernelCall& c) {
    int64_t strides[MAX_DIMS];
    if (!view_strides_for(in(c, 0), out(c).shape, strides))
        engine_fail("reshape: a tensor of shape %s with these strides cannot be viewed as %s (call contiguous() first)",
                    in(c, 0).shape.str().c_str(), out(c).shape.str().c_str());
    view_set_layout(out(c), in(c, 0).offset, strides);
}

void view_as_strided(const KernelCall& c) {
    const Value& x = in(c, 0);
    if (x.strided()) engine_fail("as_strided: the region's base must be contiguous");
    view_set_layout(out(c), x.offset + c.attrs.start, c.attrs.strides.dims);
}

// ============================================================================================
// [SECTION] copy kernels

void cpu_contiguous(const KernelCall& c) { value_copy_elements(out(c), in(c, 0)); }

void cpu_region_scatter(const KernelCall& c) {
    value_copy_elements(out(c), in(c, 0));
    value_copy_elements(region_of(out(c), c.attrs, "region_scatter"), in(c, 1));
}

void cpu_assign_inplace(const KernelCall& c) { value_copy_elements(region_of(out(c), c.attrs, "assign_"), in(c, 1)); }

// ============================================================================================
// [SECTION] backward rules

void backward_permute(BackwardCall& c) {
    const Shape& order = c.attrs().shape;
    Shape inverse = order;
    for (int i = 0; i < order.ndim; ++i) inverse.dims[order.dims[i]] = i;
    c.grad_input[0] = ops::permute(c.grad_output[0], inverse);
}

void backward_select(BackwardCall& c) {
    int dim = c.attrs().dim;
    c.grad_input_slice(0, ops::unsqueeze(c.grad_output[0], dim), dim, c.attrs().start);
}

static OpAttrs region_attrs(const OpAttrs& a) {
    OpAttrs r;
    r.shape = a.shape;
    r.strides = a.strides;
    r.start = a.start;
    return r;
}

void backward_as_strided(BackwardCall& c) {
    Tensor zeros = ops::create(OP_zeros, c.input_shape(0), c.grad_output[0].dtype(), 0, c.grad_output[0].value().device());
    c.grad_input[0] = ops::region_scatter(zeros, c.grad_output[0], region_attrs(c.attrs()));
}

// assign_ and region_scatter: x's gradient is the incoming one with the region zeroed (those
// elements were replaced); the values get the region of it.
void backward_region_scatter(BackwardCall& c) {
    const OpAttrs& a = c.attrs();
    Tensor g = ops::contiguous(c.grad_output[0]);
    if (c.needs_grad(0)) c.grad_input[0] = ops::region_scatter(g, ops::create(OP_zeros, a.shape, g.dtype(), 0, g.value().device()), region_attrs(a));
    if (c.needs_grad(1)) c.grad_input[1] = ops::contiguous(ops::as_strided(g, region_attrs(a)));
}

// ============================================================================================
// [SECTION] ops::

namespace ops {

Tensor permute(const Tensor& x, const Shape& order) {
    OpAttrs a;
    a.shape = order;
    return call(OP_permute, {&x}, a);
}

Tensor select(const Tensor& x, int dim, int64_t index) {
    OpAttrs a;
    a.dim = dim;
    a.start = index;
    return call(OP_select, {&x}, a);
}

Tensor contiguous(const Tensor& x) { return x.value().is_contiguous() ? x : call(OP_contiguous, {&x}); }

Tensor as_strided(const Tensor& x, const OpAttrs& region) { return call(OP_as_strided, {&x}, region); }

Tensor region_scatter(const Tensor& x, const Tensor& values, const OpAttrs& region) {
    return call(OP_region_scatter, {&x, &values}, region);
}

OpAttrs region_of_view(const Tensor& view, const Tensor& base) {
    const Value &v = view.value(), &b = base.value();
    if (v.storage.get() != b.storage.get()) engine_fail("region: the view does not share the base's storage");
    if (b.strided()) engine_fail("region: the base must be contiguous");
    OpAttrs a;
    a.shape = v.shape;
    a.strides.ndim = v.shape.ndim;
    for (int d = 0; d < v.shape.ndim; ++d) a.strides.dims[d] = v.stride(d);
    a.start = v.offset - b.offset;
    return a;
}

Tensor assign_(Tensor& x, const Tensor& values, const OpAttrs& region) {
    Tensor result = call(OP_assign_, {&x, &values}, region);
    if (result.node->tracks_grad) x = result;
    return x;
}

Tensor reshape(const Tensor& x, const Shape& shape) {
    OpAttrs a;
    a.shape = reshape_target("reshape", x.shape(), shape);
    int64_t strides[MAX_DIMS];
    if (!view_strides_for(x.value(), a.shape, strides)) {
        Tensor packed = call(OP_contiguous, {&x});
        return call(OP_reshape, {&packed}, a);
    }
    return call(OP_reshape, {&x}, a);
}

Tensor view(const Tensor& x, const Shape& shape) {
    OpAttrs a;
    a.shape = reshape_target("view", x.shape(), shape);
    int64_t strides[MAX_DIMS];
    if (!view_strides_for(x.value(), a.shape, strides))
        engine_fail("view: the size %s is not compatible with the input's layout (shape %s, a view of another "
                    "tensor whose elements are not in row-major order); use reshape(...) instead, which copies",
                    a.shape.str().c_str(), x.shape().str().c_str());
    return call(OP_reshape, {&x}, a);
}

}  // namespace ops

}  // namespace td
