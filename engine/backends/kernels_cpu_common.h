// kernels_cpu_common.h: what the CPU kernel files (kernels_cpu*.cpp) share: Eigen maps of values,
// the broadcast row walker, the strided offset walker, dim splits and uniform random numbers.
// Internal to those files (an anonymous namespace: each file has its own copy, inlined).
#pragma once

#include <Eigen/Dense>
#include <cstring>

#include "dtype_dispatch.h"
#include "tape.h"

namespace td {

namespace {

template <class T>
using ArrayMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using ConstArrayMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

template <class T>
ArrayMap<T> array_of(const Value& v) { return ArrayMap<T>(v.data<T>(), v.numel()); }
template <class T>
ConstArrayMap<T> const_array_of(const Value& v) { return ConstArrayMap<T>(v.data<T>(), v.numel()); }

inline const Value& in(const KernelCall& c, int i) { return *c.inputs[i]; }
inline const Value& out(const KernelCall& c, int i = 0) { return *c.outputs[i]; }

// Walks the rows (the last dimension) of a `full` shape. For each of up to two operands whose
// shapes broadcast to `full`, it keeps the offset of the current row's first element and whether
// the operand moves along the row (step 1) or repeats one element (step 0).
struct RowWalker {
    int outer_ndim;                 // dims above the last
    int64_t dims[MAX_DIMS];
    int64_t row_len = 1, rows = 1;
    int64_t strides[2][MAX_DIMS] = {};
    int64_t offset[2] = {0, 0};
    int64_t step[2] = {0, 0};
    int64_t index[MAX_DIMS] = {};

    RowWalker(const Shape& full, const Shape& a, const Shape* b = nullptr) {
        outer_ndim = full.ndim > 0 ? full.ndim - 1 : 0;
        for (int i = 0; i < full.ndim; ++i) dims[i] = full.dims[i];
        if (full.ndim > 0) row_len = full.dims[full.ndim - 1];
        for (int i = 0; i < outer_ndim; ++i) rows *= full.dims[i];
        set_operand(0, full, a);
        if (b) set_operand(1, full, *b);
    }

    void set_operand(int k, const Shape& full, const Shape& s) {
        int64_t stride = 1;
        for (int i = full.ndim - 1; i >= 0; --i) {
            int j = i - (full.ndim - s.ndim);
            bool broadcast = j < 0 || (s.dims[j] == 1 && full.dims[i] != 1);
            int64_t st = broadcast ? 0 : stride;
            if (j >= 0) stride *= s.dims[j];
            if (i == full.ndim - 1) step[k] = st == 0 ? 0 : 1;
            else strides[k][i] = st;
        }
        if (full.ndim == 0) step[k] = 1;
    }

    void next() {
        for (int d = outer_ndim - 1; d >= 0; --d) {
            offset[0] += strides[0][d];
            offset[1] += strides[1][d];
            if (++index[d] < dims[d]) return;
            offset[0] -= strides[0][d] * dims[d];
            offset[1] -= strides[1][d] * dims[d];
            index[d] = 0;
        }
    }
};

// out = f(a, b) elementwise with broadcasting; f is inlined and the loops vectorise.
template <class T, class F>
void binary_loop(const Value& a, const Value& b, const Value& o, F f) {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = o.data<T>();
    int64_t n = o.numel();
    if (a.shape == o.shape && b.shape == o.shape) {
        for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], pb[i]);
        return;
    }
    if (b.numel() == 1 && a.shape == o.shape) {
        T s = pb[0];
        for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], s);
        return;
    }
    if (a.numel() == 1 && b.shape == o.shape) {
        T s = pa[0];
        for (int64_t i = 0; i < n; ++i) po[i] = f(s, pb[i]);
        return;
    }
    RowWalker w(o.shape, a.shape, &b.shape);
    int64_t len = w.row_len;
    for (int64_t r = 0; r < w.rows; ++r, w.next()) {
        T* orow = po + r * len;
        const T* ar = pa + w.offset[0];
        const T* br = pb + w.offset[1];
        if (w.step[0] && w.step[1]) {
            for (int64_t j = 0; j < len; ++j) orow[j] = f(ar[j], br[j]);
        } else if (w.step[0]) {
            T s = br[0];
            for (int64_t j = 0; j < len; ++j) orow[j] = f(ar[j], s);
        } else if (w.step[1]) {
            T s = ar[0];
            for (int64_t j = 0; j < len; ++j) orow[j] = f(s, br[j]);
        } else {
            T v = f(ar[0], br[0]);
            for (int64_t j = 0; j < len; ++j) orow[j] = v;
        }
    }
}

