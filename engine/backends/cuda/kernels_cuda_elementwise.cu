// kernels_cuda_elementwise.cu: the CUDA kernels of elementwise.def's lines, and of the other
// elementwise ops the CPU has (where, to, tril, triu). See cuda_common.h.
//
// Each line of elementwise.def becomes a functor (`<name>_line`) whose apply() is the line's
// expression on one element, with the same math:: functions the CPU runs (scalar_math.h, host and
// device); one grid-stride kernel template (elementwise_kernel) runs any functor over the output,
// reading each operand through its broadcast strides. Semantics are the CPU's
// (kernels_cpu.cpp, [SECTION] elementwise):
//   FLOATS   float32 and float64 (int64 inputs were converted by op_call: OPF_FLOAT_ONLY)
//   ALL      int64 too
//   COMPARE  the line runs in the inputs' dtype, its 1 or 0 is written in the output's dtype
//            (shape_compare: float32 for int64 inputs)
// s, lo and hi are attrs.scalar, attrs.lo and attrs.hi converted to the element type on the host
// as the CPU does (element_cast: float to int64 truncates and saturates).
#include "cuda_common.h"
#include "scalar_math.h"

namespace td {

namespace {

// ---------------------------------------------------------------------------------------------
// Broadcasting: up to three operands read at each output index.

constexpr int MAX_OPERANDS = 3;

// How each operand is read at row-major output index i: through its strides over the output's
// dims (0 along a broadcast dim), or at i itself when the operand has the output's shape
// (`same`, the common case: no division). Adjacent dims are merged where every operand allows it,
// so most layouts end with one or two dims.
struct BroadcastLayout {
    int ndim;
    int64_t dims[MAX_DIMS];
    int64_t strides[MAX_OPERANDS][MAX_DIMS];
    bool same[MAX_OPERANDS];
};

// The layout of `n` operands (shapes) read at each index of `full` (their NumPy broadcast).
BroadcastLayout broadcast_layout(const Shape& full, const Shape* const* operands, int n) {
    BroadcastLayout l{};
    int64_t strides[MAX_OPERANDS][MAX_DIMS] = {};
    for (int k = 0; k < n; ++k) {
        const Shape& s = *operands[k];
        l.same[k] = s == full;
        int64_t stride = 1;
        for (int i = full.ndim - 1; i >= 0; --i) {   // aligned from the right
            int j = i - (full.ndim - s.ndim);
            strides[k][i] = (j < 0 || s.dims[j] == 1) ? 0 : stride;
            if (j >= 0) stride *= s.dims[j];
        }
    }
    // Drop size-1 dims; merge dim i into the one kept after it when every operand steps through
    // the pair as through one dim (stride[i] == stride[next] * dims[next]).
    for (int i = full.ndim - 1; i >= 0; --i) {
        int64_t size = full.dims[i];
        if (size == 1) continue;
        if (l.ndim > 0) {
            int last = l.ndim - 1;
            bool merge = true;
            for (int k = 0; k < n; ++k) merge = merge && strides[k][i] == l.strides[k][last] * l.dims[last];
            if (merge) {
                l.dims[last] *= size;
                continue;
            }
        }
        l.dims[l.ndim] = size;
        for (int k = 0; k < n; ++k) l.strides[k][l.ndim] = strides[k][i];
        ++l.ndim;
    }
    // The dims were collected from the last; put them back in row-major order.
    for (int a = 0, b = l.ndim - 1; a < b; ++a, --b) {
        int64_t t = l.dims[a];
        l.dims[a] = l.dims[b];
        l.dims[b] = t;
        for (int k = 0; k < n; ++k) {
            t = l.strides[k][a];
            l.strides[k][a] = l.strides[k][b];
            l.strides[k][b] = t;
        }
    }
    return l;
}

// The element of operand k read at output index i.
__device__ __forceinline__ int64_t operand_index(const BroadcastLayout& l, int k, int64_t i) {
    if (l.same[k]) return i;
    int64_t at = 0;
    for (int d = l.ndim - 1; d >= 0; --d) {
        at += (i % l.dims[d]) * l.strides[k][d];
        i /= l.dims[d];
    }
    return at;
}

// ---------------------------------------------------------------------------------------------
// The lines: one functor each, apply(x, y, scalars) -> the line's value in T.

template <class T>
struct LineScalars {
    T s, lo, hi;
};

template <class T>
LineScalars<T> line_scalars(const OpAttrs& a) {
    return {element_cast<T>(a.scalar), element_cast<T>(a.lo), element_cast<T>(a.hi)};
}

#define LINE_FUNCTOR(name, expression)                                                         \
    struct name##_line {                                                                       \
        template <class T>                                                                     \
        __device__ static T apply(T x, [[maybe_unused]] T y, const LineScalars<T>& scalars) {  \
            [[maybe_unused]] T s = scalars.s, lo = scalars.lo, hi = scalars.hi;                \
            return static_cast<T>(expression);                                                 \
        }                                                                                      \
    };
#define ONE_INPUT(name, dtypes, expression) LINE_FUNCTOR(name, expression)
#define TWO_INPUTS(name, dtypes, expression) LINE_FUNCTOR(name, expression)
#define TWO_INPUTS_SPAN(name, dtypes, expression) LINE_FUNCTOR(name, expression)
#include "elementwise.def"
#undef ONE_INPUT
#undef TWO_INPUTS
#undef TWO_INPUTS_SPAN
#undef LINE_FUNCTOR

// out[i] = Line(x, y) for each output index i, x and y read through the layout (y only when
// Arity is 2), computed in T and written as Out (Out differs from T for comparisons only).
template <class Line, int Arity, class T, class Out>
__global__ void elementwise_kernel(Out* out, const T* x, const T* y, BroadcastLayout layout, LineScalars<T> scalars,
                                   int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        T a = x[operand_index(layout, 0, i)];
        T b = Arity == 2 ? y[operand_index(layout, 1, i)] : T(0);
        out[i] = static_cast<Out>(Line::apply(a, b, scalars));
    }
}

