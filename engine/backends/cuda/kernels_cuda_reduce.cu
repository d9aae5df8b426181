// kernels_cuda_reduce.cu: the CUDA kernels of the reductions: sum mean prod max min amax amin
// sum_to cumsum softmax log_softmax sort topk. See cuda_common.h.
//
// Semantics are the CPU's (kernels_cpu_reduce.cpp, [SECTION] reductions, and cpu_sum_to):
//   - float32 accumulates in float32, float64 in float64, int64 in int64 (wrapping), as the CPU
//     does. The order of the additions differs where the GPU splits a reduction over threads (a
//     tree), so a float sum can differ from the CPU's in its last bits; where one thread walks the
//     reduced elements in order (few of them, or a strided reduction with many outputs; cumsum;
//     softmax along a dim that is not the last) the order is the CPU's row-major one.
//   - max, min, amax, amin: NaN propagates (the first NaN wins), ties go to the first element;
//     max and min over one dim give the 1-based index of the winner as well.
//   - an empty reduction gives 0 (sum), 1 (prod), NaN (mean: 0 / 0); amax, max... refuse empty
//     dims in their shape rules.
#include <climits>
#include <limits>

#include "cuda_common.h"
#include "scalar_math.h"

namespace td {

namespace {

// ---------------------------------------------------------------------------------------------
// The layout of a reduction: each output element (row-major over the kept dims) folds the input
// elements at its kept coordinates and every coordinate of the reduced dims (row-major over them).
// Offsets come from the input's contiguous strides; size-1 dims are dropped and adjacent dims of
// the same kind merged when their strides allow, so the usual cases (every dim, one dim) need one
// or two divisions per element.
struct ReduceLayout {
    int kept_ndim = 0, reduced_ndim = 0;
    int64_t kept_dims[MAX_DIMS] = {}, kept_strides[MAX_DIMS] = {};
    int64_t reduced_dims[MAX_DIMS] = {}, reduced_strides[MAX_DIMS] = {};
    int64_t n_out = 1;   // output elements
    int64_t count = 1;   // input elements folded into each
};

// Appends a dim (outer to inner) to a list, merged into its last when that one steps over it exactly.
void append_dim(int& ndim, int64_t* dims, int64_t* strides, int64_t size, int64_t stride) {
    if (ndim > 0 && strides[ndim - 1] == stride * size) {
        dims[ndim - 1] *= size;
        strides[ndim - 1] = stride;
        return;
    }
    dims[ndim] = size;
    strides[ndim] = stride;
    ++ndim;
}

// The layout of reducing a contiguous tensor of shape `x` over the dims in `mask` (bit d: dim d).
ReduceLayout reduce_layout(const Shape& x, uint32_t mask) {
    ReduceLayout l;
    int64_t strides[MAX_DIMS];
    shape_contiguous_strides(x, strides);
    for (int d = 0; d < x.ndim; ++d) {
        int64_t size = x.dims[d];
        if (mask & (1u << d)) {
            l.count *= size;
            if (size != 1) append_dim(l.reduced_ndim, l.reduced_dims, l.reduced_strides, size, strides[d]);
        } else {
            l.n_out *= size;
            if (size != 1) append_dim(l.kept_ndim, l.kept_dims, l.kept_strides, size, strides[d]);
        }
    }
    return l;
}

// The offset of row-major index i over (dims, strides).
__device__ __forceinline__ int64_t offset_of(int ndim, const int64_t* dims, const int64_t* strides, int64_t i) {
    int64_t at = 0;
    for (int d = ndim - 1; d >= 0; --d) {
        at += (i % dims[d]) * strides[d];
        i /= dims[d];
    }
    return at;
}

__device__ __forceinline__ int64_t kept_offset(const ReduceLayout& l, int64_t o) {
    return offset_of(l.kept_ndim, l.kept_dims, l.kept_strides, o);
}
__device__ __forceinline__ int64_t reduced_offset(const ReduceLayout& l, int64_t r) {
    return offset_of(l.reduced_ndim, l.reduced_dims, l.reduced_strides, r);
}

// ---------------------------------------------------------------------------------------------
// The folds. Each has an accumulator Acc, its identity, load (input element v at reduced position
// r), combine (associative; ties and NaN resolved by position, so any split gives the CPU's answer)
// and store.

// Where a reduction writes: values, indices (max and min over a dim, else null), and for mean the
// count it divides by.
template <class T>
struct ReduceOut {
    T* values;
    int64_t* indices;
    bool divide;
    T divisor;
};

template <class T>
struct SumFold {
    using Acc = T;
    __device__ static Acc identity() { return T(0); }
    __device__ static Acc load(T v, int64_t) { return v; }
    __device__ static Acc combine(Acc a, Acc b) { return math::wrapping_add(a, b); }
    __device__ static void store(Acc a, const ReduceOut<T>& out, int64_t o) {
        out.values[o] = out.divide ? a / out.divisor : a;
    }
};

template <class T>
struct ProdFold {
    using Acc = T;
    __device__ static Acc identity() { return T(1); }
    __device__ static Acc load(T v, int64_t) { return v; }
    __device__ static Acc combine(Acc a, Acc b) { return math::wrapping_mul(a, b); }
    __device__ static void store(Acc a, const ReduceOut<T>& out, int64_t o) { out.values[o] = a; }
};

// The start of a running maximum (Max) or minimum: -inf / +inf, or int64's limits.
template <class T, bool Max>
__device__ T extreme_identity() {
    if constexpr (std::numeric_limits<T>::has_infinity)
        return Max ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    else
        return Max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
}

// max, min, amax, amin: the value and its position (the first NaN, else the first of the tied
// winners: what kernels_cpu_common.h's is_new_max / is_new_min keep, walking in order). amax and amin carry the position too (no indices stored): a tree of blocks folds the
// elements out of order, and without the position a tie between -0.0 and 0.0, or between two
// NaNs, would go to whichever came last in the tree, where the CPU keeps the first (its bits).
template <class T>
struct ValueAt {
    T value;
    int64_t at;
};

template <class T, bool Max>
struct ArgFold {
    using Acc = ValueAt<T>;
    __device__ static Acc identity() { return {extreme_identity<T, Max>(), INT64_MAX}; }
    __device__ static Acc load(T v, int64_t r) { return {v, r}; }
    __device__ static Acc combine(Acc a, Acc b) {
        bool a_nan = a.value != a.value, b_nan = b.value != b.value;
        if (a_nan || b_nan) {
            if (a_nan && b_nan) return b.at < a.at ? b : a;
            return a_nan ? a : b;
        }
        if (Max ? b.value > a.value : b.value < a.value) return b;
        if (b.value == a.value && b.at < a.at) return b;
        return a;
    }
    __device__ static void store(Acc a, const ReduceOut<T>& out, int64_t o) {
        out.values[o] = a.value;
        if (out.indices) out.indices[o] = a.at + 1;
    }
};

// ---------------------------------------------------------------------------------------------
// The reduction kernels.

// One thread per output element, folding its elements in order (the CPU's order).
template <class Fold, class T>
__global__ void reduce_per_thread(const T* x, ReduceLayout l, ReduceOut<T> out) {
    for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < l.n_out; o += int64_t(gridDim.x) * blockDim.x) {
        const T* base = x + kept_offset(l, o);
        typename Fold::Acc acc = Fold::identity();
        for (int64_t r = 0; r < l.count; ++r) acc = Fold::combine(acc, Fold::load(base[reduced_offset(l, r)], r));
        Fold::store(acc, out, o);
    }
}

// Work item b (b < n_out * splits) is part b % splits of output b / splits: one block folds it
// through shared memory (a tree), then stores the output (splits == 1) or the part's accumulator in
// partial[b] for reduce_partials.
template <class Fold, class T>
__global__ void reduce_per_block(const T* x, ReduceLayout l, int64_t splits, ReduceOut<T> out,
                                 typename Fold::Acc* partial) {
    __shared__ typename Fold::Acc shared[CUDA_THREADS];
    int64_t chunk = (l.count + splits - 1) / splits;
    for (int64_t b = blockIdx.x; b < l.n_out * splits; b += gridDim.x) {
        int64_t o = b / splits, begin = (b % splits) * chunk;
        int64_t end = begin + chunk < l.count ? begin + chunk : l.count;
        const T* base = x + kept_offset(l, o);
        typename Fold::Acc acc = Fold::identity();
        for (int64_t r = begin + threadIdx.x; r < end; r += blockDim.x)
            acc = Fold::combine(acc, Fold::load(base[reduced_offset(l, r)], r));
        shared[threadIdx.x] = acc;
        __syncthreads();
        for (unsigned width = blockDim.x / 2; width > 0; width /= 2) {
            if (threadIdx.x < width) shared[threadIdx.x] = Fold::combine(shared[threadIdx.x], shared[threadIdx.x + width]);
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            if (splits == 1) Fold::store(shared[0], out, o);
            else partial[b] = shared[0];
        }
        __syncthreads();   // shared[] is reused by the next item
    }
}

// One thread per output: its `splits` parts folded in order, stored.
template <class Fold, class T>
__global__ void reduce_partials(const typename Fold::Acc* partial, int64_t n_out, int64_t splits, ReduceOut<T> out) {
    for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < n_out; o += int64_t(gridDim.x) * blockDim.x) {
        typename Fold::Acc acc = partial[o * splits];
        for (int64_t s = 1; s < splits; ++s) acc = Fold::combine(acc, partial[o * splits + s]);
        Fold::store(acc, out, o);
    }
}

