// op_cases.cpp: one or more test rows per op of engine/core/ops.def, in the table's order.
//
// Expected values are written by hand, or computed here from the inputs with the standard library
// and the plain loops of test_helpers.h — never by calling the engine. Inputs for the gradient
// check stay away from kinks (relu, abs, clamp, max ties) and domain edges (log, sqrt, pow > 0).
// Dims in attrs are 0-based, as in C++; index tensors hold 1-based int64 indices.
//
// [SECTION] inputs      the shared input values
// [SECTION] references  plain-loop references and checks for the random ops
// [SECTION] rows        op_cases(): the rows, grouped as in ops.def
#include "op_cases.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "test_helpers.h"

namespace td_test {

namespace {

using td::OpAttrs;
using td::Window2d;
constexpr DType F32 = td::DTYPE_F32, F64 = td::DTYPE_F64, I64 = td::DTYPE_I64;

// ============================================================================================
// [SECTION] inputs
//
// Shared inputs. [2,3] unless said; no zeros, no ties, no two values closer than 0.1.

const Shape S23{2, 3};
const std::vector<double> X23 = {0.5, -1.2, 2.0, 1.5, -0.3, 0.8};
const std::vector<double> Y23 = {1.1, 0.4, -0.7, -2.0, 0.9, 1.3};
const std::vector<double> POS23 = {0.5, 1.2, 2.0, 1.5, 0.3, 0.8};        // for log, sqrt, pow
const std::vector<double> NONZERO23 = {1.5, -0.8, 2.5, -1.25, 0.6, 3.0};  // divisors
const std::vector<double> B3 = {0.25, -1.5, 2.0};                        // [3], broadcast over rows
const std::vector<double> C21 = {2.0, -0.5};                             // [2,1], broadcast over cols

// [2,3,4] and [3,4] with distinct values, for ops along a dim of a bigger tensor.
std::vector<double> distinct_values(int64_t n, double scale) {
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) v[k] = scale * static_cast<double>((k * 7) % n) - 1.3;   // a permutation of steps
    return v;
}
const Shape S234{2, 3, 4};
const std::vector<double> V234 = distinct_values(24, 0.15);
const Shape S34{3, 4};
const std::vector<double> V34 = distinct_values(12, 0.25);

// ============================================================================================
// [SECTION] references

InputCase in(const Shape& s, const std::vector<double>& v, DType d = F32) { return {s, v, d}; }
OutputCase out(const Shape& s, const std::vector<double>& v, DType d = F32) { return {s, v, d}; }

OpCase row(const std::string& op, const std::string& variant, std::vector<InputCase> inputs, const OpAttrs& attrs,
           std::vector<OutputCase> outputs) {
    OpCase c;
    c.op = op;
    c.variant = variant;
    c.inputs = std::move(inputs);
    c.attrs = attrs;
    c.outputs = std::move(outputs);
    return c;
}

OpAttrs create_attrs(const Shape& shape, DType dtype, double fill = 0) {
    OpAttrs a;
    a.shape = shape;
    a.dtype = dtype;
    a.scalar = fill;
    return a;
}

OpCase create_row(const std::string& op, const std::string& variant, const Shape& shape, DType dtype,
                  const std::vector<double>& expected, double fill = 0) {
    return row(op, variant, {}, create_attrs(shape, dtype, fill), {out(shape, expected, dtype)});
}

std::vector<double> constant(int64_t n, double x) { return std::vector<double>(static_cast<size_t>(n), x); }

std::string number(double x) {
    char buffer[32];
    snprintf(buffer, sizeof buffer, "%g", x);
    return buffer;
}

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

std::vector<double> softmax_line(const std::vector<double>& x) {
    double total = 0;
    for (double v : x) total += std::exp(v);
    std::vector<double> y;
    for (double v : x) y.push_back(std::exp(v) / total);
    return y;
}

std::vector<double> log_softmax_line(const std::vector<double>& x) {
    double total = 0;
    for (double v : x) total += std::exp(v);
    std::vector<double> y;
    for (double v : x) y.push_back(v - std::log(total));
    return y;
}

double line_sum(const std::vector<double>& x) { return std::accumulate(x.begin(), x.end(), 0.0); }
double line_max(const std::vector<double>& x) { return *std::max_element(x.begin(), x.end()); }
double line_argmax_1based(const std::vector<double>& x) {
    return static_cast<double>(std::max_element(x.begin(), x.end()) - x.begin() + 1);
}

// x reduced over the dims in `mask` (bit d: dim d) with f, in the order of the remaining dims.
std::vector<double> reduce_mask_ref(const Shape& s, const std::vector<double>& x, uint32_t mask,
                                    const std::function<double(const std::vector<double>&)>& f) {
    Shape kept = s;
    for (int d = 0; d < s.ndim; ++d)
        if (mask & (1u << d)) kept.dims[d] = 1;
    std::vector<std::vector<double>> groups(static_cast<size_t>(kept.numel()));
    std::vector<int64_t> kept_strides = strides_of(kept);
    for (int64_t k = 0; k < s.numel(); ++k) {
        std::vector<int64_t> idx = unravel(s, k);
        int64_t at = 0;
        for (int d = 0; d < s.ndim; ++d) at += (mask & (1u << d) ? 0 : idx[d]) * kept_strides[d];
        groups[at].push_back(x[k]);
    }
    std::vector<double> out;
    for (const auto& g : groups) out.push_back(f(g));
    return out;
}

// x reversed along the dims in `mask`.
std::vector<double> flip_ref(const Shape& s, const std::vector<double>& x, uint32_t mask) {
    std::vector<double> out(x.size());
    std::vector<int64_t> strides = strides_of(s);
    for (int64_t k = 0; k < s.numel(); ++k) {
        std::vector<int64_t> idx = unravel(s, k);
        int64_t from = 0;
        for (int d = 0; d < s.ndim; ++d) from += (mask & (1u << d) ? s.dims[d] - 1 - idx[d] : idx[d]) * strides[d];
        out[k] = x[from];
    }
    return out;
}

double line_prod(const std::vector<double>& x) { return std::accumulate(x.begin(), x.end(), 1.0, std::multiplies<double>()); }
double line_min(const std::vector<double>& x) { return *std::min_element(x.begin(), x.end()); }
double line_argmin_1based(const std::vector<double>& x) {
    return static_cast<double>(std::min_element(x.begin(), x.end()) - x.begin() + 1);
}
std::vector<double> cumsum_line(const std::vector<double>& x) {
    std::vector<double> y;
    double total = 0;
    for (double v : x) y.push_back(total += v);
    return y;
}

// Every element of shape `to` read from x (shape `from`) with broadcasting: expand's reference.
std::vector<double> expand_ref(const Shape& from, const std::vector<double>& x, const Shape& to) {
    return broadcast_ref(from, x, to, constant(to.numel(), 0), [](double a, double) { return a; });
}

// y = x with dims d1 and d2 swapped, by plain index arithmetic.
std::vector<double> transpose_ref(const Shape& s, const std::vector<double>& x, int d1, int d2, Shape* out_shape) {
    Shape o = s;
    std::swap(o.dims[d1], o.dims[d2]);
    std::vector<double> y(x.size());
    std::vector<int64_t> in_strides = strides_of(s);
    for (int64_t k = 0; k < o.numel(); ++k) {
        std::vector<int64_t> idx = unravel(o, k);
        std::swap(idx[d1], idx[d2]);
        int64_t from = 0;
        for (int i = 0; i < s.ndim; ++i) from += idx[i] * in_strides[i];
        y[k] = x[from];
    }
    *out_shape = o;
    return y;
}

// Batched products: bmm's reference, one matmul_ref per batch.
std::vector<double> bmm_ref(const Shape& sa, const std::vector<double>& a, bool ta, const Shape& sb,
                            const std::vector<double>& b, bool tb) {
    std::vector<double> y;
    int64_t a_size = sa[1] * sa[2], b_size = sb[1] * sb[2];
    for (int64_t i = 0; i < sa[0]; ++i) {
        std::vector<double> ai(a.begin() + i * a_size, a.begin() + (i + 1) * a_size);
        std::vector<double> bi(b.begin() + i * b_size, b.begin() + (i + 1) * b_size);
        std::vector<double> ci = matmul_ref(ai, sa[1], sa[2], ta, bi, sb[1], sb[2], tb);
        y.insert(y.end(), ci.begin(), ci.end());
    }
    return y;
}

// A window with the same stride and padding along H and W.
Window2d square_window(int stride, int padding) {
    Window2d w;
    w.stride_h = w.stride_w = stride;
    w.padding_h = w.padding_w = padding;
    return w;
}

// The op attrs of a window (as ops:: records them), with a target shape for the backward ops.
OpAttrs attrs_of(const Window2d& w, const Shape& shape = Shape()) {
    OpAttrs a;
    a.kernel_h = w.kernel_h, a.kernel_w = w.kernel_w, a.stride_h = w.stride_h, a.stride_w = w.stride_w;
    a.padding_h = w.padding_h, a.padding_w = w.padding_w, a.dilation_h = w.dilation_h, a.dilation_w = w.dilation_w;
    a.groups = w.groups, a.ceil_mode = w.ceil_mode;
    a.shape = shape;
    return a;
}

// Windows along one axis (PyTorch's formula): floor, or with ceil_mode rounding up as long as the
// last window starts inside the input or the left padding.
int64_t window_count_ref(int64_t size, int64_t kernel, int stride, int padding, int dilation, bool ceil_mode) {
    int64_t room = size + 2 * padding - dilation * (kernel - 1) - 1;
    int64_t count = (ceil_mode ? room + stride - 1 : room) / stride + 1;
    if (ceil_mode && (count - 1) * stride >= size + padding) --count;
    return count;
}

// conv2d's output shape: windows that do not fit are dropped. xs may be one image [C,H,W].
Shape conv2d_ref_shape(const Shape& xs, const Shape& ws, const Window2d& win) {
    int nd = xs.ndim;
    int64_t oh = window_count_ref(xs[nd - 2], ws[2], win.stride_h, win.padding_h, win.dilation_h, false);
    int64_t ow = window_count_ref(xs[nd - 1], ws[3], win.stride_w, win.padding_w, win.dilation_w, false);
    if (nd == 3) return Shape{ws[0], oh, ow};
    return Shape{xs[0], ws[0], oh, ow};
}

Shape conv2d_ref_shape(const Shape& xs, const Shape& ws, int stride, int padding) {
    return conv2d_ref_shape(xs, ws, square_window(stride, padding));
}

// Every product of conv2d's definition, y[n,o,oy,ox] += x[n,g*C/G+c,oy*sh-ph+i*dh,ox*sw-pw+j*dw] * w[o,c,i,j]
// with g = o's group (terms in the padding left out): visit(y_at, x_at, w_at) with flat indices.
// The three conv references are this one loop, accumulating into y, x or w.
void conv2d_terms(const Shape& xs, const Shape& ws, const Window2d& win,
                  const std::function<void(int64_t, int64_t, int64_t)>& visit) {
    Shape ys = conv2d_ref_shape(xs, ws, win);
    int nd = xs.ndim;
    int64_t batch = nd == 4 ? xs[0] : 1, channels = xs[nd - 3], h = xs[nd - 2], w = xs[nd - 1];
    int64_t oh = ys[ys.ndim - 2], ow = ys[ys.ndim - 1];
    int64_t outs_per_group = ws[0] / win.groups;
    for (int64_t n = 0; n < batch; ++n)
        for (int64_t o = 0; o < ws[0]; ++o)
            for (int64_t oy = 0; oy < oh; ++oy)
                for (int64_t ox = 0; ox < ow; ++ox)
                    for (int64_t c = 0; c < ws[1]; ++c)
                        for (int64_t i = 0; i < ws[2]; ++i)
                            for (int64_t j = 0; j < ws[3]; ++j) {
                                int64_t iy = oy * win.stride_h - win.padding_h + i * win.dilation_h;
                                int64_t ix = ox * win.stride_w - win.padding_w + j * win.dilation_w;
                                if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                                int64_t channel = (o / outs_per_group) * ws[1] + c;
                                visit(((n * ws[0] + o) * oh + oy) * ow + ox, ((n * channels + channel) * h + iy) * w + ix,
                                      ((o * ws[1] + c) * ws[2] + i) * ws[3] + j);
                            }
}

std::vector<double> conv2d_ref(const Shape& xs, const std::vector<double>& x, const Shape& ws,
                               const std::vector<double>& w, const std::vector<double>& bias, const Window2d& win) {
    Shape ys = conv2d_ref_shape(xs, ws, win);
    std::vector<double> y(static_cast<size_t>(ys.numel()), 0.0);
    int64_t plane = ys[ys.ndim - 2] * ys[ys.ndim - 1];
    for (size_t k = 0; k < y.size() && !bias.empty(); ++k) y[k] = bias[(k / plane) % ws[0]];
    conv2d_terms(xs, ws, win, [&](int64_t yi, int64_t xi, int64_t wi) { y[yi] += x[xi] * w[wi]; });
    return y;
}

std::vector<double> conv2d_ref(const Shape& xs, const std::vector<double>& x, const Shape& ws,
                               const std::vector<double>& w, const std::vector<double>& bias, int stride, int padding) {
    return conv2d_ref(xs, x, ws, w, bias, square_window(stride, padding));
}

// The gradient of sum(g * conv2d(x, w)) with respect to x (shape xs) ...
std::vector<double> conv2d_grad_input_ref(const std::vector<double>& g, const Shape& xs, const Shape& ws,
                                          const std::vector<double>& w, const Window2d& win) {
    std::vector<double> dx(static_cast<size_t>(xs.numel()), 0.0);
    conv2d_terms(xs, ws, win, [&](int64_t yi, int64_t xi, int64_t wi) { dx[xi] += g[yi] * w[wi]; });
    return dx;
}

std::vector<double> conv2d_grad_input_ref(const std::vector<double>& g, const Shape& xs, const Shape& ws,
                                          const std::vector<double>& w, int stride, int padding) {
    return conv2d_grad_input_ref(g, xs, ws, w, square_window(stride, padding));
}

// ... and with respect to w (shape ws).
std::vector<double> conv2d_grad_weight_ref(const std::vector<double>& g, const Shape& xs, const std::vector<double>& x,
                                           const Shape& ws, const Window2d& win) {
    std::vector<double> dw(static_cast<size_t>(ws.numel()), 0.0);
    conv2d_terms(xs, ws, win, [&](int64_t yi, int64_t xi, int64_t wi) { dw[wi] += g[yi] * x[xi]; });
    return dw;
}

std::vector<double> conv2d_grad_weight_ref(const std::vector<double>& g, const Shape& xs, const std::vector<double>& x,
                                           const Shape& ws, int stride, int padding) {
    return conv2d_grad_weight_ref(g, xs, x, ws, square_window(stride, padding));
}

// max_pool2d by plain loops, as PyTorch's CPU kernel: each window's first maximum over the
// elements inside the input and its 1-based flat index in the H*W plane. xs may be [C,H,W].
void max_pool2d_ref(const Shape& xs, const std::vector<double>& x, const Window2d& win, Shape* ys,
                    std::vector<double>* values, std::vector<double>* indices) {
    int nd = xs.ndim;
    int64_t planes = nd == 4 ? xs[0] * xs[1] : xs[0], h = xs[nd - 2], w = xs[nd - 1];
    int64_t oh = window_count_ref(h, win.kernel_h, win.stride_h, win.padding_h, win.dilation_h, win.ceil_mode);
    int64_t ow = window_count_ref(w, win.kernel_w, win.stride_w, win.padding_w, win.dilation_w, win.ceil_mode);
    *ys = nd == 4 ? Shape{xs[0], xs[1], oh, ow} : Shape{xs[0], oh, ow};
    for (int64_t plane = 0; plane < planes; ++plane)
        for (int64_t oy = 0; oy < oh; ++oy)
            for (int64_t ox = 0; ox < ow; ++ox) {
                int64_t best = -1;
                for (int64_t i = 0; i < win.kernel_h; ++i)
                    for (int64_t j = 0; j < win.kernel_w; ++j) {
                        int64_t iy = oy * win.stride_h - win.padding_h + i * win.dilation_h;
                        int64_t ix = ox * win.stride_w - win.padding_w + j * win.dilation_w;
                        if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                        int64_t at = iy * w + ix;
                        if (best < 0 || x[plane * h * w + at] > x[plane * h * w + best]) best = at;
                    }
                values->push_back(x[plane * h * w + best]);
                indices->push_back(static_cast<double>(best + 1));
            }
}

void max_pool2d_ref(const Shape& xs, const std::vector<double>& x, int kernel, int stride, Shape* ys,
                    std::vector<double>* values, std::vector<double>* indices) {
    Window2d win = square_window(stride, 0);
    win.kernel_h = win.kernel_w = kernel;
    max_pool2d_ref(xs, x, win, ys, values, indices);
}

// An LSTM layer by plain loops (ops.def's lstm): xw [T,B,4H], h0 and c0 [B,H], w [4H,H]; h
// [T,B,H] and the state [T,B,5H] (i f g o c per step), PyTorch's gate order.
struct LstmRef {
    int64_t steps, batch, hidden;
    std::vector<double> xw, h0, c0, w, h, state;
};

double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }

