// kernels_cpu.h: the CPU kernel of every op, declared from the op table.
#pragma once

#include "ops.h"

namespace td {

#define OP(name, n_in, n_out, flags, attrs, shape_rule, backward_rule, cpu_kernel, math) \
    void cpu_kernel(const KernelCall& call);
#include "ops.def"
#undef OP

// The bytes the kernel of `op` allocates for itself beyond its outputs (conv2d's column matrix,
// a comparison's int64 result, softmax's rows), for a given call's input shapes and dtypes and its
// first output: a plan's memory is bounded before it runs (plan_memory_bound). An upper bound;
// SIZE_MAX when it overflows. Keep it in step with the kernels.
size_t cpu_kernel_scratch_bytes(OpId op, const Value* const* inputs, int n_inputs, const Shape& output,
                                DType output_dtype, const OpAttrs& attrs);

}  // namespace td
