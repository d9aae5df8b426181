// kernels_cuda_other.cu: the CUDA kernels of the ops that are neither elementwise, products nor
// reductions (see cuda_common.h). Semantics are kernels_cpu*.cpp's and view_ops.cpp's.
//
// [SECTION] helpers        launches, dtype dispatch, device-side error slots, the RNG, block sums
// [SECTION] creation       tensor zeros ones full eye arange linspace rand randn randint randperm
// [SECTION] layout         contiguous cat narrow_backward flip region_scatter
// [SECTION] indexing       gather scatter_add scatter
// [SECTION] losses         mse_loss cross_entropy nll_loss multi_margin_loss and their derivatives
// [SECTION] pooling        max_pool2d max_pool2d_backward
// [SECTION] sampling       multinomial
// [SECTION] in place       add_ sub_ mul_ zero_ fill_ copy_ masked_fill_ assign_
//
// Data-dependent errors (an index, a label or a probability out of range) cannot be raised in a
// kernel: the kernel skips the bad element and writes its position (the least one, atomicMin)
// into an ErrorSlot; the host reads the slot back after the kernel (a stream sync) and raises the
// CPU kernel's error for that element. While cuda_stream() is being captured into a CUDA graph (a
// frozen plan's replay) nothing may sync: there the check is skipped (bad elements are still
// skipped, never read or written out of bounds), as the plan's eager run checked the same shapes.
//
// Known differences from the CPU: the random ops draw other numbers (a counter-based generator,
// reproducible after cuda_manual_seed); sums (losses) are added in another order (a tree within a
// block, then the blocks in order: deterministic, not bit-equal to the CPU's); scatter_add and
// max_pool2d_backward add with atomics, so overlapping contributions are added in no fixed order.
#include <cub/device/device_radix_sort.cuh>

#include <cmath>
#include <cstring>
#include <vector>

#include "cuda_common.h"

namespace td {

namespace {

// ============================================================================================
// [SECTION] helpers

const Value& in(const KernelCall& c, int i) { return *c.inputs[i]; }
const Value& out(const KernelCall& c, int i = 0) { return *c.outputs[i]; }

size_t bytes_of(const Value& v) { return static_cast<size_t>(v.numel()) * dtype_size(v.dtype); }

void zero_fill(const Value& v, const char* what) {
    cuda_check(cudaMemsetAsync(v.raw(), 0, bytes_of(v), cuda_stream()), what);
}

// Element i of a contiguous device value, read on the host as a double (for error messages).
double device_element(const Value& v, int64_t i) {
    size_t size = dtype_size(v.dtype);
    unsigned char bytes[8];
    device_copy_bytes(bytes, DEVICE_CPU, static_cast<const char*>(v.raw()) + i * static_cast<int64_t>(size), DEVICE_CUDA,
                      size);
    switch (v.dtype) {
        case DTYPE_F32: { float x; memcpy(&x, bytes, 4); return x; }
        case DTYPE_F64: { double x; memcpy(&x, bytes, 8); return x; }
        default: { int64_t x; memcpy(&x, bytes, 8); return static_cast<double>(x); }
    }
}

// Element i of a contiguous int64 device value, read on the host exactly (an index in an error
// message: through a double, one near INT64_MAX would round, and convert back out of range).
int64_t device_int64(const Value& v, int64_t i) {
    int64_t x = 0;
    device_copy_bytes(&x, DEVICE_CPU, v.data<int64_t>() + i, DEVICE_CUDA, sizeof x);
    return x;
}

// A device value of any dtype read element by element as a double (labels, a loss's 0-d gradient,
// probabilities).
struct AnyValues {
    const void* data;
    DType dtype;
};

AnyValues any_values(const Value& v) { return {v.raw(), v.dtype}; }

__device__ double any_at(AnyValues v, int64_t i) {
    switch (v.dtype) {
        case DTYPE_F32: return static_cast<const float*>(v.data)[i];
        case DTYPE_F64: return static_cast<const double*>(v.data)[i];
        default: return static_cast<double>(static_cast<const int64_t*>(v.data)[i]);
    }
}

// The device word where kernels report the first bad element (see the top of the file), and
// its check on the host. Inactive (no slot, no sync) while the stream is being captured.
struct ErrorSlot {
    unsigned long long* slot = nullptr;

    ErrorSlot() {
        cudaStreamCaptureStatus capture;
        cuda_check(cudaStreamIsCapturing(cuda_stream(), &capture), "error check (cuda)");
        if (capture != cudaStreamCaptureStatusNone) return;
        slot = static_cast<unsigned long long*>(cuda_alloc(sizeof(unsigned long long)));
        cudaError_t status = cudaMemsetAsync(slot, 0xff, sizeof(unsigned long long), cuda_stream());
        if (status != cudaSuccess) {   // the destructor does not run when the constructor throws
            cuda_free(slot, sizeof(unsigned long long));
            slot = nullptr;
            cuda_check(status, "error check (cuda)");
        }
    }
    ~ErrorSlot() { cuda_free(slot, sizeof(unsigned long long)); }
    ErrorSlot(const ErrorSlot&) = delete;
    ErrorSlot& operator=(const ErrorSlot&) = delete;

    // The least position a kernel reported, or -1 when none did (or the check is inactive).
    int64_t first_bad() const {
        if (!slot) return -1;
        unsigned long long at = 0;
        device_copy_bytes(&at, DEVICE_CPU, slot, DEVICE_CUDA, sizeof at);   // waits for the kernel
        return at == ~0ull ? -1 : static_cast<int64_t>(at);
    }
};

__device__ void report_bad(unsigned long long* slot, int64_t at) {
    if (slot) atomicMin(slot, static_cast<unsigned long long>(at));
}

// A product and a sum each rounded on its own (no fused multiply-add), where the CPU kernel writes
// them apart (whether the CPU's compiler fuses them depends on -march: float results may differ in
// the last bit, docs/cuda.md); int64 arithmetic wraps, as the CPU's (built with -fwrapv), done in
// uint64.
__device__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ int64_t mul_rn(int64_t a, int64_t b) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
__device__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ double add_rn(double a, double b) { return __dadd_rn(a, b); }
__device__ int64_t add_rn(int64_t a, int64_t b) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
__device__ float sub_rn(float a, float b) { return __fsub_rn(a, b); }
__device__ double sub_rn(double a, double b) { return __dsub_rn(a, b); }
__device__ int64_t sub_rn(int64_t a, int64_t b) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}

__device__ float exp_of(float x) { return expf(x); }
__device__ double exp_of(double x) { return exp(x); }
__device__ float log_of(float x) { return logf(x); }
__device__ double log_of(double x) { return log(x); }

// element_cast<T>(double) (tensor.h) on the device.
template <class T>
__device__ T from_double(double x) {
    return element_cast<T>(x);
}

__device__ void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ void atomic_add(double* p, double v) { atomicAdd(p, v); }
__device__ void atomic_add(int64_t* p, int64_t v) {   // two's complement: the unsigned sum is the wrapped one
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
}

// The sum over a block's threads of v, given to every thread. blockDim.x is CUDA_THREADS (a power
// of two); `shared` holds CUDA_THREADS values. Every thread of the block must call it.
template <class T>
__device__ T block_sum(T v, T* shared) {
    shared[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
        __syncthreads();
    }
    T total = shared[0];
    __syncthreads();
    return total;
}

// The largest over a block's threads as std::max folds it (a NaN on the right is passed over).
template <class T>
__device__ T block_max(T v, T* shared) {
    shared[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            T a = shared[threadIdx.x], b = shared[threadIdx.x + s];
            shared[threadIdx.x] = a < b ? b : a;
        }
        __syncthreads();
    }
    T best = shared[0];
    __syncthreads();
    return best;
}

