// elementwise.h: the math of the elementwise ops over contiguous spans, written once.
//
// The op kernels (kernels_cpu.cpp) run it over whole tensors; freeze's fused loops (plan.cpp) run
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
};

// The span math of `op`, or nullptr when `op` is not such an elementwise op (fusion leaves it as
// a kernel step). An op added to ops.def becomes fusable by adding it to the switch in kernels_cpu.cpp.
const ElementwiseMath* elementwise_math(OpId op);

}  // namespace td