// Reduces x (contiguous, on the device) as `l` says into `out`. A thread per output when each
// folds few elements, or when the reduced elements are strided and there are outputs enough for
// neighbouring threads to read neighbouring elements; else a block per output, and when there are
// few outputs each is split over several blocks (a 1M-element sum runs on ~128 blocks), whose
// parts a second kernel combines.
template <class Fold, class T>
void reduce_launch(const T* x, const ReduceLayout& l, const ReduceOut<T>& out, const char* what) {
    using Acc = typename Fold::Acc;
    if (l.n_out == 0) return;   // no output (kernel_run skips these calls; below would divide by 0, launch 0 blocks)
    bool contiguous = l.reduced_ndim > 0 && l.reduced_strides[l.reduced_ndim - 1] == 1;
    if (l.count <= 32 || (!contiguous && l.n_out >= 2048)) {
        reduce_per_thread<Fold, T><<<cuda_blocks(l.n_out), CUDA_THREADS, 0, cuda_stream()>>>(x, l, out);
        cuda_check_launch(what);
        return;
    }
    constexpr int64_t PER_BLOCK = CUDA_THREADS * 32;   // elements one block folds at least, when split
    constexpr int64_t BLOCKS_WANTED = 1024;            // enough to fill the GPU
    int64_t splits = 1;
    if (l.n_out < BLOCKS_WANTED) {
        splits = (l.count + PER_BLOCK - 1) / PER_BLOCK;
        int64_t most = (BLOCKS_WANTED + l.n_out - 1) / l.n_out;
        if (splits > most) splits = most;
        if (splits < 1) splits = 1;
    }
    int64_t items = l.n_out * splits;
    unsigned grid = static_cast<unsigned>(items < 65535 * 8 ? items : 65535 * 8);
    if (splits == 1) {
        reduce_per_block<Fold, T><<<grid, CUDA_THREADS, 0, cuda_stream()>>>(x, l, 1, out, nullptr);
        cuda_check_launch(what);
        return;
    }
    CudaScratch partial(static_cast<size_t>(items) * sizeof(Acc));   // stream-ordered: reused after these kernels
    reduce_per_block<Fold, T><<<grid, CUDA_THREADS, 0, cuda_stream()>>>(x, l, splits, out, partial.as<Acc>());
    cuda_check_launch(what);
    reduce_partials<Fold, T><<<cuda_blocks(l.n_out), CUDA_THREADS, 0, cuda_stream()>>>(partial.as<Acc>(), l.n_out,
                                                                                       splits, out);
    cuda_check_launch(what);
}

