// kernels_cpu.h: the CPU kernel of every op, declared from the op table.
#pragma once

#include "ops.h"

namespace td {

#define OP(name, n_in, n_out, flags, attrs, shape_rule, backward_rule, cpu_kernel, math) \
    void cpu_kernel(const KernelCall& call);
#include "ops.def"
#undef OP

}  // namespace td
