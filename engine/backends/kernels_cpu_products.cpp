// kernels_cpu_products.cpp: the CPU kernels of the products (Eigen, or OpenBLAS for the large
// ones: blas.h): mm and bmm, and the windowed ops (conv2d by im2col + GEMM, max_pool2d), with
// their backward ops; matmul_into, which the fused LSTM layer (kernels_cpu.cpp) runs too.
// Helpers: kernels_cpu_common.h.
//
// [SECTION] products       mm bmm
// [SECTION] convolution    conv2d and its two backward ops (im2col + GEMM), max_pool2d and its backward
#include <Eigen/Dense>
#include <unsupported/Eigen/SpecialFunctions>   // Eigen::erf over arrays (gelu)
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <type_traits>

#include "blas.h"
#include "dtype_dispatch.h"
#include "elementwise.h"
#include "scalar_math.h"
#include "kernels_cpu.h"
#include "kernels_cpu_common.h"
#include "tape.h"

namespace td {

// ============================================================================================
// [SECTION] products

namespace {

// c[j] += s * row[j], each product rounded before it is added, as when the product is made apart
// and then added (what eager does, and what a plan that adds an mm into a sum must match): a
// fused multiply-add, which the compiler would otherwise make of it, rounds once. (A buffer of
// products between two loops rounds too, and made W3's frozen step 20% slower.)
#if defined(__GNUC__) && !defined(__clang__)
#define TD_NO_FP_CONTRACT __attribute__((optimize("fp-contract=off")))
#else
#define TD_NO_FP_CONTRACT
#endif
template <class T>
TD_NO_FP_CONTRACT void add_products(T* c, T s, const T* row, int64_t n) {
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
    for (int64_t j = 0; j < n; ++j) c[j] += s * row[j];
}

// A float or double product through the BLAS when blas_gemm takes it (engine/backends/blas.h: not a
// matrix-vector product, with OpenBLAS's AVX-512 kernels loaded); false, having done nothing, for
// int64 and for the products that stay in Eigen. Row-major operands with their row strides.
template <class T>
bool blas_product(T* c, int64_t ldc, const T* a, int64_t lda, const T* b, int64_t ldb, int64_t m, int64_t n,
                  int64_t k, bool ta, bool tb, bool accumulate) {
    if constexpr (std::is_floating_point_v<T>) return blas_gemm(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
    return false;
}

}  // namespace

// Through the BLAS when blas_product takes it; otherwise Eigen picks GEMV or GEMM at run time
// (measured here, that beats its coefficient-based lazyProduct even for 20x20 by 20x1).
template <class T>
void matmul_into(T* c, const T* a, const T* b, int64_t a_rows, int64_t a_cols, int64_t b_rows, int64_t b_cols,
                 bool ta, bool tb, bool accumulate) {
    using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    Eigen::Map<const Matrix> A(a, a_rows, a_cols), B(b, b_rows, b_cols);
    int64_t m = ta ? a_cols : a_rows, k = ta ? a_rows : a_cols, n = tb ? b_rows : b_cols;
    Eigen::Map<Matrix> C(c, m, n);
    if (k > 1 && blas_product(c, n, a, a_cols, b, b_cols, m, n, k, ta, tb, accumulate)) return;
    if (k == 0) {
        if (!accumulate) C.setZero();
    } else if (k == 1) {   // an outer product (RNN weight gradients): GEMM's packing costs more than it
        const T* col = a;   // op(A) is m x 1: A's elements in order either way
        const T* row = b;   // op(B) is 1 x n: B's elements in order either way
        for (int64_t i = 0; i < m; ++i) {
            T* c_row = c + i * n;
            T s = col[i];
            if (accumulate) add_products(c_row, s, row, n);
            else for (int64_t j = 0; j < n; ++j) c_row[j] = s * row[j];
        }
    } else if (accumulate) {
        if (!ta && !tb) C.noalias() += A * B;
        else if (ta && !tb) C.noalias() += A.transpose() * B;
        else if (!ta && tb) C.noalias() += A * B.transpose();
        else C.noalias() += A.transpose() * B.transpose();
    } else {
        if (!ta && !tb) C.noalias() = A * B;
        else if (ta && !tb) C.noalias() = A.transpose() * B;
        else if (!ta && tb) C.noalias() = A * B.transpose();
        else C.noalias() = A.transpose() * B.transpose();
    }
}
template void matmul_into<float>(float*, const float*, const float*, int64_t, int64_t, int64_t, int64_t, bool, bool,
                                 bool);
template void matmul_into<double>(double*, const double*, const double*, int64_t, int64_t, int64_t, int64_t, bool,
                                  bool, bool);

// A matrix operand as matmul_into reads it: row-major `rows` x `cols` elements at `data`, read
// transposed when `trans`. A transposed view (x:t() of a contiguous x) is read in place, as its
// contiguous original transposed once more; another strided layout is read from a copy.
template <class T>
struct MatrixOperand {
    const T* data;
    int64_t rows, cols;
    bool trans;
    std::optional<Value> copy;   // made only for a layout matmul_into cannot read in place