template <class T>
ReduceOut<T> values_out(const Value& o) {
    return {o.data<T>(), nullptr, false, T(0)};
}

const Value& in0(const KernelCall& c) { return *c.inputs[0]; }
const Value& out0(const KernelCall& c) { return *c.outputs[0]; }

// The layout of the call's reduction (attrs.all, attrs.dim or attrs.dim2: op_dims_mask).
ReduceLayout call_layout(const KernelCall& c) { return reduce_layout(in0(c).shape, op_dims_mask(c.attrs, in0(c).shape.ndim)); }

void cuda_sum(const KernelCall& c) {
    DISPATCH_ALL(out0(c).dtype,
                      reduce_launch<SumFold<T>>(in0(c).data<T>(), call_layout(c), values_out<T>(out0(c)), "sum (cuda)"));
}

// The sum, divided by the count of reduced elements as T (the CPU divides after summing too).
void cuda_mean(const KernelCall& c) {
    double count = static_cast<double>(in0(c).numel()) / (out0(c).numel() ? out0(c).numel() : 1);
    DISPATCH_FLOAT("mean", out0(c).dtype, {
        ReduceOut<T> out{out0(c).data<T>(), nullptr, true, static_cast<T>(count)};
        reduce_launch<SumFold<T>>(in0(c).data<T>(), call_layout(c), out, "mean (cuda)");
    });
}

