// The BLAS path of the CPU products (engine/backends/blas.cpp): mm through OpenBLAS gives what Eigen and a
// plain triple loop give, for every transpose, accumulate, float and double; the library loads
// with its AVX-512 kernels and one thread and leaves the environment as it was; the rule keeps
// matrix-vector products in Eigen. Without the BLAS (not built, not installed) the comparisons
// are skipped with a warning and only Eigen is checked.
#include <catch2/catch.hpp>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "blas.h"
#include "kernels_cpu.h"
#include "tensor.h"

using namespace td;

namespace {

// op(A) op(B) (+ the output's old values when accumulating) in double, the plain way.
std::vector<double> reference_product(const Value& a, const Value& b, const Value& out, int64_t m, int64_t n,
                                      int64_t k, bool ta, bool tb, bool accumulate) {
    std::vector<double> expected(m * n);
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            double sum = accumulate ? value_get(out, i * n + j) : 0.0;
            for (int64_t p = 0; p < k; ++p) {
                double x = value_get(a, ta ? p * m + i : i * k + p);
                double y = value_get(b, tb ? j * k + p : p * n + j);
                sum += x * y;
            }
            expected[i * n + j] = sum;
        }
    return expected;
}

// Runs the mm kernel on an m x k by k x n product under `choice`; returns the largest error
// against the plain loop, relative to the largest magnitude.
double mm_error(GemmChoice choice, DType dtype, int64_t m, int64_t n, int64_t k, bool ta, bool tb, bool accumulate) {
    Value a = value_new(ta ? Shape{k, m} : Shape{m, k}, dtype);
    Value b = value_new(tb ? Shape{n, k} : Shape{k, n}, dtype);
    Value out = value_new(Shape{m, n}, dtype);
    for (int64_t i = 0; i < a.shape.numel(); ++i) value_set(a, i, std::sin(0.37 * i));
    for (int64_t i = 0; i < b.shape.numel(); ++i) value_set(b, i, std::cos(0.11 * i));
    for (int64_t i = 0; i < out.shape.numel(); ++i) value_set(out, i, 0.5 - 0.01 * i);
    std::vector<double> expected = reference_product(a, b, out, m, n, k, ta, tb, accumulate);

    OpAttrs attrs;
    attrs.trans_a = ta, attrs.trans_b = tb, attrs.accumulate = accumulate;
    const Value* inputs[] = {&a, &b};
    Value* outputs[] = {&out};
    blas_set_choice(choice);
    cpu_mm(KernelCall{inputs, 2, outputs, 1, attrs});
    blas_set_choice(GEMM_AUTO);

    double largest = 1e-30, error = 0;
    for (int64_t i = 0; i < m * n; ++i) {
        largest = std::max(largest, std::abs(expected[i]));
        error = std::max(error, std::abs(value_get(out, i) - expected[i]));
    }
    return error / largest;
}

bool cpu_has_avx512f() { return __builtin_cpu_supports("avx512f"); }

std::string lowercase(std::string text) {
    for (char& c : text) c = char(std::tolower(static_cast<unsigned char>(c)));
    return text;
}

}  // namespace

TEST_CASE("mm through the BLAS and through Eigen matches a plain loop, every transpose, float and double") {
    struct Size { int64_t m, n, k; };
    const Size sizes[] = {{64, 100, 37}, {8, 8, 8}, {3, 5, 2}, {100, 10, 64}, {1, 20, 20}, {20, 1, 20}};
    std::vector<GemmChoice> choices = {GEMM_EIGEN, GEMM_AUTO};
    if (blas_available()) choices.push_back(GEMM_BLAS);
    else WARN("no BLAS (" << blas_describe() << "): only Eigen is checked");
    for (GemmChoice choice : choices)
        for (DType dtype : {DTYPE_F32, DTYPE_F64})
            for (const Size& s : sizes)
                for (int ops = 0; ops < 8; ++ops) {
                    bool ta = ops & 1, tb = ops & 2, accumulate = ops & 4;
                    INFO("choice " << choice << " " << dtype_name(dtype) << " m " << s.m << " n " << s.n << " k "
                                   << s.k << " ta " << ta << " tb " << tb << " accumulate " << accumulate);
                    CHECK(mm_error(choice, dtype, s.m, s.n, s.k, ta, tb, accumulate) <
                          (dtype == DTYPE_F32 ? 1e-5 : 1e-13));
                }
}

TEST_CASE("the rule: matrix-vector products stay in Eigen, every other shape goes to the BLAS") {
    CHECK_FALSE(blas_prefers(20, 1));    // the RNN cell's W_h h
    CHECK_FALSE(blas_prefers(1, 20));    // a row times a matrix
    CHECK(blas_prefers(8, 8));
    CHECK(blas_prefers(64, 100));        // W4, W5
    CHECK(blas_prefers(16, 512));        // W7's recurrent product
}

TEST_CASE("OpenBLAS loads with its AVX-512 kernels and one thread, and leaves the environment as it was") {
    const char* user_core = getenv("OPENBLAS_CORETYPE");
    std::string core_before = user_core ? user_core : "(unset)";
    const char* user_threads = getenv("OPENBLAS_NUM_THREADS");
    std::string threads_before = user_threads ? user_threads : "(unset)";
    if (!blas_available()) {
        WARN("no BLAS: " << blas_describe());
        CHECK(blas_describe().find("Eigen") != std::string::npos);   // says where the products go
        return;
    }
    std::string description = blas_describe();
    INFO(description);
    CHECK(description.find("OpenBLAS") == 0);
    CHECK(description.find(", 1 thread") != std::string::npos);
    if (cpu_has_avx512f() && !user_core) CHECK(description.find("SkylakeX kernels") != std::string::npos);
    if (user_core) CHECK(lowercase(description).find(lowercase(user_core) + " kernels") != std::string::npos);
    // put back: the variables set for the load are gone again (or as the user had them)
    const char* core_after = getenv("OPENBLAS_CORETYPE");
    const char* threads_after = getenv("OPENBLAS_NUM_THREADS");
    CHECK((core_after ? core_after : "(unset)") == core_before);
    CHECK((threads_after ? threads_after : "(unset)") == threads_before);
}