// out[0] = the sum of values[0..n) / divisor as T, summed in double by one block (a fixed order:
// the same inputs give the same bits every run).
template <class T>
__global__ void sum_into(const double* values, int64_t n, double divisor, T* out) {
    __shared__ double shared[CUDA_THREADS];
    double total = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) total += values[i];
    total = block_sum(total, shared);
    if (threadIdx.x == 0) out[0] = static_cast<T>(total / divisor);
}

// The counter-based RNG: draw `counter` of the stream `seed` is SplitMix64's output at that
// position (its state is the seed's hash plus counter steps of the golden gamma), so any draw
// is computed on its own, and a kernel's n draws are counters offset .. offset + n - 1 of
// cuda_rng_take(n): reproducible after cuda_manual_seed.
__host__ __device__ uint64_t splitmix_finish(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

__device__ uint64_t random_bits(uint64_t seed_hash, uint64_t counter) {
    return splitmix_finish(seed_hash + (counter + 1) * 0x9e3779b97f4a7c15ull);
}

// A draw's stream: the seed hashed (so that nearby seeds give unrelated streams).
uint64_t rng_stream() { return splitmix_finish(cuda_rng_seed() + 0x9e3779b97f4a7c15ull); }

// Uniform in [0, 1) from 64 random bits, as the CPU's: 53 bits for double, 24 for float.
__device__ double uniform_double(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }
__device__ float uniform_float(uint64_t bits) { return static_cast<float>(bits >> 40) * 0x1.0p-24f; }

// ============================================================================================
// [SECTION] creation

template <class T>
__global__ void fill_kernel(T* p, T value, int64_t n) {
    GRID_LOOP(i, n) p[i] = value;
}

template <class T>
void fill(const Value& o, T value, const char* what) {
    fill_kernel<T> LAUNCH(o.numel())(o.data<T>(), value, o.numel());
    cuda_check_launch(what);
}

// attrs.init_values: numel doubles on the host, converted there and copied up.
void cuda_tensor(const KernelCall& c) {
    const Value& o = out(c);
    const double* values = c.attrs.init_values;
    int64_t n = o.numel();
    DISPATCH_ALL(o.dtype, {
        std::vector<T> host(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) host[i] = element_cast<T>(values[i]);
        device_copy_bytes(o.raw(), DEVICE_CUDA, host.data(), DEVICE_CPU, bytes_of(o));   // waits: host goes
    });
}

void cuda_zeros(const KernelCall& c) { zero_fill(out(c), "zeros (cuda)"); }

void cuda_ones(const KernelCall& c) { DISPATCH_ALL(out(c).dtype, fill<T>(out(c), T(1), "ones (cuda)")); }

void cuda_full(const KernelCall& c) {
    DISPATCH_ALL(out(c).dtype, fill<T>(out(c), element_cast<T>(c.attrs.scalar), "full (cuda)"));
}

template <class T>
__global__ void diagonal_ones(T* p, int64_t count, int64_t cols) {
    GRID_LOOP(i, count) p[i * cols + i] = T(1);
}

void cuda_eye(const KernelCall& c) {
    const Value& o = out(c);
    zero_fill(o, "eye (cuda)");
    int64_t rows = o.shape.dims[0], cols = o.shape.ndim > 1 ? o.shape.dims[1] : 1;
    int64_t count = rows < cols ? rows : cols;
    DISPATCH_ALL(o.dtype, diagonal_ones<T> LAUNCH(count)(o.data<T>(), count, cols));
    cuda_check_launch("eye (cuda)");
}

template <class T>
__global__ void arange_kernel(T* p, int64_t n) {
    GRID_LOOP(i, n) p[i] = static_cast<T>(i);
}

void cuda_arange(const KernelCall& c) {
    const Value& o = out(c);
    DISPATCH_ALL(o.dtype, arange_kernel<T> LAUNCH(o.numel())(o.data<T>(), o.numel()));
    cuda_check_launch("arange (cuda)");
}

// cpu_linspace's formula: the first half counts up from start, the second down from end, each a
// fused multiply-add (as the CPU's std::fma and PyTorch's kernels); floats step in their own type,
// int64 in double (then truncated). Step is T, or double for int64.
__device__ float fma_rn(float a, float b, float c) { return __fmaf_rn(a, b, c); }
__device__ double fma_rn(double a, double b, double c) { return __fma_rn(a, b, c); }

template <class T, class Step>
__global__ void linspace_kernel(T* p, int64_t steps, T start, T end, Step step) {
    int64_t halfway = steps / 2;
    GRID_LOOP(i, steps) {
        if (steps == 1) p[i] = start;
        else if (i < halfway) p[i] = from_double<T>(fma_rn(step, static_cast<Step>(i), static_cast<Step>(start)));
        else p[i] = from_double<T>(fma_rn(-step, static_cast<Step>(steps - i - 1), static_cast<Step>(end)));
    }
}

void cuda_linspace(const KernelCall& c) {
    const Value& o = out(c);
    int64_t steps = o.numel();
    DISPATCH_ALL(o.dtype, {
        using Step = std::conditional_t<std::is_integral_v<T>, double, T>;
        T start = element_cast<T>(c.attrs.lo), end = element_cast<T>(c.attrs.hi);
        Step step = steps > 1 ? (static_cast<Step>(end) - static_cast<Step>(start)) / static_cast<Step>(steps - 1) : Step(0);
        linspace_kernel<T, Step> LAUNCH(steps)(o.data<T>(), steps, start, end, step);
    });
    cuda_check_launch("linspace (cuda)");
}

template <class T>
__global__ void rand_kernel(T* p, int64_t n, uint64_t seed_hash, uint64_t offset) {
    GRID_LOOP(i, n) {
        uint64_t bits = random_bits(seed_hash, offset + i);
        if constexpr (std::is_same<T, float>::value) p[i] = uniform_float(bits);
        else p[i] = uniform_double(bits);
    }
}

void cuda_rand(const KernelCall& c) {
    const Value& o = out(c);
    int64_t n = o.numel();
    if (!dtype_is_float(o.dtype)) engine_fail("rand: needs a float dtype, got int64");
    uint64_t offset = cuda_rng_take(static_cast<uint64_t>(n));
    DISPATCH_FLOAT("rand", o.dtype, rand_kernel<T> LAUNCH(n)(o.data<T>(), n, rng_stream(), offset));
    cuda_check_launch("rand (cuda)");
}

// Box-Muller as the CPU's: elements 2p and 2p+1 share the uniforms of counters 2p and 2p+1, the
// first taking the cosine, the second the sine. Computed in double.
template <class T>
__global__ void randn_kernel(T* p, int64_t n, uint64_t seed_hash, uint64_t offset) {
    const double two_pi = 6.283185307179586;
    GRID_LOOP(i, n) {
        int64_t pair = i / 2;
        double u1 = 1.0 - uniform_double(random_bits(seed_hash, offset + 2 * pair));   // (0, 1]: log is finite
        double u2 = uniform_double(random_bits(seed_hash, offset + 2 * pair + 1));
        double r = sqrt(-2.0 * log(u1));
        p[i] = static_cast<T>(i % 2 == 0 ? r * cos(two_pi * u2) : r * sin(two_pi * u2));
    }
}

void cuda_randn(const KernelCall& c) {
    const Value& o = out(c);
    int64_t n = o.numel();
    if (!dtype_is_float(o.dtype)) engine_fail("randn: needs a float dtype, got int64");
    uint64_t offset = cuda_rng_take(static_cast<uint64_t>(n + n % 2));
    DISPATCH_FLOAT("randn", o.dtype, randn_kernel<T> LAUNCH(n)(o.data<T>(), n, rng_stream(), offset));
    cuda_check_launch("randn (cuda)");
}

// Whole numbers uniform in [low, low + range): 64 random bits, rejecting the top values that
// would favour small results (as the CPU's uniform_below); a rejected draw is redrawn from the
// same counter in another round's stream.
template <class T>
__global__ void randint_kernel(T* p, int64_t n, int64_t low, uint64_t range, uint64_t seed_hash, uint64_t offset) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % range;
    GRID_LOOP(i, n) {
        uint64_t r = random_bits(seed_hash, offset + i);
        for (uint64_t round = 1; r >= limit; ++round) r = random_bits(seed_hash + round * 0xd1b54a32d192ed03ull, offset + i);
        int64_t v = static_cast<int64_t>(static_cast<uint64_t>(low) + r % range);
        if constexpr (std::is_same<T, int64_t>::value) p[i] = v;
        else p[i] = static_cast<T>(static_cast<double>(v));
    }
}

