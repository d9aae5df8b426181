// backend.h: the kernel tables, one per device, and the one lookup every kernel call goes through.
//
// The op row (ops.def) is device-free. Each backend fills its own table, indexed by OpId:
//   CPU   cpu_kernels: the row's kernel column (kernels_cpu*.cpp, view_ops.cpp)
//   CUDA  cuda_kernel_table(): filled by the kernels_cuda*.cu files when the build has CUDA
//         (engine/backends/cuda/), each entry null otherwise
// A null entry means "not on this device": kernel_for says so, naming the op and the device
// (never a silent fallback to the CPU). Views only set a layout and copy nothing: their kernels
// (view_*) are device-free, and every backend's table holds them.
#pragma once

#include "ops.h"

namespace td {

typedef void (*KernelFn)(const KernelCall& call);

extern const KernelFn cpu_kernels[OP_COUNT];

// Kernels that serve every device: views (they set a layout), to_device (it copies between
// devices) and the element copies of view_ops.cpp. Each backend's table holds the CPU table's
// entry for them.
bool kernel_is_device_free(OpId op);

// The CUDA table (OP_COUNT entries). Without CUDA in the build every entry is null.
const KernelFn* cuda_kernel_table();

// Runs op's kernel on `call` on the call's device (kernel_for): the one way kernels are called
// (exec_node; a plan's fold and replay; kernel_run.cpp). A kernel that reads contiguous values (not
// OPF_VIEW or OPF_STRIDED) gets contiguous copies of strided inputs; an in-place op writing through
// a strided view runs on a copy written back, and reads an input sharing the written storage from
// a copy. When every output is empty there is nothing to write and no kernel runs: a kernel could
// still walk the rows of an empty result (an expand to [2^32,1,4,0] looped for minutes). Custom
// functions have no kernel (exec_node runs them).
void kernel_run(OpId op, const KernelCall& call);

// op's kernel on `device`; an EngineError "<op>: no kernel for cuda tensors ..." when that backend
// has none (the Lua layer adds the user's file:line). Inline for the CPU, per op of every loop.
KernelFn kernel_for_device(OpId op, Device device);
inline KernelFn kernel_for(OpId op, Device device) {
    if (device == DEVICE_CPU && cpu_kernels[op]) return cpu_kernels[op];
    return kernel_for_device(op, device);
}
bool kernel_exists(OpId op, Device device);
// Why `op` has no kernel on `device` (the --ops listing and kernel_for's error); nullptr when it has one.
const char* kernel_missing_reason(OpId op, Device device);

// Whether op's CUDA kernel may be captured into a CUDA graph (a frozen plan's replay): not the
// kernels that check their data on the host after running (indices, labels, probabilities:
// kernels_cuda_other.cu's ErrorSlot), nor the copies from the host (`tensor`, to_device), nor the
// random ones (their generator's offset is taken on the host, per call).
bool cuda_kernel_capturable(OpId op);

}  // namespace td
