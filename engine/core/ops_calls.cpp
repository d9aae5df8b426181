// ops_calls.cpp: the ops:: functions of ops.h, one per op: each packs its arguments into OpAttrs
// and calls op_call, which records the node and runs it. A few pick the op for their arguments
// first (matmul: mm or bmm; linear; conv2d_same; flatten; arange_range); those built from several
// ops are in ops_compose.cpp.
//
// [SECTION] elementwise     arithmetic, comparisons, masks, activations, clamp, where
// [SECTION] products        lstm, mm/bmm, matmul, linear, conv2d, max_pool2d
// [SECTION] shape           flatten, transpose, squeeze, expand, cat, narrow
// [SECTION] reductions      reduce, cumsum, sort/topk, flip, scatter, softmax, gather, to, losses
// [SECTION] creation        to_device, create, arange, from_values
// [SECTION] in-place        add_, mul_, zero_, fill_, copy_, masked_fill_
#include <cmath>
#include <vector>

#include "ops.h"
#include "tape.h"

namespace td {

namespace ops {

Tensor call(OpId op, std::initializer_list<const Tensor*> inputs, const OpAttrs& attrs) {
    return op_call(op, inputs.begin(), static_cast<int>(inputs.size()), attrs);
}

static OpAttrs scalar_attrs(double s) {
    OpAttrs a;
    a.scalar = s;
    return a;
}

static OpAttrs dim_attrs(int dim) {
    OpAttrs a;
    a.dim = dim;
    return a;
}

static OpAttrs shape_attrs(const Shape& shape) {
    OpAttrs a;
    a.shape = shape;
    return a;
}

// ============================================================================================
// [SECTION] elementwise

Tensor add(const Tensor& a, const Tensor& b) { return call(OP_add, {&a, &b}); }
Tensor sub(const Tensor& a, const Tensor& b) { return call(OP_sub, {&a, &b}); }
Tensor mul(const Tensor& a, const Tensor& b) { return call(OP_mul, {&a, &b}); }
Tensor div(const Tensor& a, const Tensor& b) { return call(OP_div, {&a, &b}); }
Tensor eq(const Tensor& a, const Tensor& b) { return call(OP_eq, {&a, &b}); }
Tensor compare(OpId op, const Tensor& a, const Tensor& b) { return call(op, {&a, &b}); }

// The mask as x's dtype, so one kernel loop reads both.
// A float mask becomes exact 1/0 first (ne 0), so that no non-zero value turns into 0 on the way
// (0.5 into int64, 1e-300 into float32): non-zero is true, whatever the dtype.
static Tensor mask_like(const Tensor& mask, const Tensor& x) {
    if (!mask.defined() || !x.defined() || mask.dtype() == x.dtype()) return mask;
    Tensor truth = dtype_is_float(mask.dtype()) ? compare_scalar(OP_ne, mask, 0) : mask;
    return truth.dtype() == x.dtype() ? truth : to(truth, x.dtype());
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
    Tensor m = mask_like(mask, x);
    return call(OP_masked_fill, {&x, &m}, scalar_attrs(value));
}
// An int64 tensor with a fractional number becomes float32 first, as PyTorch promotes.
static Tensor with_scalar(OpId op, const Tensor& x, double s) {
    if (x.defined() && x.dtype() == DTYPE_I64 && s != std::floor(s)) {
        Tensor as_float = to(x, DTYPE_F32);
        return call(op, {&as_float}, scalar_attrs(s));
    }
    return call(op, {&x}, scalar_attrs(s));
}

Tensor add_scalar(const Tensor& x, double s) { return with_scalar(OP_add_scalar, x, s); }
Tensor mul_scalar(const Tensor& x, double s) { return with_scalar(OP_mul_scalar, x, s); }
Tensor div_scalar(const Tensor& x, double s) { return call(OP_div_scalar, {&x}, scalar_attrs(s)); }
Tensor rsub_scalar(const Tensor& x, double s) { return with_scalar(OP_rsub_scalar, x, s); }
Tensor rdiv_scalar(const Tensor& x, double s) { return call(OP_rdiv_scalar, {&x}, scalar_attrs(s)); }
// int64 ^ a whole p stays int64 (as PyTorch); a fractional p computes in float32.
Tensor pow(const Tensor& x, double p) {
    if (x.defined() && x.dtype() == DTYPE_I64 && p == std::floor(p) && p < 0)
        engine_fail("pow: integers to negative integer powers are not allowed (x is int64, the exponent %g)", p);
    return with_scalar(OP_pow, x, p);
}

Tensor pow_tensor(const Tensor& base, const Tensor& exponent) { return call(OP_pow_tensor, {&base, &exponent}); }

// base ^ exponent with the base a 0-d tensor, so that 0 ^ x and (-2) ^ x follow PyTorch (values and
// gradients: pow_tensor's). An int64 exponent stays int64 with a whole base, else float32.
Tensor rpow_scalar(double base, const Tensor& exponent) {
    if (!exponent.defined()) return pow_tensor(exponent, exponent);   // op_call reports the missing tensor
    DType dtype = exponent.dtype() == DTYPE_I64 && base != std::floor(base) ? DTYPE_F32 : exponent.dtype();
    Tensor b = create(OP_full, Shape{}, dtype, base, exponent.value().device());
    return pow_tensor(b, exponent);
}
Tensor unary(OpId op, const Tensor& x) { return call(op, {&x}); }
Tensor neg(const Tensor& x) { return call(OP_neg, {&x}); }

Tensor clamp(const Tensor& x, double lo, double hi) {
    OpAttrs a;
    a.lo = lo;
    a.hi = hi;
    return call(OP_clamp, {&x}, a);
}

Tensor activation_backward(OpId op, const Tensor& grad, const Tensor& saved) { return call(op, {&grad, &saved}); }

Tensor compare_scalar(OpId op, const Tensor& x, double s) {
    if (!x.defined()) return compare(op, x, x);   // op_call reports the missing tensor
    return compare(op, x, create(OP_full, Shape{}, x.dtype(), s, x.value().device()));
}

Tensor maximum(const Tensor& a, const Tensor& b) { return call(OP_maximum, {&a, &b}); }
Tensor minimum(const Tensor& a, const Tensor& b) { return call(OP_minimum, {&a, &b}); }

Tensor clamp_tensor(const Tensor& x, const Tensor* lo, const Tensor* hi) {
    Tensor y = x;
    if (lo) y = call(OP_clamp_min, {&y, lo});
    if (hi) y = call(OP_clamp_max, {&y, hi});
    return y;
}

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
    if (!condition.defined() || !a.defined() || !b.defined()) return call(OP_where, {&condition, &a, &b});
    const Value* choices[2] = {&a.value(), &b.value()};
    DType dtype = promote_dtypes(choices, 2);
    Tensor a_as = a.dtype() == dtype ? a : to(a, dtype);
    Tensor b_as = b.dtype() == dtype ? b : to(b, dtype);
    return call(OP_where, {&condition, &a_as, &b_as});
}

Tensor activation(OpId op, const Tensor& x, double s, double hi) {
    OpAttrs a;
    a.scalar = s;
    a.hi = hi;
    return call(op, {&x}, a);
}

Tensor gelu_backward(const Tensor& grad, const Tensor& x, double approximate) {
    return call(OP_gelu_backward, {&grad, &x}, scalar_attrs(approximate));
}

Tensor triangle(OpId op, const Tensor& x, int64_t diagonal) {
    OpAttrs a;
    a.start = diagonal;
    return call(op, {&x}, a);
}

Tensor multinomial(const Tensor& probs, int64_t n, bool replacement) {
    OpAttrs a;
    a.length = n;
    a.all = replacement;
    return call(OP_multinomial, {&probs}, a);
}

Tensor clamp_backward(const Tensor& grad, const Tensor& x, double lo, double hi) {
    OpAttrs a;
    a.lo = lo;
    a.hi = hi;
    return call(OP_clamp_backward, {&grad, &x}, a);
}

// ============================================================================================
// [SECTION] products

static Tensor product(OpId op, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
    OpAttrs attrs;
    attrs.trans_a = trans_a;
    attrs.trans_b = trans_b;
    return call(op, {&a, &b}, attrs);
}

Tensor lstm(const Tensor& xw, const Tensor& h0, const Tensor& c0, const Tensor& w_hh) {
    return call(OP_lstm, {&xw, &h0, &c0, &w_hh});
}
Tensor lstm_backward(const Tensor& grad_h, const Tensor& grad_state, const Tensor& state, const Tensor& c0,
                     const Tensor& w_hh) {
    return call(OP_lstm_backward, {&grad_h, &grad_state, &state, &c0, &w_hh});
}
Tensor mm(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) { return product(OP_mm, a, b, trans_a, trans_b); }
Tensor bmm(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) { return product(OP_bmm, a, b, trans_a, trans_b); }

// matmul as PyTorch's torch.matmul: a 1-d operand is a row (left) or column (right) vector whose
// added dim is removed again; 2-d by 2-d is mm; a batch (3-d or more) times a matrix folds the batch
// into rows; otherwise the batch dims (all but the last two) broadcast against each other, both
// operands are expanded to them and folded into one batch for bmm. Shapes are checked here, so
// errors name matmul, the op the script called.
Tensor matmul(const Tensor& a, const Tensor& b) {
    if (!a.defined() || !b.defined()) return mm(a, b);   // op_call reports the missing tensor
    const Shape &sa = a.shape(), &sb = b.shape();
    if (sa.ndim < 1 || sb.ndim < 1)
        engine_fail("matmul: both operands need at least 1 dim, got %s and %s", sa.str().c_str(), sb.str().c_str());
    int64_t inner_a = sa[sa.ndim - 1], inner_b = sb.ndim == 1 ? sb[0] : sb[sb.ndim - 2];
    if (inner_a != inner_b)
        engine_fail("matmul: shapes %s and %s do not match (%lld columns against %lld rows)", sa.str().c_str(),
                    sb.str().c_str(), static_cast<long long>(inner_a), static_cast<long long>(inner_b));

    if (sa.ndim == 1) return squeeze(matmul(unsqueeze(a, 0), b), sb.ndim == 1 ? 0 : sb.ndim - 2);
    if (sb.ndim == 1) return squeeze(matmul(a, unsqueeze(b, 1)), sa.ndim - 1);
    if (sa.ndim == 2 && sb.ndim == 2) return mm(a, b);
    if (sb.ndim == 2) {   // a batch times one matrix: fold the batch into rows
        int64_t rows = 1;
        for (int d = 0; d < sa.ndim - 1; ++d) rows *= sa[d];
        Tensor product = mm(reshape(a, Shape{rows, inner_a}), b);
        Shape out = sa;
        out.dims[out.ndim - 1] = sb[1];
        return reshape(product, out);
    }
    Shape batch_a = sa, batch_b = sb;   // the dims before the last two
    batch_a.ndim = sa.ndim - 2;
    batch_b.ndim = sb.ndim - 2;
    Shape batch;
    try {
        batch = broadcast_shapes("matmul", batch_a, batch_b);
    } catch (const EngineError&) {
        engine_fail("matmul: the batch dims of %s and %s cannot be broadcast together", sa.str().c_str(), sb.str().c_str());
    }
    if (batch.ndim + 2 > MAX_DIMS) engine_fail("matmul: tensors have at most %d dims", MAX_DIMS);
    int64_t n = sa[sa.ndim - 2], m = sb[sb.ndim - 1], count = batch.numel();
    auto as_batch = [&](const Tensor& t, int64_t rows, int64_t cols) {
        Shape full = batch;
        full.dims[full.ndim++] = rows;
        full.dims[full.ndim++] = cols;
        Tensor wide = t.shape() == full ? t : expand(t, full);
        if (batch.ndim == 1) return wide;
        return reshape(wide, Shape{count, rows, cols});
    };
    Tensor product = bmm(as_batch(a, n, inner_a), as_batch(b, inner_b, m));
    if (batch.ndim == 1) return product;
    Shape out = batch;
    out.dims[out.ndim++] = n;
    out.dims[out.ndim++] = m;
    return reshape(product, out);
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
    Tensor y;
    if (x.defined() && w.defined() && x.shape().ndim == 2 && w.shape().ndim == 2) {
        if (x.shape()[1] != w.shape()[1])
            engine_fail("linear: input %s does not match weight %s (expected [N,%lld])", x.shape().str().c_str(),
                        w.shape().str().c_str(), static_cast<long long>(w.shape()[1]));
        y = mm(x, w, false, true);   // reads w transposed: no transpose node, no copy
    } else {
        y = matmul(x, transpose(w, 0, 1));
    }
    return b.defined() ? add(y, b) : y;
}

// A window as the attrs of a conv2d / max_pool2d node (`shape`: the backward ops' target shape).
static OpAttrs window_attrs(const Window2d& w, const Shape& shape = Shape()) {
    OpAttrs a;
    a.kernel_h = w.kernel_h, a.kernel_w = w.kernel_w;
    a.stride_h = w.stride_h, a.stride_w = w.stride_w;
    a.padding_h = w.padding_h, a.padding_w = w.padding_w;
    a.dilation_h = w.dilation_h, a.dilation_w = w.dilation_w;
    a.groups = w.groups;
    a.ceil_mode = w.ceil_mode;
    a.shape = shape;
    return a;
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Window2d& window) {
    Window2d w = window;
    w.kernel_h = w.kernel_w = 0;   // the weight's
    w.ceil_mode = false;
    OpAttrs a = window_attrs(w);
    if (!bias.defined()) return call(OP_conv2d, {&x, &weight}, a);
    return call(OP_conv2d, {&x, &weight, &bias}, a);
}

// Along one axis, "same" padding totals dilation * (kernel - 1): half on each side, and when that
// is odd one more at the end. An output computed with one more row of padding on both sides and
// its first row dropped is exactly that (each kept row reads the rows the asymmetric padding gives).
Tensor conv2d_same(const Tensor& x, const Tensor& weight, const Tensor& bias, const Window2d& window) {
    if (window.stride_h != 1 || window.stride_w != 1)
        engine_fail("conv2d: padding=\"same\" is not supported for strided convolutions (stride %d, %d)",
                    window.stride_h, window.stride_w);
    if (!x.defined() || !weight.defined() || weight.shape().ndim != 4 || window.dilation_h < 1 || window.dilation_w < 1)
        return conv2d(x, weight, bias, window);   // the op's checks say what is wrong
    int64_t total_h = int64_t(window.dilation_h) * (weight.shape()[2] - 1);
    int64_t total_w = int64_t(window.dilation_w) * (weight.shape()[3] - 1);
    if (total_h / 2 + total_h % 2 > INT32_MAX || total_w / 2 + total_w % 2 > INT32_MAX)
        engine_fail("conv2d: padding=\"same\" needs a padding over 2^31 (kernel %lldx%lld, dilation %d, %d)",
                    static_cast<long long>(weight.shape()[2]), static_cast<long long>(weight.shape()[3]),
                    window.dilation_h, window.dilation_w);
    Window2d w = window;
    w.padding_h = static_cast<int>(total_h / 2 + total_h % 2);
    w.padding_w = static_cast<int>(total_w / 2 + total_w % 2);
    Tensor y = conv2d(x, weight, bias, w);
    int nd = y.shape().ndim;
    if (total_h % 2) y = narrow(y, nd - 2, 1, y.shape()[nd - 2] - 1);
    if (total_w % 2) y = narrow(y, nd - 1, 1, y.shape()[nd - 1] - 1);
    return y;
}

Tensor conv2d_backward_input(const Tensor& grad, const Tensor& weight, const Shape& input_shape, const Window2d& window) {
    return call(OP_conv2d_backward_input, {&grad, &weight}, window_attrs(window, input_shape));
}

Tensor conv2d_backward_weight(const Tensor& grad, const Tensor& x, const Shape& weight_shape, const Window2d& window) {
    return call(OP_conv2d_backward_weight, {&grad, &x}, window_attrs(window, weight_shape));
}

Tensor max_pool2d(const Tensor& x, const Window2d& window) {
    Window2d w = window;
    w.groups = 1;
    return call(OP_max_pool2d, {&x}, window_attrs(w));
}

Tensor max_pool2d_backward(const Tensor& grad, const Tensor& indices, const Shape& input_shape, const Window2d& window) {
    return call(OP_max_pool2d_backward, {&grad, &indices}, window_attrs(window, input_shape));
}

// ============================================================================================
// [SECTION] shape

// A 0-d tensor flattens to [1], as in PyTorch.
Tensor flatten(const Tensor& x, int start_dim, int end_dim) {
    if (!x.defined()) return reshape(x, Shape{-1});   // op_call reports the missing tensor
    const Shape& s = x.shape();
    if (s.ndim == 0) return reshape(x, Shape{1});
    if (start_dim < 0 || end_dim >= s.ndim)
        engine_fail("flatten: dims %d..%d out of range for %s", start_dim + 1, end_dim + 1, s.str().c_str());
    if (start_dim > end_dim)
        engine_fail("flatten: start_dim %d comes after end_dim %d (shape %s)", start_dim + 1, end_dim + 1,
                    s.str().c_str());
    Shape flat;
    for (int i = 0; i < start_dim; ++i) flat.dims[flat.ndim++] = s.dims[i];
    int64_t merged = 1;
    for (int i = start_dim; i <= end_dim; ++i) merged *= s.dims[i];
    flat.dims[flat.ndim++] = merged;
    for (int i = end_dim + 1; i < s.ndim; ++i) flat.dims[flat.ndim++] = s.dims[i];
    return reshape(x, flat);
}

Tensor transpose(const Tensor& x, int d1, int d2) {
    OpAttrs a;
    a.dim = d1;
    a.dim2 = d2;
    return call(OP_transpose, {&x}, a);
}

Tensor unsqueeze(const Tensor& x, int dim) { return call(OP_unsqueeze, {&x}, dim_attrs(dim)); }

Tensor squeeze(const Tensor& x, int dim) {
    OpAttrs a = dim_attrs(dim < 0 ? 0 : dim);
    a.all = dim < 0;
    return call(OP_squeeze, {&x}, a);
}

Tensor expand(const Tensor& x, const Shape& shape) { return call(OP_expand, {&x}, shape_attrs(shape)); }
Tensor sum_to(const Tensor& x, const Shape& shape) { return call(OP_sum_to, {&x}, shape_attrs(shape)); }

Tensor cat(const std::vector<Tensor>& xs, int dim) {
    std::vector<const Tensor*> inputs;
    for (const Tensor& x : xs) inputs.push_back(&x);
    return op_call(OP_cat, inputs.data(), static_cast<int>(inputs.size()), dim_attrs(dim));
}

Tensor narrow(const Tensor& x, int dim, int64_t start, int64_t length) {
    OpAttrs a = dim_attrs(dim);
    a.start = start;
    a.length = length;
    return call(OP_narrow, {&x}, a);
}

Tensor narrow_backward(const Tensor& g, int dim, int64_t start, const Shape& full) {
    OpAttrs a = dim_attrs(dim);
    a.start = start;
    a.length = g.defined() && dim < g.shape().ndim ? g.shape()[dim] : 0;
    a.shape = full;
    return call(OP_narrow_backward, {&g}, a);
}

// ============================================================================================
// [SECTION] reductions

Tensor reduce(OpId op, const Tensor& x, int dim, bool keepdim) {
    OpAttrs a = dim_attrs(dim);
    a.keepdim = keepdim;
    return call(op, {&x}, a);
}

Tensor reduce_all(OpId op, const Tensor& x) {
    OpAttrs a;
    a.all = true;
    return call(op, {&x}, a);
}

// One dim in attrs.dim, several in attrs.dim2, every dim (or none given) as attrs.all.
static OpAttrs dims_attrs(uint32_t mask, int ndim) {
    OpAttrs a;
    uint32_t every = ndim >= 32 ? ~0u : (1u << ndim) - 1;
    if (__builtin_popcount(mask) == 1) a.dim = __builtin_ctz(mask);
    else if (mask == 0 || mask == every) a.all = true;
    else a.dim2 = static_cast<int>(mask);
    return a;
}

Tensor reduce_dims(OpId op, const Tensor& x, uint32_t mask, bool keepdim) {
    OpAttrs a = dims_attrs(mask, x.defined() ? x.shape().ndim : 0);
    a.keepdim = keepdim;
    return call(op, {&x}, a);
}

Tensor cumsum(const Tensor& x, int dim) { return call(OP_cumsum, {&x}, dim_attrs(dim)); }

Tensor sort(const Tensor& x, int dim, bool descending) {
    OpAttrs a = dim_attrs(dim);
    a.scalar = descending ? 1 : 0;
    return call(OP_sort, {&x}, a);
}

Tensor topk(const Tensor& x, int64_t k, int dim, bool largest) {
    OpAttrs a = dim_attrs(dim);
    a.scalar = largest ? 1 : 0;
    a.length = k;
    return call(OP_topk, {&x}, a);
}

Tensor flip(const Tensor& x, uint32_t mask) { return call(OP_flip, {&x}, dims_attrs(mask, x.defined() ? x.shape().ndim : 0)); }

Tensor scatter(const Tensor& x, int dim, const Tensor& index, const Tensor& src) {
    return call(OP_scatter, {&x, &index, &src}, dim_attrs(dim));
}

Tensor softmax(const Tensor& x, int dim) { return call(OP_softmax, {&x}, dim_attrs(dim)); }
Tensor log_softmax(const Tensor& x, int dim) { return call(OP_log_softmax, {&x}, dim_attrs(dim)); }
Tensor gather(const Tensor& x, int dim, const Tensor& index) { return call(OP_gather, {&x, &index}, dim_attrs(dim)); }

Tensor scatter_add(const Tensor& src, int dim, const Tensor& index, const Shape& shape) {
    OpAttrs a = dim_attrs(dim);
    a.shape = shape;
    return call(OP_scatter_add, {&src, &index}, a);
}

Tensor to(const Tensor& x, DType dtype) {
    OpAttrs a;
    a.dtype = dtype;
    return call(OP_to, {&x}, a);
}

static OpAttrs loss_attrs(Reduction reduction) {
    OpAttrs a;
    a.reduction = reduction;
    return a;
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
    return call(OP_mse_loss, {&input, &target}, loss_attrs(reduction));
}

Tensor class_loss(OpId op, const Tensor& scores, const Tensor& labels, Reduction reduction) {
    return call(op, {&scores, &labels}, loss_attrs(reduction));
}

Tensor class_loss_backward(OpId op, const Tensor& grad, const Tensor& scores, const Tensor& labels,
                           Reduction reduction) {
    return call(op, {&grad, &scores, &labels}, loss_attrs(reduction));
}

Tensor nll_loss_backward(const Tensor& grad, const Tensor& labels, const Shape& scores_shape, Reduction reduction) {
    OpAttrs a = loss_attrs(reduction);
    a.shape = scores_shape;
    return call(OP_nll_loss_backward, {&grad, &labels}, a);
}

// ============================================================================================
// [SECTION] creation

Tensor to_device(const Tensor& x, Device device) {
    if (x.value().device() == device) return x;
    OpAttrs a;
    a.device = device;
    return call(OP_to_device, {&x}, a);
}
Tensor create(OpId op, const Shape& shape, DType dtype, double fill, Device device) {
    OpAttrs a;
    a.shape = shape;
    a.dtype = dtype;
    a.scalar = fill;
    a.device = device;
    return op_call(op, nullptr, 0, a);
}

Tensor create_range(OpId op, const Shape& shape, DType dtype, double lo, double hi, Device device) {
    OpAttrs a;
    a.device = device;
    a.shape = shape;
    a.dtype = dtype;
    a.lo = lo;
    a.hi = hi;
    return op_call(op, nullptr, 0, a);
}

// PyTorch's count, ceil((end - start) / step), and values start + i * step computed in float64
// (int64 for an int64 result) and then converted: arange(n) scaled and shifted, so the graph shows
// arange, mul_scalar and add_scalar nodes.
Tensor arange_range(double start, double end, double step, DType dtype, Device device) {
    if (step == 0) engine_fail("arange: step must be nonzero");
    if (!std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step))
        engine_fail("arange: start, end and step must be finite, got %g, %g and %g", start, end, step);
    if ((step > 0 && end < start) || (step < 0 && end > start))
        engine_fail("arange: the step %g goes away from end (start %g, end %g)", step, start, end);
    double count = std::ceil((end - start) / step);
    if (count > 0x1p62) engine_fail("arange: %g elements are more than a tensor can hold", count);
    DType compute = dtype == DTYPE_I64 ? DTYPE_I64 : DTYPE_F64;
    Tensor y = create(OP_arange, Shape{static_cast<int64_t>(count)}, compute, 0, device);
    if (step != 1) y = mul_scalar(y, step);
    if (start != 0) y = add_scalar(y, start);
    if (y.dtype() != dtype) y = to(y, dtype);
    return y;
}