void cuda_randint(const KernelCall& c) {
    const Value& o = out(c);
    int64_t n = o.numel();
    int64_t low = static_cast<int64_t>(c.attrs.lo);
    // the rule checked low < high, both within 2^62: the range fits, computed without signed overflow
    uint64_t range = static_cast<uint64_t>(static_cast<int64_t>(c.attrs.hi)) - static_cast<uint64_t>(low);
    uint64_t offset = cuda_rng_take(static_cast<uint64_t>(n));
    DISPATCH_ALL(o.dtype, randint_kernel<T> LAUNCH(n)(o.data<T>(), n, low, range, rng_stream(), offset));
    cuda_check_launch("randint (cuda)");
}

// keys[i] = random bits, values[i] = i + 1.
__global__ void permutation_keys(uint64_t* keys, int64_t* values, int64_t n, uint64_t seed_hash, uint64_t offset) {
    GRID_LOOP(i, n) {
        keys[i] = random_bits(seed_hash, offset + i);
        values[i] = i + 1;
    }
}

template <class T>
__global__ void int64_to(T* out, const int64_t* in, int64_t n) {
    GRID_LOOP(i, n) out[i] = static_cast<T>(static_cast<double>(in[i]));
}

// 1..n shuffled: 1..n sorted by random 64-bit keys (CUB's radix sort). Uniform but for keys that
// collide (probability about n^2 / 2^65), whose values keep their order.
void cuda_randperm(const KernelCall& c) {
    const char* what = "randperm (cuda)";
    const Value& o = out(c);
    int64_t n = o.numel();
    CudaScratch keys_in(n * sizeof(uint64_t)), keys_out(n * sizeof(uint64_t));
    CudaScratch values_in(n * sizeof(int64_t)), values_sorted(o.dtype == DTYPE_I64 ? 0 : n * sizeof(int64_t));
    int64_t* values_out = o.dtype == DTYPE_I64 ? o.data<int64_t>() : values_sorted.as<int64_t>();
    uint64_t offset = cuda_rng_take(static_cast<uint64_t>(n));
    permutation_keys LAUNCH(n)(keys_in.as<uint64_t>(), values_in.as<int64_t>(), n, rng_stream(), offset);
    cuda_check_launch(what);
    size_t temp_bytes = 0;
    cuda_check(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys_in.as<uint64_t>(), keys_out.as<uint64_t>(),
                                               values_in.as<int64_t>(), values_out, n, 0, 64, cuda_stream()),
               what);
    CudaScratch temp(temp_bytes);
    cuda_check(cub::DeviceRadixSort::SortPairs(temp.data, temp_bytes, keys_in.as<uint64_t>(), keys_out.as<uint64_t>(),
                                               values_in.as<int64_t>(), values_out, n, 0, 64, cuda_stream()),
               what);
    if (o.dtype == DTYPE_I64) return;
    DISPATCH_FLOAT(what, o.dtype, int64_to<T> LAUNCH(n)(o.data<T>(), values_out, n));
    cuda_check_launch(what);
}

// ============================================================================================
// [SECTION] layout

// contiguous: the input as it is (OPF_STRIDED), copied in row-major order.
// dst[k * dst_row + dst_at + r] = src[k * block + r] for k < outer, r < block: a block of each
// of `outer` rows of src placed at dst_at within each row of dst (cat, narrow_backward).
template <class T>
__global__ void copy_blocks(T* dst, const T* src, int64_t outer, int64_t block, int64_t dst_row, int64_t dst_at) {
    GRID_LOOP(i, outer * block) {
        int64_t k = i / block, r = i % block;
        dst[k * dst_row + dst_at + r] = src[i];
    }
}

// part (contiguous) copied into full (contiguous) at `start` along dim.
void place_along(const Value& full, const Value& part, int dim, int64_t start, const char* what) {
    if (part.numel() == 0) return;
    DimSplit f = dim_split(full.shape, dim), p = dim_split(part.shape, dim);
    int64_t block = p.n * p.inner;
    DISPATCH_BY_SIZE(full.dtype, copy_blocks<T> LAUNCH(p.outer * block)(
                                          static_cast<T*>(full.raw()), static_cast<const T*>(part.raw()), p.outer, block,
                                          f.n * f.inner, start * f.inner));
    cuda_check_launch(what);
}