void cuda_prod(const KernelCall& c) {
    DISPATCH_ALL(out0(c).dtype,
                      reduce_launch<ProdFold<T>>(in0(c).data<T>(), call_layout(c), values_out<T>(out0(c)), "prod (cuda)"));
}

// max / min: over one dim, the values and their 1-based indices; over every dim, the value only.
template <bool Max>
void arg_reduce(const KernelCall& c, const char* what) {
    int64_t* indices = c.n_outputs > 1 ? c.outputs[1]->data<int64_t>() : nullptr;
    DISPATCH_ALL(out0(c).dtype, {
        ReduceOut<T> out{out0(c).data<T>(), indices, false, T(0)};
        reduce_launch<ArgFold<T, Max>>(in0(c).data<T>(), call_layout(c), out, what);
    });
}

void cuda_max(const KernelCall& c) { arg_reduce<true>(c, "max (cuda)"); }
void cuda_min(const KernelCall& c) { arg_reduce<false>(c, "min (cuda)"); }

// amax / amin: max's fold with no indices stored (ArgFold: the first winner, as the CPU's).
void cuda_amax(const KernelCall& c) {
    DISPATCH_ALL(out0(c).dtype, reduce_launch<ArgFold<T, true>>(in0(c).data<T>(), call_layout(c),
                                                                     values_out<T>(out0(c)), "amax (cuda)"));
}
void cuda_amin(const KernelCall& c) {
    DISPATCH_ALL(out0(c).dtype, reduce_launch<ArgFold<T, false>>(in0(c).data<T>(), call_layout(c),
                                                                      values_out<T>(out0(c)), "amin (cuda)"));
}

// sum_to: x summed down to the output's shape (attrs.shape): over x's leading dims the output
// lacks, and over the dims where the output has size 1 and x does not.
void cuda_sum_to(const KernelCall& c) {
    const Shape &x = in0(c).shape, &to = out0(c).shape;
    uint32_t mask = 0;
    for (int i = 0; i < x.ndim; ++i) {
        int j = i - (x.ndim - to.ndim);
        if (j < 0 || (to.dims[j] == 1 && x.dims[i] != 1)) mask |= 1u << i;
    }
    DISPATCH_ALL(out0(c).dtype, reduce_launch<SumFold<T>>(in0(c).data<T>(), reduce_layout(x, mask),
                                                               values_out<T>(out0(c)), "sum_to (cuda)"));
}

// ---------------------------------------------------------------------------------------------
// Along one dim: x seen as [outer, n, inner]; a line is the n elements at one (outer, inner).

using Lines = DimSplit;   // tensor.h: x as [outer, n, inner] around the dim

// The first element of line `line` (0 .. outer * inner).
__device__ __forceinline__ int64_t line_start(const Lines& l, int64_t line) {
    return (line / l.inner) * l.n * l.inner + line % l.inner;
}

// cumsum: one thread per line, in order, as the CPU adds (y[0] = x[0], y[j] = y[j-1] + x[j]).
template <class T>
__global__ void cumsum_kernel(T* out, const T* x, Lines l) {
    for (int64_t line = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; line < l.outer * l.inner;
         line += int64_t(gridDim.x) * blockDim.x) {
        int64_t at = line_start(l, line);
        T acc = x[at];
        out[at] = acc;
        for (int64_t j = 1; j < l.n; ++j) {
            at += l.inner;
            acc = math::wrapping_add(acc, x[at]);
            out[at] = acc;
        }
    }
}

