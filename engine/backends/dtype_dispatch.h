// dtype_dispatch.h: run a statement with T bound to the element type of a dtype, in the CPU
// kernels (kernels_cpu.cpp) and the CUDA ones (engine/backends/cuda/) alike.
//   DISPATCH_FLOAT(op_name, dtype, stmt)   float32, float64; other dtypes are an error naming op_name
//   DISPATCH_ALL(dtype, stmt)              float32, float64, int64
//   DISPATCH_BY_SIZE(dtype, stmt)          uint32_t or uint64_t: for moving elements, only the size matters
#pragma once

#include "tensor.h"

#define DISPATCH_FLOAT(op_name, dtype, ...)                                                   \
    switch (dtype) {                                                                          \
        case td::DTYPE_F32: { using T = float; __VA_ARGS__; break; }                          \
        case td::DTYPE_F64: { using T = double; __VA_ARGS__; break; }                         \
        default: td::engine_fail("%s: not defined for %s tensors", op_name, td::dtype_name(dtype)); \
    }
#define DISPATCH_ALL(dtype, ...)                                      \
    switch (dtype) {                                                  \
        case td::DTYPE_F32: { using T = float; __VA_ARGS__; break; }  \
        case td::DTYPE_F64: { using T = double; __VA_ARGS__; break; } \
        case td::DTYPE_I64: { using T = int64_t; __VA_ARGS__; break; }\
    }
#define DISPATCH_BY_SIZE(dtype, ...)                                    \
    if (td::dtype_size(dtype) == 4) { using T = uint32_t; __VA_ARGS__; } \
    else { using T = uint64_t; __VA_ARGS__; }
