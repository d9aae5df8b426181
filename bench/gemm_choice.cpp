// gemm_choice: times the CPU mm kernel on the products the benchmark's workloads run (W4-W8),
// once with every product in Eigen and once with every product in the BLAS, samples interleaved,
// and prints per shape the minimum µs of each, their ratio and what the rule (blas_prefers,
// engine/backends/blas.cpp) picks, so that the rule can be re-checked on another machine.
//   build/gemm_choice [samples]     (default 15 samples of ~2 ms per shape and backend)
// The shapes are m n k as mm sees them (op(A) m x k, op(B) k x n), with their transposes and
// whether they add into the output (freeze's in-place gradients), found by logging every product
// of `tapedeck bench W4 ... W8`.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "blas.h"
#include "kernels_cpu.h"
#include "tensor.h"

namespace {

using td::DType, td::DTYPE_F32, td::DTYPE_F64;

struct ProductShape {
    const char* workload;   // where it is run, and as what
    int64_t m, n, k;
    bool trans_a, trans_b, accumulate;
    DType dtype;
};

const ProductShape shapes[] = {
    {"W3 W_h h", 20, 1, 20, false, false, false, DTYPE_F32},
    {"W3 W_x x", 20, 1, 10, false, false, false, DTYPE_F32},
    {"W3 bwd W_h^T grad", 20, 1, 20, true, false, false, DTYPE_F32},
    {"long loop rnn h W_h^T", 1, 20, 20, false, true, false, DTYPE_F32},
    {"W4 fwd x w1", 64, 100, 1000, false, false, false, DTYPE_F32},
    {"W4 fwd h w2", 64, 10, 100, false, false, false, DTYPE_F32},
    {"W4 bwd grad w2^T", 64, 100, 10, false, true, false, DTYPE_F32},
    {"W4 bwd h^T grad", 100, 10, 64, true, false, false, DTYPE_F32},
    {"W4 bwd x^T grad", 1000, 100, 64, true, false, false, DTYPE_F32},
    {"W4 frozen x^T grad +=", 1000, 100, 64, true, false, true, DTYPE_F32},
    {"W5 x W1", 64, 100, 1000, false, false, false, DTYPE_F32},
    {"W5 h W2", 64, 1000, 100, false, false, false, DTYPE_F32},
    {"W6 fc bwd grad^T h", 10, 1568, 8, true, false, false, DTYPE_F32},
    {"W6 fc fwd h W^T", 8, 10, 1568, false, true, false, DTYPE_F32},
    {"W6 conv im2col", 8, 784, 9, false, false, false, DTYPE_F32},
    {"W7 h W_hh^T", 16, 512, 128, false, true, false, DTYPE_F32},
    {"W7 grad W_hh", 16, 128, 512, false, false, false, DTYPE_F32},
    {"W7 grad^T h +=", 128, 512, 16, true, false, true, DTYPE_F32},
    {"W7 x W_ih^T (all steps)", 512, 512, 32, false, true, false, DTYPE_F32},
    {"W7 head h W^T", 512, 71, 128, false, true, false, DTYPE_F32},
    {"W7 bwd grad^T x", 32, 512, 512, true, false, false, DTYPE_F32},
    {"W7 head bwd grad^T h", 128, 71, 512, true, false, false, DTYPE_F32},
    {"W8 attention q k^T", 32, 32, 8, false, true, false, DTYPE_F32},
    {"W8 attention att v", 32, 8, 32, false, false, false, DTYPE_F32},
    {"W8 qkv x W^T", 512, 96, 32, false, true, false, DTYPE_F32},
    {"W8 mlp x W^T", 512, 128, 32, false, true, false, DTYPE_F32},
    {"W8 mlp h W^T", 512, 32, 128, false, true, false, DTYPE_F32},
    {"W8 bwd grad^T h", 128, 32, 512, true, false, false, DTYPE_F32},
    {"W8 bwd grad^T x", 32, 128, 512, true, false, false, DTYPE_F32},
    {"square 8", 8, 8, 8, false, false, false, DTYPE_F32},
    {"square 16", 16, 16, 16, false, false, false, DTYPE_F32},
    {"square 24", 24, 24, 24, false, false, false, DTYPE_F32},
    {"square 32", 32, 32, 32, false, false, false, DTYPE_F32},
    {"square 128", 128, 128, 128, false, false, false, DTYPE_F32},
    {"square 256", 256, 256, 256, false, false, false, DTYPE_F32},
    {"square 512", 512, 512, 512, false, false, false, DTYPE_F32},
    {"W3 W_h h, double", 20, 1, 20, false, false, false, DTYPE_F64},
    {"W4 fwd h w2, double", 64, 10, 100, false, false, false, DTYPE_F64},
    {"W4 bwd h^T grad, double", 100, 10, 64, true, false, false, DTYPE_F64},
    {"W8 attention q k^T, double", 32, 32, 8, false, true, false, DTYPE_F64},
    {"W4 fwd x w1, double", 64, 100, 1000, false, false, false, DTYPE_F64},
    {"W5 h W2, double", 64, 1000, 100, false, false, false, DTYPE_F64},
    {"W4 bwd x^T grad, double", 1000, 100, 64, true, false, false, DTYPE_F64},
    {"W7 h W_hh^T, double", 16, 512, 128, false, true, false, DTYPE_F64},
    {"W8 mlp x W^T, double", 512, 128, 32, false, true, false, DTYPE_F64},
    {"square 16, double", 16, 16, 16, false, false, false, DTYPE_F64},
    {"square 24, double", 24, 24, 24, false, false, false, DTYPE_F64},
    {"square 32, double", 32, 32, 32, false, false, false, DTYPE_F64},
    {"square 256, double", 256, 256, 256, false, false, false, DTYPE_F64},
};

// The operands of one product, filled with small numbers, and the mm call that runs it.
struct Product {
    td::Value a, b, out;
    td::OpAttrs attrs;