void cuda_cumsum(const KernelCall& c) {
    Lines l = dim_split(in0(c).shape, c.attrs.dim);
    if (l.n == 0) return;
    DISPATCH_ALL(out0(c).dtype, {
        cumsum_kernel<T><<<cuda_blocks(l.outer * l.inner), CUDA_THREADS, 0, cuda_stream()>>>(out0(c).data<T>(),
                                                                                            in0(c).data<T>(), l);
        cuda_check_launch("cumsum (cuda)");
    });
}

// softmax (log_softmax when `log`) of one line, shifted by its max: y = e^(x - m) / sum, or
// x - m - log(sum), as the CPU computes it. A line whose max is NaN or -inf gives NaN, as there.
template <class T>
__device__ T max_of(T a, T b) { return b > a ? b : a; }

// Along the last dim (inner == 1): one block per row, the max and the sum folded in shared memory.
template <class T>
__global__ void softmax_rows_kernel(T* out, const T* x, int64_t rows, int64_t n, bool log) {
    __shared__ T shared[CUDA_THREADS];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const T* xr = x + row * n;
        T* yr = out + row * n;
        T m = -std::numeric_limits<T>::infinity();
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m = max_of(m, xr[j]);
        shared[threadIdx.x] = m;
        __syncthreads();
        for (unsigned width = blockDim.x / 2; width > 0; width /= 2) {
            if (threadIdx.x < width) shared[threadIdx.x] = max_of(shared[threadIdx.x], shared[threadIdx.x + width]);
            __syncthreads();
        }
        m = shared[0];
        __syncthreads();
        T total = T(0);
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
            T e = std::exp(xr[j] - m);
            yr[j] = e;   // read back below by this same thread
            total += e;
        }
        shared[threadIdx.x] = total;
        __syncthreads();
        for (unsigned width = blockDim.x / 2; width > 0; width /= 2) {
            if (threadIdx.x < width) shared[threadIdx.x] += shared[threadIdx.x + width];
            __syncthreads();
        }
        total = shared[0];
        __syncthreads();
        T log_total = std::log(total);
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) yr[j] = log ? xr[j] - m - log_total : yr[j] / total;
    }
}

// Along another dim (inner > 1): one thread per line; neighbouring threads read neighbouring
// elements. The CPU's order of operations exactly.
template <class T>
__global__ void softmax_lines_kernel(T* out, const T* x, Lines l, bool log) {
    for (int64_t line = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; line < l.outer * l.inner;
         line += int64_t(gridDim.x) * blockDim.x) {
        int64_t start = line_start(l, line);
        const T* xl = x + start;
        T* yl = out + start;
        T m = xl[0];
        for (int64_t j = 1; j < l.n; ++j) m = max_of(m, xl[j * l.inner]);
        T total = T(0);
        for (int64_t j = 0; j < l.n; ++j) {
            T e = std::exp(xl[j * l.inner] - m);
            yl[j * l.inner] = e;
            total += e;
        }
        T log_total = std::log(total);
        for (int64_t j = 0; j < l.n; ++j)
            yl[j * l.inner] = log ? xl[j * l.inner] - m - log_total : yl[j * l.inner] / total;
    }
}

void softmax(const KernelCall& c, bool log, const char* name, const char* what) {
    Lines l = dim_split(in0(c).shape, c.attrs.dim);
    if (in0(c).numel() == 0) return;   // nothing to normalise (as the CPU; no rows: a grid of 0 blocks)
    DISPATCH_FLOAT(name, out0(c).dtype, {
        if (l.inner == 1) {
            int64_t rows = l.outer;
            unsigned grid = static_cast<unsigned>(rows < 65535 * 8 ? rows : 65535 * 8);
            softmax_rows_kernel<T><<<grid, CUDA_THREADS, 0, cuda_stream()>>>(out0(c).data<T>(), in0(c).data<T>(), rows,
                                                                             l.n, log);
        } else {
            softmax_lines_kernel<T><<<cuda_blocks(l.outer * l.inner), CUDA_THREADS, 0, cuda_stream()>>>(
                out0(c).data<T>(), in0(c).data<T>(), l, log);
        }
        cuda_check_launch(what);
    });
}

