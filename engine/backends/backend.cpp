// backend.cpp: the CPU kernel table (from ops.def) and kernel_for, the one lookup.
#include "backend.h"

#include "device.h"
#include "device_emulated.h"
#include "kernels_cpu.h"

#include <cstring>

namespace td {

void no_kernel(const KernelCall&) { engine_fail("this op has no kernel: it runs otherwise (exec_node)"); }

// to_device: input and output on different devices (kernel_run picks the output's backend; the
// copy itself is the device runtime's, the same from every table).
void copy_to_device(const KernelCall& c) {
    const Value& from = *c.inputs[0];
    const Value& to = *c.outputs[0];
    size_t bytes = static_cast<size_t>(to.numel()) * dtype_size(to.dtype);
    if (from.device() == DEVICE_CPU && to.device() == DEVICE_CPU) std::memcpy(to.raw(), from.raw(), bytes);
    else device_copy_bytes(to.raw(), to.device(), from.raw(), from.device(), bytes);
}

// Views set a layout; to_device copies through the runtime; view_ops.cpp's copy kernels
// (contiguous, region_scatter, assign_) move elements with value_copy_elements, which runs the
// values' device's copy.
bool kernel_is_device_free(OpId op) {
    return (op_info(op).flags & OPF_VIEW) || op == OP_to_device || op == OP_contiguous || op == OP_region_scatter ||
           op == OP_assign_;
}

const KernelFn cpu_kernels[OP_COUNT] = {
#define OP(name, n_in, n_out, flags, attrs, shape_rule, backward_rule, cpu_kernel, math) \
    cpu_kernel == no_kernel ? nullptr : cpu_kernel,
#include "ops.def"
#undef OP
};

// Ops the CUDA backend leaves out on purpose, each with its reason (shown by `tapedeck --ops`).
// Any other op without a CUDA kernel is a gap the op-coverage test reports.
struct MissingKernel {
    OpId op;
    const char* reason;
};
static const MissingKernel CUDA_LEFT_OUT[] = {
    {OP_function, "a custom function runs its own ops, each on its own device"},
    {OP_function_backward, "a custom function's backward runs its own ops, each on its own device"},
    {OP_lstm, "nn.LSTM's fused layer is the CPU's fast path; on the GPU each step runs as ops (cuBLAS products)"},
    {OP_lstm_backward, "the fused layer's backward, CPU only like lstm"},
};

// The emulated GPU (device_emulated.h) runs the CPU's kernels on its host memory.
static const KernelFn* table_of(Device device) {
    return device == DEVICE_CPU || device_emulated() ? cpu_kernels : cuda_kernel_table();
}

bool kernel_exists(OpId op, Device device) { return table_of(device)[op] != nullptr; }

const char* kernel_missing_reason(OpId op, Device device) {
    if (kernel_exists(op, device)) return nullptr;
    for (const MissingKernel& m : CUDA_LEFT_OUT)
        if (device == DEVICE_CUDA && m.op == op) return m.reason;
    if (device == DEVICE_CUDA && !cuda_built()) return "tapedeck was built without CUDA";
    return "not written yet";
}

bool cuda_kernel_capturable(OpId op) {
    switch (op) {
        case OP_gather: case OP_scatter: case OP_scatter_add:
        case OP_cross_entropy: case OP_nll_loss: case OP_multi_margin_loss:
        case OP_cross_entropy_backward: case OP_nll_loss_backward: case OP_multi_margin_loss_backward:
        case OP_mse_loss: case OP_multinomial: case OP_max_pool2d_backward:
        case OP_tensor: case OP_to_device:
        // The random ops take their generator offset on the host (cuda_rng_take): a graph would
        // draw the same numbers at every launch.
        case OP_rand: case OP_randn: case OP_randint: case OP_randperm:
            return false;
        default:
            return true;
    }
}

KernelFn kernel_for_device(OpId op, Device device) {
    KernelFn kernel = table_of(device)[op];
    if (!kernel)
        engine_fail("%s: no kernel for %s tensors (%s)", op_info(op).name, device_name(device),
                    kernel_missing_reason(op, device));
    return kernel;
}

}  // namespace td
