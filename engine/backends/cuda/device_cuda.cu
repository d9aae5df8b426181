// device_cuda.cu: device.h with CUDA: the device check, the caching allocator, copies, the RNG
// state, and the stream and library handles every kernel shares (cuda_common.h).
//
// [SECTION] the device     is there one (any error at start-up: none), its name
// [SECTION] handles        the stream, cuBLAS, cuDNN; the error checks
// [SECTION] memory         the caching allocator and its statistics
// [SECTION] copies         between devices; synchronize; the RNG state
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <vector>

#include "cuda_common.h"

namespace td {

// ============================================================================================
// [SECTION] the device

namespace {

struct DeviceState {
    bool checked = false;
    bool available = false;
    int count = 0;
    std::string reason;
    std::string name;
};

// CUDA's version numbers (13000) as people write them ("13.0").
std::string cuda_version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

// Why the libraries found at run time cannot work together, or "": cuDNN's file is libcudnn.so.9
// whichever CUDA it was built for, so the loader may take a cuDNN made for CUDA 12 (a PyTorch
// wheel's) beside our CUDA 13 runtime, which NVIDIA does not support (docs/cuda.md).
std::string library_mismatch() {
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    size_t cudnn_cuda = cudnnGetCudartVersion();
    if (static_cast<int>(cudnn_cuda / 1000) == runtime / 1000) return "";
    return "cuDNN 9 (" + std::to_string(cudnnGetVersion()) + ") was built for CUDA " + cuda_version_text(static_cast<int>(cudnn_cuda)) +
           " but tapedeck runs CUDA " + cuda_version_text(runtime) + "'s runtime: put a cuDNN 9 for CUDA " +
           std::to_string(runtime / 1000) + " first on the library path (nvidia-cudnn-cu" + std::to_string(runtime / 1000) + ")";
}

// "no CUDA device (...)", with the driver's and the runtime's CUDA versions when the driver is too old.
std::string no_device_reason(cudaError_t status) {
    std::string reason = std::string("no CUDA device (cudaGetDeviceCount: ") + cudaGetErrorString(status) + ")";
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    if (status == cudaErrorInsufficientDriver && driver > 0)
        reason += ": the driver supports CUDA " + cuda_version_text(driver) + ", this build's runtime is CUDA " +
                  cuda_version_text(runtime);
    return reason;
}

DeviceState& device_state() {
    static DeviceState* state = new DeviceState;   // immortal: storages may be freed at exit
    if (state->checked) return *state;
    state->checked = true;
    int count = 0;
    cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
        state->reason = no_device_reason(status);
        cudaGetLastError();   // clear it
        return *state;
    }
    if (count == 0) {
        state->reason = "no CUDA device (cudaGetDeviceCount found none)";
        return *state;
    }
    cudaDeviceProp props;
    status = cudaGetDeviceProperties(&props, 0);
    if (status == cudaSuccess) status = cudaSetDevice(0);
    if (status == cudaSuccess) status = cudaFree(nullptr);   // creates the context now, not mid-op
    if (status != cudaSuccess) {
        state->reason = std::string("CUDA device unusable (") + cudaGetErrorString(status) + ")";
        cudaGetLastError();
        return *state;
    }
    state->reason = library_mismatch();
    if (!state->reason.empty()) return *state;
    state->available = true;
    state->count = count;
    state->name = props.name;
    return *state;
}

}  // namespace

bool cuda_built() { return true; }
bool gpu_available() { return device_state().available; }
std::string gpu_unavailable_reason() { return gpu_available() ? "" : device_state().reason; }
int gpu_device_count() { return gpu_available() ? device_state().count : 0; }
std::string gpu_device_name() { return gpu_available() ? device_state().name : ""; }

