// device.h: the GPU runtime as the engine sees it: whether there is a device, its memory, copies.
//
// Built with CUDA (TAPEDECK_CUDA, CMakeLists.txt) this is engine/backends/cuda/device_cuda.cu; without it,
// engine/backends/device_none.cpp, where no device is ever available and every call that needs one fails
// with the reason. Any CUDA error at start-up (no driver, no device) counts as "no device":
// cuda_available() is false and says why; nothing crashes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tensor.h"

namespace td {

bool cuda_built();                       // compiled with the CUDA backend
bool cuda_available();                   // a usable device (checked once, then cached)
std::string cuda_unavailable_reason();   // why not: "built without CUDA", "no CUDA device (...)"
int cuda_device_count();                 // 0 without a usable device
std::string cuda_device_name();          // "NVIDIA H100 80GB HBM3"; "" without a device
// The CUDA libraries found at run time and the driver: "CUDA runtime 13.0, driver 13.0, cuBLAS 13.0.2,
// cuDNN 9.19.0 (for CUDA 13)"; "" in a build without CUDA.
std::string cuda_libraries();
// An error naming `what` (the op or function) and the reason when there is no usable device.
void cuda_require(const char* what);

// Device memory, through a caching allocator: freed blocks are kept in size buckets and reused;
// cuda_empty_cache gives the cached ones back to the driver. Out of memory is an EngineError
// giving the sizes (after emptying the cache once and trying again).
void* cuda_alloc(size_t bytes);
void cuda_free(void* p, size_t bytes);
void cuda_empty_cache();
size_t cuda_memory_allocated();          // bytes in live tensors
size_t cuda_max_memory_allocated();      // the most since the start or cuda_reset_peak_memory
size_t cuda_memory_reserved();           // live + cached
void cuda_reset_peak_memory();

void cuda_synchronize();                 // waits for every kernel queued so far
// The counter-based RNG's state (rand, randn, dropout on the device): a seed and an offset that
// each draw advances by the elements it used, so a draw is reproducible from (seed, offset).
void cuda_manual_seed(uint64_t seed);
uint64_t cuda_rng_seed();
uint64_t cuda_rng_take(uint64_t count);  // the offset to start at; advances it by count

// Copies `bytes` between any two devices (host to device, device to host, device to device).
// A copy to the host has finished when this returns.
void device_copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
// dst's elements := src's, both on the GPU, same shape and dtype, any layouts (tensor.h's
// value_copy_elements for device values).
void cuda_copy_elements(const Value& dst, const Value& src);

// Stream capture (CUDA graphs), for a frozen plan's replay (freeze/plan_run.cpp): the kernels queued between
// begin and end are recorded, not run, and the graph replays them with one launch. Memory the
// captured kernels allocate for themselves (scratch) stays reserved for the graph until it is freed.
// Host synchronisation inside a capture fails it (cuda_capture_end then gives nullptr).
struct DeviceGraph;
bool cuda_capture_begin();              // false where there is nothing to capture (no GPU, emulated)
DeviceGraph* cuda_capture_end();        // the graph, or nullptr when the capture failed
void cuda_graph_launch(DeviceGraph* graph);
void cuda_graph_free(DeviceGraph* graph);

}  // namespace td
