// device.cpp: device.h's calls, to the real GPU runtime (device_gpu.h) or, with
// TAPEDECK_EMULATE_GPU=1, to the emulated one (device_emulated.h: host memory, CPU kernels).
#include "device.h"

#include <cstring>
#include <functional>
#include <vector>

#include "device_emulated.h"
#include "device_gpu.h"

namespace td {

bool cuda_available() { return device_emulated() || gpu_available(); }
std::string cuda_unavailable_reason() { return device_emulated() ? "" : gpu_unavailable_reason(); }
int cuda_device_count() { return device_emulated() ? 1 : gpu_device_count(); }
std::string cuda_device_name() { return device_emulated() ? EMULATED_DEVICE_NAME : gpu_device_name(); }
std::string cuda_libraries() { return gpu_libraries(); }
void cuda_require(const char* what) {
    if (!device_emulated()) gpu_require(what);
}

void* cuda_alloc(size_t bytes) { return device_emulated() ? emulated_alloc(bytes) : gpu_alloc(bytes); }
void cuda_free(void* p, size_t bytes) {
    if (device_emulated()) emulated_free(p, bytes);
    else gpu_free(p, bytes);
}
void cuda_empty_cache() {
    if (!device_emulated()) gpu_empty_cache();
}
size_t cuda_memory_allocated() { return device_emulated() ? emulated_memory_allocated() : gpu_memory_allocated(); }
size_t cuda_max_memory_allocated() {
    return device_emulated() ? emulated_max_memory_allocated() : gpu_max_memory_allocated();
}
size_t cuda_memory_reserved() { return device_emulated() ? emulated_memory_allocated() : gpu_memory_reserved(); }
void cuda_reset_peak_memory() {
    if (device_emulated()) emulated_reset_peak_memory();
    else gpu_reset_peak_memory();
}
void cuda_synchronize() {
    if (!device_emulated()) gpu_synchronize();
}

void device_copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
    if (device_emulated()) std::memcpy(dst, src, bytes);
    else gpu_copy_bytes(dst, dst_device, src, src_device, bytes);
}

void cuda_copy_elements(const Value& dst, const Value& src) {
    if (device_emulated()) value_copy_elements_on_host(dst, src);
    else gpu_copy_elements(dst, src);
}

// A captured graph: the GPU's, or the emulated GPU's list of deferred kernel calls.
struct DeviceGraph {
    GpuGraph* gpu = nullptr;
    std::vector<std::function<void()>> emulated;
};

bool cuda_capture_begin() { return device_emulated() ? emulated_capture_begin() : gpu_capture_begin(); }

DeviceGraph* cuda_capture_end() {
    if (device_emulated()) {
        auto* graph = new DeviceGraph;
        graph->emulated = emulated_capture_end();
        return graph;
    }
    GpuGraph* gpu = gpu_capture_end();
    if (!gpu) return nullptr;
    auto* graph = new DeviceGraph;
    graph->gpu = gpu;
    return graph;
}

void cuda_graph_launch(DeviceGraph* graph) {
    if (graph->gpu) gpu_graph_launch(graph->gpu);
    for (const std::function<void()>& run : graph->emulated) run();
}

void cuda_graph_free(DeviceGraph* graph) {
    if (!graph) return;
    if (graph->gpu) gpu_graph_free(graph->gpu);
    delete graph;
}

}  // namespace td