    explicit Product(const ProductShape& s)
        : a(td::value_new(s.trans_a ? td::Shape{s.k, s.m} : td::Shape{s.m, s.k}, s.dtype)),
          b(td::value_new(s.trans_b ? td::Shape{s.n, s.k} : td::Shape{s.k, s.n}, s.dtype)),
          out(td::value_new(td::Shape{s.m, s.n}, s.dtype)) {
        for (const td::Value* v : {&a, &b, &out})
            for (int64_t i = 0; i < v->shape.numel(); ++i) td::value_set(*v, i, double(i % 7) * 0.125 - 0.375);
        attrs.trans_a = s.trans_a, attrs.trans_b = s.trans_b, attrs.accumulate = s.accumulate;
    }
    void run() {
        const td::Value* inputs[] = {&a, &b};
        td::Value* outputs[] = {&out};
        td::cpu_mm(td::KernelCall{inputs, 2, outputs, 1, attrs});
    }
};

double now_us() {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// µs per call of `product` under `choice`, one sample of `calls` calls.
double sample_us(Product& product, td::GemmChoice choice, int calls) {
    td::blas_set_choice(choice);
    double t0 = now_us();
    for (int i = 0; i < calls; ++i) product.run();
    return (now_us() - t0) / calls;
}

}  // namespace

int main(int argc, char** argv) {
    int samples = argc > 1 ? atoi(argv[1]) : 15;
    if (samples < 1) {
        fprintf(stderr, "gemm_choice: expected a positive number of samples, got '%s'\n", argv[1]);
        return 2;
    }
    printf("GEMM: %s\n", td::blas_describe().c_str());
    if (!td::blas_available()) {
        printf("gemm_choice: no BLAS to compare with; every product runs in Eigen\n");
        return 0;
    }
    printf("%-26s %5s %5s %5s %-5s %9s %9s %9s %10s %6s  %s\n", "product", "m", "n", "k", "op", "MACs", "Eigen µs",
           "BLAS µs", "BLAS/Eigen", "rule", "");
    int disagreements = 0;
    for (const ProductShape& s : shapes) {
        Product product(s);
        sample_us(product, td::GEMM_EIGEN, 3);   // warm: caches, OpenBLAS's buffers
        sample_us(product, td::GEMM_BLAS, 3);
        double once = std::max(sample_us(product, td::GEMM_EIGEN, 1), 0.05);
        int calls = std::max(1, int(2000 / once));   // ~2 ms a sample
        double eigen = 1e30, blas = 1e30;
        for (int i = 0; i < samples; ++i) {   // interleaved: the machine's noise hits both alike
            eigen = std::min(eigen, sample_us(product, td::GEMM_EIGEN, calls));
            blas = std::min(blas, sample_us(product, td::GEMM_BLAS, calls));
        }
        bool rule = td::blas_prefers(s.m, s.n);
        bool agrees = rule == (blas < eigen) || std::abs(blas / eigen - 1) < 0.05;   // within noise: either
        disagreements += !agrees;
        char op[8];
        snprintf(op, sizeof op, "%s%s%s", s.trans_a ? "At" : "A", s.trans_b ? "Bt" : "B", s.accumulate ? "+" : "");
        printf("%-26s %5ld %5ld %5ld %-5s %9ld %9.2f %9.2f %10.2f %6s  %s\n", s.workload, (long)s.m, (long)s.n,
               (long)s.k, op, (long)(s.m * s.n * s.k), eigen, blas, blas / eigen, rule ? "BLAS" : "Eigen",
               agrees ? "" : "<- the other one is faster here");
    }
    td::blas_set_choice(td::GEMM_AUTO);
    printf("%d of %zu shapes where the rule picks the slower one (by more than 5%%)\n", disagreements,
           sizeof shapes / sizeof shapes[0]);
    return 0;
}