enum LineDTypes { DTYPES_FLOATS, DTYPES_ALL, DTYPES_COMPARE };

// Launches Line over the call: inputs in T, output in Out.
template <class Line, int Arity, class T, class Out>
void launch_line(const KernelCall& c, const char* what) {
    const Value& o = *c.outputs[0];
    const Shape* shapes[2] = {&c.inputs[0]->shape, Arity == 2 ? &c.inputs[1]->shape : &o.shape};
    BroadcastLayout layout = broadcast_layout(o.shape, shapes, Arity);
    const T* x = c.inputs[0]->data<T>();
    const T* y = Arity == 2 ? c.inputs[1]->data<T>() : x;
    int64_t n = o.numel();
    elementwise_kernel<Line, Arity, T, Out><<<cuda_blocks(n), CUDA_THREADS, 0, cuda_stream()>>>(
        o.data<Out>(), x, y, layout, line_scalars<T>(c.attrs), n);
    cuda_check_launch(what);
}

// A COMPARE line with inputs in T: its 1 or 0 in the output's dtype.
template <class Line, int Arity, class T>
void launch_compare(const KernelCall& c, const char* what) {
    switch (c.outputs[0]->dtype) {
        case DTYPE_F32: launch_line<Line, Arity, T, float>(c, what); break;
        case DTYPE_F64: launch_line<Line, Arity, T, double>(c, what); break;
        case DTYPE_I64: launch_line<Line, Arity, T, int64_t>(c, what); break;
    }
}

// A line's kernel in the dtypes it allows: FLOATS and ALL in the output's dtype (the inputs' too),
// COMPARE in the inputs' dtype.
template <class Line, int Arity, LineDTypes dtypes>
void run_line(const KernelCall& c, const char* name, const char* what) {
    const Value& o = *c.outputs[0];
    if constexpr (dtypes == DTYPES_COMPARE) {
        switch (c.inputs[0]->dtype) {
            case DTYPE_F32: launch_compare<Line, Arity, float>(c, what); break;
            case DTYPE_F64: launch_compare<Line, Arity, double>(c, what); break;
            case DTYPE_I64: launch_compare<Line, Arity, int64_t>(c, what); break;
        }
    } else {
        switch (o.dtype) {
            case DTYPE_F32: launch_line<Line, Arity, float, float>(c, what); break;
            case DTYPE_F64: launch_line<Line, Arity, double, double>(c, what); break;
            case DTYPE_I64:
                if constexpr (dtypes == DTYPES_ALL) launch_line<Line, Arity, int64_t, int64_t>(c, what);
                else engine_fail("%s: not defined for %s tensors", name, dtype_name(o.dtype));
                break;
        }
    }
}

// The kernels: cuda_<name> for each line.
#define ONE_INPUT(name, dtypes, expression) \
    void cuda_##name(const KernelCall& c) { run_line<name##_line, 1, DTYPES_##dtypes>(c, #name, #name " (cuda)"); }
#define TWO_INPUTS(name, dtypes, expression) \
    void cuda_##name(const KernelCall& c) { run_line<name##_line, 2, DTYPES_##dtypes>(c, #name, #name " (cuda)"); }
#define TWO_INPUTS_SPAN TWO_INPUTS
#include "elementwise.def"
#undef ONE_INPUT
#undef TWO_INPUTS
#undef TWO_INPUTS_SPAN

// ---------------------------------------------------------------------------------------------
// where(condition, a, b): condition in any dtype (non-zero: true), a and b in the output's.

template <class C, class T>
__global__ void where_kernel(T* out, const C* condition, const T* a, const T* b, BroadcastLayout layout, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        out[i] = condition[operand_index(layout, 0, i)] != C(0) ? a[operand_index(layout, 1, i)]
                                                                : b[operand_index(layout, 2, i)];
}