// x = f(x, y) in place, y broadcast into x's shape.
template <class T, class F>
void inplace_loop(const Value& x, const Value& y, F f) {
    T* px = x.data<T>();
    const T* py = y.data<T>();
    int64_t n = x.numel();
    if (y.shape == x.shape) {
        for (int64_t i = 0; i < n; ++i) px[i] = f(px[i], py[i]);
        return;
    }
    if (y.numel() == 1) {
        T s = py[0];
        for (int64_t i = 0; i < n; ++i) px[i] = f(px[i], s);
        return;
    }
    RowWalker w(x.shape, y.shape);
    int64_t len = w.row_len;
    for (int64_t r = 0; r < w.rows; ++r, w.next()) {
        T* xr = px + r * len;
        const T* yr = py + w.offset[0];
        if (w.step[0]) {
            for (int64_t j = 0; j < len; ++j) xr[j] = f(xr[j], yr[j]);
        } else {
            for (int64_t j = 0; j < len; ++j) xr[j] = f(xr[j], yr[0]);
        }
    }
}

// Walks the elements of a tensor of shape `walked` in order, keeping the offset of the element at
// the same coordinates in another tensor read through `strides` (a 0 stride repeats, a negative
// one walks backwards): for reductions into a kept shape, flips, and indexing along a dim.
struct OffsetWalker {
    int ndim;
    int64_t dims[MAX_DIMS] = {};
    int64_t strides[MAX_DIMS] = {};
    int64_t index[MAX_DIMS] = {};
    int64_t offset;

    OffsetWalker(const Shape& walked, const int64_t* other_strides, int64_t start = 0) : ndim(walked.ndim), offset(start) {
        for (int d = 0; d < ndim; ++d) {
            dims[d] = walked.dims[d];
            strides[d] = other_strides[d];
        }
    }

    void next() {
        for (int d = ndim - 1; d >= 0; --d) {
            offset += strides[d];
            if (++index[d] < dims[d]) return;
            offset -= strides[d] * dims[d];
            index[d] = 0;
        }
    }
};

// Row-major strides of `s` (elements).
inline void contiguous_strides(const Shape& s, int64_t* strides) {
    int64_t stride = 1;
    for (int d = s.ndim - 1; d >= 0; --d) {
        strides[d] = stride;
        stride *= s.dims[d];
    }
}

// Whether v replaces best in a running maximum: larger, or the first NaN (NaN propagates, as in
// PyTorch). Ties keep the first. Bitwise, not short-circuit: a loop over it has no data-dependent
// branch, and can vectorise.
template <class T>
bool is_new_max(T v, T best) {
    return (v > best) | ((v != v) & (best == best));
}

template <class T>
bool is_new_min(T v, T best) {
    return (v < best) | ((v != v) & (best == best));
}

// Uniform in [0, 1): 53 random bits for double, 24 for float (so it never rounds up to 1).
inline double uniform_double() { return static_cast<double>(engine_random_u64() >> 11) * 0x1.0p-53; }
inline float uniform_float() { return static_cast<float>(engine_random_u64() >> 40) * 0x1.0p-24f; }

}  // namespace

// C = op(A) op(B) (or C += ..., `accumulate`) for row-major A (a_rows x a_cols) and B, op an
// optional transpose (kernels_cpu_products.cpp; for float and double outside it).
template <class T>
void matmul_into(T* c, const T* a, const T* b, int64_t a_rows, int64_t a_cols, int64_t b_rows, int64_t b_cols,
                 bool ta, bool tb, bool accumulate);

}  // namespace td
