// plan_native.h: freeze to native code — a compiled CPU plan's steps as one C++ source, compiled
// by the system's compiler into a shared object, cached, and loaded with dlopen.
//
// Native is a faster way to run the same plan, not another plan: the steps native code can run
// (elementwise kernels and fused loops, small products, also into a .grad, sums over all elements,
// and views that keep a contiguous value contiguous, which the plan binds before the code runs) are grouped into
// segments, runs of consecutive such steps, and each segment becomes one C++ function with the
// shapes as constants and the plan's values as pointers. plan_run calls a segment's function where
// it would have run its steps one by one; every other step (guards, .grad updates, views, in-place
// ops, large products through BLAS, the rest of the op table) runs as before. An observed call
// (a debugger, the viewer) runs the debug replay, never native code; plan files and ONNX export
// read the plan, which native code does not change.
//
//   plan_native_generate   which steps, and the source (plan_native_source.cpp); no compiler
//   plan_native_build      generate, then compile or find in the cache, check, load
//                          (plan_native_build.cpp); on any failure the plan stays interpreted
//                          and the result says why
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "plan.h"

namespace td {

// A run of steps [begin, end) of a compiled plan that one native function runs. `values` are the
// plan values its code reads or writes, in the order of the pointer table the function takes
// (p[i] is the bytes of values[i]); `fresh` the ones among them that get new bytes each call (a
// value the plan returns), given before the call as the interpreted steps give them.
struct NativeSegment {
    size_t begin = 0, end = 0;
    std::vector<int> values;
    std::vector<int> fresh;
    std::vector<size_t> views;                   // its view steps: the plan binds them before the call
    struct GradWrite {
        size_t step;                             // a product written into a .grad (PlanStep::into_grad)
        bool exists;                             // whether that .grad exists then (the code adds into it)
        bool first;                              // the segment's first write into that .grad
    };
    std::vector<GradWrite> grad_writes;          // the plan gives their bytes (and sets the .grad) before the call
    std::vector<uint8_t> after_grad_writes;      // per value: its bytes are known only then (the writes'
                                                 // outputs, the .grad values of their targets)
    std::string symbol;                          // the function's name in the object
    void (*run)(void* const* pointers) = nullptr;   // after loading
};

struct PlanNative {
    std::string source;                  // the generated C++, as f:source() shows it (no prelude)
    std::vector<NativeSegment> segments;
    int native_steps = 0;                // steps inside segments
    std::string why_not;                 // generate: why the plan has no native code ("" when it has)
    // After plan_native_build:
    std::string compiler;                // the compiler's path
    std::string object_path;             // the cached shared object
    bool cache_hit = false;
    double compile_seconds = 0;          // 0 on a cache hit
    double load_seconds = 0;             // checking and loading the object
    void* handle = nullptr;              // dlopen's
    // At run time:
    bool enabled = true;                 // f:timeit turns it off to time the interpreted plan
    int64_t segment_calls = 0;           // segment runs in native code
    int64_t fallbacks = 0;               // segment runs step by step: an argument or .grad was
                                         // strided or missing this call (the kernels handle it)
    PlanNative() = default;
    PlanNative(const PlanNative&) = delete;
    PlanNative& operator=(const PlanNative&) = delete;
    ~PlanNative();
};

// The native program of a compiled plan: its segments and source. Never fails: a plan with no
// step native code can run (a GPU plan, or one of only views and guards) gets no segment and
// `why_not` says so. Steps of a plan over MAX_NATIVE_STEPS are not generated (why_not says so).
constexpr size_t MAX_NATIVE_STEPS = 10000;
std::unique_ptr<PlanNative> plan_native_generate(const Plan& plan);

// Where native objects are cached and what compiles them. Empty fields: from the environment
// ($TAPEDECK_CXX, else $CXX, else g++, c++ or clang++ on PATH; $XDG_CACHE_HOME/tapedeck/native,
// else ~/.cache/tapedeck/native).
struct NativeBuildOptions {
    std::string compiler;
    std::string cache_dir;
};

struct NativeBuildResult {
    bool ok = false;
    std::string message;   // why the plan stays interpreted (ok: false), else what was done
};

// Makes `plan` (compiled, CPU) run its segments natively: generates the source, finds the object
// in the cache (checked by its recorded size and hash before dlopen: a corrupt or foreign object
// is rebuilt, never loaded) or compiles it (the compiler's errors in the message), and loads it.
// On success plan.native is set; on failure it is left null and the interpreted plan runs.
NativeBuildResult plan_native_build(Plan& plan, const NativeBuildOptions& options = {});

// The compiler's flags (part of the cache key): the same for every plan.
const char* plan_native_flags();

// The prelude the generated source is compiled with (scalar_math.h, native_prelude.h), and the
// whole text given to the compiler.
std::string plan_native_prelude();
std::string plan_native_full_source(const PlanNative& native);

}  // namespace td