void cuda_softmax(const KernelCall& c) { softmax(c, false, "softmax", "softmax (cuda)"); }
void cuda_log_softmax(const KernelCall& c) { softmax(c, true, "log_softmax", "log_softmax (cuda)"); }

// ---------------------------------------------------------------------------------------------
// sort, topk: each line's positions ordered by value (NaN the largest), ties by position, as the
// CPU's sort_along; the first k written (k: the output's size along dim), with 1-based indices.
// One thread per line sorts its positions by a bottom-up merge sort in scratch memory: correct
// for any length, but a single long line runs on one thread.

// Whether position a goes before position b of `line` (elements `inner` apart).
template <class T>
__device__ bool sorts_before(const T* line, int64_t inner, int64_t a, int64_t b, bool descending) {
    return math::sorts_before(line[a * inner], line[b * inner], a, b, descending);
}

template <class T>
__global__ void sort_kernel(T* values, int64_t* indices, const T* x, Lines l, int64_t k, bool descending,
                            int64_t* scratch_a, int64_t* scratch_b) {
    for (int64_t line = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; line < l.outer * l.inner;
         line += int64_t(gridDim.x) * blockDim.x) {
        const T* xl = x + line_start(l, line);
        int64_t* from = scratch_a + line * l.n;
        int64_t* to = scratch_b + line * l.n;
        for (int64_t j = 0; j < l.n; ++j) from[j] = j;
        for (int64_t width = 1; width < l.n; width *= 2) {
            for (int64_t lo = 0; lo < l.n; lo += 2 * width) {
                int64_t mid = lo + width < l.n ? lo + width : l.n;
                int64_t hi = lo + 2 * width < l.n ? lo + 2 * width : l.n;
                int64_t i = lo, j = mid, w = lo;
                while (i < mid && j < hi) to[w++] = sorts_before(xl, l.inner, from[j], from[i], descending) ? from[j++] : from[i++];
                while (i < mid) to[w++] = from[i++];
                while (j < hi) to[w++] = from[j++];
            }
            int64_t* t = from;
            from = to;
            to = t;
        }
        int64_t outer = line / l.inner, inner = line % l.inner;
        for (int64_t j = 0; j < k; ++j) {
            int64_t at = (outer * k + j) * l.inner + inner;
            values[at] = xl[from[j] * l.inner];
            indices[at] = from[j] + 1;
        }
    }
}

void cuda_sort(const KernelCall& c) {
    int dim = c.attrs.dim;
    Lines l = dim_split(in0(c).shape, dim);
    int64_t k = out0(c).shape.dims[dim], lines = l.outer * l.inner;
    size_t bytes = static_cast<size_t>(lines * l.n) * sizeof(int64_t);
    CudaScratch a(bytes), b(bytes);
    DISPATCH_ALL(out0(c).dtype, {
        sort_kernel<T><<<cuda_blocks(lines), CUDA_THREADS, 0, cuda_stream()>>>(
            out0(c).data<T>(), c.outputs[1]->data<int64_t>(), in0(c).data<T>(), l, k, c.attrs.scalar != 0,
            a.as<int64_t>(), b.as<int64_t>());
        cuda_check_launch("sort (cuda)");
    });
}

#undef DISPATCH_ALL
#undef DISPATCH_FLOAT

}  // namespace

void cuda_register_reductions(KernelFn* table) {
    table[OP_sum] = cuda_sum;
    table[OP_mean] = cuda_mean;
    table[OP_prod] = cuda_prod;
    table[OP_max] = cuda_max;
    table[OP_min] = cuda_min;
    table[OP_amax] = cuda_amax;
    table[OP_amin] = cuda_amin;
    table[OP_sum_to] = cuda_sum_to;
    table[OP_cumsum] = cuda_cumsum;
    table[OP_softmax] = cuda_softmax;
    table[OP_log_softmax] = cuda_log_softmax;
    table[OP_sort] = cuda_sort;
    table[OP_topk] = cuda_sort;
}

}  // namespace td
