// scalar_math.h: scalar functions that elementwise.def's lines use beyond std:: — plain C++ on one
// element of type T (float, double or int64_t), so that a CPU loop and a GPU kernel can share them.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace td::scalar {

// x ^ p with the exponents that are common in models computed exactly and fast.
template <class T>
T power(T x, T p) {
    if (p == T(2)) return x * x;
    if (p == T(1)) return x;
    if (p == T(3)) return x * x * x;
    if (p == T(0.5)) return std::sqrt(x);
    return std::pow(x, p);
}

// -1, 0 or 1 (NaN gives 0, as PyTorch's sign).
template <class T>
T sign(T x) { return T((x > T(0)) - (x < T(0))); }

// Rounding an integer gives it back; a float rounds as std:: does (round: half to even, as PyTorch).
template <class T>
T floor(T x) { if constexpr (std::is_integral_v<T>) return x; else return std::floor(x); }
template <class T>
T ceil(T x) { if constexpr (std::is_integral_v<T>) return x; else return std::ceil(x); }
template <class T>
T trunc(T x) { if constexpr (std::is_integral_v<T>) return x; else return std::trunc(x); }
template <class T>
T round_half_even(T x) { if constexpr (std::is_integral_v<T>) return x; else return std::nearbyint(x); }

template <class T>
T sigmoid(T x) { return T(1) / (T(1) + std::exp(-x)); }

// min(max(x, lo), hi) as PyTorch (hi wins when lo > hi); NaN stays NaN.
template <class T>
T clamp(T x, T lo, T hi) {
    T above = x < lo ? lo : x;
    return hi < above ? hi : above;
}

// |x|; -0.0 gives 0.0.
template <class T>
T abs(T x) { if constexpr (std::is_integral_v<T>) return x < 0 ? -x : x; else return std::fabs(x); }

}  // namespace td::scalar
