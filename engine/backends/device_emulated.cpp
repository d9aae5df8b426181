// device_emulated.cpp: see device_emulated.h.
#include "device_emulated.h"

#include <cstdlib>
#include <cstring>

#include "tensor.h"

namespace td {

namespace {

struct EmulatedState {
    size_t allocated = 0;
    size_t peak = 0;
    int kernels_running = 0;
    bool capturing = false;
    std::vector<std::function<void()>> captured;
};

EmulatedState& state() {
    static EmulatedState* s = new EmulatedState;   // immortal: storages may be freed at exit
    return *s;
}

}  // namespace

bool device_emulated() {
    static const bool on = [] {
        const char* setting = std::getenv("TAPEDECK_EMULATE_GPU");
        return setting && std::strcmp(setting, "1") == 0;
    }();
    return on;
}

void* emulated_alloc(size_t bytes) {
    size_t rounded = (bytes + 255) / 256 * 256;
    void* p = std::aligned_alloc(256, rounded == 0 ? 256 : rounded);
    if (!p) engine_fail("out of (emulated) GPU memory: %zu bytes", bytes);
    state().allocated += bytes;
    if (state().allocated > state().peak) state().peak = state().allocated;
    return p;
}

void emulated_free(void* p, size_t bytes) {
    if (!p) return;
    std::free(p);
    state().allocated -= bytes;
}

size_t emulated_memory_allocated() { return state().allocated; }
size_t emulated_max_memory_allocated() { return state().peak; }
void emulated_reset_peak_memory() { state().peak = state().allocated; }

EmulatedKernelScope::EmulatedKernelScope() { ++state().kernels_running; }
EmulatedKernelScope::~EmulatedKernelScope() { --state().kernels_running; }
bool emulated_kernel_running() { return state().kernels_running > 0; }

bool emulated_capture_begin() {
    if (state().capturing) return false;
    state().capturing = true;
    state().captured.clear();
    return true;
}
bool emulated_capturing() { return state().capturing; }
void emulated_capture_add(std::function<void()> run) { state().captured.push_back(std::move(run)); }
std::vector<std::function<void()>> emulated_capture_end() {
    state().capturing = false;
    return std::move(state().captured);
}

}  // namespace td