    // The matrix at `batch` dims in front: v's last two dims, each batch `batch_stride` apart.
    MatrixOperand(const Value& v, bool transposed, int64_t* batch_stride) {
        int nd = v.shape.ndim;
        int64_t r = v.shape.dims[nd - 2], c = v.shape.dims[nd - 1];
        *batch_stride = r * c;
        if (!v.strided()) {   // the usual case
            data = v.data<T>(), rows = r, cols = c, trans = transposed;
            return;
        }
        bool batch_dense = nd == 2 || v.shape.dims[0] == 1 || v.stride(0) == r * c;
        bool row_major = (r == 1 || v.stride(nd - 2) == c) && (c == 1 || v.stride(nd - 1) == 1);
        bool col_major = (r == 1 || v.stride(nd - 2) == 1) && (c == 1 || v.stride(nd - 1) == r);
        const Value* source = &v;
        if (!batch_dense || (!row_major && !col_major)) {
            copy.emplace(value_new(v.shape, v.dtype, v.device()));
            value_copy_elements(*copy, v);
            source = &*copy;
            row_major = true;
        }
        data = source->data<T>();
        if (row_major) {
            rows = r, cols = c, trans = transposed;
        } else {
            rows = c, cols = r, trans = !transposed;
        }
    }
};

void cpu_mm(const KernelCall& c) {
    const Value &a = in(c, 0), &b = in(c, 1);
    if (!a.strided() && !b.strided()) {   // the usual case, straight to the product (an RNN runs thousands)
        DISPATCH_ALL(out(c).dtype, matmul_into<T>(out(c).data<T>(), a.data<T>(), b.data<T>(), a.shape[0], a.shape[1],
                                                  b.shape[0], b.shape[1], c.attrs.trans_a, c.attrs.trans_b,
                                                  c.attrs.accumulate));
        return;
    }
    DISPATCH_ALL(out(c).dtype, {   // int64 too: int64 mm stays int64, as PyTorch
        int64_t unused;
        MatrixOperand<T> a(in(c, 0), c.attrs.trans_a, &unused), b(in(c, 1), c.attrs.trans_b, &unused);
        matmul_into<T>(out(c).data<T>(), a.data, b.data, a.rows, a.cols, b.rows, b.cols, a.trans, b.trans,
                       c.attrs.accumulate);
    });
}

void cpu_bmm(const KernelCall& c) {
    const Value& o = out(c);
    int64_t batch = o.shape[0], o_size = o.shape[1] * o.shape[2];
    DISPATCH_ALL(o.dtype, {
        int64_t a_size, b_size;
        MatrixOperand<T> a(in(c, 0), c.attrs.trans_a, &a_size), b(in(c, 1), c.attrs.trans_b, &b_size);
        for (int64_t i = 0; i < batch; ++i)
            matmul_into<T>(o.data<T>() + i * o_size, a.data + i * a_size, b.data + i * b_size, a.rows, a.cols, b.rows,
                           b.cols, a.trans, b.trans, c.attrs.accumulate);
    });
}

// ============================================================================================
// [SECTION] convolution
//
// conv2d runs as im2col + GEMM, one sample at a time: the patch under every output position
// becomes one column of a [C*kH*kW, Ho*Wo] matrix, so the sample's output [O, Ho*Wo] is the
// weight [O, C*kH*kW] times it. The backward ops are the same products transposed; the input's
// gradient goes back through col2im, which adds each column into the patch it came from.

namespace {

template <class T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using MatrixMap = Eigen::Map<RowMatrix<T>>;

// The sizes of one conv2d: input [N,C,H,W], weight [O,C/groups,kH,kW], output [N,O,Ho,Wo] (an
// unbatched [C,H,W] is N = 1), and its window along H and W.
struct ConvGeometry {
    int64_t n, c, h, w;
    int64_t o, kh, kw;
    int64_t oh, ow;
    int64_t stride_h, stride_w, padding_h, padding_w, dilation_h, dilation_w;
    int64_t groups;