std::string gpu_libraries() {
    int runtime = 0, driver = 0, cublas_major = 0, cublas_minor = 0, cublas_patch = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    cublasGetProperty(MAJOR_VERSION, &cublas_major);
    cublasGetProperty(MINOR_VERSION, &cublas_minor);
    cublasGetProperty(PATCH_LEVEL, &cublas_patch);
    size_t cudnn = cudnnGetVersion();   // 91900: 9.19.0
    return "CUDA runtime " + cuda_version_text(runtime) + ", driver " + (driver ? cuda_version_text(driver) : "none") +
           ", cuBLAS " + std::to_string(cublas_major) + "." + std::to_string(cublas_minor) + "." +
           std::to_string(cublas_patch) + ", cuDNN " + std::to_string(cudnn / 10000) + "." +
           std::to_string(cudnn % 10000 / 100) + "." + std::to_string(cudnn % 100) + " (for CUDA " +
           cuda_version_text(static_cast<int>(cudnnGetCudartVersion())) + ")";
}

void gpu_require(const char* what) {
    if (!gpu_available()) engine_fail("%s: %s", what, device_state().reason.c_str());
}

// ============================================================================================
// [SECTION] handles

void cuda_check(cudaError_t status, const char* what) {
    if (status != cudaSuccess) {
        cudaGetLastError();
        engine_fail("%s: CUDA error: %s", what, cudaGetErrorString(status));
    }
}

void cublas_check(cublasStatus_t status, const char* what) {
    if (status != CUBLAS_STATUS_SUCCESS) engine_fail("%s: cuBLAS error %d", what, static_cast<int>(status));
}

void cudnn_check(cudnnStatus_t status, const char* what) {
    if (status != CUDNN_STATUS_SUCCESS) engine_fail("%s: cuDNN error: %s", what, cudnnGetErrorString(status));
}

cudaStream_t cuda_stream() {
    static cudaStream_t stream = [] {
        gpu_require("cuda stream");
        cudaStream_t s;
        cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
        return s;
    }();
    return stream;
}

// cuBLAS's workspace: one block of its own, set once, so that a product captured in a CUDA graph
// uses it rather than taking workspace during each capture (memory that grew with every recapture:
// PyTorch #83461). 32 MiB is what NVIDIA advises for Hopper. It is not a tensor: the allocator's
// figures (torch.cuda.memory_allocated) leave it out.
constexpr size_t CUBLAS_WORKSPACE_BYTES = size_t(32) << 20;

