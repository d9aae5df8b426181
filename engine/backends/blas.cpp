// blas.cpp: OpenBLAS's sgemm/dgemm, loaded at run time (see blas.h for the contract and why).
//
// [SECTION] loading     dlopen with the core type and thread count set, the functions it needs
// [SECTION] the rule    which shapes go to the BLAS, the TAPEDECK_GEMM override
// [SECTION] gemm        the row-major product through cblas_?gemm
#include "blas.h"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>
#include <optional>

#if TAPEDECK_BLAS
#include <cblas.h>
#include <dlfcn.h>
#endif

namespace td {

namespace {

// ============================================================================================
// [SECTION] loading

#if TAPEDECK_BLAS
using SgemmFunction = decltype(&cblas_sgemm);
using DgemmFunction = decltype(&cblas_dgemm);
#else
using SgemmFunction = void*;
using DgemmFunction = void*;
#endif

// What loading found: the two products, or why there are none.
struct LoadedBlas {
    SgemmFunction sgemm = nullptr;
    DgemmFunction dgemm = nullptr;
    bool kernels_measured = false;   // its kernels are the AVX-512 ones blas_prefers was measured with
    std::string description;   // "OpenBLAS 0.3.21, SkylakeX kernels, 1 thread", or why not loaded
};

#if TAPEDECK_BLAS
// OpenBLAS's AVX-512 cores, which share the SkylakeX SGEMM/DGEMM kernels (openblas_get_corename).
bool is_avx512_core(const char* name) {
    for (const char* core : {"SkylakeX", "Cooperlake", "SapphireRapids"})
        if (strcasecmp(name, core) == 0) return true;
    return false;
}

bool cpu_has_avx512f() {
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_cpu_supports("avx512f");
#else
    return false;
#endif
}

// Sets an environment variable for the time of one load, then puts back what was there.
class ScopedEnvironment {
  public:
    ScopedEnvironment(const char* name, const char* value) : name_(name) {
        if (const char* old = getenv(name)) old_ = old;
        setenv(name, value, 1);
    }
    ~ScopedEnvironment() {
        if (old_) setenv(name_, old_->c_str(), 1);
        else unsetenv(name_);
    }

