// test_helpers.h: small helpers shared by the engine tests — making tensors from plain vectors,
// reading values back, and plain-loop reference computations (broadcasting, products, work along
// a dim) that are written independently of the engine's kernels.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "tape.h"

namespace td_test {

using td::DType;
using td::Shape;
using td::Tensor;
using td::Value;

// A leaf tensor holding `values` (row-major). requires_grad is set on the leaf when asked
// (as Lua's requires_grad=true does: only float leaves may require grad).
inline Tensor make_tensor(const Shape& shape, const std::vector<double>& values, DType dtype = td::DTYPE_F64,
                          bool requires_grad = false, td::Device device = td::DEVICE_CPU) {
    if (static_cast<int64_t>(values.size()) != shape.numel())
        FAIL("make_tensor: " << values.size() << " values for shape " << shape.str());
    Tensor t = td::ops::from_values(shape, dtype, values.data(), device);
    t.node->outputs[0].requires_grad = requires_grad;
    return t;
}

// A float64 leaf that requires grad.
inline Tensor make_leaf(const Shape& shape, const std::vector<double>& values, DType dtype = td::DTYPE_F64) {
    return make_tensor(shape, values, dtype, true);
}

// A 0-d tensor.
inline Tensor make_scalar(double x, DType dtype = td::DTYPE_F64, bool requires_grad = false) {
    return make_tensor(Shape{}, {x}, dtype, requires_grad);
}

// The values of v, on any device (read through the host boundary).
inline std::vector<double> values_of(const Value& v) {
    Value host = td::value_to_host(v);
    std::vector<double> out(static_cast<size_t>(host.numel()));
    for (int64_t i = 0; i < host.numel(); ++i) out[static_cast<size_t>(i)] = td::value_get(host, i);
    return out;
}

inline std::vector<double> values_of(const Tensor& t) { return values_of(t.value()); }

inline double item(const Tensor& t) {
    REQUIRE(t.numel() == 1);
    return td::value_get(td::value_to_host(t.value()), 0);
}

// The .grad of a leaf (or of a non-leaf that retains grad); empty when none arrived.
inline Tensor grad_of(const Tensor& t) { return t.node->outputs[t.output].grad; }

inline bool near(double actual, double expected, double rtol, double atol) {
    if (std::isnan(expected)) return std::isnan(actual);
    return std::fabs(actual - expected) <= atol + rtol * std::fabs(expected);
}

inline std::string join(const std::vector<double>& v) {
    std::ostringstream s;
    s.precision(10);
    s << '{';
    for (size_t i = 0; i < v.size(); ++i) s << (i ? ", " : "") << v[i];
    return s.str() + '}';
}

// Every element of `actual` near `expected`; on failure the message shows both in full.
inline void check_values(const std::vector<double>& actual, const std::vector<double>& expected, double rtol = 1e-12,
                         double atol = 1e-12) {
    INFO("actual   " << join(actual));
    INFO("expected " << join(expected));
    CHECK(actual.size() == expected.size());
    if (actual.size() != expected.size()) return;
    bool all_near = true;
    for (size_t i = 0; i < actual.size(); ++i) all_near = all_near && near(actual[i], expected[i], rtol, atol);
    CHECK(all_near);
}

inline void check_values(const Tensor& t, const std::vector<double>& expected, double rtol = 1e-12,
                         double atol = 1e-12) {
    check_values(values_of(t), expected, rtol, atol);
}

// ---------------------------------------------------------------------------------------------
// Reference computations with plain loops (row-major, any number of dims).

// Row-major strides of a shape.
inline std::vector<int64_t> strides_of(const Shape& s) {
    std::vector<int64_t> st(static_cast<size_t>(s.ndim), 1);
    for (int i = s.ndim - 2; i >= 0; --i) st[i] = st[i + 1] * s.dims[i + 1];
    return st;
}

// NumPy broadcasting of two shapes (assumes they are compatible).
inline Shape broadcast_ref_shape(const Shape& a, const Shape& b) {
    Shape out;
    out.ndim = std::max(a.ndim, b.ndim);
    for (int i = 0; i < out.ndim; ++i) {
        int ia = i - (out.ndim - a.ndim), ib = i - (out.ndim - b.ndim);
        int64_t da = ia >= 0 ? a.dims[ia] : 1, db = ib >= 0 ? b.dims[ib] : 1;
        out.dims[i] = da == 1 ? db : da;
    }
    return out;
}

// The flat index into a tensor of shape `s` (right-aligned in `full`) for the element of `full` at
// multi-index `idx`, with size-1 dims of `s` repeating.
inline int64_t broadcast_source_index(const Shape& s, const Shape& full, const std::vector<int64_t>& idx) {
    std::vector<int64_t> st = strides_of(s);
    int64_t flat = 0;
    for (int i = 0; i < s.ndim; ++i) {
        int j = i + (full.ndim - s.ndim);
        if (s.dims[i] != 1) flat += idx[j] * st[i];
    }
    return flat;
}

// The multi-index of flat element k of shape s.
inline std::vector<int64_t> unravel(const Shape& s, int64_t k) {
    std::vector<int64_t> idx(static_cast<size_t>(s.ndim));
    for (int i = s.ndim - 1; i >= 0; --i) {
        idx[i] = k % s.dims[i];
        k /= s.dims[i];
    }
    return idx;
}

// out[i] = f(a[..], b[..]) over the broadcast shape.
inline std::vector<double> broadcast_ref(const Shape& sa, const std::vector<double>& a, const Shape& sb,
                                         const std::vector<double>& b, const std::function<double(double, double)>& f) {
    Shape full = broadcast_ref_shape(sa, sb);
    std::vector<double> out(static_cast<size_t>(full.numel()));
    for (int64_t k = 0; k < full.numel(); ++k) {
        std::vector<int64_t> idx = unravel(full, k);
        out[k] = f(a[broadcast_source_index(sa, full, idx)], b[broadcast_source_index(sb, full, idx)]);
    }
    return out;
}

// Sum a tensor of shape `full` down to `to` (the inverse of broadcasting `to` up to `full`).
inline std::vector<double> sum_to_ref(const Shape& full, const std::vector<double>& x, const Shape& to) {
    std::vector<double> out(static_cast<size_t>(to.numel()), 0.0);
    for (int64_t k = 0; k < full.numel(); ++k) out[broadcast_source_index(to, full, unravel(full, k))] += x[k];
    return out;
}

// Matrix product of row-major A (ar x ac) and B (br x bc), either read transposed.
inline std::vector<double> matmul_ref(const std::vector<double>& a, int64_t ar, int64_t ac, bool ta,
                                      const std::vector<double>& b, int64_t br, int64_t bc, bool tb) {
    int64_t m = ta ? ac : ar, k = ta ? ar : ac, n = tb ? br : bc;
    std::vector<double> c(static_cast<size_t>(m * n), 0.0);
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
            for (int64_t p = 0; p < k; ++p) {
                double av = ta ? a[p * ac + i] : a[i * ac + p];
                double bv = tb ? b[j * bc + p] : b[p * bc + j];
                c[i * n + j] += av * bv;
            }
    return c;
}

// Apply `f` to each line of x along `dim` (a line: the elements whose indices differ only in dim),
// writing the line it returns back in place: softmax, cumulative ops...
inline std::vector<double> map_lines(const Shape& s, const std::vector<double>& x, int dim,
                                     const std::function<std::vector<double>(const std::vector<double>&)>& f) {
    std::vector<double> out(x.size());
    int64_t stride = strides_of(s)[dim], n = s.dims[dim];
    for (int64_t k = 0; k < s.numel(); ++k) {
        if (unravel(s, k)[dim] != 0) continue;   // k starts a line
        std::vector<double> line(static_cast<size_t>(n));
        for (int64_t j = 0; j < n; ++j) line[j] = x[k + j * stride];
        std::vector<double> mapped = f(line);
        for (int64_t j = 0; j < n; ++j) out[k + j * stride] = mapped[j];
    }
    return out;
}

// Reduce each line along `dim` to one number, in the order of the remaining dims.
inline std::vector<double> reduce_lines(const Shape& s, const std::vector<double>& x, int dim,
                                        const std::function<double(const std::vector<double>&)>& f) {
    std::vector<double> out;
    int64_t stride = strides_of(s)[dim], n = s.dims[dim];
    for (int64_t k = 0; k < s.numel(); ++k) {
        if (unravel(s, k)[dim] != 0) continue;
        std::vector<double> line(static_cast<size_t>(n));
        for (int64_t j = 0; j < n; ++j) line[j] = x[k + j * stride];
        out.push_back(f(line));
    }
    return out;
}

inline std::vector<double> map_values(const std::vector<double>& x, const std::function<double(double)>& f) {
    std::vector<double> out(x.size());
    for (size_t i = 0; i < x.size(); ++i) out[i] = f(x[i]);
    return out;
}

inline std::vector<double> zip_values(const std::vector<double>& a, const std::vector<double>& b,
                                      const std::function<double(double, double)>& f) {
    std::vector<double> out(a.size());
    for (size_t i = 0; i < a.size(); ++i) out[i] = f(a[i], b[i]);
    return out;
}

}  // namespace td_test