void cuda_cat(const KernelCall& c) {
    const Value& o = out(c);
    int64_t offset = 0;   // along dim
    for (int i = 0; i < c.n_inputs; ++i) {
        place_along(o, in(c, i), c.attrs.dim, offset, "cat (cuda)");
        offset += in(c, i).shape.dims[c.attrs.dim];
    }
}

// y = zeros with x placed at attrs.start along attrs.dim.
void cuda_narrow_backward(const KernelCall& c) {
    zero_fill(out(c), "narrow_backward (cuda)");
    place_along(out(c), in(c, 0), c.attrs.dim, c.attrs.start, "narrow_backward (cuda)");
}

// Where output element i (row-major over dims) reads its input: start + the sum of its
// coordinates times strides (negative along the flipped dims).
struct FlipLayout {
    int ndim;
    int64_t dims[MAX_DIMS];
    int64_t strides[MAX_DIMS];
    int64_t start;
};

template <class T>
__global__ void flip_kernel(T* o, const T* x, FlipLayout f, int64_t n) {
    GRID_LOOP(i, n) {
        int64_t at = f.start, rest = i;
        for (int d = f.ndim - 1; d >= 0; --d) {
            at += (rest % f.dims[d]) * f.strides[d];
            rest /= f.dims[d];
        }
        o[i] = x[at];
    }
}

void cuda_flip(const KernelCall& c) {
    const Value &x = in(c, 0), &o = out(c);
    uint32_t mask = op_dims_mask(c.attrs, x.shape.ndim);
    FlipLayout f{};
    f.ndim = x.shape.ndim;
    int64_t stride = 1;
    for (int d = x.shape.ndim - 1; d >= 0; --d) {
        f.dims[d] = x.shape.dims[d];
        f.strides[d] = stride;
        if (mask & (1u << d)) {
            f.start += (x.shape.dims[d] - 1) * stride;
            f.strides[d] = -stride;
        }
        stride *= x.shape.dims[d];
    }
    DISPATCH_BY_SIZE(x.dtype, flip_kernel<T> LAUNCH(o.numel())(static_cast<T*>(o.raw()),
                                                                    static_cast<const T*>(x.raw()), f, o.numel()));
    cuda_check_launch("flip (cuda)");
}


// ============================================================================================
// [SECTION] indexing
//
// gather, scatter_add and scatter walk the elements of the index (1-based int64) in order: for
// element `at`, `base` is the offset in the other tensor (contiguous) at the same coordinates with
// the one along dim 0; the index value k picks base + (k - 1) * stride (cpu_gather's for_each_index).

struct IndexWalk {
    int ndim;
    int64_t dims[MAX_DIMS];      // the index's shape
    int64_t strides[MAX_DIMS];   // the other tensor's row-major strides, 0 along dim
    int64_t size;                // the other tensor's size along dim: indices 1..size
    int64_t stride;              // its stride along dim
};

IndexWalk index_walk(const Shape& index, const Shape& other, int dim) {
    IndexWalk w{};
    w.ndim = index.ndim;
    int64_t stride = 1;
    for (int d = other.ndim - 1; d >= 0; --d) {
        w.strides[d] = d == dim ? 0 : stride;
        if (d == dim) w.stride = stride;
        stride *= other.dims[d];
    }
    for (int d = 0; d < index.ndim; ++d) w.dims[d] = index.dims[d];
    w.size = other.dims[dim];
    return w;
}

// The offset index value k picks for index element `at`, or -1 (reported) when k is out of range.
__device__ int64_t index_target(const IndexWalk& w, const int64_t* index, int64_t at, unsigned long long* bad) {
    int64_t k = index[at];
    if (k < 1 || k > w.size) {
        report_bad(bad, at);
        return -1;
    }
    int64_t base = 0, rest = at;
    for (int d = w.ndim - 1; d >= 0; --d) {
        base += (rest % w.dims[d]) * w.strides[d];
        rest /= w.dims[d];
    }
    return base + (k - 1) * w.stride;
}

// The CPU's error for an index found out of range at position `at` of `index`.
void check_indices(const ErrorSlot& errors, const Value& index, const IndexWalk& w, int dim, const char* op_name) {
    int64_t at = errors.first_bad();
    if (at < 0) return;
    engine_fail("%s: index %lld out of range 1..%lld along dim %d", op_name,
                static_cast<long long>(device_int64(index, at)), static_cast<long long>(w.size), dim + 1);
}

template <class T>
__global__ void gather_kernel(T* o, const T* x, const int64_t* index, IndexWalk w, int64_t n, unsigned long long* bad) {
    GRID_LOOP(at, n) {
        int64_t from = index_target(w, index, at, bad);
        o[at] = from < 0 ? T(0) : x[from];
    }
}

void cuda_gather(const KernelCall& c) {
    const Value &x = in(c, 0), &index = in(c, 1), &o = out(c);
    IndexWalk w = index_walk(index.shape, x.shape, c.attrs.dim);
    ErrorSlot errors;
    DISPATCH_BY_SIZE(x.dtype, gather_kernel<T> LAUNCH(o.numel())(static_cast<T*>(o.raw()),
                                                                      static_cast<const T*>(x.raw()),
                                                                      index.data<int64_t>(), w, o.numel(), errors.slot));
    cuda_check_launch("gather (cuda)");
    check_indices(errors, index, w, c.attrs.dim, "gather");
}

template <class T>
__global__ void scatter_add_kernel(T* o, const T* src, const int64_t* index, IndexWalk w, int64_t n,
                                   unsigned long long* bad) {
    GRID_LOOP(at, n) {
        int64_t to = index_target(w, index, at, bad);
        if (to >= 0) atomic_add(o + to, src[at]);
    }
}

// y = zeros(attrs.shape); y[...index...] += src (atomics: places indexed twice add in no fixed order).
void cuda_scatter_add(const KernelCall& c) {
    const Value &src = in(c, 0), &index = in(c, 1), &o = out(c);
    IndexWalk w = index_walk(index.shape, o.shape, c.attrs.dim);
    zero_fill(o, "scatter_add (cuda)");
    ErrorSlot errors;
    DISPATCH_ALL(o.dtype, scatter_add_kernel<T> LAUNCH(index.numel())(o.data<T>(), src.data<T>(),
                                                                           index.data<int64_t>(), w, index.numel(),
                                                                           errors.slot));
    cuda_check_launch("scatter_add (cuda)");
    check_indices(errors, index, w, c.attrs.dim, "scatter_add");
}

// scatter's first pass: each indexed place keeps the last index element that writes it (the
// largest `at`), so that the result is the CPU's (the last write wins) whatever the thread order.
__global__ void scatter_winners(long long* winner, const int64_t* index, IndexWalk w, int64_t n, unsigned long long* bad) {
    GRID_LOOP(at, n) {
        int64_t to = index_target(w, index, at, bad);
        if (to >= 0) atomicMax(winner + to, static_cast<long long>(at));
    }
}

template <class T>
__global__ void scatter_write(T* o, const T* src, const long long* winner, const int64_t* index, IndexWalk w, int64_t n) {
    GRID_LOOP(at, n) {
        int64_t to = index_target(w, index, at, nullptr);
        if (to >= 0 && winner[to] == at) o[to] = src[at];
    }
}

