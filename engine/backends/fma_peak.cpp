// fma_peak.cpp: the FMA peak of one core (fma_peak.h). Compiled with the kernels' -march, so the
// vectors are as wide as theirs (AVX-512 where the build targets it).
#include "fma_peak.h"

#include <chrono>

namespace td {

namespace {

#if defined(__AVX512F__)
constexpr int WIDTH = 16;
#elif defined(__AVX__)
constexpr int WIDTH = 8;
#else
constexpr int WIDTH = 4;
#endif
typedef float Vector __attribute__((vector_size(WIDTH * sizeof(float))));

// CHAINS independent accumulators (more than an FMA's latency times the units): the loop is
// bound by FMA throughput. Each round is CHAINS vector FMAs (c * a + b contracts to one: GCC's
// default -ffp-contract=fast, checked by the bench's figures against the core's known peak).
constexpr int CHAINS = 12;

__attribute__((noinline)) void fma_rounds(long rounds, Vector* acc, Vector a, Vector b) {
    Vector c[CHAINS];
    for (int i = 0; i < CHAINS; ++i) c[i] = acc[i];
    for (long r = 0; r < rounds; ++r)
        for (int i = 0; i < CHAINS; ++i) c[i] = c[i] * a + b;
    for (int i = 0; i < CHAINS; ++i) acc[i] = c[i];
}

double seconds_of(long rounds, Vector* acc, Vector a, Vector b) {
    auto start = std::chrono::steady_clock::now();
    fma_rounds(rounds, acc, a, b);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

double cpu_fma_peak_flops(double seconds) {
    Vector acc[CHAINS], a, b;
    for (int i = 0; i < CHAINS; ++i) acc[i] = Vector{} + 1.0f;
    a = Vector{} + 0.999999f;   // stays near 1: no overflow, no denormals
    b = Vector{} + 1e-6f;
    const long rounds = 100000;
    double best = 1e30, spent = 0;
    while (spent < seconds) {
        double t = seconds_of(rounds, acc, a, b);
        best = t < best ? t : best;
        spent += t;
    }
    volatile float sink = acc[0][0];   // the results are used
    (void)sink;
    return 2.0 * WIDTH * CHAINS * static_cast<double>(rounds) / best;
}

}  // namespace td
