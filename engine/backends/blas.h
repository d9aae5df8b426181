// blas.h: float and double GEMM through the system's OpenBLAS, for the products where it beats
// Eigen (measured per shape: bench/gemm_choice.cpp; the rule is blas_prefers).
//
// tapedeck does not link OpenBLAS: the first product that could use it loads libopenblas.so.0
// with dlopen. Before loading, it sets OPENBLAS_CORETYPE=SkylakeX when the CPU has AVX-512F and
// the user set no core type (OpenBLAS 0.3.21 picks its kernels while the library loads, and takes
// some AVX-512 Xeons for a Prescott: ~5x slower), and
// OPENBLAS_NUM_THREADS=1 (tapedeck runs one thread; OpenBLAS would otherwise start a thread per
// core at load). Both variables are put back as they were once it is loaded. Without the library
// at run time, or in a build configured without it (TAPEDECK_BLAS off or libopenblas-dev missing),
// every product stays in Eigen.
//
// TAPEDECK_GEMM in the environment overrides the rule: "eigen" keeps every product in Eigen,
// "blas" sends every float/double product to the BLAS when it is there (whatever its kernels),
// "auto" (the default) uses the rule. Read once, at the first product.
#pragma once

#include <cstdint>
#include <string>

namespace td {

enum GemmChoice {
    GEMM_AUTO,    // per shape, blas_prefers, when OpenBLAS runs its AVX-512 kernels
    GEMM_EIGEN,   // Eigen for every product
    GEMM_BLAS,    // the BLAS for every float/double product, when it is loaded
};

// Row-major C (m x n, `ldc` elements between rows) = op(A) op(B), or C += op(A) op(B) when
// `accumulate`; op(A) is m x k: A is stored row-major as m x k (`lda` between rows), or as k x m
// read transposed when `trans_a`; likewise op(B), k x n. Returns true when the BLAS did it; false,
// having touched nothing, when the product belongs to Eigen (the choice, or no BLAS).
bool blas_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
               const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate);
bool blas_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
               const double* b, int64_t ldb, double* c, int64_t ldc, bool accumulate);

// The measured rule: whether an m x k by k x n product, float or double, runs faster in
// OpenBLAS's AVX-512 kernels than in Eigen on one core (k does not matter). GEMM_AUTO follows it
// only when those are the kernels OpenBLAS loaded. See docs/performance.md for the table.
bool blas_prefers(int64_t m, int64_t n);

// Whether the BLAS is loaded (loading it on the first call).
bool blas_available();

// One line for people: "OpenBLAS 0.3.21, SkylakeX kernels, 1 thread (products of ...)" or why
// every product stays in Eigen.
std::string blas_describe();

// The choice in force (TAPEDECK_GEMM, or what blas_set_choice set), and a way to change it for
// the measuring tool and the tests.
GemmChoice blas_choice();
void blas_set_choice(GemmChoice choice);

}  // namespace td
