// kernels_cuda.cu: the CUDA kernel table (backend.h), and the strided copy every backend needs
// (value_copy_elements on the device: a view made contiguous, a result written back through one).
#include "cuda_common.h"

namespace td {

namespace {

// The element of a strided value at row-major index i: its storage offset.
struct StridedLayout {
    int ndim;
    int64_t dims[MAX_DIMS];
    int64_t strides[MAX_DIMS];
    int64_t offset;
};

StridedLayout layout_of(const Value& v) {
    StridedLayout l{};
    l.ndim = v.shape.ndim;
    l.offset = v.offset;
    for (int d = 0; d < v.shape.ndim; ++d) {
        l.dims[d] = v.shape.dims[d];
        l.strides[d] = v.stride(d);
    }
    return l;
}

__device__ int64_t storage_index(const StridedLayout& l, int64_t i) {
    int64_t at = l.offset;
    for (int d = l.ndim - 1; d >= 0; --d) {
        at += (i % l.dims[d]) * l.strides[d];
        i /= l.dims[d];
    }
    return at;
}

template <class T>
__global__ void copy_strided(T* dst, StridedLayout dst_layout, const T* src, StridedLayout src_layout, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        dst[storage_index(dst_layout, i)] = src[storage_index(src_layout, i)];
}

template <class T>
void copy_strided_as(const Value& dst, const Value& src) {
    int64_t n = dst.numel();
    copy_strided<T><<<cuda_blocks(n), CUDA_THREADS, 0, cuda_stream()>>>(
        static_cast<T*>(dst.storage->data), layout_of(dst), static_cast<const T*>(src.storage->data), layout_of(src), n);
    cuda_check_launch("copy (cuda)");
}

}  // namespace

void gpu_copy_elements(const Value& dst, const Value& src) {
    if (dst.numel() == 0) return;
    if (dst.is_contiguous() && src.is_contiguous()) {
        cuda_check(cudaMemcpyAsync(dst.raw(), src.raw(), static_cast<size_t>(dst.numel()) * dtype_size(dst.dtype),
                                   cudaMemcpyDeviceToDevice, cuda_stream()),
                   "copy (cuda)");
        return;
    }
    if (dtype_size(dst.dtype) == 4) copy_strided_as<uint32_t>(dst, src);
    else copy_strided_as<uint64_t>(dst, src);
}

const KernelFn* cuda_kernel_table() {
    static const KernelFn* table = [] {
        KernelFn* t = new KernelFn[OP_COUNT]();
        for (int op = 0; op < OP_COUNT; ++op)
            if (kernel_is_device_free(static_cast<OpId>(op))) t[op] = cpu_kernels[op];
        cuda_register_elementwise(t);
        cuda_register_products(t);
        cuda_register_reductions(t);
        cuda_register_other(t);
        return t;
    }();
    return table;
}

}  // namespace td