cublasHandle_t cuda_cublas() {
    static cublasHandle_t handle = [] {
        cublasHandle_t h;
        cublas_check(cublasCreate(&h), "cublasCreate");
        cublas_check(cublasSetStream(h, cuda_stream()), "cublasSetStream");
        cublas_check(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");   // no TF32
        void* workspace = nullptr;
        cuda_check(cudaMalloc(&workspace, CUBLAS_WORKSPACE_BYTES), "cuBLAS workspace");
        cublas_check(cublasSetWorkspace(h, workspace, CUBLAS_WORKSPACE_BYTES), "cublasSetWorkspace");
        return h;
    }();
    return handle;
}

cudnnHandle_t cuda_cudnn() {
    static cudnnHandle_t handle = [] {
        cudnnHandle_t h;
        cudnn_check(cudnnCreate(&h), "cudnnCreate");
        cudnn_check(cudnnSetStream(h, cuda_stream()), "cudnnSetStream");
        return h;
    }();
    return handle;
}

// ============================================================================================
// [SECTION] memory
//
// Blocks are rounded up to a bucket (512 bytes below 1 MB, then 2 MB steps) and kept, when freed,
// in a free list per bucket size for the next allocation of that bucket. Freeing never waits: every
// kernel runs on the one stream, so a block reused by a later kernel is used after the earlier ones.

namespace {

struct Allocator {
    std::map<size_t, std::vector<void*>> free_blocks;   // bucket size -> cached blocks
    size_t allocated = 0;     // in live tensors (bucket sizes)
    size_t peak = 0;
    size_t cached = 0;
    size_t graph_reserved = 0;   // scratch blocks kept for captured graphs (see capture below)
};

Allocator& allocator() {
    static Allocator* a = new Allocator;
    return *a;
}

size_t bucket_of(size_t bytes) {
    constexpr size_t SMALL = 512, LARGE = size_t(2) << 20;
    if (bytes < (size_t(1) << 20)) return (bytes + SMALL - 1) / SMALL * SMALL;
    return (bytes + LARGE - 1) / LARGE * LARGE;
}

double gigabytes(size_t bytes) { return static_cast<double>(bytes) / (1u << 30); }

// While a capture is on (capture section below): the blocks allocated since it began. A captured
// kernel's scratch block is freed during the capture, but every launch of the graph writes it
// again: it must not go back to the cache, where a tensor could get it between two launches.
struct CaptureState {
    GpuGraph* graph = nullptr;               // the graph being captured; null: no capture is on
    std::set<void*> allocated;               // the blocks allocated since it began
};
CaptureState& capture_state() {
    static CaptureState state;
    return state;
}

void note_allocated_in_capture(void* p) {
    CaptureState& c = capture_state();
    if (c.graph) c.allocated.insert(p);
}
bool keep_for_capture(void* p, size_t size);

}  // namespace

void* gpu_alloc(size_t bytes) {
    gpu_require("cuda memory");
    Allocator& a = allocator();
    size_t size = bucket_of(bytes == 0 ? 1 : bytes);
    void* p = nullptr;
    auto it = a.free_blocks.find(size);
    if (it != a.free_blocks.end() && !it->second.empty()) {
        p = it->second.back();
        it->second.pop_back();
        a.cached -= size;
    } else {
        cudaError_t status = cudaMalloc(&p, size);
        if (status == cudaErrorMemoryAllocation) {   // give the cache back, then once more
            cudaGetLastError();
            cuda_empty_cache();
            status = cudaMalloc(&p, size);
        }
        if (status != cudaSuccess) {
            cudaGetLastError();
            size_t free_bytes = 0, total = 0;
            cudaMemGetInfo(&free_bytes, &total);
            engine_fail("out of GPU memory: %.2f GB asked for, %.2f GB in tensors, %.2f GB free of %.2f GB (%s)",
                        gigabytes(size), gigabytes(a.allocated), gigabytes(free_bytes), gigabytes(total),
                        cudaGetErrorString(status));
        }
    }
    a.allocated += size;
    if (a.allocated > a.peak) a.peak = a.allocated;
    note_allocated_in_capture(p);
    return p;
}

void gpu_free(void* p, size_t bytes) {
    if (!p) return;
    Allocator& a = allocator();
    size_t size = bucket_of(bytes == 0 ? 1 : bytes);
    a.allocated -= size;
    if (keep_for_capture(p, size)) return;
    a.free_blocks[size].push_back(p);
    a.cached += size;
}

void gpu_empty_cache() {
    if (!gpu_available()) return;
    Allocator& a = allocator();
    cudaStreamSynchronize(cuda_stream());
    for (auto& [size, blocks] : a.free_blocks)
        for (void* p : blocks) cudaFree(p);
    a.free_blocks.clear();
    a.cached = 0;
}

size_t gpu_memory_allocated() { return allocator().allocated; }
size_t gpu_max_memory_allocated() { return allocator().peak; }
size_t gpu_memory_reserved() { return allocator().allocated + allocator().cached + allocator().graph_reserved; }
void gpu_reset_peak_memory() { allocator().peak = allocator().allocated; }

// ============================================================================================
// [SECTION] copies

namespace {

// A few bytes from the host as a kernel's argument: cudaMemcpyAsync from pageable host memory
// waits for the stream first, so the small copies eager code makes all the time (a 0-d CPU tensor
// beside GPU tensors: an optimizer's step count, a scalar) would each stall the GPU's queue. The
// bytes travel in the launch instead, in stream order, and the host may free its copy at once.
constexpr size_t SMALL_COPY_BYTES = 1024;
struct SmallBytes {
    unsigned char bytes[SMALL_COPY_BYTES];
};

__global__ void write_small_bytes(unsigned char* dst, SmallBytes src, unsigned n) {
    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src.bytes[i];
}

}  // namespace

void gpu_copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
    if (bytes == 0) return;
    gpu_require("copy between devices");
    if (src_device == DEVICE_CPU && dst_device != DEVICE_CPU && bytes <= SMALL_COPY_BYTES) {
        SmallBytes small;
        std::memcpy(small.bytes, src, bytes);
        write_small_bytes<<<1, 128, 0, cuda_stream()>>>(static_cast<unsigned char*>(dst), small, static_cast<unsigned>(bytes));
        cuda_check_launch("copy to the GPU");
        return;
    }
    cudaMemcpyKind kind = dst_device == DEVICE_CPU   ? (src_device == DEVICE_CPU ? cudaMemcpyHostToHost : cudaMemcpyDeviceToHost)
                          : src_device == DEVICE_CPU ? cudaMemcpyHostToDevice
                                                     : cudaMemcpyDeviceToDevice;
    cuda_check(cudaMemcpyAsync(dst, src, bytes, kind, cuda_stream()), "copy between devices");
    // A copy to the host is read by the caller when this returns: wait for it. A copy from
    // (pageable) host memory has been staged when cudaMemcpyAsync returns, so the caller may free
    // its bytes; device-to-device copies stay queued.
    if (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyHostToHost)
        cuda_check(cudaStreamSynchronize(cuda_stream()), "copy between devices");
}