Tensor from_values(const Shape& shape, DType dtype, const double* values, Device device) {
    OpAttrs a;
    a.device = device;
    a.shape = shape;
    a.dtype = dtype;
    a.init_values = values;
    return op_call(OP_tensor, nullptr, 0, a);
}

// ============================================================================================
// [SECTION] in-place

// An in-place op returns its output; when autograd tracks it, x now stands for that new node
// (its history includes the in-place step), as in PyTorch.
static Tensor rebase(Tensor& x, const Tensor& result) {
    if (result.node->tracks_grad) x = result;
    return x;
}

Tensor add_(Tensor& x, const Tensor& y, double alpha) { return rebase(x, call(OP_add_, {&x, &y}, scalar_attrs(alpha))); }
Tensor sub_(Tensor& x, const Tensor& y, double alpha) { return rebase(x, call(OP_sub_, {&x, &y}, scalar_attrs(alpha))); }

Tensor mul_(Tensor& x, const Tensor& y) {
    if (grad_enabled() && y.defined() && y.requires_grad())
        engine_fail("mul_: the multiplier requires grad, and an in-place product cannot pass a gradient to it "
                    "(use x * y instead)");
    return rebase(x, call(OP_mul_, {&x, &y}));
}

Tensor mul_(Tensor& x, double s) {
    Tensor multiplier = create(OP_full, Shape{}, x.dtype(), s, x.value().device());
    return mul_(x, multiplier);
}
Tensor zero_(Tensor& x) { return rebase(x, call(OP_zero_, {&x})); }
Tensor fill_(Tensor& x, double s) { return rebase(x, call(OP_fill_, {&x}, scalar_attrs(s))); }
Tensor copy_(Tensor& x, const Tensor& src) { return rebase(x, call(OP_copy_, {&x, &src})); }

Tensor masked_fill_(Tensor& x, const Tensor& mask, double value) {
    Tensor m = mask_like(mask, x);
    return rebase(x, call(OP_masked_fill_, {&x, &m}, scalar_attrs(value)));
}

}  // namespace ops

}  // namespace td