// y = x; y[...index...] = src (a place indexed twice gets the last write).
void cuda_scatter(const KernelCall& c) {
    const char* what = "scatter (cuda)";
    const Value &x = in(c, 0), &index = in(c, 1), &src = in(c, 2), &o = out(c);
    IndexWalk w = index_walk(index.shape, o.shape, c.attrs.dim);
    cuda_check(cudaMemcpyAsync(o.raw(), x.raw(), bytes_of(o), cudaMemcpyDeviceToDevice, cuda_stream()), what);
    CudaScratch winner(static_cast<size_t>(o.numel()) * sizeof(long long));
    cuda_check(cudaMemsetAsync(winner.data, 0xff, winner.bytes, cuda_stream()), what);   // -1: none
    ErrorSlot errors;
    scatter_winners LAUNCH(index.numel())(winner.as<long long>(), index.data<int64_t>(), w, index.numel(), errors.slot);
    cuda_check_launch(what);
    check_indices(errors, index, w, c.attrs.dim, "scatter");
    DISPATCH_BY_SIZE(o.dtype, scatter_write<T> LAUNCH(index.numel())(static_cast<T*>(o.raw()),
                                                                          static_cast<const T*>(src.raw()),
                                                                          winner.as<long long>(), index.data<int64_t>(), w,
                                                                          index.numel()));
    cuda_check_launch(what);
}

// ============================================================================================
// [SECTION] losses
//
// Each loss is 0-d: the mean over examples, or the sum (attrs.reduction). The class losses walk
// the rows of scores [N,C] (or [C], one row), one block per row; each row's loss (double) goes to
// a scratch array, summed by sum_into. Labels are 1-based, of any dtype (floats holding whole
// numbers); a bad one is reported and its row skipped, then raised as the CPU raises it. Rows and
// the mean's count: class_rows, reduction_count (ops.h).

// The 0-based column of example i's label, or -1 (reported) when it is not a whole number in 1..classes.
__device__ int64_t label_column(AnyValues labels, int64_t i, int64_t classes, unsigned long long* bad) {
    double label = any_at(labels, i);
    if (label != floor(label) || label < 1 || label > static_cast<double>(classes)) {
        report_bad(bad, i);
        return -1;
    }
    return static_cast<int64_t>(label) - 1;
}

// The CPU's error (kernels_cpu_reduce.cpp's label_column) for the first bad label, if a kernel found one.
void check_labels(const ErrorSlot& errors, const Value& labels, int64_t classes, const char* op_name) {
    int64_t i = errors.first_bad();
    if (i < 0) return;
    double label = device_element(labels, i);
    if (label != std::floor(label))
        engine_fail("%s: label %g at position %lld is not a whole number (labels are classes 1..%lld)", op_name, label,
                    static_cast<long long>(i + 1), static_cast<long long>(classes));
    engine_fail("%s: label %.0f at position %lld is out of range: there are %lld classes (labels 1..%lld)", op_name,
                label, static_cast<long long>(i + 1), static_cast<long long>(classes), static_cast<long long>(classes));
}

// Blocks for one block per row (a grid-stride loop over rows beyond that).
unsigned row_blocks(int64_t rows) {
    return static_cast<unsigned>(rows < 1 ? 1 : rows > 65535 * 8 ? 65535 * 8 : rows);
}

// Per-row partial sums of (x - y)^2 (each square in T, summed in double), one per block.
template <class T>
__global__ void squared_error_partials(const T* x, const T* y, int64_t n, double* partials) {
    __shared__ double shared[CUDA_THREADS];
    double total = 0;
    GRID_LOOP(i, n) {
        T d = x[i] - y[i];
        total += static_cast<double>(d * d);
    }
    total = block_sum(total, shared);
    if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

void cuda_mse_loss(const KernelCall& c) {
    const char* what = "mse_loss (cuda)";
    const Value &x = in(c, 0), &y = in(c, 1), &o = out(c);
    int64_t n = x.numel();
    double count = c.attrs.reduction == REDUCTION_MEAN ? static_cast<double>(n) : 1;
    unsigned blocks = cuda_blocks(n) > 1024 ? 1024 : cuda_blocks(n);
    CudaScratch partials(blocks * sizeof(double));
    DISPATCH_FLOAT("mse_loss", x.dtype, {
        squared_error_partials<T><<<blocks, CUDA_THREADS, 0, cuda_stream()>>>(x.data<T>(), y.data<T>(), n,
                                                                              partials.as<double>());
        cuda_check_launch(what);
        sum_into<T><<<1, CUDA_THREADS, 0, cuda_stream()>>>(partials.as<double>(), blocks, count, o.data<T>());
    });
    cuda_check_launch(what);
}

// Which class loss a row kernel computes.
enum ClassLoss { LOSS_CROSS_ENTROPY, LOSS_NLL, LOSS_MULTI_MARGIN };

// row_loss[i] for each row i of x [rows, classes]:
//   cross_entropy      (max - x[k]) + log(sum_j e^(x[j] - max))   (in T, as the CPU's)
//   nll_loss           -x[k]
//   multi_margin_loss  sum over j != k of max(0, 1 - x[k] + x[j]) (in T, summed in double) / classes
template <class T>
__global__ void class_loss_rows(ClassLoss loss, const T* x, AnyValues labels, int64_t rows, int64_t classes,
                                double* row_loss, unsigned long long* bad) {
    __shared__ double shared_storage[CUDA_THREADS];
    T* shared = reinterpret_cast<T*>(shared_storage);
    for (int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
        int64_t k = label_column(labels, i, classes, bad);   // the same in every thread of the block
        if (k < 0) {
            if (threadIdx.x == 0) row_loss[i] = 0;
            continue;
        }
        const T* row = x + i * classes;
        if (loss == LOSS_NLL) {
            if (threadIdx.x == 0) row_loss[i] = -static_cast<double>(row[k]);
        } else if (loss == LOSS_CROSS_ENTROPY) {
            T m = row[0];
            for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) m = m < row[j] ? row[j] : m;
            m = block_max(m, shared);
            T sum_e = 0;
            for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) sum_e += exp_of(row[j] - m);
            sum_e = block_sum(sum_e, shared);
            if (threadIdx.x == 0) row_loss[i] = static_cast<double>((m - row[k]) + log_of(sum_e));
        } else {
            T base = T(1) - row[k];
            double hinges = 0;
            for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) {
                T v = base + row[j];
                if (j != k) hinges += static_cast<double>(T(0) < v ? v : T(0));   // std::max(0, v)
            }
            hinges = block_sum(hinges, shared_storage);
            if (threadIdx.x == 0) row_loss[i] = hinges / static_cast<double>(classes);
        }
    }
}

