// device_none.cpp: device.h in a build without CUDA. No device is ever available; what needs one
// fails with the reason, and the CUDA kernel table is empty.
#include "backend.h"
#include "device.h"

namespace td {

namespace {
constexpr const char* REASON = "tapedeck was built without CUDA (nvcc was not found when it was configured)";
}

bool cuda_built() { return false; }
bool cuda_available() { return false; }
std::string cuda_unavailable_reason() { return REASON; }
int cuda_device_count() { return 0; }
std::string cuda_device_name() { return ""; }
void cuda_require(const char* what) { engine_fail("%s: no CUDA device: %s", what, REASON); }

void* cuda_alloc(size_t) {
    cuda_require("cuda memory");
    return nullptr;
}
void cuda_free(void*, size_t) {}
void cuda_empty_cache() {}
size_t cuda_memory_allocated() { return 0; }
size_t cuda_max_memory_allocated() { return 0; }
size_t cuda_memory_reserved() { return 0; }
void cuda_reset_peak_memory() {}
void cuda_synchronize() {}
void cuda_manual_seed(uint64_t) {}
uint64_t cuda_rng_seed() { return 0; }
uint64_t cuda_rng_take(uint64_t) { return 0; }

void device_copy_bytes(void*, Device, const void*, Device, size_t) { cuda_require("copy between devices"); }
void cuda_copy_elements(const Value&, const Value&) { cuda_require("copy on the device"); }

const KernelFn* cuda_kernel_table() {
    static const KernelFn none[OP_COUNT] = {};
    return none;
}

}  // namespace td
