// device_none.cpp: device.h in a build without CUDA. No device is ever available; what needs one
// fails with the reason, and the CUDA kernel table is empty.
#include "backend.h"
#include "device.h"
#include "device_gpu.h"

namespace td {

namespace {
constexpr const char* REASON = "tapedeck was built without CUDA (nvcc was not found when it was configured)";
}

bool cuda_built() { return false; }
bool gpu_available() { return false; }
std::string gpu_unavailable_reason() { return REASON; }
int gpu_device_count() { return 0; }
std::string gpu_device_name() { return ""; }
std::string gpu_libraries() { return ""; }
void gpu_require(const char* what) { engine_fail("%s: no CUDA device: %s", what, REASON); }

void* gpu_alloc(size_t) {
    gpu_require("cuda memory");
    return nullptr;
}
void gpu_free(void*, size_t) {}
void gpu_empty_cache() {}
size_t gpu_memory_allocated() { return 0; }
size_t gpu_max_memory_allocated() { return 0; }
size_t gpu_memory_reserved() { return 0; }
void gpu_reset_peak_memory() {}
void gpu_synchronize() {}
void cuda_manual_seed(uint64_t) {}
uint64_t cuda_rng_seed() { return 0; }
uint64_t cuda_rng_take(uint64_t) { return 0; }

void gpu_copy_bytes(void*, Device, const void*, Device, size_t) { gpu_require("copy between devices"); }
void gpu_copy_elements(const Value&, const Value&) { gpu_require("copy on the device"); }

bool gpu_capture_begin() { return false; }
GpuGraph* gpu_capture_end() { return nullptr; }
void gpu_graph_launch(GpuGraph*) { gpu_require("graph launch"); }
void gpu_graph_free(GpuGraph*) {}

const KernelFn* cuda_kernel_table() {
    static const KernelFn none[OP_COUNT] = {};
    return none;
}

}  // namespace td