void class_loss(const KernelCall& c, ClassLoss loss, const char* op_name, const char* what) {
    const Value &x = in(c, 0), &labels = in(c, 1), &o = out(c);
    ClassRows r = class_rows(x.shape);
    CudaScratch row_loss(static_cast<size_t>(r.n) * sizeof(double));
    ErrorSlot errors;
    DISPATCH_FLOAT(op_name, x.dtype, {
        class_loss_rows<T><<<row_blocks(r.n), CUDA_THREADS, 0, cuda_stream()>>>(
            loss, x.data<T>(), any_values(labels), r.n, r.classes, row_loss.as<double>(), errors.slot);
        cuda_check_launch(what);
        check_labels(errors, labels, r.classes, op_name);
        sum_into<T><<<1, CUDA_THREADS, 0, cuda_stream()>>>(row_loss.as<double>(), r.n, reduction_count(c.attrs, r.n),
                                                           o.data<T>());
    });
    cuda_check_launch(what);
}

void cuda_cross_entropy(const KernelCall& c) { class_loss(c, LOSS_CROSS_ENTROPY, "cross_entropy", "cross_entropy (cuda)"); }
void cuda_nll_loss(const KernelCall& c) { class_loss(c, LOSS_NLL, "nll_loss", "nll_loss (cuda)"); }
void cuda_multi_margin_loss(const KernelCall& c) {
    class_loss(c, LOSS_MULTI_MARGIN, "multi_margin_loss", "multi_margin_loss (cuda)");
}

// dx = g s (softmax(row) - onehot(label)), s = 1 / count: e = exp(x - max), then e * (scale / sum e),
// less scale at the label (cross_entropy_backward_rows' arithmetic). g: the 0-d gradient.
template <class T>
__global__ void cross_entropy_backward_rows(T* o, AnyValues g, const T* x, AnyValues labels, int64_t rows,
                                            int64_t classes, double count, unsigned long long* bad) {
    __shared__ double shared_storage[CUDA_THREADS];
    T* shared = reinterpret_cast<T*>(shared_storage);
    T scale = static_cast<T>(any_at(g, 0) / count);
    for (int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
        int64_t k = label_column(labels, i, classes, bad);
        if (k < 0) continue;
        const T* row = x + i * classes;
        T* dx = o + i * classes;
        T m = row[0];
        for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) m = m < row[j] ? row[j] : m;
        m = block_max(m, shared);
        T sum_e = 0;
        for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) sum_e += exp_of(row[j] - m);
        sum_e = block_sum(sum_e, shared);
        T factor = scale / sum_e;
        for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) {
            T e = mul_rn(exp_of(row[j] - m), factor);   // rounded before the label's subtraction
            dx[j] = j == k ? e - scale : e;
        }
    }
}

void cuda_cross_entropy_backward(const KernelCall& c) {
    const char* what = "cross_entropy_backward (cuda)";
    const Value &g = in(c, 0), &x = in(c, 1), &labels = in(c, 2), &o = out(c);
    ClassRows r = class_rows(x.shape);
    ErrorSlot errors;
    DISPATCH_FLOAT("cross_entropy_backward", o.dtype,
                        cross_entropy_backward_rows<T><<<row_blocks(r.n), CUDA_THREADS, 0, cuda_stream()>>>(
                            o.data<T>(), any_values(g), x.data<T>(), any_values(labels), r.n, r.classes,
                            reduction_count(c.attrs, r.n), errors.slot));
    cuda_check_launch(what);
    check_labels(errors, labels, r.classes, "cross_entropy_backward");
}

// dx = -g s at [i, label_i] (dx zero before).
template <class T>
__global__ void nll_loss_backward_rows(T* o, AnyValues g, AnyValues labels, int64_t rows, int64_t classes, double count,
                                       unsigned long long* bad) {
    T value = static_cast<T>(-any_at(g, 0) / count);
    GRID_LOOP(i, rows) {
        int64_t k = label_column(labels, i, classes, bad);
        if (k >= 0) o[i * classes + k] = value;
    }
}

void cuda_nll_loss_backward(const KernelCall& c) {
    const char* what = "nll_loss_backward (cuda)";
    const Value &g = in(c, 0), &labels = in(c, 1), &o = out(c);
    ClassRows r = class_rows(o.shape);
    zero_fill(o, what);
    ErrorSlot errors;
    DISPATCH_FLOAT("nll_loss_backward", o.dtype,
                        nll_loss_backward_rows<T> LAUNCH(r.n)(o.data<T>(), any_values(g), any_values(labels), r.n,
                                                              r.classes, reduction_count(c.attrs, r.n), errors.slot));
    cuda_check_launch(what);
    check_labels(errors, labels, r.classes, "nll_loss_backward");
}

// dx[i, j] = scale where the hinge 1 - x[k] + x[j] is on (> 0), else 0, for j != k; dx[i, k] =
// -scale once per hinge on, subtracted one at a time in T as the CPU does. scale = g / C / count.
template <class T>
__global__ void multi_margin_backward_rows(T* o, AnyValues g, const T* x, AnyValues labels, int64_t rows, int64_t classes,
                                           double count, unsigned long long* bad) {
    __shared__ double shared[CUDA_THREADS];
    T scale = static_cast<T>(any_at(g, 0) / static_cast<double>(classes) / count);
    for (int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
        int64_t k = label_column(labels, i, classes, bad);
        if (k < 0) continue;
        const T* row = x + i * classes;
        T* dx = o + i * classes;
        T base = T(1) - row[k];
        double on = 0;
        for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) {
            if (j == k) continue;
            T v = base + row[j];
            T hinge = T(0) < v ? v : T(0);
            dx[j] = hinge > 0 ? scale : T(0);
            on += hinge > 0 ? 1 : 0;
        }
        on = block_sum(on, shared);
        if (threadIdx.x == 0) {
            T at_label = 0;
            for (int64_t t = 0; t < static_cast<int64_t>(on); ++t) at_label -= scale;
            dx[k] = at_label;
        }
    }
}

void cuda_multi_margin_loss_backward(const KernelCall& c) {
    const char* what = "multi_margin_loss_backward (cuda)";
    const Value &g = in(c, 0), &x = in(c, 1), &labels = in(c, 2), &o = out(c);
    ClassRows r = class_rows(x.shape);
    ErrorSlot errors;
    DISPATCH_FLOAT("multi_margin_loss_backward", o.dtype,
                        multi_margin_backward_rows<T><<<row_blocks(r.n), CUDA_THREADS, 0, cuda_stream()>>>(
                            o.data<T>(), any_values(g), x.data<T>(), any_values(labels), r.n, r.classes,
                            reduction_count(c.attrs, r.n), errors.slot));
    cuda_check_launch(what);
    check_labels(errors, labels, r.classes, "multi_margin_loss_backward");
}

// ============================================================================================
// [SECTION] pooling

// The window of max_pool2d over planes of h x w into oh x ow.
struct PoolWindow {
    int64_t h, w, oh, ow;
    int64_t kh, kw, stride_h, stride_w, padding_h, padding_w, dilation_h, dilation_w;
};