  private:
    const char* name_;
    std::optional<std::string> old_;
};

// The first line of openblas_get_config() ("OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ...") as
// "OpenBLAS 0.3.21", with the core it picked and its thread count.
std::string describe_openblas(void* library) {
    auto get_config = reinterpret_cast<char* (*)()>(dlsym(library, "openblas_get_config"));
    auto get_corename = reinterpret_cast<char* (*)()>(dlsym(library, "openblas_get_corename"));
    auto get_threads = reinterpret_cast<int (*)()>(dlsym(library, "openblas_get_num_threads"));
    std::string name = "OpenBLAS";
    if (get_config) {
        const char* config = get_config();
        const char* space = strchr(config, ' ');   // "OpenBLAS 0.3.21 ...": keep the version
        const char* end = space ? strchr(space + 1, ' ') : nullptr;
        name = end ? std::string(config, end - config) : std::string(config);
    }
    char text[200];
    snprintf(text, sizeof text, "%s, %s kernels, %d thread%s", name.c_str(), get_corename ? get_corename() : "unknown",
             get_threads ? get_threads() : -1, get_threads && get_threads() == 1 ? "" : "s");
    return text;
}

LoadedBlas load_openblas() {
    LoadedBlas blas;
    void* library = nullptr;
    {
        // OpenBLAS reads both while it loads (a constructor), so they must be set before dlopen.
        std::optional<ScopedEnvironment> core_type;
        if (cpu_has_avx512f() && !getenv("OPENBLAS_CORETYPE")) core_type.emplace("OPENBLAS_CORETYPE", "SkylakeX");
        ScopedEnvironment one_thread("OPENBLAS_NUM_THREADS", "1");
        library = dlopen(TAPEDECK_BLAS_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    }
    if (!library) {
        const char* why = dlerror();
        blas.description = std::string("no BLAS: ") + (why ? why : "dlopen failed") + "; every product runs in Eigen";
        return blas;
    }
    // Already loaded by someone else with more threads, or told otherwise: one thread all the same.
    if (auto set_threads = reinterpret_cast<void (*)(int)>(dlsym(library, "openblas_set_num_threads"))) set_threads(1);
    blas.sgemm = reinterpret_cast<SgemmFunction>(dlsym(library, "cblas_sgemm"));
    blas.dgemm = reinterpret_cast<DgemmFunction>(dlsym(library, "cblas_dgemm"));
    if (!blas.sgemm || !blas.dgemm) {
        blas = LoadedBlas{};
        blas.description = std::string("no BLAS: ") + TAPEDECK_BLAS_LIBRARY + " has no cblas_sgemm/cblas_dgemm";
        return blas;
    }
    auto get_corename = reinterpret_cast<char* (*)()>(dlsym(library, "openblas_get_corename"));
    blas.kernels_measured = get_corename && is_avx512_core(get_corename());
    blas.description = describe_openblas(library);
    if (!blas.kernels_measured) {
        const char* core_type = getenv("OPENBLAS_CORETYPE");
        blas.description += std::string(": not its AVX-512 kernels, slower than Eigen here, so unused") +
                            (core_type ? std::string(" (OPENBLAS_CORETYPE=") + core_type + " is set)" : "");
    }
    return blas;
}
#endif

// Loaded once, at the first product that asks (single-threaded engine: no lock).
const LoadedBlas& loaded_blas() {
    static const LoadedBlas blas = [] {
#if TAPEDECK_BLAS
        return load_openblas();
#else
        LoadedBlas none;
        none.description = "no BLAS: built without it (libopenblas-dev not found, or -DTAPEDECK_BLAS=OFF); "
                           "every product runs in Eigen";
        return none;
#endif
    }();
    return blas;
}

// ============================================================================================
// [SECTION] the rule

// TAPEDECK_GEMM's value; an unknown one is reported once and read as "auto".
GemmChoice choice_from_environment() {
    const char* value = getenv("TAPEDECK_GEMM");
    if (!value || !*value || strcmp(value, "auto") == 0) return GEMM_AUTO;
    if (strcmp(value, "eigen") == 0) return GEMM_EIGEN;
    if (strcmp(value, "blas") == 0) return GEMM_BLAS;
    fprintf(stderr, "tapedeck: TAPEDECK_GEMM=%s: expected auto, eigen or blas; using auto\n", value);
    return GEMM_AUTO;
}

std::optional<GemmChoice> chosen;   // set by blas_set_choice, else TAPEDECK_GEMM at the first product

// Whether an m x n product goes to the BLAS: under GEMM_AUTO, when the rule says so and the BLAS
// runs the kernels the rule was measured with (loaded on the first product that asks).
bool use_blas(int64_t m, int64_t n) {
    GemmChoice choice = blas_choice();
    if (choice == GEMM_EIGEN) return false;
    if (choice == GEMM_BLAS) return blas_available();
    return blas_prefers(m, n) && loaded_blas().kernels_measured;
}

bool fits_int(int64_t x) { return x >= 0 && x <= INT_MAX; }

// Whether blas_gemm hands this product to the BLAS: a product with something in it whose sizes
// fit cblas's int arguments, that the choice sends there, with the BLAS loaded.
bool goes_to_blas(int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc) {
    if (m <= 0 || n <= 0 || k <= 0) return false;
    if (!fits_int(m) || !fits_int(n) || !fits_int(k) || !fits_int(lda) || !fits_int(ldb) || !fits_int(ldc))
        return false;
    return use_blas(m, n);
}

}  // namespace

// Measured with bench/gemm_choice.cpp on the 2-core AVX-512 machine (docs/performance.md has the
// table): OpenBLAS's SkylakeX kernels, with their small-matrix paths, beat Eigen from 8x8x8 up to
// 512x512x512 (0.5x to 0.8x of its time in float; double from even to 0.5x), except where one
// side is a vector, where Eigen's GEMV wins (the RNN cells' W_h h).
bool blas_prefers(int64_t m, int64_t n) { return m > 1 && n > 1; }

bool blas_available() { return loaded_blas().sgemm != nullptr; }

std::string blas_describe() {
    const char* choice = blas_choice() == GEMM_EIGEN ? " (TAPEDECK_GEMM=eigen: not used)"
                         : blas_choice() == GEMM_BLAS ? " (TAPEDECK_GEMM=blas: every product)"
                                                      : "";
    return loaded_blas().description + choice;
}

GemmChoice blas_choice() {
    if (!chosen) chosen = choice_from_environment();
    return *chosen;
}

void blas_set_choice(GemmChoice choice) { chosen = choice; }

// ============================================================================================
// [SECTION] gemm

bool blas_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
               const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
    if (!goes_to_blas(m, n, k, lda, ldb, ldc)) return false;
#if TAPEDECK_BLAS
    loaded_blas().sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                        int(m), int(n), int(k), 1.0f, a, int(lda), b, int(ldb), accumulate ? 1.0f : 0.0f, c, int(ldc));
    return true;
#else
    (void)trans_a, (void)trans_b, (void)a, (void)b, (void)c, (void)accumulate;
    return false;
#endif
}

bool blas_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
               const double* b, int64_t ldb, double* c, int64_t ldc, bool accumulate) {
    if (!goes_to_blas(m, n, k, lda, ldb, ldc)) return false;
#if TAPEDECK_BLAS
    loaded_blas().dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                        int(m), int(n), int(k), 1.0, a, int(lda), b, int(ldb), accumulate ? 1.0 : 0.0, c, int(ldc));
    return true;
#else
    (void)trans_a, (void)trans_b, (void)a, (void)b, (void)c, (void)accumulate;
    return false;
#endif
}

}  // namespace td
