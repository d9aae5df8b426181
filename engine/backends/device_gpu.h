// device_gpu.h: the real GPU runtime behind device.h (engine/backends/cuda/device_cuda.cu, or
// engine/backends/device_none.cpp in a build without CUDA). device.cpp calls these unless the GPU is
// emulated (device_emulated.h); nothing else should.
#pragma once

#include "device.h"

namespace td {

bool gpu_available();
std::string gpu_unavailable_reason();
int gpu_device_count();
std::string gpu_device_name();
std::string gpu_libraries();
void gpu_require(const char* what);
void* gpu_alloc(size_t bytes);
void gpu_free(void* p, size_t bytes);
void gpu_empty_cache();
size_t gpu_memory_allocated();
size_t gpu_max_memory_allocated();
size_t gpu_memory_reserved();
void gpu_reset_peak_memory();
void gpu_synchronize();
void gpu_copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
void gpu_copy_elements(const Value& dst, const Value& src);
struct GpuGraph;   // an instantiated CUDA graph and the scratch blocks it keeps (device_cuda.cu)
bool gpu_capture_begin();
GpuGraph* gpu_capture_end();
void gpu_graph_launch(GpuGraph* graph);
void gpu_graph_free(GpuGraph* graph);

}  // namespace td