template <class C, class T>
void where_as(const KernelCall& c) {
    const Value& o = *c.outputs[0];
    const Shape* shapes[3] = {&c.inputs[0]->shape, &c.inputs[1]->shape, &c.inputs[2]->shape};
    BroadcastLayout layout = broadcast_layout(o.shape, shapes, 3);
    int64_t n = o.numel();
    where_kernel<C, T><<<cuda_blocks(n), CUDA_THREADS, 0, cuda_stream()>>>(
        o.data<T>(), c.inputs[0]->data<C>(), c.inputs[1]->data<T>(), c.inputs[2]->data<T>(), layout, n);
    cuda_check_launch("where (cuda)");
}

template <class T>
void where_with(const KernelCall& c) {
    switch (c.inputs[0]->dtype) {
        case DTYPE_F32: where_as<float, T>(c); break;
        case DTYPE_F64: where_as<double, T>(c); break;
        case DTYPE_I64: where_as<int64_t, T>(c); break;
    }
}

void cuda_where(const KernelCall& c) {
    switch (c.outputs[0]->dtype) {
        case DTYPE_F32: where_with<float>(c); break;
        case DTYPE_F64: where_with<double>(c); break;
        case DTYPE_I64: where_with<int64_t>(c); break;
    }
}

// ---------------------------------------------------------------------------------------------
// to: a dtype conversion, as element_cast (tensor.h) converts.

template <class Out, class In>
__global__ void to_kernel(Out* out, const In* x, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        out[i] = element_cast<Out>(x[i]);   // tensor.h's, host and device
}

template <class Out, class In>
void to_as(const KernelCall& c) {
    int64_t n = c.outputs[0]->numel();
    to_kernel<Out, In><<<cuda_blocks(n), CUDA_THREADS, 0, cuda_stream()>>>(c.outputs[0]->data<Out>(),
                                                                           c.inputs[0]->data<In>(), n);
    cuda_check_launch("to (cuda)");
}

template <class Out>
void to_from(const KernelCall& c) {
    switch (c.inputs[0]->dtype) {
        case DTYPE_F32: to_as<Out, float>(c); break;
        case DTYPE_F64: to_as<Out, double>(c); break;
        case DTYPE_I64: to_as<Out, int64_t>(c); break;
    }
}

void cuda_to(const KernelCall& c) {
    switch (c.outputs[0]->dtype) {
        case DTYPE_F32: to_from<float>(c); break;
        case DTYPE_F64: to_from<double>(c); break;
        case DTYPE_I64: to_from<int64_t>(c); break;
    }
}

// ---------------------------------------------------------------------------------------------
// tril, triu: each matrix (the last two dims) keeps the elements on the lower (upper) side of
// diagonal k = attrs.start, zeroes the rest.

template <class T>
__global__ void triangle_kernel(T* out, const T* x, int64_t rows, int64_t cols, int64_t k, bool lower, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        int64_t col = i % cols, row = (i / cols) % rows;
        bool keep = lower ? col - row <= k : col - row >= k;
        out[i] = keep ? x[i] : T(0);
    }
}

template <class T>
void triangle_as(const KernelCall& c, bool lower, const char* what) {
    const Value &x = *c.inputs[0], &o = *c.outputs[0];
    int64_t rows = x.shape.dims[x.shape.ndim - 2], cols = x.shape.dims[x.shape.ndim - 1], n = o.numel();
    triangle_kernel<T><<<cuda_blocks(n), CUDA_THREADS, 0, cuda_stream()>>>(o.data<T>(), x.data<T>(), rows, cols,
                                                                           c.attrs.start, lower, n);
    cuda_check_launch(what);
}

void triangle(const KernelCall& c, bool lower) {
    const char* what = lower ? "tril (cuda)" : "triu (cuda)";
    switch (c.outputs[0]->dtype) {
        case DTYPE_F32: triangle_as<float>(c, lower, what); break;
        case DTYPE_F64: triangle_as<double>(c, lower, what); break;
        case DTYPE_I64: triangle_as<int64_t>(c, lower, what); break;
    }
}

void cuda_tril(const KernelCall& c) { triangle(c, true); }
void cuda_triu(const KernelCall& c) { triangle(c, false); }

}  // namespace

void cuda_register_elementwise(KernelFn* table) {
#define ONE_INPUT(name, dtypes, expression) table[OP_##name] = cuda_##name;
#define TWO_INPUTS ONE_INPUT
#define TWO_INPUTS_SPAN ONE_INPUT
#include "elementwise.def"
#undef ONE_INPUT
#undef TWO_INPUTS
#undef TWO_INPUTS_SPAN
    table[OP_where] = cuda_where;
    table[OP_to] = cuda_to;
    table[OP_tril] = cuda_tril;
    table[OP_triu] = cuda_triu;
}

}  // namespace td