void gpu_synchronize() {
    if (gpu_available()) cuda_check(cudaStreamSynchronize(cuda_stream()), "torch.cuda.synchronize");
}

namespace {
struct RngState {
    uint64_t seed = 0x5eed;
    uint64_t offset = 0;
};
RngState& rng() {
    static RngState state;
    return state;
}
}  // namespace

void cuda_manual_seed(uint64_t seed) {
    rng().seed = seed;
    rng().offset = 0;
}
uint64_t cuda_rng_seed() { return rng().seed; }
uint64_t cuda_rng_take(uint64_t count) {
    uint64_t at = rng().offset;
    rng().offset += count;
    return at;
}

}  // namespace td

// ============================================================================================
// [SECTION] capture
//
// A frozen plan's replay captures runs of its steps as CUDA graphs (freeze/plan_run.cpp, GraphSegment): the
// stream is captured in relaxed mode (the caching allocator may still cudaMalloc), the graph is
// instantiated once and launched on the same stream, so it stays in order with everything else.

namespace td {

struct GpuGraph {
    cudaGraphExec_t exec = nullptr;
    std::vector<std::pair<void*, size_t>> reserved;   // scratch blocks its kernels write (kept for it)
};

namespace {

bool keep_for_capture(void* p, size_t size) {
    if (!capture_state().graph || !capture_state().allocated.erase(p)) return false;
    capture_state().graph->reserved.emplace_back(p, size);
    allocator().graph_reserved += size;
    return true;
}

// Gives a graph's reserved blocks back to the cache (in stream order: a launch still queued
// finishes before any later kernel uses them).
void release_reserved(GpuGraph* graph) {
    Allocator& a = allocator();
    for (auto& [p, size] : graph->reserved) {
        a.free_blocks[size].push_back(p);
        a.cached += size;
        a.graph_reserved -= size;
    }
    graph->reserved.clear();
}

}  // namespace

bool gpu_capture_begin() {
    if (!gpu_available() || capture_state().graph) return false;
    if (cudaStreamBeginCapture(cuda_stream(), cudaStreamCaptureModeRelaxed) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    capture_state().graph = new GpuGraph;
    capture_state().allocated.clear();
    return true;
}

GpuGraph* gpu_capture_end() {
    GpuGraph* graph = capture_state().graph;
    if (!graph) return nullptr;
    capture_state().graph = nullptr;
    capture_state().allocated.clear();
    cudaGraph_t captured = nullptr;
    cudaError_t status = cudaStreamEndCapture(cuda_stream(), &captured);
    // AutoFreeOnLaunch: memory a captured library call allocated and did not free inside the graph
    // is freed at the next launch, so the graph can be launched again (with 0, it could not).
    if (status == cudaSuccess && captured)
        status = cudaGraphInstantiate(&graph->exec, captured, cudaGraphInstantiateFlagAutoFreeOnLaunch);
    if (captured) cudaGraphDestroy(captured);
    if (status != cudaSuccess || !graph->exec) {
        cudaGetLastError();   // a capture that failed (a synchronising call inside): no graph
        release_reserved(graph);
        delete graph;
        return nullptr;
    }
    return graph;
}

void gpu_graph_launch(GpuGraph* graph) { cuda_check(cudaGraphLaunch(graph->exec, cuda_stream()), "graph launch"); }

void gpu_graph_free(GpuGraph* graph) {
    if (graph->exec) cudaGraphExecDestroy(graph->exec);
    release_reserved(graph);
    delete graph;
}

}  // namespace td
