// device_emulated.h: an emulated GPU for testing the device plumbing on machines without one.
//
// With TAPEDECK_EMULATE_GPU=1 in the environment, "cuda" is a device whose memory is host memory
// and whose kernel table is the CPU's: tensors carry DEVICE_CUDA, move with to_device, make plans
// with GPU buffers, and must be read through the host boundary (value_to_host) as real GPU tensors
// must; only the kernels are not the CUDA ones. So the tests (tests/cuda/) check on every CI run
// what does not depend on the CUDA kernels: device inference, copies, the host boundary, autograd
// and freeze on a second device, the models moved with model:cuda(). It never changes what a real
// GPU runs, and it says so: torch.cuda.get_device_name() is "emulated GPU (host memory, CPU kernels)".
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

namespace td {

struct Value;

bool device_emulated();   // TAPEDECK_EMULATE_GPU=1 (read once)
constexpr const char* EMULATED_DEVICE_NAME = "emulated GPU (host memory, CPU kernels)";

// The runtime's calls, on host memory (device.h's meaning, with the allocator's statistics).
void* emulated_alloc(size_t bytes);
void emulated_free(void* p, size_t bytes);
size_t emulated_memory_allocated();
size_t emulated_max_memory_allocated();
void emulated_reset_peak_memory();

// While a kernel runs on the emulated device its (CPU) code reads and writes device values
// directly, as a CUDA kernel does: value_get/value_set allow it only then (kernel_run says when).
struct EmulatedKernelScope {
    EmulatedKernelScope();
    ~EmulatedKernelScope();
};
bool emulated_kernel_running();

// Capture on the emulated GPU (device.h's cuda_capture_*): between begin and end, kernel_run
// defers each kernel call (its values and attributes copied, as a CUDA graph keeps its pointers
// and arguments) instead of running it; a launch runs the list. Views still run at once (they
// only set a layout on the host, as on a GPU).
bool emulated_capture_begin();
bool emulated_capturing();
void emulated_capture_add(std::function<void()> run);
std::vector<std::function<void()>> emulated_capture_end();

}  // namespace td
