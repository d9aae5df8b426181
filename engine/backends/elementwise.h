// elementwise.h: the math of the elementwise ops over contiguous spans, written once.
//
// The op kernels (kernels_cpu.cpp) run it over whole tensors; freeze's fused loops (freeze/plan_run.cpp) run
// several of these span functions chunk by chunk over registers. The same code both ways, so a
// fused chain computes exactly what the ops compute one by one (no second copy of the math).
#pragma once

#include "ops.h"

namespace td {

// out[i] = op(in[0][i], in[1][i]) for i < n (in[0] only for one-input ops). `out` may be in[0].
typedef void (*SpanF32)(const float* const* in, float* out, int64_t n, const OpAttrs& attrs);
typedef void (*SpanF64)(const double* const* in, double* out, int64_t n, const OpAttrs& attrs);

struct ElementwiseMath {
    int arity;   // 1 or 2 tensor inputs
    SpanF32 f32;
    SpanF64 f64;
    // The line's scalar form on one float64 element (y unused by one-input ops): what a GPU kernel
    // would compute; tests compare it with the kernels.
    double (*scalar)(double x, double y, const OpAttrs& attrs);
    // The line's expression as text ("math::tanh(x)"): native code (freeze/plan_native.h) compiles it.
    const char* expression;
};

// The math of `op` from its line in elementwise.def, or nullptr when `op` has none (fusion leaves
// it as a kernel step).
const ElementwiseMath* elementwise_math(OpId op);

}  // namespace td
