// backward_rules.cpp: each op's backward rule (the op table's backward_rule column, ops.def).
// Each computes grad_input[i] for the inputs that need it, from grad_output and the saved values,
// using ops:: calls (so the backward pass is recorded). Broadcast inputs get their gradient summed
// back to their own shape.
//
// [SECTION] elementwise            arithmetic, unary functions, comparisons, where
// [SECTION] activations            their derivatives (ops too, so they differentiate again); tril, triu
// [SECTION] products and windows   lstm, matmul, conv2d, max_pool2d
// [SECTION] shape and reductions   views, cat, narrow, reductions, sort, scatter, softmax, gather, to
// [SECTION] losses and in-place ops
#include <cmath>

#include "ops.h"
#include "tape.h"

namespace td {

// ============================================================================================
// [SECTION] elementwise

static Tensor reduce_to(const Tensor& g, const Shape& shape) {
    return g.shape() == shape ? g : ops::sum_to(g, shape);
}

void backward_identity(BackwardCall& c) { c.grad_input[0] = c.grad_output[0]; }

void backward_none(BackwardCall&) {}

void backward_add(BackwardCall& c) {
    for (int i = 0; i < 2; ++i)
        if (c.needs_grad(i)) c.grad_input[i] = reduce_to(c.grad_output[0], c.input_shape(i));
}

void backward_sub(BackwardCall& c) {
    if (c.needs_grad(0)) c.grad_input[0] = reduce_to(c.grad_output[0], c.input_shape(0));
    if (c.needs_grad(1)) c.grad_input[1] = reduce_to(ops::neg(c.grad_output[0]), c.input_shape(1));
}

void backward_mul(BackwardCall& c) {
    const Tensor& g = c.grad_output[0];
    if (c.needs_grad(0)) c.grad_input[0] = reduce_to(ops::mul(g, c.input(1)), c.input_shape(0));
    if (c.needs_grad(1)) c.grad_input[1] = reduce_to(ops::mul(g, c.input(0)), c.input_shape(1));
}

void backward_div(BackwardCall& c) {   // y = a / b: da = g / b, db = -g * y / b
    const Tensor& g = c.grad_output[0];
    if (c.needs_grad(0)) c.grad_input[0] = reduce_to(ops::div(g, c.input(1)), c.input_shape(0));
    if (c.needs_grad(1))
        c.grad_input[1] = reduce_to(ops::neg(ops::div(ops::mul(g, c.output(0)), c.input(1))), c.input_shape(1));
}

// A 0-d tensor of x's dtype holding s (a comparison's other side, where's constant choice).
static Tensor constant_like(const Tensor& x, double s) { return ops::create(OP_full, Shape{}, x.dtype(), s, x.value().device()); }

// y = a ^ b, as PyTorch's pow_backward_self and pow_backward_exponent:
// da = g * b * a^(b-1), but 0 where b == 0 (0^0 has a zero gradient, not NaN);
// db = g * y * ln a (NaN where a < 0), but 0 where a == 0 and b >= 0. Computed only when b needs
// a gradient, so a constant exponent never spreads it.
void backward_pow_tensor(BackwardCall& c) {
    const Tensor& g = c.grad_output[0];
    if (c.needs_grad(0)) {
        Tensor exponent_minus_1 = ops::add_scalar(c.input(1), -1);
        Tensor local = ops::mul(c.input(1), ops::pow_tensor(c.input(0), exponent_minus_1));
        Tensor da = ops::where(ops::compare_scalar(OP_eq, c.input(1), 0), constant_like(g, 0), ops::mul(g, local));
        c.grad_input[0] = reduce_to(da, c.input_shape(0));
    }
    if (c.needs_grad(1)) {
        Tensor zero_base = ops::mul(ops::compare_scalar(OP_eq, c.input(0), 0), ops::compare_scalar(OP_ge, c.input(1), 0));
        Tensor y_log_a = ops::mul(c.output(0), ops::unary(OP_log, c.input(0)));
        c.grad_input[1] = reduce_to(ops::mul(g, ops::where(zero_base, constant_like(g, 0), y_log_a)), c.input_shape(1));
    }
}

void backward_mul_scalar(BackwardCall& c) { c.grad_input[0] = ops::mul_scalar(c.grad_output[0], c.attrs().scalar); }

void backward_div_scalar(BackwardCall& c) { c.grad_input[0] = ops::div_scalar(c.grad_output[0], c.attrs().scalar); }

void backward_neg(BackwardCall& c) { c.grad_input[0] = ops::neg(c.grad_output[0]); }

void backward_rdiv_scalar(BackwardCall& c) {   // y = s / x: dx = -g * y / x
    c.grad_input[0] = ops::neg(ops::div(ops::mul(c.grad_output[0], c.output(0)), c.input(0)));
}

void backward_pow(BackwardCall& c) {   // y = x^p: dx = g * p * x^(p-1); x^0 has a zero gradient (PyTorch's)
    double p = c.attrs().scalar;
    const Tensor& g = c.grad_output[0];
    if (p == 0) {
        c.grad_input[0] = ops::create(OP_zeros, c.input_shape(0), g.dtype(), 0, g.value().device());
    } else if (p == 1) {
        c.grad_input[0] = g;
    } else if (p == 2) {
        c.grad_input[0] = ops::mul(g, ops::mul_scalar(c.input(0), 2));
    } else {
        c.grad_input[0] = ops::mul(g, ops::mul_scalar(ops::pow(c.input(0), p - 1), p));
    }
}

void backward_exp(BackwardCall& c) { c.grad_input[0] = ops::mul(c.grad_output[0], c.output(0)); }

void backward_log(BackwardCall& c) { c.grad_input[0] = ops::div(c.grad_output[0], c.input(0)); }

void backward_sqrt(BackwardCall& c) {
    c.grad_input[0] = ops::div(c.grad_output[0], ops::mul_scalar(c.output(0), 2));
}

void backward_abs(BackwardCall& c) {
    c.grad_input[0] = ops::mul(c.grad_output[0], ops::unary(OP_sign, c.input(0)));
}

// Whole-number results (sign, floor, round, ...): a zero gradient, as PyTorch.
void backward_zeros(BackwardCall& c) {
    c.grad_input[0] = ops::create(OP_zeros, c.input_shape(0), c.grad_output[0].dtype(), 0, c.grad_output[0].value().device());
}

void backward_sin(BackwardCall& c) { c.grad_input[0] = ops::mul(c.grad_output[0], ops::unary(OP_cos, c.input(0))); }

void backward_cos(BackwardCall& c) { c.grad_input[0] = ops::neg(ops::mul(c.grad_output[0], ops::unary(OP_sin, c.input(0)))); }

void backward_log1p(BackwardCall& c) { c.grad_input[0] = ops::div(c.grad_output[0], ops::add_scalar(c.input(0), 1)); }

void backward_expm1(BackwardCall& c) { c.grad_input[0] = ops::mul(c.grad_output[0], ops::add_scalar(c.output(0), 1)); }

void backward_reciprocal(BackwardCall& c) {   // y = 1/x: dx = -g y^2
    c.grad_input[0] = ops::neg(ops::mul(c.grad_output[0], ops::unary(OP_square, c.output(0))));
}

void backward_rsqrt(BackwardCall& c) {   // y = x^-1/2: dx = -g y^3 / 2
    c.grad_input[0] = ops::mul(c.grad_output[0], ops::mul_scalar(ops::pow(c.output(0), 3), -0.5));
}

void backward_square(BackwardCall& c) { c.grad_input[0] = ops::mul(c.grad_output[0], ops::mul_scalar(c.input(0), 2)); }

void backward_tanh(BackwardCall& c) {
    c.grad_input[0] = ops::activation_backward(OP_tanh_backward, c.grad_output[0], c.output(0));
}

void backward_sigmoid(BackwardCall& c) {
    c.grad_input[0] = ops::activation_backward(OP_sigmoid_backward, c.grad_output[0], c.output(0));
}

void backward_relu(BackwardCall& c) {
    c.grad_input[0] = ops::activation_backward(OP_relu_backward, c.grad_output[0], c.output(0));
}

void backward_clamp(BackwardCall& c) {
    c.grad_input[0] = ops::clamp_backward(c.grad_output[0], c.input(0), c.attrs().lo, c.attrs().hi);
}

// The activation derivatives are ops too, so they have derivatives (a second-order graph).
void backward_tanh_backward(BackwardCall& c) {   // out = g (1 - y^2)
    const Tensor& gg = c.grad_output[0];
    if (c.needs_grad(0)) c.grad_input[0] = ops::activation_backward(OP_tanh_backward, gg, c.input(1));
    if (c.needs_grad(1))
        c.grad_input[1] = ops::mul(ops::mul(gg, c.input(0)), ops::mul_scalar(c.input(1), -2));
}

void backward_sigmoid_backward(BackwardCall& c) {   // out = g y (1 - y)
    const Tensor& gg = c.grad_output[0];
    if (c.needs_grad(0)) c.grad_input[0] = ops::activation_backward(OP_sigmoid_backward, gg, c.input(1));
    if (c.needs_grad(1))
        c.grad_input[1] = ops::mul(ops::mul(gg, c.input(0)), ops::add_scalar(ops::mul_scalar(c.input(1), -2), 1));
}

void backward_relu_backward(BackwardCall& c) {
    if (c.needs_grad(0)) c.grad_input[0] = ops::activation_backward(OP_relu_backward, c.grad_output[0], c.input(1));
}

void backward_clamp_backward(BackwardCall& c) {
    if (c.needs_grad(0))
        c.grad_input[0] = ops::clamp_backward(c.grad_output[0], c.input(1), c.attrs().lo, c.attrs().hi);
}

// maximum and minimum as PyTorch: a tie shares g evenly; the loser gets nothing. `a_loses` is the
// comparison under which input 0 gets no gradient (lt for maximum), `b_loses` input 1's.
static void backward_extremum(BackwardCall& c, OpId a_loses, OpId b_loses) {
    const Tensor& g = c.grad_output[0];
    Tensor shared = ops::where(ops::eq(c.input(0), c.input(1)), ops::mul_scalar(g, 0.5), g);
    if (c.needs_grad(0))
        c.grad_input[0] = reduce_to(ops::masked_fill(shared, ops::compare(a_loses, c.input(0), c.input(1)), 0), c.input_shape(0));
    if (c.needs_grad(1))
        c.grad_input[1] = reduce_to(ops::masked_fill(shared, ops::compare(b_loses, c.input(0), c.input(1)), 0), c.input_shape(1));
}

void backward_maximum(BackwardCall& c) { backward_extremum(c, OP_lt, OP_gt); }
void backward_minimum(BackwardCall& c) { backward_extremum(c, OP_gt, OP_lt); }

// clamp_min(x, lo) as PyTorch: dx = g where x >= lo (a tie is x's), dlo = g where x < lo.
// `keeps` is the comparison of x with the bound under which x keeps the gradient.
static void backward_clamp_bound(BackwardCall& c, OpId keeps, OpId bound_wins) {
    const Tensor& g = c.grad_output[0];
    Tensor zero = constant_like(g, 0);
    if (c.needs_grad(0))
        c.grad_input[0] = reduce_to(ops::where(ops::compare(keeps, c.input(0), c.input(1)), g, zero), c.input_shape(0));
    if (c.needs_grad(1))
        c.grad_input[1] = reduce_to(ops::where(ops::compare(bound_wins, c.input(0), c.input(1)), g, zero), c.input_shape(1));
}

void backward_clamp_min(BackwardCall& c) { backward_clamp_bound(c, OP_ge, OP_lt); }
void backward_clamp_max(BackwardCall& c) { backward_clamp_bound(c, OP_le, OP_gt); }

void backward_where(BackwardCall& c) {   // da = g where condition, db = g elsewhere
    const Tensor& g = c.grad_output[0];
    Tensor zero = constant_like(g, 0);
    if (c.needs_grad(1)) c.grad_input[1] = reduce_to(ops::where(c.input(0), g, zero), c.input_shape(1));
    if (c.needs_grad(2)) c.grad_input[2] = reduce_to(ops::where(c.input(0), zero, g), c.input_shape(2));
}

// ============================================================================================
// [SECTION] activations

// The activations' gradients, with PyTorch's formulas (its *_backward kernels), written with ops.
void backward_leaky_relu(BackwardCall& c) {   // dx = g where x > 0, else g * slope
    const Tensor& g = c.grad_output[0];
    c.grad_input[0] = ops::where(ops::compare_scalar(OP_gt, c.input(0), 0), g, ops::mul_scalar(g, c.attrs().scalar));
}

void backward_elu(BackwardCall& c) {   // dx = g where x > 0, else g * alpha * e^x
    const Tensor& g = c.grad_output[0];
    Tensor negative = ops::mul(ops::mul_scalar(g, c.attrs().scalar), ops::unary(OP_exp, c.input(0)));
    c.grad_input[0] = ops::where(ops::compare_scalar(OP_gt, c.input(0), 0), g, negative);
}

void backward_gelu(BackwardCall& c) { c.grad_input[0] = ops::gelu_backward(c.grad_output[0], c.input(0), c.attrs().scalar); }

void backward_silu(BackwardCall& c) {   // s = sigmoid(x): dx = g s (1 + x (1 - s))
    Tensor s = ops::unary(OP_sigmoid, c.input(0));
    Tensor local = ops::add_scalar(ops::mul(c.input(0), ops::rsub_scalar(s, 1)), 1);
    c.grad_input[0] = ops::mul(ops::mul(c.grad_output[0], s), local);
}

void backward_softplus(BackwardCall& c) {   // dx = g where beta x > threshold, else g sigmoid(beta x)
    const Tensor& g = c.grad_output[0];
    Tensor beta_x = ops::mul_scalar(c.input(0), c.attrs().scalar);
    Tensor smooth = ops::mul(g, ops::unary(OP_sigmoid, beta_x));
    c.grad_input[0] = ops::where(ops::compare_scalar(OP_gt, beta_x, c.attrs().hi), g, smooth);
}

// out = g gelu'(x): dg = gelu_backward(gg, x), dx = gg g gelu''(x), with
// gelu''(x) = phi(x) (2 - x^2) (exact; phi the normal density), or for the tanh form
// (t = tanh(u), u = k (x + c x^3)): (1 - t^2) (u' - x t u'^2 + x u'' / 2).
void backward_gelu_backward(BackwardCall& c) {
    const Tensor& gg = c.grad_output[0];
    const Tensor& x = c.input(1);
    if (c.needs_grad(0)) c.grad_input[0] = ops::gelu_backward(gg, x, c.attrs().scalar);
    if (!c.needs_grad(1)) return;
    Tensor x2 = ops::unary(OP_square, x);
    Tensor second;
    if (c.attrs().scalar == 0) {
        Tensor phi = ops::mul_scalar(ops::unary(OP_exp, ops::mul_scalar(x2, -0.5)), 0.5 * M_2_SQRTPI * M_SQRT1_2);
        second = ops::mul(phi, ops::rsub_scalar(x2, 2));
    } else {
        const double k = M_SQRT2 * M_2_SQRTPI * 0.5, cubic = 0.044715;
        Tensor t = ops::unary(OP_tanh, ops::mul_scalar(ops::add(x, ops::mul_scalar(ops::mul(x2, x), cubic)), k));
        Tensor du = ops::mul_scalar(ops::add_scalar(ops::mul_scalar(x2, 3 * cubic), 1), k);
        Tensor inner = ops::sub(du, ops::mul(ops::mul(x, t), ops::unary(OP_square, du)));
        inner = ops::add(inner, ops::mul_scalar(x2, 3 * k * cubic));   // x u'' / 2 = 3 k c x^2
        second = ops::mul(ops::rsub_scalar(ops::unary(OP_square, t), 1), inner);
    }
    c.grad_input[1] = ops::mul(ops::mul(gg, c.input(0)), second);
}

void backward_tril(BackwardCall& c) { c.grad_input[0] = ops::triangle(OP_tril, c.grad_output[0], c.attrs().start); }
void backward_triu(BackwardCall& c) { c.grad_input[0] = ops::triangle(OP_triu, c.grad_output[0], c.attrs().start); }

// ============================================================================================
// [SECTION] products and windows

// lstm: lstm_backward walks the steps back and gives every step's gate gradient (which is xw's) and
// c0's; h0's and W_hh's are products of those gates with W_hh and with the h each step read. It has
// no derivative of its own: a create_graph pass is refused here (as PyTorch refuses one through its
// fused cuDNN RNN), naming the way to the per-step form.
void backward_lstm(BackwardCall& c) {
    if (grad_enabled())
        engine_fail("lstm: nn.LSTM's fused layer has no second derivative (create_graph); set "
                    "torch.backends.fused_lstm = false before the forward pass to record each step as ops");
    const Tensor h = c.output(0), state = c.output(1), h0 = c.input(1), c0 = c.input(2), w_hh = c.input(3);
    auto gradient_or_none = [&](int i) {
        return c.grad_output[i].defined() ? c.grad_output[i] : ops::create(OP_zeros, Shape(), h.dtype(), 0, h.value().device());
    };
    Tensor d_gates = ops::lstm_backward(gradient_or_none(0), gradient_or_none(1), state, c0, w_hh);
    int64_t steps = h.value().shape[0], batch = h.value().shape[1], hidden = h.value().shape[2];
    if (c.needs_grad(0)) c.grad_input[0] = d_gates;
    if (c.needs_grad(1)) c.grad_input[1] = ops::mm(ops::select(d_gates, 0, 0), w_hh);
    if (c.needs_grad(2)) c.grad_input[2] = Tensor(d_gates.node.get(), 1);
    if (c.needs_grad(3)) {   // sum over steps of dgates[t]ᵀ h[t-1]: one product over every step
        Tensor h_before = steps == 1 ? ops::unsqueeze(h0, 0)
                                     : ops::cat({ops::unsqueeze(h0, 0), ops::narrow(h, 0, 0, steps - 1)}, 0);
        c.grad_input[3] = ops::mm(ops::reshape(d_gates, Shape{steps * batch, 4 * hidden}),
                                  ops::reshape(h_before, Shape{steps * batch, hidden}), true, false);
    }
}

// Y = op(A) op(B), op = optional transpose. The gradients are products again, with the
// transposes folded into flags rather than copies.
void backward_matmul(BackwardCall& c) {
    const Tensor& g = c.grad_output[0];
    Tensor a = c.input(0), b = c.input(1);
    bool ta = c.attrs().trans_a, tb = c.attrs().trans_b;
    auto product = [&](const Tensor& x, const Tensor& y, bool tx, bool ty) {
        return c.node->op == OP_bmm ? ops::bmm(x, y, tx, ty) : ops::mm(x, y, tx, ty);
    };
    if (c.needs_grad(0)) {
        if (!ta) c.grad_input[0] = product(g, b, false, !tb);   // dA = g op(B)ᵀ
        else c.grad_input[0] = product(b, g, tb, true);         // dA = (g op(B)ᵀ)ᵀ = op(B) gᵀ
    }
    if (c.needs_grad(1)) {
        if (!tb) c.grad_input[1] = product(a, g, !ta, false);   // dB = op(A)ᵀ g
        else c.grad_input[1] = product(g, a, true, ta);         // dB = (op(A)ᵀ g)ᵀ = gᵀ op(A)
    }
}

// The window a conv2d / max_pool2d node was recorded with, to pass on to its gradient's ops.
static Window2d window_of(const OpAttrs& a) {
    Window2d w;
    w.kernel_h = a.kernel_h, w.kernel_w = a.kernel_w;
    w.stride_h = a.stride_h, w.stride_w = a.stride_w;
    w.padding_h = a.padding_h, w.padding_w = a.padding_w;
    w.dilation_h = a.dilation_h, w.dilation_w = a.dilation_w;
    w.groups = a.groups;
    w.ceil_mode = a.ceil_mode;
    return w;
}

// Y = conv2d(X, W) + b is linear in X and in W, so each gradient is the other operand run
// through one of the backward ops; the bias gathers G over every sample and position.
void backward_conv2d(BackwardCall& c) {
    const Tensor& g = c.grad_output[0];
    Window2d window = window_of(c.attrs());
    if (c.needs_grad(0)) c.grad_input[0] = ops::conv2d_backward_input(g, c.input(1), c.input_shape(0), window);
    if (c.needs_grad(1)) c.grad_input[1] = ops::conv2d_backward_weight(g, c.input(0), c.input_shape(1), window);
    if (c.node->inputs.size() == 3 && c.needs_grad(2)) {   // two sums along contiguous rows: ~7x faster than sum_to
        const Shape& y = g.shape();   // [N,O,Ho,Wo] or [O,Ho,Wo]
        int64_t n = y.ndim == 4 ? y[0] : 1;
        Tensor rows = ops::reshape(g, Shape{n, y[y.ndim - 3], y[y.ndim - 2] * y[y.ndim - 1]});
        c.grad_input[2] = ops::reduce(OP_sum, ops::reduce(OP_sum, rows, 2, false), 0, false);
    }
}

// The three conv ops are one bilinear form read three ways: sum(G * conv2d(X, W)) is also
// sum(conv2d_backward_input(G, W) * X) and sum(conv2d_backward_weight(G, X) * W). So with Z the
// upstream gradient of dX = conv2d_backward_input(G, W): dG = conv2d(Z, W), dW = conv2d_backward_weight(G, Z).
void backward_conv2d_backward_input(BackwardCall& c) {
    const Tensor& z = c.grad_output[0];
    Window2d window = window_of(c.attrs());
    if (c.needs_grad(0)) c.grad_input[0] = ops::conv2d(z, c.input(1), Tensor(), window);
    if (c.needs_grad(1)) c.grad_input[1] = ops::conv2d_backward_weight(c.input(0), z, c.input_shape(1), window);
}

// ... and with Z the upstream gradient of dW = conv2d_backward_weight(G, X): dG = conv2d(X, Z),
// dX = conv2d_backward_input(G, Z).
void backward_conv2d_backward_weight(BackwardCall& c) {
    const Tensor& z = c.grad_output[0];
    Window2d window = window_of(c.attrs());
    if (c.needs_grad(0)) c.grad_input[0] = ops::conv2d(c.input(1), z, Tensor(), window);
    if (c.needs_grad(1)) c.grad_input[1] = ops::conv2d_backward_input(c.input(0), z, c.input_shape(1), window);
}

void backward_max_pool2d(BackwardCall& c) {
    c.grad_input[0] = ops::max_pool2d_backward(c.grad_output[0], c.output(1), c.input_shape(0), window_of(c.attrs()));
}

// max_pool2d_backward puts each g at its window's argmax, so its gradient reads Z back from
// there: a gather along each flattened H*W plane.
void backward_max_pool2d_backward(BackwardCall& c) {
    if (!c.needs_grad(0)) return;
    const Shape &g = c.input_shape(0), &x = c.attrs().shape;   // [N,C,Ho,Wo] and [N,C,H,W], or 3-d
    int64_t planes = x.ndim == 4 ? x[0] * x[1] : x[0];
    Tensor z_planes = ops::reshape(c.grad_output[0], Shape{planes, x[x.ndim - 2] * x[x.ndim - 1]});
    Tensor indices = ops::reshape(c.input(1), Shape{planes, g[g.ndim - 2] * g[g.ndim - 1]});
    c.grad_input[0] = ops::reshape(ops::gather(z_planes, 1, indices), g);
}

// ============================================================================================
// [SECTION] shape and reductions

void backward_transpose(BackwardCall& c) {
    c.grad_input[0] = ops::transpose(c.grad_output[0], c.attrs().dim, c.attrs().dim2);
}

void backward_reshape(BackwardCall& c) { c.grad_input[0] = ops::reshape(c.grad_output[0], c.input_shape(0)); }

void backward_expand(BackwardCall& c) { c.grad_input[0] = reduce_to(c.grad_output[0], c.input_shape(0)); }

void backward_sum_to(BackwardCall& c) { c.grad_input[0] = ops::expand(c.grad_output[0], c.input_shape(0)); }

void backward_cat(BackwardCall& c) {
    int dim = c.attrs().dim;
    int64_t offset = 0;
    for (int i = 0; i < c.node->inputs.size(); ++i) {
        int64_t length = c.input_shape(i).dims[dim];
        if (c.needs_grad(i)) c.grad_input[i] = ops::narrow(c.grad_output[0], dim, offset, length);
        offset += length;
    }
}

void backward_narrow(BackwardCall& c) {
    c.grad_input_slice(0, c.grad_output[0], c.attrs().dim, c.attrs().start);
}

void backward_narrow_backward(BackwardCall& c) {
    c.grad_input[0] = ops::narrow(c.grad_output[0], c.attrs().dim, c.attrs().start, c.attrs().length);
}

// The input's shape with the reduced dims as 1: what a reduction with keepdim gives.
static Shape kept_shape(const BackwardCall& c) {
    Shape s = c.input_shape(0);
    uint32_t mask = op_dims_mask(c.attrs(), s.ndim);
    for (int d = 0; d < s.ndim; ++d)
        if (mask & (1u << d)) s.dims[d] = 1;
    return s;
}

// A reduction's output (or its gradient) with the reduced dims back as size 1 (over every dim, a
// 0-d result already broadcasts against the input as it is).
static Tensor kept(const BackwardCall& c, const Tensor& y) {
    Shape s = kept_shape(c);
    if (y.shape() == s || c.attrs().all) return y;
    if (!c.attrs().all && c.attrs().dim2 == 0) return ops::unsqueeze(y, c.attrs().dim);
    return ops::reshape(y, s);
}

// The gradient of a reduction, spread back over the input's shape.
static Tensor spread_reduced_grad(const BackwardCall& c, const Tensor& g) {
    return ops::expand(kept(c, g), c.input_shape(0));
}

void backward_sum(BackwardCall& c) { c.grad_input[0] = spread_reduced_grad(c, c.grad_output[0]); }

void backward_mean(BackwardCall& c) {
    double count = static_cast<double>(c.input_shape(0).numel()) / c.output(0).numel();
    c.grad_input[0] = ops::div_scalar(spread_reduced_grad(c, c.grad_output[0]), count);
}

// y = prod of x: dx_i = g * (the product of the others). Written without dividing by a zero: with
// no zero in the group, g y / x_i; with one zero, g (product of the rest) at the zero and 0
// elsewhere; with two or more, 0 (PyTorch's answer, also at zeros).
void backward_prod(BackwardCall& c) {
    const Tensor x = c.input(0);
    uint32_t mask = op_dims_mask(c.attrs(), x.shape().ndim);
    Tensor zero = ops::eq(x, ops::create(OP_zeros, Shape{}, x.dtype()));
    Tensor x_safe = ops::masked_fill(x, zero, 1);
    Tensor prod_safe = ops::reduce_dims(OP_prod, x_safe, mask, true);
    Tensor zeros_count = ops::reduce_dims(OP_sum, zero, mask, true);
    Tensor no_zero = ops::eq(zeros_count, ops::create(OP_zeros, Shape{}, zeros_count.dtype()));
    Tensor one_zero = ops::eq(zeros_count, ops::create(OP_ones, Shape{}, zeros_count.dtype()));
    Tensor others = ops::add(ops::mul(no_zero, ops::div(prod_safe, x_safe)), ops::mul(ops::mul(one_zero, zero), prod_safe));
    c.grad_input[0] = ops::mul(kept(c, c.grad_output[0]), others);
}

// amax/amin: the gradient is shared evenly among the elements equal to the result, as PyTorch.
void backward_amax(BackwardCall& c) {
    uint32_t mask = op_dims_mask(c.attrs(), c.input_shape(0).ndim);
    Tensor winners = ops::eq(c.input(0), kept(c, c.output(0)));
    Tensor count = ops::reduce_dims(OP_sum, winners, mask, true);
    c.grad_input[0] = ops::mul(winners, ops::div(kept(c, c.grad_output[0]), count));
}

// y = running sum along dim: dx = the running sum of g from the end.
void backward_cumsum(BackwardCall& c) {
    uint32_t along = 1u << c.attrs().dim;
    c.grad_input[0] = ops::flip(ops::cumsum(ops::flip(c.grad_output[0], along), c.attrs().dim), along);
}

// sort, topk: each value goes back to where it came from.
void backward_sort(BackwardCall& c) {
    c.grad_input[0] = ops::scatter_add(c.grad_output[0], c.attrs().dim, c.output(1), c.input_shape(0));
}

void backward_flip(BackwardCall& c) { c.grad_input[0] = ops::call(OP_flip, {&c.grad_output[0]}, c.attrs()); }

// y = x with src written at index: x's gradient is g without the overwritten places; src's is g read there.
void backward_scatter(BackwardCall& c) {
    const Tensor& g = c.grad_output[0];
    int dim = c.attrs().dim;
    Tensor index = c.input(1);
    if (c.needs_grad(0)) c.grad_input[0] = ops::scatter(g, dim, index, ops::create(OP_zeros, index.shape(), g.dtype(), 0, g.value().device()));
    if (c.needs_grad(2)) c.grad_input[2] = ops::gather(g, dim, index);
}

void backward_max(BackwardCall& c) {
    const OpAttrs& a = c.attrs();
    const Tensor& g = c.grad_output[0];
    if (a.all) {   // shared evenly among ties, as PyTorch does
        Tensor mask = ops::eq(c.input(0), c.output(0));
        Tensor share = ops::div(g, ops::reduce_all(OP_sum, mask));
        c.grad_input[0] = ops::mul(mask, share);
        return;
    }
    Tensor indices = c.output(1);
    Tensor g_kept = a.keepdim ? g : ops::unsqueeze(g, a.dim);
    Tensor i_kept = a.keepdim ? indices : ops::unsqueeze(indices, a.dim);
    c.grad_input[0] = ops::scatter_add(g_kept, a.dim, i_kept, c.input_shape(0));
}

// The gradient through y = softmax(x) along dim: dx = y * (g - sum(g * y)).
static Tensor softmax_grad(const Tensor& g, const Tensor& y, int dim) {
    Tensor dot = ops::reduce(OP_sum, ops::mul(g, y), dim, true);
    return ops::mul(y, ops::sub(g, dot));
}

void backward_softmax(BackwardCall& c) { c.grad_input[0] = softmax_grad(c.grad_output[0], c.output(0), c.attrs().dim); }

void backward_log_softmax(BackwardCall& c) {   // dx = g - e^y * sum(g)
    const Tensor& g = c.grad_output[0];
    Tensor total = ops::reduce(OP_sum, g, c.attrs().dim, true);
    c.grad_input[0] = ops::sub(g, ops::mul(ops::unary(OP_exp, c.output(0)), total));
}

void backward_gather(BackwardCall& c) {
    if (c.needs_grad(0))
        c.grad_input[0] = ops::scatter_add(c.grad_output[0], c.attrs().dim, c.input(1), c.input_shape(0));
}

void backward_scatter_add(BackwardCall& c) {
    if (c.needs_grad(0)) c.grad_input[0] = ops::gather(c.grad_output[0], c.attrs().dim, c.input(1));
}

void backward_to(BackwardCall& c) { c.grad_input[0] = ops::to(c.grad_output[0], c.node->inputs[0].value().dtype); }
void backward_to_device(BackwardCall& c) {
    c.grad_input[0] = ops::to_device(c.grad_output[0], c.node->inputs[0].value().device());
}

// ============================================================================================
// [SECTION] losses and in-place ops

// l = sum (or mean) of (a - b)^2: da = g * 2 (a - b) / count, db = -da.
void backward_mse_loss(BackwardCall& c) {
    double count = c.attrs().reduction == REDUCTION_MEAN ? static_cast<double>(c.input_shape(0).numel()) : 1;
    Tensor da = ops::mul(ops::sub(c.input(0), c.input(1)), ops::mul_scalar(c.grad_output[0], 2 / count));
    if (c.needs_grad(0)) c.grad_input[0] = da;
    if (c.needs_grad(1)) c.grad_input[1] = ops::neg(da);
}

void backward_cross_entropy(BackwardCall& c) {
    if (c.needs_grad(0))
        c.grad_input[0] = ops::class_loss_backward(OP_cross_entropy_backward, c.grad_output[0], c.input(0), c.input(1),
                                                c.attrs().reduction);
}

void backward_nll_loss(BackwardCall& c) {
    if (c.needs_grad(0))
        c.grad_input[0] = ops::nll_loss_backward(c.grad_output[0], c.input(1), c.input_shape(0), c.attrs().reduction);
}

void backward_multi_margin_loss(BackwardCall& c) {
    if (c.needs_grad(0))
        c.grad_input[0] = ops::class_loss_backward(OP_multi_margin_loss_backward, c.grad_output[0], c.input(0),
                                                c.input(1), c.attrs().reduction);
}

// The loss derivatives are linear in their gradient g: out = g * local(x). The gradient of g is
// then sum(gg * local(x)), with local(x) the same op run with g = 1.
static Tensor grad_of_loss_grad(const BackwardCall& c, const Tensor& gg) {
    Tensor one = ops::create(OP_ones, Shape{}, c.output(0).dtype());
    Tensor local = ops::class_loss_backward(c.node->op, one, c.input(1), c.input(2), c.attrs().reduction);
    return ops::reduce_all(OP_sum, ops::mul(gg, local));
}

// out = g s (p - onehot), p = softmax(x) along rows: dg as above; dx = g s * softmax_grad(gg, p).
void backward_cross_entropy_backward(BackwardCall& c) {
    const Tensor& gg = c.grad_output[0];
    if (c.needs_grad(0)) c.grad_input[0] = grad_of_loss_grad(c, gg);
    if (c.needs_grad(1)) {
        int rows_dim = c.input_shape(1).ndim - 1;
        double s = c.attrs().reduction == REDUCTION_MEAN && rows_dim == 1 ? 1.0 / c.input_shape(1).dims[0] : 1;
        Tensor p = ops::softmax(c.input(1), rows_dim);
        c.grad_input[1] = ops::mul(softmax_grad(gg, p, rows_dim), ops::mul_scalar(c.input(0), s));
    }
}

// out = nll_loss's derivative, -g s at each label: its adjoint is nll_loss itself, dg = nll_loss(gg).
void backward_nll_loss_backward(BackwardCall& c) {
    if (c.needs_grad(0))
        c.grad_input[0] = ops::class_loss(OP_nll_loss, c.grad_output[0], c.input(1), c.attrs().reduction);
}

// The hinge's derivative is piecewise constant in x: x gets no gradient (zero), g gets one.
void backward_multi_margin_loss_backward(BackwardCall& c) {
    if (c.needs_grad(0)) c.grad_input[0] = grad_of_loss_grad(c, c.grad_output[0]);
}

void backward_add_inplace(BackwardCall& c) {
    const Tensor& g = c.grad_output[0];
    double alpha = c.attrs().scalar;
    if (c.needs_grad(0)) c.grad_input[0] = g;
    if (c.needs_grad(1)) c.grad_input[1] = reduce_to(alpha == 1 ? g : ops::mul_scalar(g, alpha), c.input_shape(1));
}

void backward_sub_inplace(BackwardCall& c) {
    const Tensor& g = c.grad_output[0];
    if (c.needs_grad(0)) c.grad_input[0] = g;
    if (c.needs_grad(1)) c.grad_input[1] = reduce_to(ops::mul_scalar(g, -c.attrs().scalar), c.input_shape(1));
}

void backward_mul_inplace(BackwardCall& c) {   // the multiplier's gradient is refused at record time
    if (c.needs_grad(0)) c.grad_input[0] = ops::mul(c.grad_output[0], c.input(1));
}

void backward_masked_fill(BackwardCall& c) {   // y = s where mask, else x: dx = g where not mask, else 0
    if (c.needs_grad(0)) c.grad_input[0] = ops::masked_fill(c.grad_output[0], c.input(1), 0);
}

void backward_copy_inplace(BackwardCall& c) {
    if (c.needs_grad(1)) c.grad_input[1] = reduce_to(c.grad_output[0], c.input_shape(1));
}

}  // namespace td