// The first element of a window starting at `start` (maybe negative: in the padding) that lies
// at 0 or after, counted in window elements `dilation` apart.
__device__ int64_t first_inside(int64_t start, int64_t dilation) {
    return start >= 0 ? 0 : (-start + dilation - 1) / dilation;
}

// One output element per thread: the window's maximum (padding reads -inf), elements in row-major
// order, only a larger one (or the first NaN) taking over, so ties keep the first. Its index is
// 1-based, flat in the H*W plane; when the window's first element lies in the padding and nothing
// beat it, the index is the first element inside (as PyTorch's and the CPU's).
template <class T>
__global__ void max_pool2d_kernel(T* values, int64_t* indices, const T* x, PoolWindow p, int64_t n) {
    GRID_LOOP(e, n) {
        int64_t positions = p.oh * p.ow;
        int64_t plane = e / positions, pos = e % positions;
        int64_t row0 = (pos / p.ow) * p.stride_h - p.padding_h, col0 = (pos % p.ow) * p.stride_w - p.padding_w;
        const T* image = x + plane * p.h * p.w;
        T best = 0;
        int64_t best_row = row0, best_col = col0;
        bool first = true;
        for (int64_t i = 0; i < p.kh; ++i) {
            int64_t r = row0 + i * p.dilation_h;
            for (int64_t j = 0; j < p.kw; ++j) {
                int64_t col = col0 + j * p.dilation_w;
                bool inside = r >= 0 && r < p.h && col >= 0 && col < p.w;
                T v = inside ? image[r * p.w + col] : -INFINITY;
                bool take = first || (v > best) || (v != v && best == best);
                if (take) best = v, best_row = r, best_col = col;
                first = false;
            }
        }
        if (best_row < 0 || best_col < 0) {   // only the first element can win from the padding
            best_row = row0 + first_inside(row0, p.dilation_h) * p.dilation_h;
            best_col = col0 + first_inside(col0, p.dilation_w) * p.dilation_w;
        }
        values[e] = best;
        indices[e] = best_row * p.w + best_col + 1;
    }
}

void cuda_max_pool2d(const KernelCall& c) {
    const Value &x = in(c, 0), &values = out(c, 0), &indices = out(c, 1);
    const OpAttrs& a = c.attrs;
    const Shape &xs = x.shape, &ys = values.shape;
    PoolWindow p{xs[xs.ndim - 2], xs[xs.ndim - 1], ys[ys.ndim - 2], ys[ys.ndim - 1], a.kernel_h, a.kernel_w,
                 a.stride_h, a.stride_w, a.padding_h, a.padding_w, a.dilation_h, a.dilation_w};
    DISPATCH_FLOAT("max_pool2d", values.dtype,
                        max_pool2d_kernel<T> LAUNCH(values.numel())(values.data<T>(), indices.data<int64_t>(),
                                                                    x.data<T>(), p, values.numel()));
    cuda_check_launch("max_pool2d (cuda)");
}

// dx = zeros; each g added at its window's argmax (atomics: overlapping windows add in no fixed order).
template <class T>
__global__ void max_pool2d_backward_kernel(T* dx, const T* grad, const int64_t* indices, int64_t windows,
                                           int64_t plane_size, int64_t n, unsigned long long* bad) {
    GRID_LOOP(e, n) {
        int64_t k = indices[e];
        if (k < 1 || k > plane_size) {
            report_bad(bad, e);
            continue;
        }
        atomic_add(dx + (e / windows) * plane_size + k - 1, grad[e]);
    }
}

void cuda_max_pool2d_backward(const KernelCall& c) {
    const char* what = "max_pool2d_backward (cuda)";
    const Value &grad = in(c, 0), &indices = in(c, 1), &dx = out(c);
    const Shape &xs = dx.shape, &gs = grad.shape;
    const int64_t plane_size = xs[xs.ndim - 2] * xs[xs.ndim - 1], windows = gs[gs.ndim - 2] * gs[gs.ndim - 1];
    zero_fill(dx, what);
    ErrorSlot errors;
    DISPATCH_FLOAT("max_pool2d_backward", dx.dtype,
                        max_pool2d_backward_kernel<T> LAUNCH(grad.numel())(dx.data<T>(), grad.data<T>(),
                                                                           indices.data<int64_t>(), windows, plane_size,
                                                                           grad.numel(), errors.slot));
    cuda_check_launch(what);
    int64_t at = errors.first_bad();
    if (at >= 0)
        engine_fail("max_pool2d_backward: index %lld out of range 1..%lld of an H*W plane",
                    static_cast<long long>(device_int64(indices, at)), static_cast<long long>(plane_size));
}

// ============================================================================================
// [SECTION] sampling

// cpu_multinomial, one thread per row: each of the row's n samples draws u uniform in [0, total)
// and picks the first category whose running sum exceeds it (the last positive one when u
// rounded up to the total); without replacement, a picked category's weight becomes 0. Weights
// are the row's probabilities copied to `weights` (double). A bad row is reported as
// row * 3 + what: 0 a weight negative, NaN or infinite; 1 no positive weight; 2 fewer positive
// weights than samples without replacement (the host finds the details).
__global__ void multinomial_rows(int64_t* o, AnyValues p, double* weights, int64_t rows, int64_t k, int64_t n,
                                 bool replacement, uint64_t seed_hash, uint64_t offset, unsigned long long* bad) {
    GRID_LOOP(r, rows) {
        double* w = weights + r * k;
        int64_t positive = 0;
        bool valid = true;
        for (int64_t j = 0; j < k && valid; ++j) {
            w[j] = any_at(p, r * k + j);
            valid = w[j] >= 0 && !isinf(w[j]);
            positive += w[j] > 0;
        }
        int error = !valid ? 0 : positive == 0 ? 1 : (!replacement && positive < n) ? 2 : -1;
        if (error >= 0) {
            report_bad(bad, r * 3 + error);
            continue;
        }
        for (int64_t s = 0; s < n; ++s) {
            double total = 0;
            for (int64_t j = 0; j < k; ++j) total += w[j];
            double u = uniform_double(random_bits(seed_hash, offset + r * n + s)) * total;
            double running = 0;
            int64_t pick = k;
            for (int64_t j = 0; j < k; ++j) {   // upper_bound over the running sums
                running += w[j];
                if (running > u) {
                    pick = j;
                    break;
                }
            }
            while (pick >= k || w[pick] == 0) --pick;
            o[r * n + s] = pick + 1;
            if (!replacement) w[pick] = 0;
        }
    }
}