    int64_t patch() const { return c * kh * kw; }               // rows of the column matrix
    int64_t group_patch() const { return c / groups * kh * kw; }   // a group's rows (the weight's columns)
    int64_t group_outputs() const { return o / groups; }
    int64_t positions() const { return oh * ow; }               // its columns
    int64_t image_size() const { return c * h * w; }            // one sample of the input
    // A 1x1 kernel at stride 1 without padding reads each pixel once: the image [C, H*W] is
    // already its own column matrix.
    bool image_is_columns() const {
        return kh == 1 && kw == 1 && stride_h == 1 && stride_w == 1 && padding_h == 0 && padding_w == 0;
    }
};

// The geometry of a window op from its image (input) shape, kernel sizes, output shape and attrs.
ConvGeometry window_geometry(const Shape& image, int64_t o, int64_t kh, int64_t kw, const Shape& output,
                             const OpAttrs& a) {
    int nd = image.ndim;   // 4, or 3 for one image
    return {nd == 4 ? image[0] : 1, image[nd - 3], image[nd - 2], image[nd - 1], o, kh, kw,
            output[output.ndim - 2], output[output.ndim - 1], a.stride_h, a.stride_w, a.padding_h, a.padding_w,
            a.dilation_h, a.dilation_w, a.groups};
}

ConvGeometry conv_geometry(const Shape& input, const Shape& weight, const Shape& output, const OpAttrs& a) {
    return window_geometry(input, weight[0], weight[2], weight[3], output, a);
}

// The output positions [begin, end) along one axis whose input coordinate
// position * stride - padding + offset lies inside [0, in_size).
struct Span {
    int64_t begin, end;
};

Span span_inside(int64_t offset, int64_t in_size, int64_t out_size, int64_t stride, int64_t padding) {
    int64_t first = offset - padding;   // input coordinate of output position 0
    int64_t begin = first >= 0 ? 0 : (-first + stride - 1) / stride;
    int64_t room = in_size - 1 - first;   // position * stride may go up to this
    int64_t end = room < 0 ? 0 : std::min(out_size, room / stride + 1);
    return {std::min(begin, end), end};
}

// Moves patches between one image [C,H,W] and its column matrix [C*kH*kW, Ho*Wo], whose row
// (c,i,j) and column (y,x) is image[c][y*stride_h - padding_h + i*dilation_h][x*stride_w - padding_w + j*dilation_w].
// to_columns: fill the columns from the image, `pad` where the patch lies in the padding (im2col;
// conv2d pads with 0, max_pool2d with -inf). Otherwise: add each column into the image where it
// came from (col2im; where windows overlap, their entries add up).
template <class T>
void move_patches(T* image, T* columns, const ConvGeometry& g, bool to_columns, T pad = T(0)) {
    const int64_t positions = g.positions();
    for (int64_t c = 0; c < g.c; ++c) {
        T* plane = image + c * g.h * g.w;
        for (int64_t i = 0; i < g.kh; ++i) {
            Span ys = span_inside(i * g.dilation_h, g.h, g.oh, g.stride_h, g.padding_h);
            for (int64_t j = 0; j < g.kw; ++j) {
                T* row = columns + ((c * g.kh + i) * g.kw + j) * positions;
                Span xs = span_inside(j * g.dilation_w, g.w, g.ow, g.stride_w, g.padding_w);
                const int64_t inside = xs.end - xs.begin;
                if (inside == 0 || ys.begin == ys.end) {   // every position of this row reads the padding
                    if (to_columns) std::fill(row, row + positions, pad);
                    continue;
                }
                if (to_columns) {
                    std::fill(row, row + ys.begin * g.ow, pad);   // output rows reading the top padding
                    std::fill(row + ys.end * g.ow, row + positions, pad);   // ... the bottom padding
                }
                // the input element of output (ys.begin, xs.begin); each output row moves stride_h input rows
                T* first = plane + (ys.begin * g.stride_h - g.padding_h + i * g.dilation_h) * g.w +
                           xs.begin * g.stride_w - g.padding_w + j * g.dilation_w;
                const int64_t row_step = g.stride_h * g.w;
                for (int64_t y = ys.begin; y < ys.end; ++y) {
                    T* line = first + (y - ys.begin) * row_step;
                    T* column = row + y * g.ow;
                    if (to_columns) {
                        std::fill(column, column + xs.begin, pad);
                        if (g.stride_w == 1) std::copy(line, line + inside, column + xs.begin);
                        else for (int64_t x = 0; x < inside; ++x) column[xs.begin + x] = line[x * g.stride_w];
                        std::fill(column + xs.end, column + g.ow, pad);
                    } else {
                        for (int64_t x = 0; x < inside; ++x) line[x * g.stride_w] += column[xs.begin + x];
                    }
                }
            }
        }
    }
}

// The column matrix of one sample: the image itself for a 1x1 kernel, else im2col into scratch.
template <class T>
Eigen::Map<const RowMatrix<T>> columns_of(T* image, RowMatrix<T>& scratch, const ConvGeometry& g) {
    if (g.image_is_columns()) return Eigen::Map<const RowMatrix<T>>(image, g.patch(), g.positions());
    move_patches(image, scratch.data(), g, true);
    return Eigen::Map<const RowMatrix<T>>(scratch.data(), g.patch(), g.positions());
}

// Y[n] = W columns(X[n]) (+ b per output channel), one product per group: group k's output
// channels (rows of W) read group k's input channels (rows of the columns). Each product goes to
// the BLAS when blas_product takes it, else to Eigen; likewise in the backward ops.
template <class T>
void conv2d_forward(const Value& x, const Value& weight, const Value* bias, const Value& y, const ConvGeometry& g) {
    Eigen::Map<const RowMatrix<T>> W(weight.data<T>(), g.o, g.group_patch());
    RowMatrix<T> scratch(g.image_is_columns() ? 0 : g.patch(), g.positions());
    const int64_t outs = g.group_outputs(), rows = g.group_patch();
    for (int64_t n = 0; n < g.n; ++n) {
        MatrixMap<T> Y(y.data<T>() + n * g.o * g.positions(), g.o, g.positions());
        Eigen::Map<const RowMatrix<T>> columns = columns_of(x.data<T>() + n * g.image_size(), scratch, g);
        for (int64_t k = 0; k < g.groups; ++k) {
            if (blas_product(Y.data() + k * outs * g.positions(), g.positions(), W.data() + k * outs * rows, rows,
                             columns.data() + k * rows * g.positions(), g.positions(), outs, g.positions(), rows,
                             false, false, false))
                continue;
            Y.middleRows(k * outs, outs).noalias() = W.middleRows(k * outs, outs) * columns.middleRows(k * rows, rows);
        }
        if (bias)
            for (int64_t o = 0; o < g.o; ++o) Y.row(o).array() += bias->data<T>()[o];
    }
}

// dX[n] = col2im(Wᵀ G[n]), per group.
template <class T>
void conv2d_grad_input(const Value& grad, const Value& weight, const Value& dx, const ConvGeometry& g) {
    Eigen::Map<const RowMatrix<T>> W(weight.data<T>(), g.o, g.group_patch());
    RowMatrix<T> scratch(g.image_is_columns() ? 0 : g.patch(), g.positions());
    const int64_t outs = g.group_outputs(), rows = g.group_patch();
    for (int64_t n = 0; n < g.n; ++n) {
        Eigen::Map<const RowMatrix<T>> G(grad.data<T>() + n * g.o * g.positions(), g.o, g.positions());
        T* image = dx.data<T>() + n * g.image_size();
        MatrixMap<T> columns(g.image_is_columns() ? image : scratch.data(), g.patch(), g.positions());
        for (int64_t k = 0; k < g.groups; ++k) {
            if (blas_product(columns.data() + k * rows * g.positions(), g.positions(), W.data() + k * outs * rows,
                             rows, G.data() + k * outs * g.positions(), g.positions(), rows, g.positions(), outs,
                             true, false, false))
                continue;
            columns.middleRows(k * rows, rows).noalias() =
                W.middleRows(k * outs, outs).transpose() * G.middleRows(k * outs, outs);
        }
        if (g.image_is_columns()) continue;
        std::fill(image, image + g.image_size(), T(0));
        move_patches(image, scratch.data(), g, false);
    }
}

// dW = sum over n of G[n] columns(X[n])ᵀ, per group.
template <class T>
void conv2d_grad_weight(const Value& grad, const Value& x, const Value& dw, const ConvGeometry& g) {
    MatrixMap<T> dW(dw.data<T>(), g.o, g.group_patch());
    dW.setZero();
    RowMatrix<T> scratch(g.image_is_columns() ? 0 : g.patch(), g.positions());
    const int64_t outs = g.group_outputs(), rows = g.group_patch();
    for (int64_t n = 0; n < g.n; ++n) {
        Eigen::Map<const RowMatrix<T>> G(grad.data<T>() + n * g.o * g.positions(), g.o, g.positions());
        Eigen::Map<const RowMatrix<T>> columns = columns_of(x.data<T>() + n * g.image_size(), scratch, g);
        for (int64_t k = 0; k < g.groups; ++k) {
            if (blas_product(dW.data() + k * outs * rows, rows, G.data() + k * outs * g.positions(), g.positions(),
                             columns.data() + k * rows * g.positions(), g.positions(), outs, rows, g.positions(),
                             false, true, true))
                continue;
            dW.middleRows(k * outs, outs).noalias() +=
                G.middleRows(k * outs, outs) * columns.middleRows(k * rows, rows).transpose();
        }
    }
}

// The first element along one axis of each output position's window that lies in the input
// (the shape rule made sure there is one): where PyTorch puts a window's index when no element
// beats -inf.
std::vector<int64_t> first_inside(int64_t out_size, int64_t stride, int64_t padding, int64_t dilation) {
    std::vector<int64_t> first(out_size);
    for (int64_t o = 0; o < out_size; ++o) {
        int64_t start = o * stride - padding;
        first[o] = start >= 0 ? 0 : (-start + dilation - 1) / dilation;
    }
    return first;
}

// Each window's maximum and its 1-based flat index in the H*W plane, one plane at a time: the
// plane's windows become the columns of a [kH*kW, Ho*Wo] matrix (move_patches, as for conv2d, the
// padding -inf), whose rows are then folded into a running maximum with selects, not branches
// (random data would mispredict them). The rows are contiguous, so the loop vectorises. Window
// elements come in row-major order and only a larger one (or the first NaN) takes over, so ties
// keep the first. A padded element never wins: only the first can, when nothing beats -inf, and
// then the index is the window's first element inside the input, as PyTorch's.
template <class T>
void max_pool2d_forward(const Value& x, const Value& values, const Value& indices, const OpAttrs& a) {
    ConvGeometry g = window_geometry(x.shape, 1, a.kernel_h, a.kernel_w, values.shape, a);
    const int64_t w = g.w, kw = g.kw;
    const int64_t planes = g.n * g.c, positions = g.positions(), window = g.kh * g.kw;
    g.n = g.c = 1;   // move_patches works on one plane
    std::vector<int64_t> offset(window);   // window element q sits this far from the window's first
    for (int64_t q = 0; q < window; ++q) offset[q] = (q / kw) * g.dilation_h * w + (q % kw) * g.dilation_w;
    std::vector<int64_t> first_row = first_inside(g.oh, g.stride_h, g.padding_h, g.dilation_h);
    std::vector<int64_t> first_col = first_inside(g.ow, g.stride_w, g.padding_w, g.dilation_w);
    const bool padded = g.padding_h > 0 || g.padding_w > 0;
    RowMatrix<T> columns(window, positions);
    std::vector<int32_t> winner(positions);   // per window: the element q holding the maximum
    for (int64_t plane = 0; plane < planes; ++plane) {
        move_patches(x.data<T>() + plane * g.h * g.w, columns.data(), g, true, -std::numeric_limits<T>::infinity());
        T* best = values.data<T>() + plane * positions;
        std::copy(columns.data(), columns.data() + positions, best);
        std::fill(winner.begin(), winner.end(), 0);
        for (int64_t q = 1; q < window; ++q) {
            const T* candidates = columns.data() + q * positions;
            for (int64_t t = 0; t < positions; ++t) {
                bool take = is_new_max(candidates[t], best[t]);
                best[t] = take ? candidates[t] : best[t];
                winner[t] = take ? static_cast<int32_t>(q) : winner[t];
            }
        }
        int64_t* where = indices.data<int64_t>() + plane * positions;
        for (int64_t y = 0; y < g.oh; ++y)
            for (int64_t xo = 0; xo < g.ow; ++xo)
                where[y * g.ow + xo] = (y * g.stride_h - g.padding_h) * w + xo * g.stride_w - g.padding_w +
                                       offset[winner[y * g.ow + xo]] + 1;
        if (!padded) continue;
        // Only windows in the first rows or columns start in the padding; where element 0 (in the
        // padding) kept the maximum, the first element inside takes its place.
        for (int64_t y = 0; y < g.oh; ++y) {
            bool top_padded = y * g.stride_h < g.padding_h;
            for (int64_t xo = 0; xo < g.ow; ++xo) {
                bool left_padded = xo * g.stride_w < g.padding_w;
                if (!top_padded && !left_padded) break;   // the rest of the row starts inside
                if (winner[y * g.ow + xo] != 0) continue;
                int64_t q = first_row[y] * kw + first_col[xo];
                where[y * g.ow + xo] = (y * g.stride_h - g.padding_h) * w + xo * g.stride_w - g.padding_w + offset[q] + 1;
            }
        }
    }
}

}  // namespace

void cpu_conv2d(const KernelCall& c) {
    const Value &x = in(c, 0), &weight = in(c, 1), &y = out(c);
    const Value* bias = c.n_inputs > 2 ? c.inputs[2] : nullptr;
    ConvGeometry g = conv_geometry(x.shape, weight.shape, y.shape, c.attrs);
    DISPATCH_FLOAT("conv2d", y.dtype, conv2d_forward<T>(x, weight, bias, y, g));
}

void cpu_conv2d_backward_input(const KernelCall& c) {
    const Value &grad = in(c, 0), &weight = in(c, 1), &dx = out(c);
    ConvGeometry g = conv_geometry(dx.shape, weight.shape, grad.shape, c.attrs);
    DISPATCH_FLOAT("conv2d_backward_input", dx.dtype, conv2d_grad_input<T>(grad, weight, dx, g));
}

void cpu_conv2d_backward_weight(const KernelCall& c) {
    const Value &grad = in(c, 0), &x = in(c, 1), &dw = out(c);
    ConvGeometry g = conv_geometry(x.shape, dw.shape, grad.shape, c.attrs);
    DISPATCH_FLOAT("conv2d_backward_weight", dw.dtype, conv2d_grad_weight<T>(grad, x, dw, g));
}

void cpu_max_pool2d(const KernelCall& c) {
    DISPATCH_FLOAT("max_pool2d", out(c).dtype, max_pool2d_forward<T>(in(c, 0), out(c, 0), out(c, 1), c.attrs));
}

// dx = zeros; each g is added at its window's argmax (an index out of its plane is an error).
void cpu_max_pool2d_backward(const KernelCall& c) {
    const Value &grad = in(c, 0), &indices = in(c, 1), &dx = out(c);
    const Shape &xs = dx.shape, &gs = grad.shape;   // [N,C,H,W] and [N,C,Ho,Wo], or 3-d
    const int64_t plane_size = xs[xs.ndim - 2] * xs[xs.ndim - 1], windows = gs[gs.ndim - 2] * gs[gs.ndim - 1];
    const int64_t planes = xs.ndim == 4 ? xs[0] * xs[1] : xs[0];
    const int64_t* pi = indices.data<int64_t>();
    DISPATCH_FLOAT("max_pool2d_backward", dx.dtype, {
        array_of<T>(dx).setZero();
        const T* pg = grad.data<T>();
        for (int64_t plane = 0; plane < planes; ++plane) {
            T* image = dx.data<T>() + plane * plane_size;
            for (int64_t k = 0; k < windows; ++k, ++pi, ++pg) {
                if (*pi < 1 || *pi > plane_size)
                    engine_fail("max_pool2d_backward: index %lld out of range 1..%lld of an H*W plane",
                                static_cast<long long>(*pi), static_cast<long long>(plane_size));
                image[*pi - 1] += *pg;
            }
        }
    });
}
}  // namespace td
