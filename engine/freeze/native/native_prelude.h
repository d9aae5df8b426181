// native_prelude.h: what the C++ that freeze generates for a plan (plan_native_source.cpp) calls
// besides elementwise.def's lines: small products and sums with their sizes as template
// arguments, so the compiler unrolls and vectorises them for one plan's shapes.
//
// This file is not compiled into tapedeck: it is embedded as text, put before each generated
// source (after scalar_math.h) and compiled by the system's compiler when a plan is made native.
// tests/engine/test_plan_native.cpp includes it too, so the build compiles and checks it.
#pragma once

#include <cmath>
#include <cstdint>

// glibc's vector math (libmvec: tanh, exp, log, ... on 4, 8 or 16 elements at once, within 4 ulp of
// the scalar functions): declared here so that GCC vectorises a loop that calls them, as Eigen
// vectorises the interpreted kernels' transcendental functions. math.h declares them so only
// under -ffast-math, which would also change the math of elementwise.def's lines (NaN tests).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__)
#define TD_VECTOR_MATH(name) \
    __attribute__((__simd__("notinbranch"))) float name##f(float) noexcept; \
    __attribute__((__simd__("notinbranch"))) double name(double) noexcept;
extern "C" {
TD_VECTOR_MATH(exp)
TD_VECTOR_MATH(log)
TD_VECTOR_MATH(tanh)
TD_VECTOR_MATH(sin)
TD_VECTOR_MATH(cos)
TD_VECTOR_MATH(log1p)
TD_VECTOR_MATH(expm1)
TD_VECTOR_MATH(erf)
}
#undef TD_VECTOR_MATH
#endif

namespace td::native {

// The sum of a[i * SA] * b[i * SB] for i < K: the whole blocks of LANES elements in LANES running
// sums (explicit lanes: the compiler vectorises them without reordering a float sum on its own),
// the rest in one more, then the lanes added pairwise.
template <class T, int K, int SA, int SB>
inline T dot(const T* a, const T* b) {
    constexpr int LANES = 8, FULL = K / LANES * LANES;
    T lane[LANES] = {};
    for (int k = 0; k < FULL; k += LANES)
        for (int l = 0; l < LANES; ++l) lane[l] = std::fma(a[(k + l) * SA], b[(k + l) * SB], lane[l]);
    T rest = T(0);
    for (int k = FULL; k < K; ++k) rest = std::fma(a[k * SA], b[k * SB], rest);
    for (int width = LANES / 2; width > 0; width /= 2)
        for (int l = 0; l < width; ++l) lane[l] += lane[l + width];
    return lane[0] + rest;
}

// Rows of Y [M,N] as sums of rows: Y(i,:) (+)= sum over k of A(i,k) * Bk(k,:), where A(i,k) is
// a[i * AI + k * AK] and row k of Bk is contiguous at bk + k * N. The loop over a row's N
// elements is the one the compiler vectorises.
template <class T, int M, int N, int K, int AI, int AK, bool ACC>
inline void rows_axpy(const T* __restrict a, const T* __restrict bk, T* __restrict y) {
    for (int i = 0; i < M; ++i) {
        T row[N];
        for (int j = 0; j < N; ++j) row[j] = ACC ? y[i * N + j] : T(0);
        for (int k = 0; k < K; ++k) {
            const T aik = a[i * AI + k * AK];
            for (int j = 0; j < N; ++j) row[j] = std::fma(aik, bk[k * N + j], row[j]);
        }
        for (int j = 0; j < N; ++j) y[i * N + j] = row[j];
    }
}

// Y [M,N] (+)= op(A) op(B), op(A) [M,K] and op(B) [K,N]: A is stored [M,K], or [K,M] when TA; B is
// stored [K,N], or [N,K] when TB (mm's trans_a, trans_b and accumulate attributes).
template <class T, int M, int N, int K, bool TA, bool TB, bool ACC>
inline void mm(const T* __restrict a, const T* __restrict b, T* __restrict y) {
    constexpr int A_I = TA ? 1 : K, A_K = TA ? M : 1;   // A(i,k) = a[i * A_I + k * A_K]
    constexpr int B_K = TB ? 1 : N, B_J = TB ? K : 1;   // B(k,j) = b[k * B_K + j * B_J]
    if constexpr (K == 1) {
        // An outer product: Y(i,j) (+)= A(i,0) B(0,j), B's row contiguous whether stored [1,N] or [N,1].
        for (int i = 0; i < M; ++i) {
            const T ai = a[i * A_I];
#pragma GCC unroll 1   // a short row unrolled whole is left scalar: keep the loop, which vectorises
            for (int j = 0; j < N; ++j) y[i * N + j] = ACC ? std::fma(ai, b[j], y[i * N + j]) : ai * b[j];
        }
    } else if constexpr (N == 1 && TA && M >= 8) {
        // y is a column: as a row it is b^T A', A' = A as stored [K,M], rows contiguous.
        rows_axpy<T, 1, M, K, 0, B_K, ACC>(b, a, y);
    } else if constexpr (N < 8 && A_K == 1 && B_K == 1) {
        // Narrow Y, rows of A and columns of B contiguous: a dot product per element.
        for (int i = 0; i < M; ++i)
            for (int j = 0; j < N; ++j) {
                T sum = dot<T, K, 1, 1>(a + i * A_I, b + j * B_J);
                y[i * N + j] = ACC ? y[i * N + j] + sum : sum;
            }
    } else if constexpr (!TB) {
        rows_axpy<T, M, N, K, A_I, A_K, ACC>(a, b, y);
    } else {
        T bk[K * N];   // B^T stored as [K,N] rows (mm_native_fits keeps K * N small)
        for (int k = 0; k < K; ++k)
            for (int j = 0; j < N; ++j) bk[k * N + j] = b[k * B_K + j * B_J];
        rows_axpy<T, M, N, K, A_I, A_K, ACC>(a, bk, y);
    }
}

// out [C,R] = in [R,C] transposed.
template <class T, int R, int C>
inline void transpose(const T* __restrict in, T* __restrict out) {
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) out[c * R + r] = in[r * C + c];
}

// The sum of x's N elements (sum over every dim), in 8 running sums.
template <class T, int64_t N>
inline T sum_all(const T* x) {
    constexpr int LANES = 8;
    T lane[LANES] = {};
    int64_t i = 0;
    for (; i + LANES <= N; i += LANES)
        for (int l = 0; l < LANES; ++l) lane[l] += x[i + l];
    for (int l = 0; i < N; ++i, ++l) lane[l] += x[i];
    T sum = T(0);
    for (int l = 0; l < LANES; ++l) sum += lane[l];
    return sum;
}

}  // namespace td::native