void cuda_multinomial(const KernelCall& c) {
    const char* what = "multinomial (cuda)";
    const Value &p = in(c, 0), &o = out(c);
    int64_t k = p.shape.dims[p.shape.ndim - 1], rows = p.numel() / k, n = c.attrs.length;
    CudaScratch weights(static_cast<size_t>(p.numel()) * sizeof(double));
    uint64_t offset = cuda_rng_take(static_cast<uint64_t>(rows * n));
    ErrorSlot errors;
    multinomial_rows LAUNCH(rows)(o.data<int64_t>(), any_values(p), weights.as<double>(), rows, k, n, c.attrs.all,
                                  rng_stream(), offset, errors.slot);
    cuda_check_launch(what);
    int64_t bad = errors.first_bad();
    if (bad < 0) return;
    int64_t r = bad / 3;
    if (bad % 3 == 0) {
        for (int64_t j = 0; j < k; ++j) {
            double w = device_element(p, r * k + j);
            if (!(w >= 0) || std::isinf(w))
                engine_fail("multinomial: probabilities must be finite and not negative, got %g in row %lld", w,
                            static_cast<long long>(r + 1));
        }
    }
    if (bad % 3 == 1)
        engine_fail("multinomial: row %lld has no category with a positive probability", static_cast<long long>(r + 1));
    int64_t positive = 0;
    for (int64_t j = 0; j < k; ++j) positive += device_element(p, r * k + j) > 0;
    engine_fail("multinomial: row %lld has %lld categories with a positive probability, fewer than the %lld "
                "samples to draw without replacement",
                static_cast<long long>(r + 1), static_cast<long long>(positive), static_cast<long long>(n));
}

// ============================================================================================
// [SECTION] in place
//
// outputs[0] is input 0's storage (contiguous: kernel_run runs a strided one on a copy and writes
// it back); input 1, of input 0's dtype, broadcasts into its shape.

// Where element i of x (row-major over dims) reads y: the sum of its coordinates times y's
// broadcast strides (0 along the dims y is broadcast over).
struct Broadcast {
    int ndim;
    int64_t dims[MAX_DIMS];
    int64_t strides[MAX_DIMS];
};

Broadcast broadcast_of(const Shape& x, const Shape& y) {
    Broadcast b{};
    b.ndim = x.ndim;
    int64_t stride = 1;
    for (int i = x.ndim - 1; i >= 0; --i) {
        int j = i - (x.ndim - y.ndim);
        b.dims[i] = x.dims[i];
        b.strides[i] = (j < 0 || y.dims[j] == 1) ? 0 : stride;
        if (j >= 0) stride *= y.dims[j];
    }
    return b;
}

enum InplaceOp { INPLACE_ADD, INPLACE_SUB, INPLACE_MUL, INPLACE_COPY, INPLACE_MASKED_FILL };

// x[i] = op(x[i], y[at]): x + s y, x - s y, x y, y, or s where y != 0 (the mask) else x.
template <class T>
__global__ void inplace_kernel(T* x, const T* y, Broadcast b, int64_t n, InplaceOp op, T s) {
    GRID_LOOP(i, n) {
        int64_t at = 0, rest = i;
        for (int d = b.ndim - 1; d >= 0; --d) {
            at += (rest % b.dims[d]) * b.strides[d];
            rest /= b.dims[d];
        }
        T v = y[at];
        switch (op) {
            case INPLACE_ADD: x[i] = add_rn(x[i], mul_rn(s, v)); break;
            case INPLACE_SUB: x[i] = sub_rn(x[i], mul_rn(s, v)); break;
            case INPLACE_MUL: x[i] = mul_rn(x[i], v); break;
            case INPLACE_COPY: x[i] = v; break;
            case INPLACE_MASKED_FILL: x[i] = v != T(0) ? s : x[i]; break;
        }
    }
}

void inplace(const KernelCall& c, InplaceOp op, const char* what) {
    const Value &x = out(c), &y = in(c, 1);
    if (y.dtype != x.dtype) engine_fail("%s: internal error: a %s operand for a %s tensor", what, dtype_name(y.dtype), dtype_name(x.dtype));
    Broadcast b = broadcast_of(x.shape, y.shape);
    DISPATCH_ALL(x.dtype, inplace_kernel<T> LAUNCH(x.numel())(x.data<T>(), y.data<T>(), b, x.numel(), op,
                                                                  element_cast<T>(c.attrs.scalar)));
    cuda_check_launch(what);
}

void cuda_add_inplace(const KernelCall& c) { inplace(c, INPLACE_ADD, "add_ (cuda)"); }
void cuda_sub_inplace(const KernelCall& c) { inplace(c, INPLACE_SUB, "sub_ (cuda)"); }
void cuda_mul_inplace(const KernelCall& c) { inplace(c, INPLACE_MUL, "mul_ (cuda)"); }
void cuda_copy_inplace(const KernelCall& c) { inplace(c, INPLACE_COPY, "copy_ (cuda)"); }
void cuda_masked_fill_inplace(const KernelCall& c) { inplace(c, INPLACE_MASKED_FILL, "masked_fill_ (cuda)"); }
void cuda_zero_inplace(const KernelCall& c) { zero_fill(out(c), "zero_ (cuda)"); }
void cuda_fill_inplace(const KernelCall& c) { cuda_full(c); }

}  // namespace

void cuda_register_other(KernelFn* table) {
    table[OP_tensor] = cuda_tensor;
    table[OP_zeros] = cuda_zeros;
    table[OP_ones] = cuda_ones;
    table[OP_full] = cuda_full;
    table[OP_eye] = cuda_eye;
    table[OP_arange] = cuda_arange;
    table[OP_linspace] = cuda_linspace;
    table[OP_rand] = cuda_rand;
    table[OP_randn] = cuda_randn;
    table[OP_randint] = cuda_randint;
    table[OP_randperm] = cuda_randperm;

    table[OP_cat] = cuda_cat;
    table[OP_narrow_backward] = cuda_narrow_backward;
    table[OP_flip] = cuda_flip;

    table[OP_gather] = cuda_gather;
    table[OP_scatter_add] = cuda_scatter_add;
    table[OP_scatter] = cuda_scatter;

    table[OP_mse_loss] = cuda_mse_loss;
    table[OP_cross_entropy] = cuda_cross_entropy;
    table[OP_nll_loss] = cuda_nll_loss;
    table[OP_multi_margin_loss] = cuda_multi_margin_loss;
    table[OP_cross_entropy_backward] = cuda_cross_entropy_backward;
    table[OP_nll_loss_backward] = cuda_nll_loss_backward;
    table[OP_multi_margin_loss_backward] = cuda_multi_margin_loss_backward;

    table[OP_max_pool2d] = cuda_max_pool2d;
    table[OP_max_pool2d_backward] = cuda_max_pool2d_backward;

    table[OP_multinomial] = cuda_multinomial;

    table[OP_add_] = cuda_add_inplace;
    table[OP_sub_] = cuda_sub_inplace;
    table[OP_mul_] = cuda_mul_inplace;
    table[OP_zero_] = cuda_zero_inplace;
    table[OP_fill_] = cuda_fill_inplace;
    table[OP_copy_] = cuda_copy_inplace;
    table[OP_masked_fill_] = cuda_masked_fill_inplace;
}

}  // namespace td