void lstm_ref_forward(LstmRef& r) {
    const int64_t H = r.hidden, G = 4 * H;
    r.h.assign(static_cast<size_t>(r.steps * r.batch * H), 0);
    r.state.assign(static_cast<size_t>(r.steps * r.batch * 5 * H), 0);
    std::vector<double> h = r.h0, c = r.c0;
    for (int64_t t = 0; t < r.steps; ++t) {
        std::vector<double> h_next(h.size()), c_next(c.size());
        for (int64_t b = 0; b < r.batch; ++b) {
            std::vector<double> pre(static_cast<size_t>(G));
            for (int64_t k = 0; k < G; ++k) {
                pre[k] = r.xw[(t * r.batch + b) * G + k];
                for (int64_t m = 0; m < H; ++m) pre[k] += h[b * H + m] * r.w[k * H + m];
            }
            for (int64_t j = 0; j < H; ++j) {
                double i = sigmoid_ref(pre[j]), f = sigmoid_ref(pre[H + j]), g = std::tanh(pre[2 * H + j]),
                       o = sigmoid_ref(pre[3 * H + j]);
                c_next[b * H + j] = f * c[b * H + j] + i * g;
                h_next[b * H + j] = o * std::tanh(c_next[b * H + j]);
                double* st = &r.state[(t * r.batch + b) * 5 * H];
                st[j] = i, st[H + j] = f, st[2 * H + j] = g, st[3 * H + j] = o, st[4 * H + j] = c_next[b * H + j];
                r.h[(t * r.batch + b) * H + j] = h_next[b * H + j];
            }
        }
        h = h_next, c = c_next;
    }
}

// The gates' gradient [T,B,4H] and c0's [B,H] from the gradients of h and of the state (either
// empty: none), by the chain rule written out step by step.
void lstm_ref_backward(const LstmRef& r, const std::vector<double>& gh, const std::vector<double>& gs,
                       std::vector<double>* d_gates, std::vector<double>* d_c0) {
    const int64_t H = r.hidden, G = 4 * H, B = r.batch;
    d_gates->assign(static_cast<size_t>(r.steps * B * G), 0);
    std::vector<double> dh(static_cast<size_t>(B * H), 0), dc(static_cast<size_t>(B * H), 0);
    for (int64_t t = r.steps - 1; t >= 0; --t) {
        std::vector<double> dh_prev(dh.size(), 0);
        for (int64_t b = 0; b < B; ++b) {
            const double* st = &r.state[(t * B + b) * 5 * H];
            for (int64_t j = 0; j < H; ++j) {
                int64_t hk = (t * B + b) * H + j, sk = (t * B + b) * 5 * H;
                double i = st[j], f = st[H + j], g = st[2 * H + j], o = st[3 * H + j], c = st[4 * H + j];
                double c_before = t > 0 ? r.state[((t - 1) * B + b) * 5 * H + 4 * H + j] : r.c0[b * H + j];
                double dh_j = dh[b * H + j] + (gh.empty() ? 0 : gh[hk]);
                auto gs_at = [&](int part) { return gs.empty() ? 0 : gs[sk + part * H + j]; };
                double dc_j = dc[b * H + j] + gs_at(4) + dh_j * o * (1 - std::tanh(c) * std::tanh(c));
                double* row = &(*d_gates)[(t * B + b) * G];
                row[j] = (dc_j * g + gs_at(0)) * i * (1 - i);
                row[H + j] = (dc_j * c_before + gs_at(1)) * f * (1 - f);
                row[2 * H + j] = (dc_j * i + gs_at(2)) * (1 - g * g);
                row[3 * H + j] = (dh_j * std::tanh(c) + gs_at(3)) * o * (1 - o);
                dc[b * H + j] = dc_j * f;
            }
            for (int64_t m = 0; m < H; ++m)
                for (int64_t k = 0; k < G; ++k) dh_prev[b * H + m] += (*d_gates)[(t * B + b) * G + k] * r.w[k * H + m];
        }
        dh = dh_prev;
    }
    *d_c0 = dc;
}

// The checks shared by rand rows: every value in [0, 1), and not all the same.
void check_uniform(const Tensor& t) {
    std::vector<double> v = values_of(t);
    bool in_range = true;
    for (double x : v) in_range = in_range && x >= 0 && x < 1;
    CHECK(in_range);
    double mean = line_sum(v) / static_cast<double>(v.size());
    CHECK(mean > 0.4);   // 1,000 samples of U[0,1): mean 0.5, standard error 0.009
    CHECK(mean < 0.6);
}

void check_normal_sample(const Tensor& t) {
    std::vector<double> v = values_of(t);
    bool finite = true;
    for (double x : v) finite = finite && std::isfinite(x);
    CHECK(finite);
    double mean = line_sum(v) / static_cast<double>(v.size());
    CHECK(std::fabs(mean) < 0.2);   // 1,000 samples: standard error 0.03
    CHECK(*std::min_element(v.begin(), v.end()) < -1.5);   // P(no sample below -1.5) = 0.93^1000
    CHECK(*std::max_element(v.begin(), v.end()) > 1.5);
}

// Class losses by plain loops: x holds rows of `classes` scores, labels are 1-based. per_row
// gets one row and its 0-based label; the result is the mean over rows, or the sum.
using RowLoss = std::function<double(const std::vector<double>& row, int label)>;
double class_loss_ref(const std::vector<double>& x, int64_t classes, const std::vector<double>& labels, bool mean,
                      const RowLoss& per_row) {
    double total = 0;
    for (size_t i = 0; i < labels.size(); ++i) {
        std::vector<double> row(x.begin() + i * classes, x.begin() + (i + 1) * classes);
        total += per_row(row, static_cast<int>(labels[i]) - 1);
    }
    return mean ? total / static_cast<double>(labels.size()) : total;
}

// The derivative of a class loss, row by row: per_row gets one row and its 0-based label and
// gives d(row's loss)/d(row); every value is then scaled by g (and 1/N for the mean).
using RowGrad = std::function<std::vector<double>(const std::vector<double>& row, int label)>;
std::vector<double> class_grad_ref(double g, const std::vector<double>& x, int64_t classes,
                                   const std::vector<double>& labels, bool mean, const RowGrad& per_row) {
    double scale = mean ? g / static_cast<double>(labels.size()) : g;
    std::vector<double> dx;
    for (size_t i = 0; i < labels.size(); ++i) {
        std::vector<double> row(x.begin() + i * classes, x.begin() + (i + 1) * classes);
        for (double d : per_row(row, static_cast<int>(labels[i]) - 1)) dx.push_back(scale * d);
    }
    return dx;
}

double cross_entropy_row(const std::vector<double>& row, int label) { return -log_softmax_line(row)[label]; }
double nll_row(const std::vector<double>& row, int label) { return -row[label]; }

// sum over j != label of max(0, 1 - row[label] + row[j]), over C (PyTorch's multi_margin_loss)
double multi_margin_row(const std::vector<double>& row, int label) {
    double total = 0;
    for (size_t j = 0; j < row.size(); ++j)
        if (static_cast<int>(j) != label) total += std::max(0.0, 1 - row[label] + row[j]);
    return total / static_cast<double>(row.size());
}

std::vector<double> cross_entropy_row_grad(const std::vector<double>& row, int label) {
    std::vector<double> d = softmax_line(row);
    d[label] -= 1;
    return d;
}

std::vector<double> multi_margin_row_grad(const std::vector<double>& row, int label) {
    double c = static_cast<double>(row.size());
    std::vector<double> d(row.size(), 0.0);
    for (size_t j = 0; j < row.size(); ++j) {
        if (static_cast<int>(j) == label || 1 - row[label] + row[j] <= 0) continue;
        d[j] += 1 / c;
        d[label] -= 1 / c;
    }
    return d;
}

}  // namespace

// ============================================================================================
// [SECTION] rows

