// scalar_math.h: the functions elementwise.def's lines call (math::exp, math::where, ...), for one
// element of type T (float, double or int64_t). Plain C++ on scalars, so that a GPU kernel can
// share the lines. The CPU kernels evaluate the same lines over whole spans at once: the same
// names are overloaded for Eigen arrays in kernels_cpu.cpp, which vectorises them.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace td::math {

template <class T>
concept Scalar = std::is_arithmetic_v<T>;

template <Scalar T> T exp(T x) { return std::exp(x); }
template <Scalar T> T log(T x) { return std::log(x); }
template <Scalar T> T sqrt(T x) { return std::sqrt(x); }
template <Scalar T> T tanh(T x) { return std::tanh(x); }
template <Scalar T> T sin(T x) { return std::sin(x); }
template <Scalar T> T cos(T x) { return std::cos(x); }
template <Scalar T> T log1p(T x) { return std::log1p(x); }
template <Scalar T> T expm1(T x) { return std::expm1(x); }
template <Scalar T> T sigmoid(T x) { return T(1) / (T(1) + std::exp(-x)); }
template <Scalar T> T pow(T x, T y) { return std::pow(x, y); }

// x ^ p with the exponents common in models computed exactly and fast.
template <Scalar T>
T power(T x, T p) {
    if (p == T(2)) return x * x;
    if (p == T(1)) return x;
    if (p == T(3)) return x * x * x;
    if (p == T(0.5)) return std::sqrt(x);
    return std::pow(x, p);
}

// |x|; -0.0 gives 0.0.
template <Scalar T>
T abs(T x) { if constexpr (std::is_integral_v<T>) return x < 0 ? -x : x; else return std::fabs(x); }

// -1, 0 or 1 (NaN gives 0, as PyTorch's sign).
template <Scalar T>
T sign(T x) { return T((x > T(0)) - (x < T(0))); }

// Rounding an integer gives it back; a float rounds as std:: does (rint: halves to even, as PyTorch).
template <Scalar T>
T floor(T x) { if constexpr (std::is_integral_v<T>) return x; else return std::floor(x); }
template <Scalar T>
T ceil(T x) { if constexpr (std::is_integral_v<T>) return x; else return std::ceil(x); }
template <Scalar T>
T trunc(T x) { if constexpr (std::is_integral_v<T>) return x; else return std::trunc(x); }
template <Scalar T>
T rint(T x) { if constexpr (std::is_integral_v<T>) return x; else return std::nearbyint(x); }

// min(max(x, lo), hi) as PyTorch (hi wins when lo > hi); NaN stays NaN.
template <Scalar T>
T clamp(T x, T lo, T hi) {
    T above = x < lo ? lo : x;
    return hi < above ? hi : above;
}

// a where the condition holds, else b.
template <Scalar T>
T where(bool condition, T a, T b) { return condition ? a : b; }

}  // namespace td::math
