// cuda_common.h: what the CUDA kernels share (engine/backends/cuda/*.cu only; compiled by nvcc).
//
// The stream every kernel is queued on, the cuBLAS and cuDNN handles, launch sizes, the check that
// turns a CUDA error into an EngineError naming the op, and how each kernels_cuda_*.cu file puts
// its kernels into the CUDA table (backend.h).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "backend.h"
#include "device.h"
#include "device_gpu.h"
#include "dtype_dispatch.h"   // DISPATCH_ALL, DISPATCH_FLOAT, DISPATCH_BY_SIZE

namespace td {

// The one stream: kernels, copies and library calls are queued on it in order, so that a frozen
// plan's replay can be captured as a CUDA graph (stream capture) and launched as one.
cudaStream_t cuda_stream();
cublasHandle_t cuda_cublas();   // bound to cuda_stream(); TF32 off (results match the CPU's)
cudnnHandle_t cuda_cudnn();     // bound to cuda_stream()

// An EngineError "<what>: CUDA error: <text>" when `status` is not success.
void cuda_check(cudaError_t status, const char* what);
void cublas_check(cublasStatus_t status, const char* what);
void cudnn_check(cudnnStatus_t status, const char* what);
// After a kernel launch: a launch error (bad configuration) becomes an EngineError naming `what`.
inline void cuda_check_launch(const char* what) { cuda_check(cudaGetLastError(), what); }

// Scratch memory on the device for one kernel call (cuDNN's workspace, a reduction's partial
// sums): from the caching allocator, given back when the object goes.
struct CudaScratch {
    void* data = nullptr;
    size_t bytes = 0;
    explicit CudaScratch(size_t n) : bytes(n) { data = n ? cuda_alloc(n) : nullptr; }
    ~CudaScratch() { if (data) cuda_free(data, bytes); }
    CudaScratch(const CudaScratch&) = delete;
    CudaScratch& operator=(const CudaScratch&) = delete;
    template <class T> T* as() const { return static_cast<T*>(data); }
};

// Launch sizes for a grid-stride loop over n elements.
constexpr int CUDA_THREADS = 256;
inline unsigned cuda_blocks(int64_t n) {
    int64_t blocks = (n + CUDA_THREADS - 1) / CUDA_THREADS;
    if (blocks < 1) blocks = 1;
    return static_cast<unsigned>(blocks > 65535 * 8 ? 65535 * 8 : blocks);
}

// A grid-stride loop over i in [0, n), for a kernel launched with cuda_blocks(n) blocks.
#define GRID_LOOP(i, n) \
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

// <<<blocks, threads, 0, stream>>> for a grid-stride loop over n elements.
#define LAUNCH(n) <<<cuda_blocks(n), CUDA_THREADS, 0, cuda_stream()>>>

// Each kernels_cuda_*.cu file fills its entries of the CUDA table (kernels_cuda.cu calls them once).
void cuda_register_elementwise(KernelFn* table);   // kernels_cuda_elementwise.cu: elementwise.def's lines
void cuda_register_products(KernelFn* table);      // kernels_cuda_products.cu: mm, bmm (cuBLAS), conv2d (cuDNN)
void cuda_register_reductions(KernelFn* table);    // kernels_cuda_reduce.cu
void cuda_register_other(KernelFn* table);         // kernels_cuda_other.cu: creation, layout, indexing, losses, pooling, in place

}  // namespace td