const std::vector<OpCase>& op_cases() {
    static const std::vector<OpCase> rows = [] {
        std::vector<OpCase> r;
        auto add = [&](OpCase c) { r.push_back(std::move(c)); };

        // --- creation ---------------------------------------------------------------------------
        {
            OpCase c = create_row("tensor", "float64 [2,2] from values", Shape{2, 2}, F64, {1.5, -2, 3, 0.004});
            c.init_values = {1.5, -2, 3, 0.004};
            add(c);
            OpCase i = create_row("tensor", "int64 [3] from values", Shape{3}, I64, {7, -2, 0});
            i.init_values = {7, -2, 0};
            add(i);
        }
        add(create_row("zeros", "float32 [2,3]", S23, F32, constant(6, 0)));
        add(create_row("zeros", "float64 0-d", Shape{}, F64, {0}));
        add(create_row("ones", "int64 [3]", Shape{3}, I64, {1, 1, 1}));
        add(create_row("ones", "float64 [2,2]", Shape{2, 2}, F64, {1, 1, 1, 1}));
        add(create_row("full", "float64 [2,2] of 2.5", Shape{2, 2}, F64, {2.5, 2.5, 2.5, 2.5}, 2.5));
        add(create_row("full", "int64 [3] of -4", Shape{3}, I64, {-4, -4, -4}, -4));
        {
            OpCase c = create_row("rand", "float32 [1000]", Shape{1000}, F32, {});
            c.check = check_uniform;
            add(c);
            OpCase d = create_row("rand", "float64 [10,100]", Shape{10, 100}, F64, {});
            d.check = check_uniform;
            add(d);
            OpCase n = create_row("randn", "float32 [1000]", Shape{1000}, F32, {});
            n.check = check_normal_sample;
            add(n);
            OpCase m = create_row("randn", "float64 odd count [999]", Shape{999}, F64, {});
            m.check = check_normal_sample;
            add(m);
        }
        add(create_row("eye", "float32 [3,3]", Shape{3, 3}, F32, {1, 0, 0, 0, 1, 0, 0, 0, 1}));
        add(create_row("eye", "float64 [2,3]", Shape{2, 3}, F64, {1, 0, 0, 0, 1, 0}));
        add(create_row("arange", "int64 [5]", Shape{5}, I64, {0, 1, 2, 3, 4}));
        add(create_row("arange", "float32 [4]", Shape{4}, F32, {0, 1, 2, 3}));
        add(row("linspace", "float64 0 to 1 in 5 steps", {}, {.lo = 0, .hi = 1, .shape = Shape{5}, .dtype = F64},
                {out(Shape{5}, {0, 0.25, 0.5, 0.75, 1}, F64)}));
        add(row("linspace", "int64 -3 to 4 in 4 steps truncates (PyTorch's values)", {},
                {.lo = -3, .hi = 4, .shape = Shape{4}, .dtype = I64}, {out(Shape{4}, {-3, 0, 1, 4}, I64)}));
        add(row("linspace", "int64 -20 to 4 in 10 steps: [6] is a fused multiply-add's -3, not -4 (PyTorch's values)", {},
                {.lo = -20, .hi = 4, .shape = Shape{10}, .dtype = I64},
                {out(Shape{10}, {-20, -17, -14, -12, -9, -6, -3, -1, 1, 4}, I64)}));
        add(row("linspace", "one step is start", {}, {.lo = 2, .hi = 5, .shape = Shape{1}, .dtype = F32},
                {out(Shape{1}, {2}, F32)}));
        {
            OpCase r = row("randint", "int64 [1000] in [-2, 3)", {}, {.lo = -2, .hi = 3, .shape = Shape{1000}, .dtype = I64},
                           {out(Shape{1000}, {}, I64)});
            r.check = [](const Tensor& t) {
                std::vector<double> v = values_of(t);
                std::vector<int> counts(5, 0);
                bool whole_in_range = true;
                for (double x : v) {
                    whole_in_range = whole_in_range && x == std::floor(x) && x >= -2 && x < 3;
                    if (whole_in_range) ++counts[static_cast<size_t>(x + 2)];
                }
                CHECK(whole_in_range);
                for (int c : counts) CHECK(c > 140);   // each of 5 values: 200 expected, standard deviation 13
            };
            add(r);
            OpCase p = row("randperm", "int64 [50]: a permutation of 1..50", {}, {.shape = Shape{50}, .dtype = I64},
                           {out(Shape{50}, {}, I64)});
            p.check = [](const Tensor& t) {
                std::vector<double> v = values_of(t), sorted = v;
                std::sort(sorted.begin(), sorted.end());
                std::vector<double> expected(50);
                std::iota(expected.begin(), expected.end(), 1.0);
                CHECK(sorted == expected);
                CHECK(v != expected);   // shuffled (the chance of the identity is 1/50!)
            };
            add(p);
        }

        // --- elementwise, two tensors ---------------------------------------------------------
        auto plus = [](double a, double b) { return a + b; };
        auto minus = [](double a, double b) { return a - b; };
        auto times = [](double a, double b) { return a * b; };
        auto over = [](double a, double b) { return a / b; };
        add(row("add", "same shape", {in(S23, X23), in(S23, Y23)}, {}, {out(S23, zip_values(X23, Y23, plus))}));
        add(row("add", "[2,3] + [3]", {in(S23, X23), in(Shape{3}, B3)}, {},
                {out(S23, broadcast_ref(S23, X23, Shape{3}, B3, plus))}));
        add(row("add", "int64 stays int64", {in(Shape{3}, {1, 2, 3}, I64), in(Shape{3}, {10, 20, 30}, I64)}, {},
                {out(Shape{3}, {11, 22, 33}, I64)}));
        // int64 overflow wraps around, as in PyTorch (2^62 + 2^62 is -2^63; 2^62 * 4 is 0): on the GPU
        // too, where no -fwrapv reaches the device code (docs/cuda.md)
        add(row("add", "int64 overflow wraps", {in(Shape{2}, {0x1p62, -0x1p62}, I64), in(Shape{2}, {0x1p62, -0x1p62}, I64)}, {},
                {out(Shape{2}, {-0x1p63, -0x1p63}, I64)}));
        add(row("mul", "int64 overflow wraps", {in(Shape{2}, {0x1p62, 3}, I64), in(Shape{2}, {4, 0x1p62}, I64)}, {},
                {out(Shape{2}, {0, -0x1p62}, I64)}));
        add(row("add", "float32 + float64 promotes to float64", {in(Shape{3}, B3, F32), in(Shape{3}, {1, 2, 3}, F64)},
                {}, {out(Shape{3}, {1.25, 0.5, 5}, F64)}));
        add(row("sub", "same shape", {in(S23, X23), in(S23, Y23)}, {}, {out(S23, zip_values(X23, Y23, minus))}));
        add(row("sub", "[2,3] - [2,1]", {in(S23, X23), in(Shape{2, 1}, C21)}, {},
                {out(S23, broadcast_ref(S23, X23, Shape{2, 1}, C21, minus))}));
        add(row("mul", "same shape", {in(S23, X23), in(S23, Y23)}, {}, {out(S23, zip_values(X23, Y23, times))}));
        add(row("mul", "[2,3] * 0-d", {in(S23, X23), in(Shape{}, {-1.5})}, {},
                {out(S23, map_values(X23, [](double x) { return -1.5 * x; }))}));
        {
            // both sides broadcast: [2,1,4] * [3,1] -> [2,3,4]
            std::vector<double> a = distinct_values(8, 0.4), b = {0.5, -1.5, 2.5};
            add(row("mul", "[2,1,4] * [3,1]", {in(Shape{2, 1, 4}, a), in(Shape{3, 1}, b)}, {},
                    {out(S234, broadcast_ref(Shape{2, 1, 4}, a, Shape{3, 1}, b, times))}));
        }
        add(row("div", "same shape", {in(S23, X23), in(S23, NONZERO23)}, {},
                {out(S23, zip_values(X23, NONZERO23, over))}));
        add(row("div", "[2,3] / [3]", {in(S23, X23), in(Shape{3}, {1.5, -2.0, 0.8})}, {},
                {out(S23, broadcast_ref(S23, X23, Shape{3}, {1.5, -2.0, 0.8}, over))}));
        add(row("pow_tensor", "positive a ^ b", {in(S23, POS23), in(S23, Y23)}, {},
                {out(S23, zip_values(POS23, Y23, [](double a, double b) { return std::pow(a, b); }))}));
        {
            OpCase negative_base = row("pow_tensor", "negative a ^ whole b, [2,3] ^ [3]",
                                       {in(S23, X23), in(Shape{3}, {2, 3, -1})}, {},
                                       {out(S23, broadcast_ref(S23, X23, Shape{3}, {2, 3, -1},
                                                               [](double a, double b) { return std::pow(a, b); }))});
            negative_base.grad_inputs = {0};   // d/db = y ln a is nan for a < 0
            add(negative_base);
            // PyTorch's gradients at a zero base: da = b a^(b-1) (0 here), db = 0 where a == 0 and b >= 0
            add(row("pow_tensor", "zero bases: zero gradients, not NaN", {in(Shape{3}, {0, 0, 0.5}), in(Shape{3}, {2, 3, 1.5})},
                    {}, {out(Shape{3}, {0, 0, std::pow(0.5, 1.5)})}));
            OpCase zero_exponent = row("pow_tensor", "a ^ 0 is 1 with da = 0, also at a = 0",
                                       {in(Shape{2}, {0, 1.5}), in(Shape{2}, {0, 0})}, {}, {out(Shape{2}, {1, 1})});
            zero_exponent.grad_inputs = {0};   // d/db at a = 0, b = 0 is infinite on one side
            add(zero_exponent);
            add(row("pow_tensor", "int64 ^ int64 stays int64", {in(Shape{3}, {2, 3, -2}, I64), in(Shape{3}, {3, 2, 3}, I64)},
                    {}, {out(Shape{3}, {8, 9, -8}, I64)}));
        }
        add(row("eq", "float32", {in(Shape{4}, {1, 2, 3, 4}), in(Shape{4}, {1, 5, 3, 0})}, {},
                {out(Shape{4}, {1, 0, 1, 0})}));
        add(row("eq", "int64 gives float32", {in(Shape{3}, {1, 2, 3}, I64), in(Shape{3}, {1, 0, 3}, I64)}, {},
                {out(Shape{3}, {1, 0, 1}, F32)}));
        add(row("lt", "[2,3] < [3]", {in(S23, X23), in(Shape{3}, {0.5, 0, 1})}, {}, {out(S23, {0, 1, 0, 0, 1, 1})}));
        add(row("le", "[2,3] <= [3]", {in(S23, X23), in(Shape{3}, {0.5, 0, 1})}, {}, {out(S23, {1, 1, 0, 0, 1, 1})}));
        add(row("gt", "[2,3] > [3]", {in(S23, X23), in(Shape{3}, {0.5, 0, 1})}, {}, {out(S23, {0, 0, 1, 1, 0, 0})}));
        add(row("ge", "int64 gives float32", {in(Shape{3}, {1, 2, 3}, I64), in(Shape{3}, {2, 2, 2}, I64)}, {},
                {out(Shape{3}, {0, 1, 1}, F32)}));
        {
            OpCase fill = row("masked_fill", "x where mask is 0, else 7; mask [3] broadcast",
                              {in(S23, X23), in(Shape{3}, {1, 0, 1})}, {.scalar = 7},
                              {out(S23, {7, -1.2, 7, 7, -0.3, 7})});
            fill.grad_inputs = {0};   // a mask has no gradient
            add(fill);
        }
        add(row("eq", "[2,2] == [2] broadcast", {in(Shape{2, 2}, {1, 2, 3, 2}), in(Shape{2}, {1, 2})}, {},
                {out(Shape{2, 2}, {1, 1, 0, 1})}));
        add(row("ne", "float32", {in(Shape{4}, {1, 2, 3, 4}), in(Shape{4}, {1, 5, 3, 0})}, {}, {out(Shape{4}, {0, 1, 0, 1})}));
        add(row("ne", "int64 [2,2] != [2] gives float32", {in(Shape{2, 2}, {1, 2, 3, 2}, I64), in(Shape{2}, {1, 2}, I64)},
                {}, {out(Shape{2, 2}, {0, 0, 1, 0}, F32)}));
        auto larger = [](double a, double b) { return a > b ? a : b; };
        auto smaller = [](double a, double b) { return a < b ? a : b; };
        add(row("maximum", "same shape", {in(S23, X23), in(S23, Y23)}, {}, {out(S23, zip_values(X23, Y23, larger))}));
        add(row("maximum", "[2,3] and [3], a tie shares the gradient", {in(S23, X23), in(Shape{3}, B3)}, {},
                {out(S23, broadcast_ref(S23, X23, Shape{3}, B3, larger))}));
        {
            add(row("maximum", "int64 stays int64", {in(Shape{3}, {1, 7, -2}, I64), in(Shape{3}, {4, 5, -2}, I64)}, {},
                    {out(Shape{3}, {4, 7, -2}, I64)}));
            OpCase nan = row("minimum", "NaN in either gives NaN", {in(Shape{2}, {std::nan(""), 1}, F64),
                             in(Shape{2}, {0, std::nan("")}, F64)}, {}, {out(Shape{2}, {std::nan(""), std::nan("")}, F64)});
            nan.no_gradcheck = "finite differences of NaN";
            add(nan);
        }
        add(row("minimum", "same shape", {in(S23, X23), in(S23, Y23)}, {}, {out(S23, zip_values(X23, Y23, smaller))}));
        add(row("minimum", "[2,3] and [2,1]", {in(S23, X23), in(Shape{2, 1}, C21)}, {},
                {out(S23, broadcast_ref(S23, X23, Shape{2, 1}, C21, smaller))}));
        add(row("clamp_min", "x and a tensor bound", {in(S23, X23), in(S23, Y23)}, {}, {out(S23, zip_values(X23, Y23, larger))}));
        const std::vector<double> bound3 = {0.25, -1.5, 1.7}, bound21 = {1.8, -0.5};   // no ties with X23
        add(row("clamp_min", "a [3] bound broadcast", {in(S23, X23), in(Shape{3}, bound3)}, {},
                {out(S23, broadcast_ref(S23, X23, Shape{3}, bound3, larger))}));
        add(row("clamp_max", "x and a tensor bound", {in(S23, X23), in(S23, Y23)}, {}, {out(S23, zip_values(X23, Y23, smaller))}));
        add(row("clamp_max", "a [2,1] bound broadcast", {in(S23, X23), in(Shape{2, 1}, bound21)}, {},
                {out(S23, broadcast_ref(S23, X23, Shape{2, 1}, bound21, smaller))}));
        {
            const std::vector<double> mask = {1, 0, 2, 0, -1, 0};   // non-zero is true
            std::vector<double> expected = broadcast_ref(S23, X23, Shape{3}, B3, [](double x, double b) { return x + b * 0; });
            std::vector<double> choice = broadcast_ref(S23, X23, Shape{3}, B3, [](double, double b) { return b; });
            for (size_t k = 0; k < expected.size(); ++k) expected[k] = mask[k] != 0 ? X23[k] : choice[k];
            OpCase w = row("where", "a [2,3] mask picks x, else a [3] broadcast", {in(S23, mask), in(S23, X23), in(Shape{3}, B3)},
                           {}, {out(S23, expected)});
            w.grad_inputs = {1, 2};   // a mask has no gradient
            add(w);
            OpCase i = row("where", "an int64 [2,1] mask, float64 choices", {in(Shape{2, 1}, {0, 3}, I64), in(S23, X23, F64),
                           in(S23, Y23, F64)}, {}, {out(S23, {1.1, 0.4, -0.7, 1.5, -0.3, 0.8}, F64)});
            add(i);
        }
        // PyTorch's promotion: a 0-d tensor does not widen tensors with dims of its category.
        add(row("add", "float32 [3] + float64 0-d stays float32", {in(Shape{3}, B3, F32), in(Shape{}, {1}, F64)}, {},
                {out(Shape{3}, {1.25, -0.5, 3}, F32)}));
        add(row("mul", "int64 [3] * float64 0-d is float64", {in(Shape{3}, {1, 2, 3}, I64), in(Shape{}, {0.5}, F64)}, {},
                {out(Shape{3}, {0.5, 1, 1.5}, F64)}));
        add(row("add", "0-d float64 + 0-d float32 is float64", {in(Shape{}, {0.5}, F64), in(Shape{}, {1}, F32)}, {},
                {out(Shape{}, {1.5}, F64)}));

        // --- elementwise, tensor and a number ----------------------------------------------------
        add(row("add_scalar", "x + 1.5", {in(S23, X23)}, {.scalar = 1.5},
                {out(S23, map_values(X23, [](double x) { return x + 1.5; }))}));
        add(row("add_scalar", "int64 + 2 stays int64", {in(Shape{3}, {1, 2, 3}, I64)}, {.scalar = 2},
                {out(Shape{3}, {3, 4, 5}, I64)}));
        add(row("mul_scalar", "x * -2", {in(S23, X23)}, {.scalar = -2},
                {out(S23, map_values(X23, [](double x) { return -2 * x; }))}));
        add(row("div_scalar", "x / 4", {in(S23, X23)}, {.scalar = 4},
                {out(S23, map_values(X23, [](double x) { return x / 4; }))}));
        add(row("rsub_scalar", "3 - x", {in(S23, X23)}, {.scalar = 3},
                {out(S23, map_values(X23, [](double x) { return 3 - x; }))}));
        add(row("rdiv_scalar", "2 / x", {in(S23, NONZERO23)}, {.scalar = 2},
                {out(S23, map_values(NONZERO23, [](double x) { return 2 / x; }))}));
        for (double p : {1.0, 2.0, 3.0}) {
            add(row("pow", "x ^ " + number(p), {in(S23, X23)}, {.scalar = p},
                    {out(S23, map_values(X23, [p](double x) { return std::pow(x, p); }))}));
        }
        for (double p : {0.5, -1.5, 2.7}) {
            add(row("pow", "positive x ^ " + number(p), {in(S23, POS23)}, {.scalar = p},
                    {out(S23, map_values(POS23, [p](double x) { return std::pow(x, p); }))}));
        }
        add(row("pow", "int64 ^ 3 stays int64", {in(Shape{3}, {-3, 2, 5}, I64)}, {.scalar = 3},
                {out(Shape{3}, {-27, 8, 125}, I64)}));
        add(row("pow", "x ^ 0 is 1 with a zero gradient, also at x = 0", {in(Shape{3}, {0, 1.5, -2})}, {.scalar = 0},
                {out(Shape{3}, {1, 1, 1})}));

        // --- elementwise, one tensor --------------------------------------------------------------
        add(row("neg", "-x", {in(S23, X23)}, {}, {out(S23, map_values(X23, [](double x) { return -x; }))}));
        add(row("exp", "e^x", {in(S23, X23)}, {}, {out(S23, map_values(X23, [](double x) { return std::exp(x); }))}));
        add(row("exp", "int64 input computes in float32", {in(Shape{3}, {0, 1, 2}, I64)}, {},
                {out(Shape{3}, {1, std::exp(1.0), std::exp(2.0)}, F32)}));
        add(row("log", "ln x", {in(S23, POS23)}, {},
                {out(S23, map_values(POS23, [](double x) { return std::log(x); }))}));
        add(row("sqrt", "sqrt x", {in(S23, POS23)}, {},
                {out(S23, map_values(POS23, [](double x) { return std::sqrt(x); }))}));
        add(row("abs", "|x|", {in(S23, X23)}, {}, {out(S23, map_values(X23, [](double x) { return std::fabs(x); }))}));
        {
            OpCase signs = row("sign", "-1, 0, 1", {in(Shape{4}, {-2, 0, 3.5, -0.1})}, {}, {out(Shape{4}, {-1, 0, 1, -1})});
            signs.no_gradcheck = "0 is where sign jumps";
            add(signs);
            add(row("sign", "a zero derivative away from 0, as PyTorch", {in(S23, X23)}, {},
                    {out(S23, map_values(X23, [](double x) { return double((x > 0) - (x < 0)); }))}));
        }
        add(row("tanh", "tanh x", {in(S23, X23)}, {},
                {out(S23, map_values(X23, [](double x) { return std::tanh(x); }))}));
        add(row("sigmoid", "1 / (1 + e^-x)", {in(S23, X23)}, {}, {out(S23, map_values(X23, sigmoid))}));
        add(row("relu", "max(x, 0)", {in(S23, X23)}, {},
                {out(S23, map_values(X23, [](double x) { return x > 0 ? x : 0; }))}));
        add(row("clamp", "min -0.5 max 1", {in(S23, X23)}, {.lo = -0.5, .hi = 1.0},
                {out(S23, {0.5, -0.5, 1.0, 1.0, -0.3, 0.8})}));
        auto unary_row = [&](const char* op, const char* variant, const std::vector<double>& xs, double (*f)(double)) {
            add(row(op, variant, {in(S23, xs)}, {}, {out(S23, map_values(xs, f))}));
        };
        unary_row("sin", "sin x", X23, [](double x) { return std::sin(x); });
        unary_row("cos", "cos x", X23, [](double x) { return std::cos(x); });
        unary_row("log1p", "ln(1 + x)", POS23, [](double x) { return std::log1p(x); });
        unary_row("expm1", "e^x - 1", X23, [](double x) { return std::expm1(x); });
        unary_row("reciprocal", "1 / x", NONZERO23, [](double x) { return 1 / x; });
        unary_row("rsqrt", "1 / sqrt x", POS23, [](double x) { return 1 / std::sqrt(x); });
        unary_row("square", "x^2", X23, [](double x) { return x * x; });
        add(row("square", "int64 stays int64", {in(Shape{3}, {-3, 0, 4}, I64)}, {}, {out(Shape{3}, {9, 0, 16}, I64)}));
        // Away from whole numbers (and halves) the rounding ops have a zero derivative, as PyTorch's.
        const std::vector<double> fractions = {0.3, -1.2, 2.7, 1.4, -0.6, 0.8};
        unary_row("floor", "largest whole <= x", fractions, [](double x) { return std::floor(x); });
        unary_row("ceil", "smallest whole >= x", fractions, [](double x) { return std::ceil(x); });
        unary_row("round", "nearest whole", fractions, [](double x) { return std::nearbyint(x); });
        unary_row("trunc", "toward zero", fractions, [](double x) { return std::trunc(x); });
        {
            OpCase halves = row("round", "halves to even, as PyTorch", {in(Shape{5}, {0.5, 1.5, 2.5, -0.5, -1.5})}, {},
                                {out(Shape{5}, {0, 2, 2, -0.0, -2})});
            halves.no_gradcheck = "a half is where round jumps";
            add(halves);
        }
        add(row("floor", "int64 stays int64", {in(Shape{2}, {-3, 7}, I64)}, {}, {out(Shape{2}, {-3, 7}, I64)}));
        add(row("clamp", "min 0 only", {in(S23, X23)}, {.lo = 0.0},
                {out(S23, {0.5, 0.0, 2.0, 1.5, 0.0, 0.8})}));
        {
            const double nan = std::nan(""), inf = INFINITY;
            const std::vector<double> special = {nan, 1.5, inf, -inf, -0.0, 0};
            add(row("isnan", "float64", {in(S23, special, F64)}, {}, {out(S23, {1, 0, 0, 0, 0, 0}, F64)}));
            add(row("isinf", "float32", {in(S23, special)}, {}, {out(S23, {0, 0, 1, 1, 0, 0})}));
            add(row("isfinite", "float64", {in(S23, special, F64)}, {}, {out(S23, {0, 1, 0, 0, 1, 1}, F64)}));
            add(row("isnan", "int64 gives float32 zeros", {in(Shape{2}, {3, -4}, I64)}, {}, {out(Shape{2}, {0, 0}, F32)}));
            add(row("isfinite", "int64 gives float32 ones", {in(Shape{2}, {3, -4}, I64)}, {}, {out(Shape{2}, {1, 1}, F32)}));
        }

        // --- activations (F.name) -------------------------------------------------------------------
        add(row("leaky_relu", "slope 0.1", {in(S23, X23)}, {.scalar = 0.1},
                {out(S23, map_values(X23, [](double x) { return x > 0 ? x : 0.1 * x; }))}));
        add(row("elu", "alpha 1.3", {in(S23, X23)}, {.scalar = 1.3},
                {out(S23, map_values(X23, [](double x) { return x > 0 ? x : 1.3 * std::expm1(x); }))}));
        auto gelu_exact = [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); };
        auto gelu_tanh = [](double x) {
            return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
        };
        add(row("gelu", "exact", {in(S23, X23)}, {}, {out(S23, map_values(X23, gelu_exact))}));
        add(row("gelu", "tanh approximation", {in(S23, X23, F64)}, {.scalar = 1}, {out(S23, map_values(X23, gelu_tanh), F64)}));
        add(row("silu", "x sigmoid(x)", {in(S23, X23)}, {}, {out(S23, map_values(X23, [](double x) { return x * sigmoid(x); }))}));
        add(row("softplus", "beta 1.5, threshold 20", {in(S23, X23)}, {.scalar = 1.5, .hi = 20},
                {out(S23, map_values(X23, [](double x) { return std::log1p(std::exp(1.5 * x)) / 1.5; }))}));
        add(row("softplus", "beta 2, threshold 2: x where 2x > 2", {in(S23, X23, F64)}, {.scalar = 2, .hi = 2},
                {out(S23, map_values(X23, [](double x) { return 2 * x > 2 ? x : std::log1p(std::exp(2 * x)) / 2; }), F64)}));

        // --- triangles ---------------------------------------------------------------------------------
        {
            auto triangle_ref = [](const Shape& s, const std::vector<double>& x, int64_t k, bool lower) {
                int64_t rows = s[s.ndim - 2], cols = s[s.ndim - 1];
                std::vector<double> y = x;
                for (size_t at = 0; at < y.size(); ++at) {
                    int64_t i = (static_cast<int64_t>(at) / cols) % rows, j = static_cast<int64_t>(at) % cols;
                    if (lower ? j - i > k : j - i < k) y[at] = 0;
                }
                return y;
            };
            add(row("tril", "main diagonal", {in(S23, X23)}, {}, {out(S23, {0.5, 0, 0, 1.5, -0.3, 0})}));
            add(row("tril", "[2,3,4] below diagonal -1", {in(S234, V234)}, {.start = -1},
                    {out(S234, triangle_ref(S234, V234, -1, true))}));
            add(row("triu", "main diagonal", {in(S23, X23)}, {}, {out(S23, {0.5, -1.2, 2.0, 0, -0.3, 0.8})}));
            const std::vector<double> whole = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
            add(row("triu", "[3,4] from diagonal 2, int64", {in(S34, whole, I64)}, {.start = 2},
                    {out(S34, triangle_ref(S34, whole, 2, false), I64)}));
        }

        // --- local derivatives of the activations ------------------------------------------------
        {
            std::vector<double> tanh_y = map_values(X23, [](double x) { return std::tanh(x); });
            add(row("tanh_backward", "g * (1 - y^2)", {in(S23, Y23), in(S23, tanh_y)}, {},
                    {out(S23, zip_values(Y23, tanh_y, [](double g, double y) { return g * (1 - y * y); }))}));
            std::vector<double> sig_y = {0.2, 0.7, 0.45, 0.9, 0.1, 0.6};
            add(row("sigmoid_backward", "g * y * (1 - y)", {in(S23, Y23), in(S23, sig_y)}, {},
                    {out(S23, zip_values(Y23, sig_y, [](double g, double y) { return g * y * (1 - y); }))}));
            add(row("relu_backward", "g where y > 0", {in(S23, Y23), in(S23, X23)}, {},
                    {out(S23, zip_values(Y23, X23, [](double g, double y) { return y > 0 ? g : 0; }))}));
            add(row("clamp_backward", "g where -0.5 <= x <= 1", {in(S23, Y23), in(S23, X23)}, {.lo = -0.5, .hi = 1.0},
                    {out(S23, {1.1, 0, 0, 0, 0.9, 1.3})}));
            // gelu'(x) = Phi(x) + x phi(x); the gradient check differentiates it again (gelu'').
            auto gelu_derivative = [](double x) {
                return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
            };
            add(row("gelu_backward", "g gelu'(x)", {in(S23, Y23, F64), in(S23, X23, F64)}, {},
                    {out(S23, zip_values(Y23, X23, [&](double g, double x) { return g * gelu_derivative(x); }), F64)}));
            auto gelu_tanh_derivative = [](double x) {
                double k = std::sqrt(2 / M_PI), t = std::tanh(k * (x + 0.044715 * x * x * x));
                return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
            };
            add(row("gelu_backward", "tanh approximation", {in(S23, Y23, F64), in(S23, X23, F64)}, {.scalar = 1},
                    {out(S23, zip_values(Y23, X23, [&](double g, double x) { return g * gelu_tanh_derivative(x); }), F64)}));
        }

        // --- matrix products ----------------------------------------------------------------------
        {
            const std::vector<double> M32 = {1.0, -0.5, 0.3, 2.0, -1.1, 0.7};   // [3,2]
            const std::vector<double> N32 = {0.5, 1.5, -1.2, -0.3, 2.0, 0.8};   // [3,2]
            add(row("mm", "[2,3] x [3,2]", {in(S23, X23), in(Shape{3, 2}, M32)}, {},
                    {out(Shape{2, 2}, matmul_ref(X23, 2, 3, false, M32, 3, 2, false))}));
            add(row("mm", "trans_a: [3,2]^T x [3,2]", {in(Shape{3, 2}, N32), in(Shape{3, 2}, M32)}, {.trans_a = true},
                    {out(Shape{2, 2}, matmul_ref(N32, 3, 2, true, M32, 3, 2, false))}));
            add(row("mm", "trans_b: [2,3] x [2,3]^T", {in(S23, X23), in(S23, Y23)}, {.trans_b = true},
                    {out(Shape{2, 2}, matmul_ref(X23, 2, 3, false, Y23, 2, 3, true))}));
            add(row("mm", "trans_a and trans_b: [3,2]^T x [2,3]^T", {in(Shape{3, 2}, N32), in(S23, Y23)},
                    {.trans_a = true, .trans_b = true},
                    {out(Shape{2, 2}, matmul_ref(N32, 3, 2, true, Y23, 2, 3, true))}));
            add(row("mm", "int64 stays int64 (as PyTorch)", {in(Shape{1, 2}, {1, 2}, I64), in(Shape{2, 1}, {3, 4}, I64)},
                    {}, {out(Shape{1, 1}, {11}, I64)}));
        add(row("mm", "float64 [3,2] x [2,3] gives [3,3]", {in(Shape{3, 2}, M32, F64), in(S23, X23, F64)}, {},
                    {out(Shape{3, 3}, matmul_ref(M32, 3, 2, false, X23, 2, 3, false), F64)}));

            const Shape A{2, 2, 3}, B{2, 3, 2}, Bt{2, 2, 3};
            std::vector<double> a = distinct_values(12, 0.3), b = distinct_values(12, 0.2);
            add(row("bmm", "[2,2,3] x [2,3,2]", {in(A, a), in(B, b)}, {},
                    {out(Shape{2, 2, 2}, bmm_ref(A, a, false, B, b, false))}));
            add(row("bmm", "trans_b: [2,2,3] x [2,2,3]^T", {in(A, a), in(Bt, b)}, {.trans_b = true},
                    {out(Shape{2, 2, 2}, bmm_ref(A, a, false, Bt, b, true))}));
            add(row("bmm", "trans_a: [2,3,2]^T x [2,3,2]", {in(B, a), in(B, b)}, {.trans_a = true},
                    {out(Shape{2, 2, 2}, bmm_ref(B, a, true, B, b, false))}));
        }

        // --- convolution and pooling ----------------------------------------------------------------
        {
            // The lecture's homework: stride 2, no padding, cross-correlation as PyTorch's.
            const std::vector<double> homework = {1, 2, 3, 4, 5, 2, 2, 1, 1, 1, 3, 2, 1, 1, 1,
                                                  4, 1, 1, 1, 1, 5, 1, 1, 1, 1};
            const std::vector<double> cross = {0, -1, 0, 1, 1, 1, 0, -1, 0};
            add(row("conv2d", "the lecture's homework: 5x5 with a 3x3 cross at stride 2",
                    {in(Shape{1, 1, 5, 5}, homework), in(Shape{1, 1, 3, 3}, cross)}, attrs_of(square_window(2, 0)),
                    {out(Shape{1, 1, 2, 2}, {1, -2, 3, 1})}));

            const Shape X1{2, 2, 5, 4}, W1{3, 2, 3, 2};   // a rectangular kernel with a bias
            std::vector<double> x1 = distinct_values(80, 0.05), w1 = distinct_values(36, 0.1);
            add(row("conv2d", "[2,2,5,4] with [3,2,3,2] and a bias", {in(X1, x1), in(W1, w1), in(Shape{3}, B3)},
                    {}, {out(conv2d_ref_shape(X1, W1, 1, 0), conv2d_ref(X1, x1, W1, w1, B3, 1, 0))}));
            const Shape X2{1, 2, 6, 5}, W2{2, 2, 3, 3};   // stride 2: the 6th row fits no window
            std::vector<double> x2 = distinct_values(60, 0.05), w2 = distinct_values(36, 0.1);
            add(row("conv2d", "stride 2 drops what does not fit, no bias", {in(X2, x2), in(W2, w2)}, attrs_of(square_window(2, 0)),
                    {out(conv2d_ref_shape(X2, W2, 2, 0), conv2d_ref(X2, x2, W2, w2, {}, 2, 0))}));
            const Shape X3{1, 2, 5, 4};
            std::vector<double> x3 = distinct_values(40, 0.05);
            add(row("conv2d", "stride 2 and padding 1 with a bias", {in(X3, x3), in(W2, w2), in(Shape{2}, C21)},
                    attrs_of(square_window(2, 1)),
                    {out(conv2d_ref_shape(X3, W2, 2, 1), conv2d_ref(X3, x3, W2, w2, C21, 2, 1))}));
            const Shape X4{2, 3, 2, 2}, W4{4, 3, 1, 1};   // a 1x1 kernel reads the image as its columns
            std::vector<double> x4 = distinct_values(24, 0.1), w4 = distinct_values(12, 0.2), b4 = {0.5, -1, 1.5, 2};
            add(row("conv2d", "float64 1x1 kernel with a bias",
                    {in(X4, x4, F64), in(W4, w4, F64), in(Shape{4}, b4, F64)}, {},
                    {out(conv2d_ref_shape(X4, W4, 1, 0), conv2d_ref(X4, x4, W4, w4, b4, 1, 0), F64)}));

            const Shape G5{2, 3, 5, 4}, X5{2, 2, 4, 3}, W5{3, 2, 2, 2};   // padding 1: the output is larger
            std::vector<double> g5 = distinct_values(120, 0.02), x5 = distinct_values(48, 0.05);
            std::vector<double> w5 = distinct_values(24, 0.1);
            const Shape G2 = conv2d_ref_shape(X2, W2, 2, 0), G4 = conv2d_ref_shape(X4, W4, 1, 0);
            std::vector<double> g2 = distinct_values(G2.numel(), 0.3), g4 = distinct_values(G4.numel(), 0.15);
            add(row("conv2d_backward_input", "padding 1", {in(G5, g5), in(W5, w5)}, attrs_of(square_window(1, 1), X5),
                    {out(X5, conv2d_grad_input_ref(g5, X5, W5, w5, 1, 1))}));
            add(row("conv2d_backward_input", "stride 2: the row no window reads gets 0", {in(G2, g2), in(W2, w2)},
                    attrs_of(square_window(2, 0), X2), {out(X2, conv2d_grad_input_ref(g2, X2, W2, w2, 2, 0))}));
            add(row("conv2d_backward_input", "float64 1x1 kernel", {in(G4, g4, F64), in(W4, w4, F64)},
                    {.shape = X4}, {out(X4, conv2d_grad_input_ref(g4, X4, W4, w4, 1, 0), F64)}));
            add(row("conv2d_backward_weight", "padding 1", {in(G5, g5), in(X5, x5)}, attrs_of(square_window(1, 1), W5),
                    {out(W5, conv2d_grad_weight_ref(g5, X5, x5, W5, 1, 1))}));
            add(row("conv2d_backward_weight", "stride 2 drops what does not fit", {in(G2, g2), in(X2, x2)},
                    attrs_of(square_window(2, 0), W2), {out(W2, conv2d_grad_weight_ref(g2, X2, x2, W2, 2, 0))}));
            add(row("conv2d_backward_weight", "float64 1x1 kernel", {in(G4, g4, F64), in(X4, x4, F64)},
                    {.shape = W4}, {out(W4, conv2d_grad_weight_ref(g4, X4, x4, W4, 1, 0), F64)}));

            struct Pool {
                std::string variant;
                Shape shape;
                std::vector<double> x;
                int kernel, stride;
                DType dtype;
            };
            const std::vector<Pool> pools = {
                {"[1,2,4,4] kernel 2", Shape{1, 2, 4, 4}, distinct_values(32, 0.1), 2, 2, F32},
                {"float64 kernel 3 stride 2: windows overlap, the last column is dropped", Shape{1, 1, 5, 6},
                 distinct_values(30, 0.1), 3, 2, F64},
                {"[2,1,3,5] kernel 2 stride 1", Shape{2, 1, 3, 5}, distinct_values(30, 0.2), 2, 1, F32},
            };
            for (const Pool& p : pools) {
                Shape ys;
                std::vector<double> values, indices;
                max_pool2d_ref(p.shape, p.x, p.kernel, p.stride, &ys, &values, &indices);
                add(row("max_pool2d", p.variant, {in(p.shape, p.x, p.dtype)}, {.kernel_h = p.kernel, .kernel_w = p.kernel, .stride_h = p.stride, .stride_w = p.stride},
                        {out(ys, values, p.dtype), out(ys, indices, I64)}));
            }
            OpCase ties = row("max_pool2d", "ties keep the first maximum",
                              {in(Shape{1, 1, 2, 4}, {1, 1, 0, 2, 1, 0, 2, 2})}, {.kernel_h = 2, .kernel_w = 2, .stride_h = 2, .stride_w = 2},
                              {out(Shape{1, 1, 1, 2}, {1, 2}), out(Shape{1, 1, 1, 2}, {1, 4}, I64)});
            ties.no_gradcheck = "at a tie the maximum has no derivative";
            add(ties);

            // PyTorch's full options: rectangular stride, padding and dilation, groups, one image.
            Window2d grouped;
            grouped.stride_h = 1, grouped.stride_w = 2, grouped.padding_h = 1, grouped.padding_w = 2;
            grouped.dilation_h = 2, grouped.dilation_w = 1, grouped.groups = 2;
            const Shape X6{2, 4, 6, 5}, W6{4, 2, 2, 3};
            std::vector<double> x6 = distinct_values(240, 0.01), w6 = distinct_values(48, 0.05), b6 = {0.5, -1, 1.5, 2};
            const Shape Y6 = conv2d_ref_shape(X6, W6, grouped);
            add(row("conv2d", "groups 2, dilation (2,1), stride (1,2), padding (1,2)",
                    {in(X6, x6, F64), in(W6, w6, F64), in(Shape{4}, b6, F64)}, attrs_of(grouped),
                    {out(Y6, conv2d_ref(X6, x6, W6, w6, b6, grouped), F64)}));
            Window2d depthwise;
            depthwise.padding_h = 1, depthwise.groups = 3;
            const Shape X7{3, 5, 4}, W7{6, 1, 3, 2};   // one image, two filters per channel
            std::vector<double> x7 = distinct_values(60, 0.05), w7 = distinct_values(36, 0.1);
            add(row("conv2d", "unbatched [3,5,4], depthwise groups 3", {in(X7, x7), in(W7, w7)}, attrs_of(depthwise),
                    {out(conv2d_ref_shape(X7, W7, depthwise), conv2d_ref(X7, x7, W7, w7, {}, depthwise))}));
            std::vector<double> g6 = distinct_values(Y6.numel(), 0.02);
            add(row("conv2d_backward_input", "groups 2 with dilation", {in(Y6, g6, F64), in(W6, w6, F64)},
                    attrs_of(grouped, X6), {out(X6, conv2d_grad_input_ref(g6, X6, W6, w6, grouped), F64)}));
            add(row("conv2d_backward_weight", "groups 2 with dilation", {in(Y6, g6, F64), in(X6, x6, F64)},
                    attrs_of(grouped, W6), {out(W6, conv2d_grad_weight_ref(g6, X6, x6, W6, grouped), F64)}));
            const Shape Y7 = conv2d_ref_shape(X7, W7, depthwise);
            std::vector<double> g7 = distinct_values(Y7.numel(), 0.03);
            add(row("conv2d_backward_input", "unbatched depthwise", {in(Y7, g7), in(W7, w7)}, attrs_of(depthwise, X7),
                    {out(X7, conv2d_grad_input_ref(g7, X7, W7, w7, depthwise))}));
            add(row("conv2d_backward_weight", "unbatched depthwise", {in(Y7, g7), in(X7, x7)}, attrs_of(depthwise, W7),
                    {out(W7, conv2d_grad_weight_ref(g7, X7, x7, W7, depthwise))}));

            struct Window {
                std::string variant;
                Shape shape;
                int kernel_h, kernel_w, stride_h, stride_w, padding_h, padding_w, dilation_h, dilation_w;
                bool ceil_mode;
            };
            const std::vector<Window> windows = {
                {"padding 1: padded elements never win", Shape{1, 2, 5, 4}, 3, 3, 2, 2, 1, 1, 1, 1, false},
                {"ceil_mode keeps a last window that starts inside", Shape{2, 1, 5, 6}, 2, 2, 2, 2, 0, 0, 1, 1, true},
                {"unbatched, kernel 3x2, stride (1,2), padding (1,1), dilation (2,1), ceil_mode", Shape{2, 6, 5}, 3, 2,
                 1, 2, 1, 1, 2, 1, true},
            };
            for (const Window& p : windows) {
                Window2d win;
                win.kernel_h = p.kernel_h, win.kernel_w = p.kernel_w, win.stride_h = p.stride_h, win.stride_w = p.stride_w;
                win.padding_h = p.padding_h, win.padding_w = p.padding_w, win.dilation_h = p.dilation_h;
                win.dilation_w = p.dilation_w, win.ceil_mode = p.ceil_mode;
                std::vector<double> x = distinct_values(p.shape.numel(), 0.1);
                Shape ys;
                std::vector<double> values, indices;
                max_pool2d_ref(p.shape, x, win, &ys, &values, &indices);
                add(row("max_pool2d", p.variant, {in(p.shape, x, F64)}, attrs_of(win),
                        {out(ys, values, F64), out(ys, indices, I64)}));
            }

            add(row("max_pool2d_backward", "kernel 2: each g lands on its window's argmax",
                    {in(Shape{1, 1, 2, 2}, {1, 2, 3, 4}), in(Shape{1, 1, 2, 2}, {6, 3, 13, 16}, I64)},
                    {.kernel_h = 2, .kernel_w = 2, .stride_h = 2, .stride_w = 2, .shape = Shape{1, 1, 4, 4}},
                    {out(Shape{1, 1, 4, 4}, {0, 0, 2, 0, 0, 1, 0, 0, 0, 0, 0, 0, 3, 0, 0, 4})}));
            add(row("max_pool2d_backward", "float64 overlapping windows sharing an argmax add up",
                    {in(Shape{1, 1, 2, 2}, {1, 2, 3, 4}, F64), in(Shape{1, 1, 2, 2}, {5, 5, 5, 9}, I64)},
                    {.kernel_h = 2, .kernel_w = 2, .shape = Shape{1, 1, 3, 3}},
                    {out(Shape{1, 1, 3, 3}, {0, 0, 0, 0, 6, 0, 0, 0, 4}, F64)}));
        }

        // --- recurrent layers ----------------------------------------------------------------------
        {
            LstmRef r{3, 2, 2, distinct_values(48, 0.11), {0.3, -0.2, 0.1, 0.5}, {-0.4, 0.2, 0.6, -0.1},
                      distinct_values(16, 0.09), {}, {}};
            lstm_ref_forward(r);
            const Shape xw{3, 2, 8}, hc{2, 2}, w{8, 2}, hs{3, 2, 2}, st{3, 2, 10};
            add(row("lstm", "3 steps, batch 2, hidden 2 (float64)",
                    {in(xw, r.xw, F64), in(hc, r.h0, F64), in(hc, r.c0, F64), in(w, r.w, F64)}, {},
                    {out(hs, r.h, F64), out(st, r.state, F64)}));
            add(row("lstm", "float32", {in(xw, r.xw), in(hc, r.h0), in(hc, r.c0), in(w, r.w)}, {},
                    {out(hs, r.h), out(st, r.state)}));
            std::vector<double> gh = distinct_values(12, 0.2), gs = distinct_values(60, 0.04), d_gates, d_c0;
            lstm_ref_backward(r, gh, gs, &d_gates, &d_c0);
            add(row("lstm_backward", "gradients of h and of the state",
                    {in(hs, gh, F64), in(st, gs, F64), in(st, r.state, F64), in(hc, r.c0, F64), in(w, r.w, F64)}, {},
                    {out(Shape{3, 2, 8}, d_gates, F64), out(hc, d_c0, F64)}));
            lstm_ref_backward(r, gh, {}, &d_gates, &d_c0);
            add(row("lstm_backward", "a 0-d gradient of the state: none reached it",
                    {in(hs, gh, F64), in(Shape(), {0}, F64), in(st, r.state, F64), in(hc, r.c0, F64), in(w, r.w, F64)}, {},
                    {out(Shape{3, 2, 8}, d_gates, F64), out(hc, d_c0, F64)}));
        }

        // --- shape and layout ---------------------------------------------------------------------
        {
            Shape t1, t2;
            std::vector<double> x23_t = transpose_ref(S23, X23, 0, 1, &t1);
            std::vector<double> v234_t = transpose_ref(S234, V234, 0, 2, &t2);
            add(row("transpose", "[2,3] dims 1,2", {in(S23, X23)}, {.dim = 0, .dim2 = 1}, {out(t1, x23_t)}));
            add(row("transpose", "[2,3,4] dims 1,3", {in(S234, V234)}, {.dim = 0, .dim2 = 2}, {out(t2, v234_t)}));
        }
        {
            Shape t;
            std::vector<double> v234_t = transpose_ref(S234, V234, 1, 2, &t);
            add(row("transpose", "[2,3,4] dims 2,3", {in(S234, V234)}, {.dim = 1, .dim2 = 2}, {out(t, v234_t)}));
        }
        {
            // permute (2,3,1) 1-based = order {1,2,0}: y[i,j,k] = x[k,i,j]
            Shape o{3, 4, 2};
            std::vector<double> y;
            for (int i = 0; i < 3; ++i)
                for (int j = 0; j < 4; ++j)
                    for (int k = 0; k < 2; ++k) y.push_back(V234[k * 12 + i * 4 + j]);
            add(row("permute", "[2,3,4] dims 2,3,1", {in(S234, V234)}, {.shape = Shape{1, 2, 0}}, {out(o, y)}));
        }
        {
            // regions of a [3,4]: a [2,2] block at [2,2] (1-based), and a [2,3] read down the columns
            std::vector<double> block{V34[5], V34[6], V34[9], V34[10]};
            std::vector<double> down{V34[0], V34[4], V34[8], V34[1], V34[5], V34[9]};
            add(row("as_strided", "[2,2] block of [3,4]", {in(S34, V34)},
                    {.start = 5, .shape = Shape{2, 2}, .strides = Shape{4, 1}}, {out(Shape{2, 2}, block)}));
            add(row("as_strided", "[2,3] columns of [3,4]", {in(S34, V34)},
                    {.start = 0, .shape = Shape{2, 3}, .strides = Shape{1, 4}}, {out(Shape{2, 3}, down)}));
            std::vector<double> replaced = V34;
            replaced[5] = 1, replaced[6] = 2, replaced[9] = 3, replaced[10] = 4;
            add(row("region_scatter", "[2,2] block of [3,4] replaced", {in(S34, V34), in(Shape{2, 2}, {1, 2, 3, 4})},
                    {.start = 5, .shape = Shape{2, 2}, .strides = Shape{4, 1}}, {out(S34, replaced)}));
            add(row("assign_", "[2,2] block of [3,4] assigned", {in(S34, V34), in(Shape{2, 2}, {1, 2, 3, 4})},
                    {.start = 5, .shape = Shape{2, 2}, .strides = Shape{4, 1}}, {out(S34, replaced)}));
        }
        add(row("contiguous", "[2,3] (already contiguous: a copy)", {in(S23, X23)}, {}, {out(S23, X23)}));
        add(row("reshape", "[2,3] as [3,2]", {in(S23, X23)}, {.shape = Shape{3, 2}}, {out(Shape{3, 2}, X23)}));
        add(row("reshape", "[2,3] as [-1]", {in(S23, X23)}, {.shape = Shape{-1}}, {out(Shape{6}, X23)}));
        add(row("unsqueeze", "[2,3] at dim 2", {in(S23, X23)}, {.dim = 1}, {out(Shape{2, 1, 3}, X23)}));
        add(row("unsqueeze", "[2,3] at the end", {in(S23, X23)}, {.dim = 2}, {out(Shape{2, 3, 1}, X23)}));
        add(row("squeeze", "[2,1,3] at dim 2", {in(Shape{2, 1, 3}, X23)}, {.dim = 1}, {out(S23, X23)}));
        add(row("squeeze", "[2,3] at dim 1 of size 2: unchanged", {in(S23, X23)}, {.dim = 0}, {out(S23, X23)}));
        add(row("squeeze", "every size-1 dim of [1,2,1]", {in(Shape{1, 2, 1}, C21)}, {.all = true},
                {out(Shape{2}, C21)}));
        add(row("expand", "[3,1] to [2,3,4]", {in(Shape{3, 1}, B3)}, {.shape = S234},
                {out(S234, expand_ref(Shape{3, 1}, B3, S234))}));
        add(row("expand", "0-d to [2,3]", {in(Shape{}, {1.5})}, {.shape = S23}, {out(S23, constant(6, 1.5))}));
        add(row("sum_to", "[2,3,4] to [3,1]", {in(S234, V234)}, {.shape = Shape{3, 1}},
                {out(Shape{3, 1}, sum_to_ref(S234, V234, Shape{3, 1}))}));
        add(row("sum_to", "[2,3,4] to [2,1,4]", {in(S234, V234)}, {.shape = Shape{2, 1, 4}},
                {out(Shape{2, 1, 4}, sum_to_ref(S234, V234, Shape{2, 1, 4}))}));
        add(row("sum_to", "[2,3] to [3]", {in(S23, X23)}, {.shape = Shape{3}},
                {out(Shape{3}, sum_to_ref(S23, X23, Shape{3}))}));
        add(row("sum_to", "[2,3] to 0-d", {in(S23, X23)}, {.shape = Shape{}}, {out(Shape{}, {3.3})}));
        add(row("cat", "[2,1], [2,2], [2,3] along dim 2",
                {in(Shape{2, 1}, {1, 2}), in(Shape{2, 2}, {3, 4, 5, 6}), in(S23, X23)}, {.dim = 1},
                {out(Shape{2, 6}, {1, 3, 4, 0.5, -1.2, 2.0, 2, 5, 6, 1.5, -0.3, 0.8})}));
        add(row("cat", "[1,3] and [2,3] along dim 1", {in(Shape{1, 3}, B3), in(S23, X23)}, {.dim = 0},
                {out(Shape{3, 3}, {0.25, -1.5, 2.0, 0.5, -1.2, 2.0, 1.5, -0.3, 0.8})}));
        add(row("cat", "[2,1,2] and [2,2,2] along dim 2",
                {in(Shape{2, 1, 2}, {1, 2, 3, 4}), in(Shape{2, 2, 2}, {5, 6, 7, 8, 9, 10, 11, 12})}, {.dim = 1},
                {out(Shape{2, 3, 2}, {1, 2, 5, 6, 7, 8, 3, 4, 9, 10, 11, 12})}));
        add(row("cat", "float32 and float64 give float64", {in(Shape{2}, C21, F32), in(Shape{1}, {4}, F64)}, {.dim = 0},
                {out(Shape{3}, {2.0, -0.5, 4}, F64)}));
        {
            std::vector<double> cols12, row3;
            for (int i = 0; i < 3; ++i)
                for (int j = 1; j <= 2; ++j) cols12.push_back(V34[i * 4 + j]);
            for (int j = 0; j < 4; ++j) row3.push_back(V34[2 * 4 + j]);
            add(row("narrow", "[3,4] dim 2 start 2 length 2", {in(S34, V34)}, {.dim = 1, .start = 1, .length = 2},
                    {out(Shape{3, 2}, cols12)}));
            add(row("narrow", "[3,4] dim 1 start 3 length 1", {in(S34, V34)}, {.dim = 0, .start = 2, .length = 1},
                    {out(Shape{1, 4}, row3)}));
            std::vector<double> col3;
            for (int i = 0; i < 3; ++i) col3.push_back(V34[i * 4 + 2]);
            add(row("select", "[3,4] dim 1 index 3", {in(S34, V34)}, {.dim = 0, .start = 2}, {out(Shape{4}, row3)}));
            add(row("select", "[3,4] dim 2 index 3", {in(S34, V34)}, {.dim = 1, .start = 2}, {out(Shape{3}, col3)}));
            add(row("narrow_backward", "[3,2] into zeros [3,4] at dim 2 start 2",
                    {in(Shape{3, 2}, {1, 2, 3, 4, 5, 6})}, {.dim = 1, .start = 1, .length = 2, .shape = S34},
                    {out(S34, {0, 1, 2, 0, 0, 3, 4, 0, 0, 5, 6, 0})}));
            add(row("narrow_backward", "[1,4] into zeros [3,4] at dim 1 start 2",
                    {in(Shape{1, 4}, {1, 2, 3, 4})}, {.dim = 0, .start = 1, .length = 1, .shape = S34},
                    {out(S34, {0, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0})}));
        }
        add(row("flip", "[2,3] dim 2", {in(S23, X23)}, {.dim = 1}, {out(S23, {2.0, -1.2, 0.5, 0.8, -0.3, 1.5})}));
        add(row("flip", "[2,3,4] dims 1 and 3 (bitmask in dim2)", {in(S234, V234)}, {.dim2 = 0b101},
                {out(S234, flip_ref(S234, V234, 0b101))}));
        add(row("flip", "every dim", {in(S23, X23)}, {.all = true}, {out(S23, {0.8, -0.3, 1.5, 2.0, -1.2, 0.5})}));
        add(row("flip", "int64", {in(Shape{3}, {1, 2, 3}, I64)}, {.dim = 0}, {out(Shape{3}, {3, 2, 1}, I64)}));

        // --- reductions -----------------------------------------------------------------------------
        add(row("sum", "all", {in(S23, X23)}, {.all = true}, {out(Shape{}, {3.3})}));
        add(row("sum", "all keepdim", {in(S23, X23)}, {.all = true, .keepdim = true}, {out(Shape{1, 1}, {3.3})}));
        add(row("sum", "dim 1", {in(S23, X23)}, {.dim = 0}, {out(Shape{3}, {2.0, -1.5, 2.8})}));
        add(row("sum", "dim 2 keepdim", {in(S23, X23)}, {.dim = 1, .keepdim = true}, {out(Shape{2, 1}, {1.3, 2.0})}));
        add(row("sum", "[2,3,4] dim 2", {in(S234, V234)}, {.dim = 1},
                {out(Shape{2, 4}, reduce_lines(S234, V234, 1, line_sum))}));
        add(row("sum", "int64 stays int64", {in(Shape{3}, {1, 2, 3}, I64)}, {.all = true}, {out(Shape{}, {6}, I64)}));
        add(row("sum", "int64 overflow wraps", {in(Shape{3}, {0x1p62, 0x1p62, 0x1p62}, I64)}, {.all = true},
                {out(Shape{}, {-0x1p62}, I64)}));
        add(row("cumsum", "int64 overflow wraps", {in(Shape{3}, {0x1p62, 0x1p62, 0x1p62}, I64)}, {.dim = 0},
                {out(Shape{3}, {0x1p62, -0x1p63, -0x1p62}, I64)}));
        add(row("prod", "int64 overflow wraps", {in(Shape{3}, {0x1p62, 2, 2}, I64)}, {.all = true},
                {out(Shape{}, {0}, I64)}));
        add(row("sum", "[2,3,4] dims 1 and 3 (bitmask in dim2)", {in(S234, V234)}, {.dim2 = 0b101},
                {out(Shape{3}, reduce_mask_ref(S234, V234, 0b101, line_sum))}));
        add(row("sum", "[2,3,4] dims 2 and 3 keepdim", {in(S234, V234)}, {.dim2 = 0b110, .keepdim = true},
                {out(Shape{2, 1, 1}, reduce_mask_ref(S234, V234, 0b110, line_sum))}));
        add(row("mean", "all", {in(S23, X23)}, {.all = true}, {out(Shape{}, {0.55})}));
        add(row("mean", "dim 2", {in(S23, X23)}, {.dim = 1}, {out(Shape{2}, {1.3 / 3, 2.0 / 3})}));
        add(row("mean", "dim 1 keepdim", {in(S23, X23)}, {.dim = 0, .keepdim = true},
                {out(Shape{1, 3}, {1.0, -0.75, 1.4})}));
        add(row("mean", "int64 input computes in float32", {in(Shape{4}, {1, 2, 3, 5}, I64)}, {.all = true},
                {out(Shape{}, {2.75}, F32)}));
        add(row("mean", "[2,3,4] dims 1 and 2 keepdim", {in(S234, V234)}, {.dim2 = 0b011, .keepdim = true},
                {out(Shape{1, 1, 4}, reduce_mask_ref(S234, V234, 0b011, [](const std::vector<double>& v) {
                     return line_sum(v) / static_cast<double>(v.size());
                 }))}));
        add(row("prod", "all", {in(S23, X23)}, {.all = true}, {out(Shape{}, {line_prod(X23)})}));
        add(row("prod", "dim 2", {in(S23, X23)}, {.dim = 1}, {out(Shape{2}, {-1.2, -0.36})}));
        add(row("prod", "a row with one zero and one with two, dim 2 keepdim", {in(S23, {1.5, 0, 2.0, 0, -1.2, 0})},
                {.dim = 1, .keepdim = true}, {out(Shape{2, 1}, {0, 0})}));
        add(row("prod", "[2,3,4] dims 1 and 3", {in(S234, V234)}, {.dim2 = 0b101},
                {out(Shape{3}, reduce_mask_ref(S234, V234, 0b101, line_prod))}));
        add(row("prod", "int64 stays int64", {in(Shape{3}, {2, 3, 4}, I64)}, {.all = true}, {out(Shape{}, {24}, I64)}));
        add(row("max", "all: one output", {in(S23, X23)}, {.all = true}, {out(Shape{}, {2.0})}));
        add(row("max", "dim 2: values and 1-based indices", {in(S23, X23)}, {.dim = 1},
                {out(Shape{2}, {2.0, 1.5}), out(Shape{2}, {3, 1}, I64)}));
        add(row("max", "dim 1 keepdim", {in(S23, X23)}, {.dim = 0, .keepdim = true},
                {out(Shape{1, 3}, {1.5, -0.3, 2.0}), out(Shape{1, 3}, {2, 2, 1}, I64)}));
        add(row("max", "[2,3,4] dim 2", {in(S234, V234)}, {.dim = 1},
                {out(Shape{2, 4}, reduce_lines(S234, V234, 1, line_max)),
                 out(Shape{2, 4}, reduce_lines(S234, V234, 1, line_argmax_1based), I64)}));
        add(row("min", "all: one output", {in(S23, X23)}, {.all = true}, {out(Shape{}, {-1.2})}));
        add(row("min", "dim 2: values and 1-based indices", {in(S23, X23)}, {.dim = 1},
                {out(Shape{2}, {-1.2, -0.3}), out(Shape{2}, {2, 2}, I64)}));
        add(row("min", "[2,3,4] dim 3 keepdim", {in(S234, V234)}, {.dim = 2, .keepdim = true},
                {out(Shape{2, 3, 1}, reduce_lines(S234, V234, 2, line_min)),
                 out(Shape{2, 3, 1}, reduce_lines(S234, V234, 2, line_argmin_1based), I64)}));
        add(row("amax", "all", {in(S23, X23)}, {.all = true}, {out(Shape{}, {2.0})}));
        add(row("amax", "dim 2 keepdim", {in(S23, X23)}, {.dim = 1, .keepdim = true}, {out(Shape{2, 1}, {2.0, 1.5})}));
        add(row("amax", "[2,3,4] dims 1 and 3", {in(S234, V234)}, {.dim2 = 0b101},
                {out(Shape{3}, reduce_mask_ref(S234, V234, 0b101, line_max))}));
        {
            OpCase ties = row("amax", "ties: each shares the gradient", {in(S23, {1, 2, 2, 0, 2, 1})}, {.all = true},
                              {out(Shape{}, {2})});
            ties.no_gradcheck = "at a tie the maximum has no derivative";
            add(ties);
        }
        add(row("amax", "int64", {in(Shape{3}, {4, -2, 7}, I64)}, {.all = true}, {out(Shape{}, {7}, I64)}));
        add(row("amin", "dim 1", {in(S23, X23)}, {.dim = 0}, {out(Shape{3}, {0.5, -1.2, 0.8})}));
        add(row("amin", "[2,3,4] dims 2 and 3 keepdim", {in(S234, V234)}, {.dim2 = 0b110, .keepdim = true},
                {out(Shape{2, 1, 1}, reduce_mask_ref(S234, V234, 0b110, line_min))}));
        add(row("cumsum", "dim 2", {in(S23, X23)}, {.dim = 1}, {out(S23, map_lines(S23, X23, 1, cumsum_line))}));
        add(row("cumsum", "[2,3,4] dim 2", {in(S234, V234)}, {.dim = 1}, {out(S234, map_lines(S234, V234, 1, cumsum_line))}));
        add(row("cumsum", "int64 stays int64", {in(Shape{3}, {1, 2, 3}, I64)}, {.dim = 0}, {out(Shape{3}, {1, 3, 6}, I64)}));
        add(row("sort", "[2,3] dim 2 ascending", {in(S23, X23)}, {.dim = 1},
                {out(S23, {-1.2, 0.5, 2.0, -0.3, 0.8, 1.5}), out(S23, {2, 1, 3, 2, 3, 1}, I64)}));
        add(row("sort", "[2,3] dim 1 descending", {in(S23, X23)}, {.scalar = 1, .dim = 0},
                {out(S23, {1.5, -0.3, 2.0, 0.5, -1.2, 0.8}), out(S23, {2, 2, 1, 1, 1, 2}, I64)}));
        {
            OpCase ties = row("sort", "ties keep their order; NaN is the largest", {in(Shape{5}, {1, 0, NAN, 1, 0})},
                              {.dim = 0}, {out(Shape{5}, {0, 0, 1, 1, NAN}), out(Shape{5}, {2, 5, 1, 4, 3}, I64)});
            ties.no_gradcheck = "ties and NaN";
            add(ties);
        }
        add(row("topk", "k=2 largest along dim 2", {in(S23, X23)}, {.scalar = 1, .dim = 1, .length = 2},
                {out(Shape{2, 2}, {2.0, 0.5, 1.5, 0.8}), out(Shape{2, 2}, {3, 1, 1, 3}, I64)}));
        add(row("topk", "k=1 smallest along dim 1", {in(S23, X23)}, {.dim = 0, .length = 1},
                {out(Shape{1, 3}, {0.5, -1.2, 0.8}), out(Shape{1, 3}, {1, 1, 2}, I64)}));
        add(row("softmax", "dim 2", {in(S23, X23)}, {.dim = 1}, {out(S23, map_lines(S23, X23, 1, softmax_line))}));
        add(row("softmax", "[2,3,4] dim 2", {in(S234, V234)}, {.dim = 1},
                {out(S234, map_lines(S234, V234, 1, softmax_line))}));
        add(row("softmax", "large values stay finite", {in(Shape{3}, {1000, 1001, 1002})}, {.dim = 0},
                {out(Shape{3}, softmax_line({0, 1, 2}))}));
        add(row("log_softmax", "dim 2", {in(S23, X23)}, {.dim = 1},
                {out(S23, map_lines(S23, X23, 1, log_softmax_line))}));
        add(row("log_softmax", "[2,3,4] dim 1", {in(S234, V234)}, {.dim = 0},
                {out(S234, map_lines(S234, V234, 0, log_softmax_line))}));
        add(row("log_softmax", "large values stay finite", {in(Shape{3}, {1000, 1001, 1002})}, {.dim = 0},
                {out(Shape{3}, log_softmax_line({0, 1, 2}))}));

        // --- indexing -------------------------------------------------------------------------------
        {
            // y[i][j] = x[i][index[i][j]] along dim 2
            const std::vector<double> index = {4, 1, 2, 2, 3, 4};
            std::vector<double> along_cols;
            for (int i = 0; i < 3; ++i)
                for (int j = 0; j < 2; ++j) along_cols.push_back(V34[i * 4 + static_cast<int>(index[i * 2 + j]) - 1]);
            add(row("gather", "[3,4] dim 2 with a repeated index", {in(S34, V34), in(Shape{3, 2}, index, I64)},
                    {.dim = 1}, {out(Shape{3, 2}, along_cols)}));
            // y[i][j] = x[index[i][j]][j] along dim 1
            const std::vector<double> rows_index = {3, 1, 2, 3, 1, 1, 3, 2};
            std::vector<double> along_rows;
            for (int i = 0; i < 2; ++i)
                for (int j = 0; j < 4; ++j)
                    along_rows.push_back(V34[(static_cast<int>(rows_index[i * 4 + j]) - 1) * 4 + j]);
            add(row("gather", "[3,4] dim 1", {in(S34, V34), in(Shape{2, 4}, rows_index, I64)}, {.dim = 0},
                    {out(Shape{2, 4}, along_rows)}));
        }
        {
            // along the middle dim of [2,3,2]: y[i][j][k] = x[i][index[i][j][k]][k]
            const std::vector<double> index = {3, 1, 2, 2};   // [2,1,2]
            std::vector<double> x = distinct_values(12, 0.5), y;
            for (int i = 0; i < 2; ++i)
                for (int k = 0; k < 2; ++k) y.push_back(x[i * 6 + (static_cast<int>(index[i * 2 + k]) - 1) * 2 + k]);
            add(row("gather", "[2,3,2] dim 2", {in(Shape{2, 3, 2}, x), in(Shape{2, 1, 2}, index, I64)}, {.dim = 1},
                    {out(Shape{2, 1, 2}, y)}));
        }
        // zeros([3,3]); y[index[i][j]][j] += src[i][j]; column 1 gets both of its sources at row 1.
        add(row("scatter_add", "[2,3] into [3,3] along dim 1",
                {in(S23, {1, 2, 3, 4, 5, 6}), in(S23, {1, 3, 1, 1, 2, 3}, I64)}, {.dim = 0, .shape = Shape{3, 3}},
                {out(Shape{3, 3}, {5, 0, 3, 0, 5, 0, 0, 2, 6})}));
        {
            // an index smaller than x outside dim: y[i][j] = x[i][index[i][j]] for the first 2 rows
            const std::vector<double> index = {4, 1, 2, 2};
            std::vector<double> y = {V34[3], V34[0], V34[5], V34[5]};
            add(row("gather", "[3,4] dim 2, index [2,2] smaller outside dim", {in(S34, V34), in(Shape{2, 2}, index, I64)},
                    {.dim = 1}, {out(Shape{2, 2}, y)}));
        }
        add(row("scatter_add", "[2,2] into [3,4] along dim 2, index smaller outside dim",
                {in(Shape{2, 2}, {1, 2, 3, 4}), in(Shape{2, 2}, {4, 1, 2, 2}, I64)}, {.dim = 1, .shape = S34},
                {out(S34, {2, 0, 0, 1, 0, 7, 0, 0, 0, 0, 0, 0})}));
        {
            std::vector<double> x = {0.5, -1.2, 2.0, 1.5, -0.3, 0.8, 1.1, 0.4, -0.7};
            std::vector<double> y = x;
            y[2 * 3 + 0] = 10;   // src[0][0] to row index[0][0] = 3
            y[0 * 3 + 1] = 20;
            y[1 * 3 + 2] = 30;
            add(row("scatter", "[1,3] into [3,3] along dim 1",
                    {in(Shape{3, 3}, x), in(Shape{1, 3}, {3, 1, 2}, I64), in(Shape{1, 3}, {10, 20, 30})}, {.dim = 0},
                    {out(Shape{3, 3}, y)}));
            add(row("scatter", "[2,2] into [2,4] along dim 2",
                    {in(Shape{2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}), in(Shape{2, 2}, {4, 1, 2, 3}, I64), in(Shape{2, 2}, {7.5, 8.5, 9.5, 10.5})},
                    {.dim = 1}, {out(Shape{2, 4}, {8.5, 2, 3, 7.5, 5, 9.5, 10.5, 8})}));
        }
        add(row("scatter_add", "[3,2] into [3,4] along dim 2",
                {in(Shape{3, 2}, {1, 2, 3, 4, 5, 6}), in(Shape{3, 2}, {4, 1, 2, 2, 3, 4}, I64)},
                {.dim = 1, .shape = S34}, {out(S34, {2, 0, 0, 1, 0, 7, 0, 0, 0, 0, 5, 6})}));

        // --- copies and dtypes ------------------------------------------------------------------------
        add(row("to", "float32 to float64", {in(S23, X23, F32)}, {.dtype = F64},
                {out(S23, map_values(X23, [](double x) { return static_cast<double>(static_cast<float>(x)); }), F64)}));
        add(row("to", "int64 to float32", {in(Shape{3}, {1, -2, 3}, I64)}, {.dtype = F32}, {out(Shape{3}, {1, -2, 3})}));
        {
            OpCase c = row("to", "float64 to float32", {in(Shape{2}, {0.1, -2.5}, F64)}, {.dtype = F32},
                           {out(Shape{2}, {static_cast<float>(0.1), -2.5})});
            c.no_gradcheck = "float32 output: finite differences would measure rounding";
            add(c);
            OpCase t = row("to", "float64 to int64 truncates", {in(Shape{3}, {1.7, -2.7, 3.0}, F64)}, {.dtype = I64},
                           {out(Shape{3}, {1, -2, 3}, I64)});
            t.no_gradcheck = "int64 output has no gradient";
            add(t);
        }
        // The copy between devices; on the CPU alone, a copy (the CUDA rows: test_cuda_ops.cpp).
        add(row("to_device", "cpu to cpu: a copy", {in(S23, X23)}, {.device = td::DEVICE_CPU}, {out(S23, X23)}));
        add(row("clone", "a copy", {in(S23, X23)}, {}, {out(S23, X23)}));
        add(row("detach", "the same values", {in(S23, X23)}, {}, {out(S23, X23)}));

        // --- sampling ---------------------------------------------------------------------------------
        {
            OpCase without = row("multinomial", "two of four categories without replacement, zeros never drawn",
                                 {in(Shape{4}, {0, 0.3, 0, 0.7})}, {.length = 2}, {out(Shape{2}, {}, I64)});
            without.check = [](const Tensor& t) {
                std::vector<double> v = values_of(t);
                std::sort(v.begin(), v.end());
                CHECK(v == std::vector<double>{2, 4});
            };
            add(without);
            OpCase with = row("multinomial", "[2,3] rows, 2000 draws each with replacement",
                              {in(S23, {1, 0, 3, 0, 5, 0}, F64)}, {.all = true, .length = 2000}, {out(Shape{2, 2000}, {}, I64)});
            with.check = [](const Tensor& t) {
                std::vector<double> v = values_of(t);
                int threes = 0;
                bool allowed = true;
                for (size_t k = 0; k < 2000; ++k) {
                    allowed = allowed && (v[k] == 1 || v[k] == 3);
                    threes += v[k] == 3;
                }
                for (size_t k = 2000; k < 4000; ++k) allowed = allowed && v[k] == 2;
                CHECK(allowed);
                CHECK(threes > 1400);   // expected 1500, standard deviation 19
                CHECK(threes < 1600);
            };
            add(with);
        }

        // --- losses ---------------------------------------------------------------------------------
        {
            constexpr td::Reduction SUM = td::REDUCTION_SUM;
            auto squared_error = [](double x, double y) { return (x - y) * (x - y); };
            add(row("mse_loss", "mean of [2,3]", {in(S23, X23), in(S23, Y23)}, {},
                    {out(Shape{}, {line_sum(zip_values(X23, Y23, squared_error)) / 6})}));
            std::vector<double> target = distinct_values(24, 0.1);
            add(row("mse_loss", "sum of float64 [2,3,4]", {in(S234, V234, F64), in(S234, target, F64)}, {.reduction = SUM},
                    {out(Shape{}, {line_sum(zip_values(V234, target, squared_error))}, F64)}));
            // (0.25 - 1)^2 + (-1.5 - 2)^2 + (2 - 3)^2 = 0.5625 + 12.25 + 1 = 13.8125, over 3
            add(row("mse_loss", "int64 target computes in float32", {in(Shape{3}, B3), in(Shape{3}, {1, 2, 3}, I64)}, {},
                    {out(Shape{}, {13.8125 / 3})}));

            const std::vector<double> labels23 = {3, 1}, labels34 = {2, 4, 1};
            add(row("cross_entropy", "[2,3] mean", {in(S23, X23), in(Shape{2}, labels23, I64)}, {},
                    {out(Shape{}, {class_loss_ref(X23, 3, labels23, true, cross_entropy_row)})}));
            add(row("cross_entropy", "[3,4] sum", {in(S34, V34), in(Shape{3}, labels34, I64)}, {.reduction = SUM},
                    {out(Shape{}, {class_loss_ref(V34, 4, labels34, false, cross_entropy_row)})}));
            // row 1: log(e^0 + e^1 + e^2) - 0 after shifting by 1000; row 2: 1000 + log(1 + e^-1000 + e^-2000) = 1000
            add(row("cross_entropy", "large logits stay finite",
                    {in(S23, {1000, 1001, 1002, -1000, 0, 1000}, F64), in(Shape{2}, {1, 2}, I64)}, {},
                    {out(Shape{}, {(std::log(1 + std::exp(1.0) + std::exp(2.0)) + 1000) / 2}, F64)}));
            {
                OpCase c = row("cross_entropy", "float labels holding whole numbers", {in(S23, X23), in(Shape{2}, labels23)},
                               {}, {out(Shape{}, {class_loss_ref(X23, 3, labels23, true, cross_entropy_row)})});
                c.grad_inputs = {0};   // labels get no gradient
                add(c);
            }
            add(row("cross_entropy", "one example: [3] with a 0-d label", {in(Shape{3}, B3), in(Shape{}, {2}, I64)}, {},
                    {out(Shape{}, {cross_entropy_row(B3, 1)})}));
            add(row("nll_loss", "[2,3] mean", {in(S23, X23), in(Shape{2}, labels23, I64)}, {},
                    {out(Shape{}, {-(2.0 + 1.5) / 2})}));
            add(row("nll_loss", "[3,4] sum", {in(S34, V34), in(Shape{3}, labels34, I64)}, {.reduction = SUM},
                    {out(Shape{}, {class_loss_ref(V34, 4, labels34, false, nll_row)})}));

            // The lecture's scores, example i of class i. Hinges: row 1: 0.5 + 1.0; row 2: 0.8 + 0.6;
            // row 3: max(0, -3.8) + 0.9. Loss = (1.5 + 1.4 + 0.9) / C / N = 3.8 / 9.
            const std::vector<double> lecture = {2.1, 1.6, 2.1, 3.0, 3.2, 2.8, -2, 3.7, 3.8}, labels33 = {1, 2, 3};
            add(row("multi_margin_loss", "the lecture's [3,3] scores, mean",
                    {in(Shape{3, 3}, lecture), in(Shape{3}, labels33, I64)}, {}, {out(Shape{}, {3.8 / 9})}));
            add(row("multi_margin_loss", "[2,3] sum", {in(S23, X23), in(Shape{2}, {1, 2}, I64)}, {.reduction = SUM},
                    {out(Shape{}, {class_loss_ref(X23, 3, {1, 2}, false, multi_margin_row)})}));

            add(row("cross_entropy_backward", "[2,3] mean, g = 0.7",
                    {in(Shape{}, {0.7}), in(S23, X23), in(Shape{2}, labels23, I64)}, {},
                    {out(S23, class_grad_ref(0.7, X23, 3, labels23, true, cross_entropy_row_grad))}));
            add(row("cross_entropy_backward", "one example [3], sum, g = -1.5",
                    {in(Shape{}, {-1.5}), in(Shape{3}, B3), in(Shape{}, {2}, I64)}, {.reduction = SUM},
                    {out(Shape{3}, class_grad_ref(-1.5, B3, 3, {2}, false, cross_entropy_row_grad))}));
            add(row("nll_loss_backward", "[2,3] mean, g = 0.7", {in(Shape{}, {0.7}), in(Shape{2}, labels23, I64)},
                    {.shape = S23}, {out(S23, {0, 0, -0.35, -0.35, 0, 0})}));
            add(row("nll_loss_backward", "[3,4] sum, g = 0.7", {in(Shape{}, {0.7}), in(Shape{3}, labels34, I64)},
                    {.reduction = SUM, .shape = S34}, {out(S34, {0, -0.7, 0, 0, 0, 0, 0, -0.7, -0.7, 0, 0, 0})}));
            add(row("multi_margin_loss_backward", "the lecture's [3,3] scores, mean, g = 1",
                    {in(Shape{}, {1}), in(Shape{3, 3}, lecture), in(Shape{3}, labels33, I64)}, {},
                    {out(Shape{3, 3}, {-2.0 / 9, 1.0 / 9, 1.0 / 9, 1.0 / 9, -2.0 / 9, 1.0 / 9, 0, 1.0 / 9, -1.0 / 9})}));
            add(row("multi_margin_loss_backward", "[2,3] sum, g = 0.7",
                    {in(Shape{}, {0.7}), in(S23, X23), in(Shape{2}, {1, 2}, I64)}, {.reduction = SUM},
                    {out(S23, class_grad_ref(0.7, X23, 3, {1, 2}, false, multi_margin_row_grad))}));
        }

        // --- in place: input 0's storage is written -------------------------------------------------
        add(row("add_", "x += 2 * [3]", {in(S23, X23), in(Shape{3}, B3)}, {.scalar = 2},
                {out(S23, broadcast_ref(S23, X23, Shape{3}, B3, [](double x, double y) { return x + 2 * y; }))}));
        add(row("add_", "x += y", {in(S23, X23), in(S23, Y23)}, {.scalar = 1}, {out(S23, zip_values(X23, Y23, plus))}));
        add(row("sub_", "x -= 0.5 * y", {in(S23, X23), in(S23, Y23)}, {.scalar = 0.5},
                {out(S23, zip_values(X23, Y23, [](double x, double y) { return x - 0.5 * y; }))}));
        {
            OpCase c = row("mul_", "x *= [2,1]", {in(S23, X23), in(Shape{2, 1}, C21)}, {},
                           {out(S23, broadcast_ref(S23, X23, Shape{2, 1}, C21, times))});
            c.grad_inputs = {0};   // the multiplier may not require grad (mul_ refuses it)
            add(c);
        }
        add(row("add_", "[2,3,4] += [3,1]", {in(S234, V234), in(Shape{3, 1}, B3)}, {.scalar = 1},
                {out(S234, broadcast_ref(S234, V234, Shape{3, 1}, B3, plus))}));
        add(row("zero_", "x = 0", {in(S23, X23)}, {}, {out(S23, constant(6, 0))}));
        add(row("fill_", "x = 7", {in(S23, X23)}, {.scalar = 7}, {out(S23, constant(6, 7))}));
        add(row("copy_", "x = [3] broadcast", {in(S23, X23), in(Shape{3}, B3)}, {},
                {out(S23, {0.25, -1.5, 2.0, 0.25, -1.5, 2.0})}));
        add(row("copy_", "float32 x = int64 y", {in(Shape{3}, B3), in(Shape{3}, {1, 2, 3}, I64)}, {},
                {out(Shape{3}, {1, 2, 3})}));
        {
            OpCase fill = row("masked_fill_", "x = 0 where mask, [2,1] mask broadcast",
                              {in(S23, X23), in(Shape{2, 1}, {0, 1})}, {.scalar = 0},
                              {out(S23, {0.5, -1.2, 2.0, 0, 0, 0})});
            fill.grad_inputs = {0};   // a mask has no gradient
            add(fill);
        }
        return r;
    }();
    return rows;
}

}  // namespace td_test
