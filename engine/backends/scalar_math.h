// scalar_math.h: the functions elementwise.def's lines call (math::exp, math::where, ...), for one
// element of type T (float, double or int64_t). Plain C++ on scalars, so that a GPU kernel can
// share the lines. The CPU kernels evaluate the same lines over whole spans at once: the same
// names are overloaded for Eigen arrays in kernels_cpu.cpp, which vectorises them.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

// Every function here is callable from CUDA device code too (engine/backends/cuda/kernels_cuda_elementwise.cu
// compiles the same lines with nvcc): TD_HOST_DEVICE.
#include "host_device.h"

namespace td::math {

template <class T>
concept Scalar = std::is_arithmetic_v<T>;

template <Scalar T> TD_HOST_DEVICE T exp(T x) { return std::exp(x); }
template <Scalar T> TD_HOST_DEVICE T log(T x) { return std::log(x); }
template <Scalar T> TD_HOST_DEVICE T sqrt(T x) { return std::sqrt(x); }
template <Scalar T> TD_HOST_DEVICE T tanh(T x) { return std::tanh(x); }
template <Scalar T> TD_HOST_DEVICE T sin(T x) { return std::sin(x); }
template <Scalar T> TD_HOST_DEVICE T cos(T x) { return std::cos(x); }
template <Scalar T> TD_HOST_DEVICE T log1p(T x) { return std::log1p(x); }
template <Scalar T> TD_HOST_DEVICE T expm1(T x) { return std::expm1(x); }
template <Scalar T> TD_HOST_DEVICE T sigmoid(T x) { return T(1) / (T(1) + std::exp(-x)); }
// a + b and a * b that wrap around for int64, as PyTorch's do: the CPU build gets that from -fwrapv,
// which reaches no device code, so the reductions' running sums and products use these (in uint64,
// whose overflow is defined) on both sides.
template <Scalar T>
TD_HOST_DEVICE T wrapping_add(T a, T b) {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
    else return a + b;
}
template <Scalar T>
TD_HOST_DEVICE T wrapping_mul(T a, T b) {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
    else return a * b;
}
// x ^ y; for int64 as PyTorch's integer power (exact, wrapping; a negative exponent gives 0
// unless x is 1 or -1).
template <Scalar T>
TD_HOST_DEVICE T pow(T x, T y) {
    if constexpr (std::is_integral_v<T>) {
        if (y < 0) return x == 1 ? T(1) : x == -1 ? ((y & 1) ? T(-1) : T(1)) : T(0);
        uint64_t result = 1, base = static_cast<uint64_t>(x);   // unsigned: overflow wraps, as PyTorch
        for (uint64_t e = static_cast<uint64_t>(y); e; e >>= 1) {
            if (e & 1) result *= base;
            base *= base;
        }
        return static_cast<T>(result);
    } else {
        return std::pow(x, y);
    }
}

// x ^ p with the exponents common in models computed exactly and fast.
template <Scalar T>
TD_HOST_DEVICE T power(T x, T p) {
    if (p == T(2)) return x * x;
    if (p == T(1)) return x;
    if (p == T(3)) return x * x * x;
    if constexpr (std::is_integral_v<T>) {
        return pow(x, p);
    } else {
        if (p == T(0.5)) return std::sqrt(x);
        return std::pow(x, p);
    }
}

// |x|; -0.0 gives 0.0.
template <Scalar T>
TD_HOST_DEVICE T abs(T x) { if constexpr (std::is_integral_v<T>) return x < 0 ? -x : x; else return std::fabs(x); }

// -1, 0 or 1 (NaN gives 0, as PyTorch's sign).
template <Scalar T>
TD_HOST_DEVICE T sign(T x) { return T((x > T(0)) - (x < T(0))); }

// Rounding an integer gives it back; a float rounds as std:: does (rint: halves to even, as PyTorch).
template <Scalar T>
TD_HOST_DEVICE T floor(T x) { if constexpr (std::is_integral_v<T>) return x; else return std::floor(x); }
template <Scalar T>
TD_HOST_DEVICE T ceil(T x) { if constexpr (std::is_integral_v<T>) return x; else return std::ceil(x); }
template <Scalar T>
TD_HOST_DEVICE T trunc(T x) { if constexpr (std::is_integral_v<T>) return x; else return std::trunc(x); }
template <Scalar T>
TD_HOST_DEVICE T rint(T x) { if constexpr (std::is_integral_v<T>) return x; else return std::nearbyint(x); }

// min(max(x, lo), hi) as PyTorch (hi wins when lo > hi); NaN stays NaN.
template <Scalar T>
TD_HOST_DEVICE T clamp(T x, T lo, T hi) {
    T above = x < lo ? lo : x;
    return hi < above ? hi : above;
}

// a where the condition holds, else b.
template <Scalar T>
TD_HOST_DEVICE T where(bool condition, T a, T b) { return condition ? a : b; }

// The larger (smaller) of x and y; NaN in either gives NaN, as PyTorch's maximum and minimum.
template <Scalar T>
TD_HOST_DEVICE T maximum(T x, T y) { return x != x ? x : y != y ? y : x < y ? y : x; }
template <Scalar T>
TD_HOST_DEVICE T minimum(T x, T y) { return x != x ? x : y != y ? y : y < x ? y : x; }

// 1 where x is NaN (infinite, finite), else 0, in x's type; an integer is always finite.
template <Scalar T>
TD_HOST_DEVICE T isnan(T x) { return T(x != x); }
template <Scalar T>
TD_HOST_DEVICE T isinf(T x) {
    if constexpr (std::is_integral_v<T>) return T(0); else return T(std::isinf(x));
}
template <Scalar T>
TD_HOST_DEVICE T isfinite(T x) {
    if constexpr (std::is_integral_v<T>) return T(1); else return T(std::isfinite(x));
}

// The activations of torch.nn.functional, as PyTorch computes them (float types only).
// gelu's formulas are written once for V = T and for V = an Eigen array of T: kernels_cpu.cpp
// evaluates them over a whole span that way, where Eigen's erf, exp and tanh are vectorised (the
// unqualified calls find std::'s for a number and Eigen::'s for an array).
//
// gelu: approximate = 0 is the exact x * Phi(x); otherwise the tanh approximation.
template <class V, class T>
TD_HOST_DEVICE V gelu_formula(const V& x, T approximate) {
    using std::erf, std::tanh;
    if (approximate != T(0)) {
        const T beta = T(M_SQRT2 * M_2_SQRTPI * 0.5), kappa = T(0.044715);
        V inner = beta * (x + kappa * x * x * x);
        return T(0.5) * x * (T(1) + tanh(inner));
    }
    return x * T(0.5) * (T(1) + erf(x * T(M_SQRT1_2)));
}

// d gelu / dx (PyTorch's gelu_backward without the incoming gradient).
template <class V, class T>
TD_HOST_DEVICE V gelu_derivative_formula(const V& x, T approximate) {
    using std::erf, std::exp, std::tanh;
    if (approximate != T(0)) {
        const T beta = T(M_SQRT2 * M_2_SQRTPI * 0.5), kappa = T(0.044715);
        V x_sq = x * x;
        V inner = beta * (x + kappa * x_sq * x);
        V tanh_inner = tanh(inner);
        V left = T(0.5) * x, right = T(1) + tanh_inner;
        V left_derivative = T(0.5) * right;
        V right_derivative = left * (T(1) - tanh_inner * tanh_inner) * beta * (T(1) + T(3) * kappa * x_sq);
        return left_derivative + right_derivative;
    }
    const T alpha = T(M_SQRT1_2), beta = T(M_2_SQRTPI * M_SQRT1_2 * 0.5);
    V cdf = T(0.5) * (T(1) + erf(x * alpha));
    V pdf = beta * exp(x * x * T(-0.5));
    return cdf + x * pdf;
}

template <Scalar T>
TD_HOST_DEVICE T gelu(T x, T approximate) { return gelu_formula<T>(x, approximate); }
template <Scalar T>
TD_HOST_DEVICE T gelu_derivative(T x, T approximate) { return gelu_derivative_formula<T>(x, approximate); }

// log(1 + e^(beta x)) / beta, or x where beta x > threshold (PyTorch's softplus).
template <Scalar T>
TD_HOST_DEVICE T softplus(T x, T beta, T threshold) {
    return x * beta > threshold ? x : std::log1p(std::exp(x * beta)) / beta;
}

// sort and topk's order (CPU and CUDA kernels): whether value va at position a goes before vb at
// position b. NaN is the largest; ties keep their positions' order (a stable sort).
template <Scalar T>
TD_HOST_DEVICE bool sorts_before(T va, T vb, int64_t a, int64_t b, bool descending) {
    bool nan_a = va != va, nan_b = vb != vb;
    if (nan_a || nan_b) {
        if (nan_a == nan_b) return a < b;
        return descending ? nan_a : nan_b;
    }
    if (va != vb) return descending ? va > vb : va < vb;
    return a < b;
}

}  // namespace td::math
