// kernels_cpu.cpp: the CPU kernel of every op in ops.def (Eigen for the math).
//
// [SECTION] helpers        dtype dispatch, Eigen maps, the broadcast row walker, dim splits
// [SECTION] creation       tensor zeros ones full rand randn eye arange
// [SECTION] elementwise    elementwise.def made into functors, kernels, span functions (elementwise_math)
// [SECTION] products       mm bmm
// [SECTION] recurrent      lstm lstm_backward (a whole layer per call)
// [SECTION] convolution    conv2d and its two backward ops (im2col + GEMM), max_pool2d and its backward
// [SECTION] layout         transpose view expand sum_to cat narrow narrow_backward flip
// [SECTION] reductions     sum mean prod max min amax amin cumsum sort topk softmax log_softmax
// [SECTION] indexing       gather scatter_add scatter
// [SECTION] copies         to (clone is elementwise: x)
// [SECTION] losses         mse_loss cross_entropy nll_loss multi_margin_loss and their derivatives
// [SECTION] in place       add_ sub_ mul_ zero_ fill_ copy_
// [SECTION] scratch        what kernels allocate beyond their outputs (cpu_kernel_scratch_bytes)
//
// Kernels read call.inputs, write call.outputs (already allocated; aliased for views and in-place
// ops) and may raise engine_fail for data-dependent errors (an index out of range).
#include <Eigen/Dense>
#include <unsupported/Eigen/SpecialFunctions>   // Eigen::erf over arrays (gelu)
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <type_traits>

#include "blas.h"
#include "dtype_dispatch.h"
#include "elementwise.h"
#include "scalar_math.h"
#include "kernels_cpu.h"
#include "tape.h"

namespace td {

// ============================================================================================
// [SECTION] helpers

namespace {

template <class T>
using ArrayMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using ConstArrayMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

template <class T>
ArrayMap<T> array_of(const Value& v) { return ArrayMap<T>(v.data<T>(), v.numel()); }
template <class T>
ConstArrayMap<T> const_array_of(const Value& v) { return ConstArrayMap<T>(v.data<T>(), v.numel()); }

const Value& in(const KernelCall& c, int i) { return *c.inputs[i]; }
const Value& out(const KernelCall& c, int i = 0) { return *c.outputs[i]; }

// Walks the rows (the last dimension) of a `full` shape. For each of up to two operands whose
// shapes broadcast to `full`, it keeps the offset of the current row's first element and whether
// the operand moves along the row (step 1) or repeats one element (step 0).
struct RowWalker {
    int outer_ndim;                 // dims above the last
    int64_t dims[MAX_DIMS];
    int64_t row_len = 1, rows = 1;
    int64_t strides[2][MAX_DIMS] = {};
    int64_t offset[2] = {0, 0};
    int64_t step[2] = {0, 0};
    int64_t index[MAX_DIMS] = {};

    RowWalker(const Shape& full, const Shape& a, const Shape* b = nullptr) {
        outer_ndim = full.ndim > 0 ? full.ndim - 1 : 0;
        for (int i = 0; i < full.ndim; ++i) dims[i] = full.dims[i];
        if (full.ndim > 0) row_len = full.dims[full.ndim - 1];
        for (int i = 0; i < outer_ndim; ++i) rows *= full.dims[i];
        set_operand(0, full, a);
        if (b) set_operand(1, full, *b);
    }

    void set_operand(int k, const Shape& full, const Shape& s) {
        int64_t stride = 1;
        for (int i = full.ndim - 1; i >= 0; --i) {
            int j = i - (full.ndim - s.ndim);
            bool broadcast = j < 0 || (s.dims[j] == 1 && full.dims[i] != 1);
            int64_t st = broadcast ? 0 : stride;
            if (j >= 0) stride *= s.dims[j];
            if (i == full.ndim - 1) step[k] = st == 0 ? 0 : 1;
            else strides[k][i] = st;
        }
        if (full.ndim == 0) step[k] = 1;
    }

    void next() {
        for (int d = outer_ndim - 1; d >= 0; --d) {
            offset[0] += strides[0][d];
            offset[1] += strides[1][d];
            if (++index[d] < dims[d]) return;
            offset[0] -= strides[0][d] * dims[d];
            offset[1] -= strides[1][d] * dims[d];
            index[d] = 0;
        }
    }
};

// out = f(a, b) elementwise with broadcasting; f is inlined and the loops vectorise.
template <class T, class F>
void binary_loop(const Value& a, const Value& b, const Value& o, F f) {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = o.data<T>();
    int64_t n = o.numel();
    if (a.shape == o.shape && b.shape == o.shape) {
        for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], pb[i]);
        return;
    }
    if (b.numel() == 1 && a.shape == o.shape) {
        T s = pb[0];
        for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], s);
        return;
    }
    if (a.numel() == 1 && b.shape == o.shape) {
        T s = pa[0];
        for (int64_t i = 0; i < n; ++i) po[i] = f(s, pb[i]);
        return;
    }
    RowWalker w(o.shape, a.shape, &b.shape);
    int64_t len = w.row_len;
    for (int64_t r = 0; r < w.rows; ++r, w.next()) {
        T* orow = po + r * len;
        const T* ar = pa + w.offset[0];
        const T* br = pb + w.offset[1];
        if (w.step[0] && w.step[1]) {
            for (int64_t j = 0; j < len; ++j) orow[j] = f(ar[j], br[j]);
        } else if (w.step[0]) {
            T s = br[0];
            for (int64_t j = 0; j < len; ++j) orow[j] = f(ar[j], s);
        } else if (w.step[1]) {
            T s = ar[0];
            for (int64_t j = 0; j < len; ++j) orow[j] = f(s, br[j]);
        } else {
            T v = f(ar[0], br[0]);
            for (int64_t j = 0; j < len; ++j) orow[j] = v;
        }
    }
}

// x = f(x, y) in place, y broadcast into x's shape.
template <class T, class F>
void inplace_loop(const Value& x, const Value& y, F f) {
    T* px = x.data<T>();
    const T* py = y.data<T>();
    int64_t n = x.numel();
    if (y.shape == x.shape) {
        for (int64_t i = 0; i < n; ++i) px[i] = f(px[i], py[i]);
        return;
    }
    if (y.numel() == 1) {
        T s = py[0];
        for (int64_t i = 0; i < n; ++i) px[i] = f(px[i], s);
        return;
    }
    RowWalker w(x.shape, y.shape);
    int64_t len = w.row_len;
    for (int64_t r = 0; r < w.rows; ++r, w.next()) {
        T* xr = px + r * len;
        const T* yr = py + w.offset[0];
        if (w.step[0]) {
            for (int64_t j = 0; j < len; ++j) xr[j] = f(xr[j], yr[j]);
        } else {
            for (int64_t j = 0; j < len; ++j) xr[j] = f(xr[j], yr[0]);
        }
    }
}

// Walks the elements of a tensor of shape `walked` in order, keeping the offset of the element at
// the same coordinates in another tensor read through `strides` (a 0 stride repeats, a negative
// one walks backwards): for reductions into a kept shape, flips, and indexing along a dim.
struct OffsetWalker {
    int ndim;
    int64_t dims[MAX_DIMS] = {};
    int64_t strides[MAX_DIMS] = {};
    int64_t index[MAX_DIMS] = {};
    int64_t offset;

    OffsetWalker(const Shape& walked, const int64_t* other_strides, int64_t start = 0) : ndim(walked.ndim), offset(start) {
        for (int d = 0; d < ndim; ++d) {
            dims[d] = walked.dims[d];
            strides[d] = other_strides[d];
        }
    }

    void next() {
        for (int d = ndim - 1; d >= 0; --d) {
            offset += strides[d];
            if (++index[d] < dims[d]) return;
            offset -= strides[d] * dims[d];
            index[d] = 0;
        }
    }
};

// Row-major strides of `s` (elements).
void contiguous_strides(const Shape& s, int64_t* strides) {
    int64_t stride = 1;
    for (int d = s.ndim - 1; d >= 0; --d) {
        strides[d] = stride;
        stride *= s.dims[d];
    }
}

// Whether v replaces best in a running maximum: larger, or the first NaN (NaN propagates, as in
// PyTorch). Ties keep the first. Bitwise, not short-circuit: a loop over it has no data-dependent
// branch, and can vectorise.
template <class T>
bool is_new_max(T v, T best) {
    return (v > best) | ((v != v) & (best == best));
}

template <class T>
bool is_new_min(T v, T best) {
    return (v < best) | ((v != v) & (best == best));
}

// Uniform in [0, 1): 53 random bits for double, 24 for float (so it never rounds up to 1).
double uniform_double() { return static_cast<double>(engine_random_u64() >> 11) * 0x1.0p-53; }
float uniform_float() { return static_cast<float>(engine_random_u64() >> 40) * 0x1.0p-24f; }

}  // namespace

// ============================================================================================
// [SECTION] creation

void cpu_tensor(const KernelCall& c) {
    const Value& o = out(c);
    const double* values = c.attrs.init_values;
    int64_t n = o.numel();
    DISPATCH_ALL(o.dtype, for (int64_t i = 0; i < n; ++i) o.data<T>()[i] = element_cast<T>(values[i]));
}

void cpu_zeros(const KernelCall& c) { std::memset(out(c).raw(), 0, out(c).numel() * dtype_size(out(c).dtype)); }

void cpu_full(const KernelCall& c) {
    const Value& o = out(c);
    DISPATCH_ALL(o.dtype, array_of<T>(o).setConstant(element_cast<T>(c.attrs.scalar)));
}

void cpu_ones(const KernelCall& c) {
    const Value& o = out(c);
    DISPATCH_ALL(o.dtype, array_of<T>(o).setConstant(T(1)));
}

void cpu_rand(const KernelCall& c) {
    const Value& o = out(c);
    int64_t n = o.numel();
    if (o.dtype == DTYPE_F32) {
        for (int64_t i = 0; i < n; ++i) o.data<float>()[i] = uniform_float();
    } else if (o.dtype == DTYPE_F64) {
        for (int64_t i = 0; i < n; ++i) o.data<double>()[i] = uniform_double();
    } else {
        engine_fail("rand: needs a float dtype, got int64");
    }
}

// Box-Muller: each pair of uniforms gives two independent normals.
void cpu_randn(const KernelCall& c) {
    const Value& o = out(c);
    if (!dtype_is_float(o.dtype)) engine_fail("randn: needs a float dtype, got int64");
    int64_t n = o.numel();
    const double two_pi = 6.283185307179586;
    for (int64_t i = 0; i < n; i += 2) {
        double u1 = 1.0 - uniform_double();   // (0, 1]: log is finite
        double u2 = uniform_double();
        double r = std::sqrt(-2.0 * std::log(u1));
        value_set(o, i, r * std::cos(two_pi * u2));
        if (i + 1 < n) value_set(o, i + 1, r * std::sin(two_pi * u2));
    }
}

void cpu_eye(const KernelCall& c) {
    cpu_zeros(c);
    const Value& o = out(c);
    int64_t rows = o.shape.dims[0], cols = o.shape.ndim > 1 ? o.shape.dims[1] : 1;
    for (int64_t i = 0; i < rows && i < cols; ++i) value_set(o, i * cols + i, 1);
}

void cpu_arange(const KernelCall& c) {
    const Value& o = out(c);
    int64_t n = o.numel();
    DISPATCH_ALL(o.dtype, for (int64_t i = 0; i < n; ++i) o.data<T>()[i] = static_cast<T>(i));
}

// linspace as PyTorch's CPU kernel: the first half counts up from lo, the second down from hi (so
// both ends are exact); floats step in their own type, int64 in float64 (then truncated).
void cpu_linspace(const KernelCall& c) {
    const Value& o = out(c);
    int64_t steps = o.numel(), halfway = steps / 2;
    DISPATCH_ALL(o.dtype, {
        using Step = std::conditional_t<std::is_integral_v<T>, double, T>;
        T start = element_cast<T>(c.attrs.lo), end = element_cast<T>(c.attrs.hi);
        Step step = steps > 1 ? (static_cast<Step>(end) - static_cast<Step>(start)) / static_cast<Step>(steps - 1) : Step(0);
        T* p = o.data<T>();
        for (int64_t i = 0; i < steps; ++i)
            p[i] = steps == 1 ? start : i < halfway ? element_cast<T>(start + step * static_cast<Step>(i))
                               : element_cast<T>(end - step * static_cast<Step>(steps - i - 1));   // int64: saturates
    });
}

// A uniform whole number in [0, n), n > 0: 64 random bits, rejecting the top values that would
// favour small results.
static uint64_t uniform_below(uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t r;
    do r = engine_random_u64(); while (r >= limit);
    return r % n;
}

void cpu_randint(const KernelCall& c) {
    const Value& o = out(c);
    int64_t low = static_cast<int64_t>(c.attrs.lo);
    // the rule checked low < high, both within 2^62: the range fits, computed without signed overflow
    uint64_t range = static_cast<uint64_t>(static_cast<int64_t>(c.attrs.hi)) - static_cast<uint64_t>(low);
    for (int64_t i = 0; i < o.numel(); ++i) {
        int64_t v = static_cast<int64_t>(static_cast<uint64_t>(low) + uniform_below(range));
        if (o.dtype == DTYPE_I64) o.data<int64_t>()[i] = v;
        else value_set(o, i, static_cast<double>(v));
    }
}

// 1..n shuffled (Fisher-Yates).
void cpu_randperm(const KernelCall& c) {
    const Value& o = out(c);
    int64_t n = o.numel();
    std::vector<int64_t> p(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) p[i] = i + 1;
    for (int64_t i = n - 1; i > 0; --i) std::swap(p[i], p[uniform_below(static_cast<uint64_t>(i) + 1)]);
    for (int64_t i = 0; i < n; ++i) value_set(o, i, static_cast<double>(p[i]));
}

// ============================================================================================
// [SECTION] elementwise
//
// The math of each elementwise op is one line of elementwise.def. Each line becomes a functor
// (`<name>_math`): its scalar form evaluates one element (TWO_INPUTS lines run that way over
// broadcast rows); a ONE_INPUT line also has an array form, the same expression over a whole span
// as an Eigen array (math:: below), which vectorises exp, tanh and the rest. The kernels and the
// span functions freeze's fused loops run (elementwise_math) use the same forms, so a fused chain
// computes exactly what the ops compute one by one.

// math:: of scalar_math.h over Eigen arrays (`x` a span, conditions arrays of bool).
namespace math {

template <class D> auto exp(const Eigen::ArrayBase<D>& x) { return x.exp(); }
template <class D> auto log(const Eigen::ArrayBase<D>& x) { return x.log(); }
template <class D> auto sqrt(const Eigen::ArrayBase<D>& x) { return x.sqrt(); }
template <class D> auto tanh(const Eigen::ArrayBase<D>& x) { return x.tanh(); }
template <class D> auto sin(const Eigen::ArrayBase<D>& x) { return x.sin(); }
template <class D> auto cos(const Eigen::ArrayBase<D>& x) { return x.cos(); }
template <class D> auto log1p(const Eigen::ArrayBase<D>& x) { return x.log1p(); }
template <class D> auto expm1(const Eigen::ArrayBase<D>& x) { return x.expm1(); }
template <class D> auto sigmoid(const Eigen::ArrayBase<D>& x) { return x.logistic(); }
template <class D> auto abs(const Eigen::ArrayBase<D>& x) { return x.abs(); }

// Element by element through the scalar form (the compiler vectorises the simple ones).
template <class D, class F> auto each(const Eigen::ArrayBase<D>& x, F f) { return x.unaryExpr(f); }
template <class D> auto sign(const Eigen::ArrayBase<D>& x) { return each(x, [](auto v) { return sign(v); }); }
template <class D> auto trunc(const Eigen::ArrayBase<D>& x) { return each(x, [](auto v) { return trunc(v); }); }
template <class D, class T> auto power(const Eigen::ArrayBase<D>& x, T p) { return each(x, [p](auto v) { return power(v, p); }); }
template <class D, class T> auto clamp(const Eigen::ArrayBase<D>& x, T lo, T hi) {
    return each(x, [lo, hi](auto v) { return clamp(v, lo, hi); });
}
// Vectorised rounding for floats; an int64 span is whole already.
template <class D> auto floor(const Eigen::ArrayBase<D>& x) {
    if constexpr (std::is_integral_v<typename D::Scalar>) return x.derived(); else return x.floor();
}
template <class D> auto ceil(const Eigen::ArrayBase<D>& x) {
    if constexpr (std::is_integral_v<typename D::Scalar>) return x.derived(); else return x.ceil();
}
template <class D> auto rint(const Eigen::ArrayBase<D>& x) {
    if constexpr (std::is_integral_v<typename D::Scalar>) return x.derived(); else return x.rint();
}
template <class D> auto isnan(const Eigen::ArrayBase<D>& x) { return each(x, [](auto v) { return isnan(v); }); }
template <class D> auto isinf(const Eigen::ArrayBase<D>& x) { return each(x, [](auto v) { return isinf(v); }); }
template <class D> auto isfinite(const Eigen::ArrayBase<D>& x) { return each(x, [](auto v) { return isfinite(v); }); }
// gelu's formulas over a whole span (scalar_math.h): vectorised, where a loop over elements calls
// libm's erf and exp one at a time (a third of a small GPT's training step).
template <class D, class T> auto gelu(const Eigen::ArrayBase<D>& x, T approximate) {
    return gelu_formula<Eigen::Array<T, Eigen::Dynamic, 1>>(x, approximate);
}
template <class D, class T> auto gelu_derivative(const Eigen::ArrayBase<D>& x, T approximate) {
    return gelu_derivative_formula<Eigen::Array<T, Eigen::Dynamic, 1>>(x, approximate);
}
template <class D, class T> auto softplus(const Eigen::ArrayBase<D>& x, T beta, T threshold) {
    return each(x, [beta, threshold](auto v) { return softplus(v, beta, threshold); });
}
template <class C, class D, class E>
auto where(const Eigen::ArrayBase<C>& condition, const Eigen::ArrayBase<D>& a, const Eigen::ArrayBase<E>& b) {
    return condition.select(a, b);
}
template <class C, Scalar T, class D> auto where(const Eigen::ArrayBase<C>& condition, T a, const Eigen::ArrayBase<D>& b) {
    return condition.select(D::Constant(b.size(), a), b);
}
template <class C, class D, Scalar T> auto where(const Eigen::ArrayBase<C>& condition, const Eigen::ArrayBase<D>& a, T b) {
    return condition.select(a, D::Constant(a.size(), b));
}

}  // namespace math

namespace {

// The attributes an elementwise line reads, as the element type.
template <class T>
struct Scalars {
    T s, lo, hi;
    explicit Scalars(const OpAttrs& a)
        : s(element_cast<T>(a.scalar)), lo(element_cast<T>(a.lo)), hi(element_cast<T>(a.hi)) {}
};

// A span is evaluated SPAN_CHUNK elements at a time: a line whose math:: makes arrays of its own
// (gelu's formulas) keeps them small and in cache (whole-span ones of 256 KiB were mapped and
// unmapped by malloc each call, a page fault per 4 KiB).
constexpr int64_t SPAN_CHUNK = 2048;

// f(at, m) for each chunk [at, at + m) of n elements.
template <class F>
void for_each_chunk(int64_t n, F f) {
    for (int64_t at = 0; at < n; at += SPAN_CHUNK) f(at, std::min(SPAN_CHUNK, n - at));
}

#define LINE_NAMES                                                          \
    [[maybe_unused]] T s = scalars.s, lo = scalars.lo, hi = scalars.hi;
#define TWO_INPUTS(name, dtypes, expression)                                                     \
    struct name##_math {                                                                           \
        static constexpr bool has_span = false;                                                    \
        template <class T>                                                                         \
        static T scalar(T x, T y, const Scalars<T>& scalars) {                                     \
            LINE_NAMES                                                                             \
            return static_cast<T>(expression);                                                     \
        }                                                                                          \
    };
#define TWO_INPUTS_SPAN(name, dtypes, expression)                                                \
    struct name##_math {                                                                           \
        static constexpr bool has_span = true;                                                     \
        template <class T>                                                                         \
        static T scalar(T x, T y, const Scalars<T>& scalars) {                                     \
            LINE_NAMES                                                                             \
            return static_cast<T>(expression);                                                     \
        }                                                                                          \
        template <class T>                                                                         \
        static void span(const T* in_x, const T* in_y, T* out, int64_t n, const Scalars<T>& scalars) { \
            LINE_NAMES                                                                             \
            for_each_chunk(n, [&](int64_t at, int64_t m) {                                         \
                ConstArrayMap<T> x(in_x + at, m), y(in_y + at, m);                                 \
                ArrayMap<T>(out + at, m) = expression;                                             \
            });                                                                                    \
        }                                                                                          \
    };
#define ONE_INPUT(name, dtypes, expression)                                                      \
    struct name##_math {                                                                           \
        template <class T>                                                                         \
        static T scalar(T x, T, const Scalars<T>& scalars) {                                       \
            LINE_NAMES                                                                             \
            return static_cast<T>(expression);                                                     \
        }                                                                                          \
        template <class T>                                                                         \
        static void span(const T* in, T* out, int64_t n, const Scalars<T>& scalars) {              \
            LINE_NAMES                                                                             \
            for_each_chunk(n, [&](int64_t at, int64_t m) {                                         \
                ConstArrayMap<T> x(in + at, m);                                                    \
                ArrayMap<T>(out + at, m) = expression;                                             \
            });                                                                                    \
        }                                                                                          \
    };
#include "elementwise.def"
#undef ONE_INPUT
#undef TWO_INPUTS
#undef TWO_INPUTS_SPAN
#undef LINE_NAMES

// The span functions: out[i] = f(in[0][i]) or f(in[0][i], in[1][i]) over n contiguous elements.
template <class Math, class T>
void span_one_input(const T* const* in, T* out, int64_t n, const OpAttrs& attrs) {
    Math::span(in[0], out, n, Scalars<T>(attrs));
}

template <class Math, class T>
void span_two_inputs(const T* const* in, T* out, int64_t n, const OpAttrs& attrs) {
    Scalars<T> scalars(attrs);
    const T* x = in[0];
    const T* y = in[1];
    if constexpr (Math::has_span) Math::span(x, y, out, n, scalars);
    else for (int64_t i = 0; i < n; ++i) out[i] = Math::scalar(x[i], y[i], scalars);
}

// The whole op in element type T into `o` (two inputs broadcast).
template <class Math, class T>
void one_input_loop(const KernelCall& c, const Value& o) {
    Math::span(in(c, 0).data<T>(), o.data<T>(), o.numel(), Scalars<T>(c.attrs));
}

template <class Math, class T>
void two_inputs_loop(const KernelCall& c, const Value& o) {
    Scalars<T> scalars(c.attrs);
    const Value &x = in(c, 0), &y = in(c, 1);
    if constexpr (Math::has_span) {
        if (x.shape == o.shape && y.shape == o.shape) {   // as the fused loops run it
            Math::span(x.data<T>(), y.data<T>(), o.data<T>(), o.numel(), scalars);
            return;
        }
    }
    binary_loop<T>(x, y, o, [scalars](T a, T b) { return Math::scalar(a, b, scalars); });
}

enum ElementwiseDTypes { DTYPES_FLOATS, DTYPES_ALL, DTYPES_COMPARE };

// Runs a line's loop in the output's dtype; a comparison of int64 tensors (with a float result)
// runs as int64, then converts.
template <ElementwiseDTypes dtypes, class Loop>
void elementwise_kernel(const KernelCall& c, const char* name, Loop loop) {
    const Value& o = out(c);
    if constexpr (dtypes == DTYPES_FLOATS) {
        DISPATCH_FLOAT(name, o.dtype, loop(T(), o));
    } else {
        if (dtypes == DTYPES_ALL || in(c, 0).dtype == o.dtype) {
            DISPATCH_ALL(o.dtype, loop(T(), o));
            return;
        }
        Value as_int = value_new(o.shape, DTYPE_I64);
        loop(int64_t(), as_int);
        for (int64_t i = 0; i < as_int.numel(); ++i) value_set(o, i, static_cast<double>(as_int.data<int64_t>()[i]));
    }
}

}  // namespace

// The kernels: the loop of each line, in the dtypes the line allows.
#define ONE_INPUT(name, dtypes, expression)                                                                  \
    void cpu_##name(const KernelCall& c) {                                                                   \
        elementwise_kernel<DTYPES_##dtypes>(c, #name, [&c](auto t, const Value& o) {                         \
            one_input_loop<name##_math, decltype(t)>(c, o);                                                  \
        });                                                                                                  \
    }
#define TWO_INPUTS(name, dtypes, expression)                                                                 \
    void cpu_##name(const KernelCall& c) {                                                                   \
        elementwise_kernel<DTYPES_##dtypes>(c, #name, [&c](auto t, const Value& o) {                         \
            two_inputs_loop<name##_math, decltype(t)>(c, o);                                                 \
        });                                                                                                  \
    }
#define TWO_INPUTS_SPAN TWO_INPUTS
#include "elementwise.def"
#undef ONE_INPUT
#undef TWO_INPUTS
#undef TWO_INPUTS_SPAN

const ElementwiseMath* elementwise_math(OpId op) {
    static const std::vector<ElementwiseMath> table = [] {
        std::vector<ElementwiseMath> t(OP_COUNT, ElementwiseMath{0, nullptr, nullptr, nullptr});
#define ONE_INPUT(name, dtypes, expression)                                                             \
    t[OP_##name] = {1, span_one_input<name##_math, float>, span_one_input<name##_math, double>,              \
                    [](double x, double y, const OpAttrs& a) { return name##_math::scalar(x, y, Scalars<double>(a)); }};
#define TWO_INPUTS(name, dtypes, expression)                                                            \
    t[OP_##name] = {2, span_two_inputs<name##_math, float>, span_two_inputs<name##_math, double>,            \
                    [](double x, double y, const OpAttrs& a) { return name##_math::scalar(x, y, Scalars<double>(a)); }};
#define TWO_INPUTS_SPAN TWO_INPUTS
#include "elementwise.def"
#undef ONE_INPUT
#undef TWO_INPUTS
#undef TWO_INPUTS_SPAN
        return t;
    }();
    return table[op].arity ? &table[op] : nullptr;
}

namespace {

// The strides with which an operand of shape `s` is read at each index of `full` (0 along the
// dims it is broadcast over), aligned from the right.
void broadcast_strides(const Shape& full, const Shape& s, int64_t* strides) {
    int64_t stride = 1;
    for (int i = full.ndim - 1; i >= 0; --i) {
        int j = i - (full.ndim - s.ndim);
        strides[i] = (j < 0 || s.dims[j] == 1) ? 0 : stride;
        if (j >= 0) stride *= s.dims[j];
    }
}

template <class C, class T>
void where_loop(const Value& condition, const Value& a, const Value& b, const Value& o) {
    const C* pc = condition.data<C>();
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = o.data<T>();
    int64_t n = o.numel();
    if (condition.shape == o.shape && a.shape == o.shape && b.shape == o.shape) {
        for (int64_t k = 0; k < n; ++k) po[k] = pc[k] != C(0) ? pa[k] : pb[k];
        return;
    }
    const Shape& full = o.shape;
    int64_t sc[MAX_DIMS], sa[MAX_DIMS], sb[MAX_DIMS], index[MAX_DIMS] = {};
    broadcast_strides(full, condition.shape, sc);
    broadcast_strides(full, a.shape, sa);
    broadcast_strides(full, b.shape, sb);
    int64_t oc = 0, oa = 0, ob = 0;
    for (int64_t k = 0; k < n; ++k) {
        po[k] = pc[oc] != C(0) ? pa[oa] : pb[ob];
        for (int d = full.ndim - 1; d >= 0; --d) {   // the next index, last dim fastest
            oc += sc[d];
            oa += sa[d];
            ob += sb[d];
            if (++index[d] < full.dims[d]) break;
            oc -= sc[d] * full.dims[d];
            oa -= sa[d] * full.dims[d];
            ob -= sb[d] * full.dims[d];
            index[d] = 0;
        }
    }
}

// Keeps the elements on the lower (upper) side of diagonal k of each matrix, zeroes the rest.
void triangle_kernel(const KernelCall& c, bool lower) {
    const Value &x = in(c, 0), &o = out(c);
    int64_t rows = x.shape.dims[x.shape.ndim - 2], cols = x.shape.dims[x.shape.ndim - 1];
    int64_t matrices = x.numel() / (rows * cols), k = c.attrs.start;
    DISPATCH_ALL(o.dtype, {
        const T* px = x.data<T>();
        T* po = o.data<T>();
        for (int64_t m = 0; m < matrices; ++m)
            for (int64_t i = 0; i < rows; ++i)
                for (int64_t j = 0; j < cols; ++j) {
                    int64_t at = (m * rows + i) * cols + j;
                    bool keep = lower ? j - i <= k : j - i >= k;
                    po[at] = keep ? px[at] : T(0);
                }
    });
}

}  // namespace

void cpu_where(const KernelCall& c) {
    const Value &condition = in(c, 0), &o = out(c);
    DISPATCH_ALL(o.dtype, {
        using Out = T;
        switch (condition.dtype) {
            case DTYPE_F32: where_loop<float, Out>(condition, in(c, 1), in(c, 2), o); break;
            case DTYPE_F64: where_loop<double, Out>(condition, in(c, 1), in(c, 2), o); break;
            case DTYPE_I64: where_loop<int64_t, Out>(condition, in(c, 1), in(c, 2), o); break;
        }
    });
}

void cpu_tril(const KernelCall& c) { triangle_kernel(c, true); }
void cpu_triu(const KernelCall& c) { triangle_kernel(c, false); }

// Each row of probabilities (any non-negative weights, not all zero) gives `length` 1-based
// categories: with replacement each is drawn from the whole row (a search in the running sums);
// without, a drawn category's weight becomes zero.
void cpu_multinomial(const KernelCall& c) {
    const Value &p = in(c, 0), &o = out(c);
    int64_t k = p.shape.dims[p.shape.ndim - 1], rows = p.numel() / k, n = c.attrs.length;
    std::vector<double> weights(static_cast<size_t>(k)), sums(static_cast<size_t>(k));
    for (int64_t r = 0; r < rows; ++r) {
        int64_t positive = 0;
        for (int64_t j = 0; j < k; ++j) {
            double w = value_get(p, r * k + j);
            if (!(w >= 0) || std::isinf(w))
                engine_fail("multinomial: probabilities must be finite and not negative, got %g in row %lld", w,
                            static_cast<long long>(r + 1));
            weights[j] = w;
            positive += w > 0;
        }
        if (positive == 0) engine_fail("multinomial: row %lld has no category with a positive probability", static_cast<long long>(r + 1));
        if (!c.attrs.all && positive < n)
            engine_fail("multinomial: row %lld has %lld categories with a positive probability, fewer than the %lld "
                        "samples to draw without replacement",
                        static_cast<long long>(r + 1), static_cast<long long>(positive), static_cast<long long>(n));
        int64_t* out_row = o.data<int64_t>() + r * n;
        for (int64_t s = 0; s < n; ++s) {
            double total = 0;
            for (int64_t j = 0; j < k; ++j) sums[j] = total += weights[j];
            double u = uniform_double() * total;
            int64_t pick = std::upper_bound(sums.begin(), sums.end(), u) - sums.begin();
            while (pick >= k || weights[pick] == 0) --pick;   // u rounded up to the total: the last positive one
            out_row[s] = pick + 1;
            if (!c.attrs.all) weights[pick] = 0;
        }
    }
}

// ============================================================================================
// [SECTION] products

namespace {

// c[j] += s * row[j], each product rounded before it is added, as when the product is made apart
// and then added (what eager does, and what a plan that adds an mm into a sum must match): a
// fused multiply-add, which the compiler would otherwise make of it, rounds once. (A buffer of
// products between two loops rounds too, and made W3's frozen step 20% slower.)
#if defined(__GNUC__) && !defined(__clang__)
#define TD_NO_FP_CONTRACT __attribute__((optimize("fp-contract=off")))
#else
#define TD_NO_FP_CONTRACT
#endif
template <class T>
TD_NO_FP_CONTRACT void add_products(T* c, T s, const T* row, int64_t n) {
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
    for (int64_t j = 0; j < n; ++j) c[j] += s * row[j];
}

// A float or double product through the BLAS when blas_gemm takes it (engine/blas.h: not a
// matrix-vector product, with OpenBLAS's AVX-512 kernels loaded); false, having done nothing, for
// int64 and for the products that stay in Eigen. Row-major operands with their row strides.
template <class T>
bool blas_product(T* c, int64_t ldc, const T* a, int64_t lda, const T* b, int64_t ldb, int64_t m, int64_t n,
                  int64_t k, bool ta, bool tb, bool accumulate) {
    if constexpr (std::is_floating_point_v<T>) return blas_gemm(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
    return false;
}

// C = op(A) op(B) (or C += ..., `accumulate`) for row-major A (a_rows x a_cols) and B: through
// the BLAS when blas_product takes it; otherwise Eigen picks GEMV or GEMM at run time (measured
// here, that beats its coefficient-based lazyProduct even for 20x20 by 20x1).
template <class T>
void matmul_into(T* c, const T* a, const T* b, int64_t a_rows, int64_t a_cols, int64_t b_rows, int64_t b_cols,
                 bool ta, bool tb, bool accumulate) {
    using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    Eigen::Map<const Matrix> A(a, a_rows, a_cols), B(b, b_rows, b_cols);
    int64_t m = ta ? a_cols : a_rows, k = ta ? a_rows : a_cols, n = tb ? b_rows : b_cols;
    Eigen::Map<Matrix> C(c, m, n);
    if (k > 1 && blas_product(c, n, a, a_cols, b, b_cols, m, n, k, ta, tb, accumulate)) return;
    if (k == 0) {
        if (!accumulate) C.setZero();
    } else if (k == 1) {   // an outer product (RNN weight gradients): GEMM's packing costs more than it
        const T* col = a;   // op(A) is m x 1: A's elements in order either way
        const T* row = b;   // op(B) is 1 x n: B's elements in order either way
        for (int64_t i = 0; i < m; ++i) {
            T* c_row = c + i * n;
            T s = col[i];
            if (accumulate) add_products(c_row, s, row, n);
            else for (int64_t j = 0; j < n; ++j) c_row[j] = s * row[j];
        }
    } else if (accumulate) {
        if (!ta && !tb) C.noalias() += A * B;
        else if (ta && !tb) C.noalias() += A.transpose() * B;
        else if (!ta && tb) C.noalias() += A * B.transpose();
        else C.noalias() += A.transpose() * B.transpose();
    } else {
        if (!ta && !tb) C.noalias() = A * B;
        else if (ta && !tb) C.noalias() = A.transpose() * B;
        else if (!ta && tb) C.noalias() = A * B.transpose();
        else C.noalias() = A.transpose() * B.transpose();
    }
}

}  // namespace

// A matrix operand as matmul_into reads it: row-major `rows` x `cols` elements at `data`, read
// transposed when `trans`. A transposed view (x:t() of a contiguous x) is read in place, as its
// contiguous original transposed once more; another strided layout is read from a copy.
template <class T>
struct MatrixOperand {
    const T* data;
    int64_t rows, cols;
    bool trans;
    std::optional<Value> copy;   // made only for a layout matmul_into cannot read in place

    // The matrix at `batch` dims in front: v's last two dims, each batch `batch_stride` apart.
    MatrixOperand(const Value& v, bool transposed, int64_t* batch_stride) {
        int nd = v.shape.ndim;
        int64_t r = v.shape.dims[nd - 2], c = v.shape.dims[nd - 1];
        *batch_stride = r * c;
        if (!v.strided()) {   // the usual case
            data = v.data<T>(), rows = r, cols = c, trans = transposed;
            return;
        }
        bool batch_dense = nd == 2 || v.shape.dims[0] == 1 || v.stride(0) == r * c;
        bool row_major = (r == 1 || v.stride(nd - 2) == c) && (c == 1 || v.stride(nd - 1) == 1);
        bool col_major = (r == 1 || v.stride(nd - 2) == 1) && (c == 1 || v.stride(nd - 1) == r);
        const Value* source = &v;
        if (!batch_dense || (!row_major && !col_major)) {
            copy.emplace(value_new(v.shape, v.dtype, v.device()));
            value_copy_elements(*copy, v);
            source = &*copy;
            row_major = true;
        }
        data = source->data<T>();
        if (row_major) {
            rows = r, cols = c, trans = transposed;
        } else {
            rows = c, cols = r, trans = !transposed;
        }
    }
};

void cpu_mm(const KernelCall& c) {
    const Value &a = in(c, 0), &b = in(c, 1);
    if (!a.strided() && !b.strided()) {   // the usual case, straight to the product (an RNN runs thousands)
        DISPATCH_ALL(out(c).dtype, matmul_into<T>(out(c).data<T>(), a.data<T>(), b.data<T>(), a.shape[0], a.shape[1],
                                                  b.shape[0], b.shape[1], c.attrs.trans_a, c.attrs.trans_b,
                                                  c.attrs.accumulate));
        return;
    }
    DISPATCH_ALL(out(c).dtype, {   // int64 too: int64 mm stays int64, as PyTorch
        int64_t unused;
        MatrixOperand<T> a(in(c, 0), c.attrs.trans_a, &unused), b(in(c, 1), c.attrs.trans_b, &unused);
        matmul_into<T>(out(c).data<T>(), a.data, b.data, a.rows, a.cols, b.rows, b.cols, a.trans, b.trans,
                       c.attrs.accumulate);
    });
}

void cpu_bmm(const KernelCall& c) {
    const Value& o = out(c);
    int64_t batch = o.shape[0], o_size = o.shape[1] * o.shape[2];
    DISPATCH_ALL(o.dtype, {
        int64_t a_size, b_size;
        MatrixOperand<T> a(in(c, 0), c.attrs.trans_a, &a_size), b(in(c, 1), c.attrs.trans_b, &b_size);
        for (int64_t i = 0; i < batch; ++i)
            matmul_into<T>(o.data<T>() + i * o_size, a.data + i * a_size, b.data + i * b_size, a.rows, a.cols, b.rows,
                           b.cols, a.trans, b.trans, c.attrs.accumulate);
    });
}

// ============================================================================================
// [SECTION] recurrent
//
// lstm and lstm_backward (ops.def): the whole layer in one call. Each step's product runs as mm
// does (matmul_into: the BLAS or Eigen); the gate arithmetic is scalar_math's sigmoid and tanh, the
// same functions the per-step ops use.

namespace {

template <class T>
void lstm_forward(const Value& xw, const Value& h0, const Value& c0, const Value& w_hh, const Value& h_out, const Value& state) {
    const int64_t steps = xw.shape[0], batch = xw.shape[1], H = xw.shape[2] / 4;
    const int64_t G = 4 * H, S = 5 * H;   // a row of gates, a row of the state
    const Scalars<T> none{OpAttrs()};
    std::vector<T> gates(static_cast<size_t>(batch * G)), tanh_c(static_cast<size_t>(H));
    std::vector<T> w_t(static_cast<size_t>(H * G));   // W_hhᵀ [H,4H] once: a product per step reads it faster so
    using Rows = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    Eigen::Map<Rows>(w_t.data(), H, G) = Eigen::Map<const Rows>(w_hh.data<T>(), G, H).transpose();
    const T* h_prev = h0.data<T>();
    const T* c_prev = c0.data<T>();
    int64_t c_prev_stride = H;   // c0's rows are H apart; the state's c, S apart
    for (int64_t t = 0; t < steps; ++t) {
        std::copy_n(xw.data<T>() + t * batch * G, batch * G, gates.data());
        matmul_into<T>(gates.data(), h_prev, w_t.data(), batch, H, H, G, false, false, true);   // += h W_hhᵀ
        T* h_t = h_out.data<T>() + t * batch * H;
        T* state_t = state.data<T>() + t * batch * S;
        for (int64_t b = 0; b < batch; ++b) {
            const T* pre = gates.data() + b * G;
            T* st = state_t + b * S;   // i f g o c
            sigmoid_math::span<T>(pre, st, 2 * H, none);
            tanh_math::span<T>(pre + 2 * H, st + 2 * H, H, none);
            sigmoid_math::span<T>(pre + 3 * H, st + 3 * H, H, none);
            const T *i = st, *f = st + H, *g = st + 2 * H, *o = st + 3 * H, *cp = c_prev + b * c_prev_stride;
            T* c = st + 4 * H;
            for (int64_t j = 0; j < H; ++j) c[j] = f[j] * cp[j] + i[j] * g[j];
            tanh_math::span<T>(c, tanh_c.data(), H, none);
            T* h = h_t + b * H;
            for (int64_t j = 0; j < H; ++j) h[j] = o[j] * tanh_c[j];
        }
        h_prev = h_t;
        c_prev = state_t + 4 * H;
        c_prev_stride = S;
    }
}

// One batch row of one step back: the gates' gradient `row` [4H] and the cell's dc (read: what
// step t+1 sent back; written: what goes on to c[t-1]), from the state row st (i f g o c), tanh(c),
// the gradients that reached h[t] (gh, dh_next) and the state (gs). Separate pointers, so the
// loop is vectorised.
template <class T>
void lstm_step_back(int64_t H, const T* __restrict st, const T* __restrict c_prev, const T* __restrict tc,
                    const T* __restrict gh, const T* __restrict gs, const T* __restrict dh_next, T* __restrict dc,
                    T* __restrict row) {
    const T *i = st, *f = st + H, *g = st + 2 * H, *o = st + 3 * H;
    for (int64_t j = 0; j < H; ++j) {
        T dh = dh_next[j] + gh[j];
        T dc_j = dc[j] + gs[4 * H + j] + dh * o[j] * (T(1) - tc[j] * tc[j]);
        T di = dc_j * g[j] + gs[j], df = dc_j * c_prev[j] + gs[H + j];
        T dg = dc_j * i[j] + gs[2 * H + j], d_o = dh * tc[j] + gs[3 * H + j];
        row[j] = di * i[j] * (T(1) - i[j]);
        row[H + j] = df * f[j] * (T(1) - f[j]);
        row[2 * H + j] = dg * (T(1) - g[j] * g[j]);
        row[3 * H + j] = d_o * o[j] * (T(1) - o[j]);
        dc[j] = dc_j * f[j];
    }
}

// grad_h and grad_state may be 0-d: no gradient reached that output (a row of zeros stands in).
template <class T>
void lstm_backward(const Value& grad_h, const Value& grad_state, const Value& state, const Value& c0, const Value& w_hh,
                   const Value& d_gates, const Value& d_c0) {
    const int64_t steps = state.shape[0], batch = state.shape[1], H = state.shape[2] / 5;
    const int64_t G = 4 * H, S = 5 * H;
    const Scalars<T> none{OpAttrs()};
    const std::vector<T> zeros(static_cast<size_t>(S), T(0));
    std::vector<T> dh_next(static_cast<size_t>(batch * H), T(0));   // what step t+1 sends back to h[t]
    std::vector<T> tc(static_cast<size_t>(H));
    T* dc_next = d_c0.data<T>();                                     // ... to c[t]; c0's at the end
    std::fill_n(dc_next, batch * H, T(0));
    for (int64_t t = steps - 1; t >= 0; --t) {
        const T* state_t = state.data<T>() + t * batch * S;
        T* dg_t = d_gates.data<T>() + t * batch * G;
        for (int64_t b = 0; b < batch; ++b) {
            const T* st = state_t + b * S;
            const T* c_prev = t > 0 ? state_t - batch * S + b * S + 4 * H : c0.data<T>() + b * H;
            const T* gh = grad_h.shape.ndim == 0 ? zeros.data() : grad_h.data<T>() + (t * batch + b) * H;
            const T* gs = grad_state.shape.ndim == 0 ? zeros.data() : grad_state.data<T>() + (t * batch + b) * S;
            tanh_math::span<T>(st + 4 * H, tc.data(), H, none);
            lstm_step_back<T>(H, st, c_prev, tc.data(), gh, gs, dh_next.data() + b * H, dc_next + b * H, dg_t + b * G);
        }
        if (t > 0) matmul_into<T>(dh_next.data(), dg_t, w_hh.data<T>(), batch, G, G, H, false, false, false);   // dgates W_hh
    }
}

}  // namespace

void cpu_lstm(const KernelCall& c) {
    DISPATCH_FLOAT("lstm", out(c).dtype, lstm_forward<T>(in(c, 0), in(c, 1), in(c, 2), in(c, 3), out(c, 0), out(c, 1)));
}

void cpu_lstm_backward(const KernelCall& c) {
    DISPATCH_FLOAT("lstm_backward", out(c).dtype,
                   lstm_backward<T>(in(c, 0), in(c, 1), in(c, 2), in(c, 3), in(c, 4), out(c, 0), out(c, 1)));
}

// ============================================================================================
// [SECTION] convolution
//
// conv2d runs as im2col + GEMM, one sample at a time: the patch under every output position
// becomes one column of a [C*kH*kW, Ho*Wo] matrix, so the sample's output [O, Ho*Wo] is the
// weight [O, C*kH*kW] times it. The backward ops are the same products transposed; the input's
// gradient goes back through col2im, which adds each column into the patch it came from.

namespace {

template <class T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using MatrixMap = Eigen::Map<RowMatrix<T>>;

// The sizes of one conv2d: input [N,C,H,W], weight [O,C/groups,kH,kW], output [N,O,Ho,Wo] (an
// unbatched [C,H,W] is N = 1), and its window along H and W.
struct ConvGeometry {
    int64_t n, c, h, w;
    int64_t o, kh, kw;
    int64_t oh, ow;
    int64_t stride_h, stride_w, padding_h, padding_w, dilation_h, dilation_w;
    int64_t groups;

    int64_t patch() const { return c * kh * kw; }               // rows of the column matrix
    int64_t group_patch() const { return c / groups * kh * kw; }   // a group's rows (the weight's columns)
    int64_t group_outputs() const { return o / groups; }
    int64_t positions() const { return oh * ow; }               // its columns
    int64_t image_size() const { return c * h * w; }            // one sample of the input
    // A 1x1 kernel at stride 1 without padding reads each pixel once: the image [C, H*W] is
    // already its own column matrix.
    bool image_is_columns() const {
        return kh == 1 && kw == 1 && stride_h == 1 && stride_w == 1 && padding_h == 0 && padding_w == 0;
    }
};

// The geometry of a window op from its image (input) shape, kernel sizes, output shape and attrs.
ConvGeometry window_geometry(const Shape& image, int64_t o, int64_t kh, int64_t kw, const Shape& output,
                             const OpAttrs& a) {
    int nd = image.ndim;   // 4, or 3 for one image
    return {nd == 4 ? image[0] : 1, image[nd - 3], image[nd - 2], image[nd - 1], o, kh, kw,
            output[output.ndim - 2], output[output.ndim - 1], a.stride_h, a.stride_w, a.padding_h, a.padding_w,
            a.dilation_h, a.dilation_w, a.groups};
}

ConvGeometry conv_geometry(const Shape& input, const Shape& weight, const Shape& output, const OpAttrs& a) {
    return window_geometry(input, weight[0], weight[2], weight[3], output, a);
}

// The output positions [begin, end) along one axis whose input coordinate
// position * stride - padding + offset lies inside [0, in_size).
struct Span {
    int64_t begin, end;
};

Span span_inside(int64_t offset, int64_t in_size, int64_t out_size, int64_t stride, int64_t padding) {
    int64_t first = offset - padding;   // input coordinate of output position 0
    int64_t begin = first >= 0 ? 0 : (-first + stride - 1) / stride;
    int64_t room = in_size - 1 - first;   // position * stride may go up to this
    int64_t end = room < 0 ? 0 : std::min(out_size, room / stride + 1);
    return {std::min(begin, end), end};
}

// Moves patches between one image [C,H,W] and its column matrix [C*kH*kW, Ho*Wo], whose row
// (c,i,j) and column (y,x) is image[c][y*stride_h - padding_h + i*dilation_h][x*stride_w - padding_w + j*dilation_w].
// to_columns: fill the columns from the image, `pad` where the patch lies in the padding (im2col;
// conv2d pads with 0, max_pool2d with -inf). Otherwise: add each column into the image where it
// came from (col2im; where windows overlap, their entries add up).
template <class T>
void move_patches(T* image, T* columns, const ConvGeometry& g, bool to_columns, T pad = T(0)) {
    const int64_t positions = g.positions();
    for (int64_t c = 0; c < g.c; ++c) {
        T* plane = image + c * g.h * g.w;
        for (int64_t i = 0; i < g.kh; ++i) {
            Span ys = span_inside(i * g.dilation_h, g.h, g.oh, g.stride_h, g.padding_h);
            for (int64_t j = 0; j < g.kw; ++j) {
                T* row = columns + ((c * g.kh + i) * g.kw + j) * positions;
                Span xs = span_inside(j * g.dilation_w, g.w, g.ow, g.stride_w, g.padding_w);
                const int64_t inside = xs.end - xs.begin;
                if (inside == 0 || ys.begin == ys.end) {   // every position of this row reads the padding
                    if (to_columns) std::fill(row, row + positions, pad);
                    continue;
                }
                if (to_columns) {
                    std::fill(row, row + ys.begin * g.ow, pad);   // output rows reading the top padding
                    std::fill(row + ys.end * g.ow, row + positions, pad);   // ... the bottom padding
                }
                // the input element of output (ys.begin, xs.begin); each output row moves stride_h input rows
                T* first = plane + (ys.begin * g.stride_h - g.padding_h + i * g.dilation_h) * g.w +
                           xs.begin * g.stride_w - g.padding_w + j * g.dilation_w;
                const int64_t row_step = g.stride_h * g.w;
                for (int64_t y = ys.begin; y < ys.end; ++y) {
                    T* line = first + (y - ys.begin) * row_step;
                    T* column = row + y * g.ow;
                    if (to_columns) {
                        std::fill(column, column + xs.begin, pad);
                        if (g.stride_w == 1) std::copy(line, line + inside, column + xs.begin);
                        else for (int64_t x = 0; x < inside; ++x) column[xs.begin + x] = line[x * g.stride_w];
                        std::fill(column + xs.end, column + g.ow, pad);
                    } else {
                        for (int64_t x = 0; x < inside; ++x) line[x * g.stride_w] += column[xs.begin + x];
                    }
                }
            }
        }
    }
}

// The column matrix of one sample: the image itself for a 1x1 kernel, else im2col into scratch.
template <class T>
Eigen::Map<const RowMatrix<T>> columns_of(T* image, RowMatrix<T>& scratch, const ConvGeometry& g) {
    if (g.image_is_columns()) return Eigen::Map<const RowMatrix<T>>(image, g.patch(), g.positions());
    move_patches(image, scratch.data(), g, true);
    return Eigen::Map<const RowMatrix<T>>(scratch.data(), g.patch(), g.positions());
}

// Y[n] = W columns(X[n]) (+ b per output channel), one product per group: group k's output
// channels (rows of W) read group k's input channels (rows of the columns). Each product goes to
// the BLAS when blas_product takes it, else to Eigen; likewise in the backward ops.
template <class T>
void conv2d_forward(const Value& x, const Value& weight, const Value* bias, const Value& y, const ConvGeometry& g) {
    Eigen::Map<const RowMatrix<T>> W(weight.data<T>(), g.o, g.group_patch());
    RowMatrix<T> scratch(g.image_is_columns() ? 0 : g.patch(), g.positions());
    const int64_t outs = g.group_outputs(), rows = g.group_patch();
    for (int64_t n = 0; n < g.n; ++n) {
        MatrixMap<T> Y(y.data<T>() + n * g.o * g.positions(), g.o, g.positions());
        Eigen::Map<const RowMatrix<T>> columns = columns_of(x.data<T>() + n * g.image_size(), scratch, g);
        for (int64_t k = 0; k < g.groups; ++k) {
            if (blas_product(Y.data() + k * outs * g.positions(), g.positions(), W.data() + k * outs * rows, rows,
                             columns.data() + k * rows * g.positions(), g.positions(), outs, g.positions(), rows,
                             false, false, false))
                continue;
            Y.middleRows(k * outs, outs).noalias() = W.middleRows(k * outs, outs) * columns.middleRows(k * rows, rows);
        }
        if (bias)
            for (int64_t o = 0; o < g.o; ++o) Y.row(o).array() += bias->data<T>()[o];
    }
}

// dX[n] = col2im(Wᵀ G[n]), per group.
template <class T>
void conv2d_grad_input(const Value& grad, const Value& weight, const Value& dx, const ConvGeometry& g) {
    Eigen::Map<const RowMatrix<T>> W(weight.data<T>(), g.o, g.group_patch());
    RowMatrix<T> scratch(g.image_is_columns() ? 0 : g.patch(), g.positions());
    const int64_t outs = g.group_outputs(), rows = g.group_patch();
    for (int64_t n = 0; n < g.n; ++n) {
        Eigen::Map<const RowMatrix<T>> G(grad.data<T>() + n * g.o * g.positions(), g.o, g.positions());
        T* image = dx.data<T>() + n * g.image_size();
        MatrixMap<T> columns(g.image_is_columns() ? image : scratch.data(), g.patch(), g.positions());
        for (int64_t k = 0; k < g.groups; ++k) {
            if (blas_product(columns.data() + k * rows * g.positions(), g.positions(), W.data() + k * outs * rows,
                             rows, G.data() + k * outs * g.positions(), g.positions(), rows, g.positions(), outs,
                             true, false, false))
                continue;
            columns.middleRows(k * rows, rows).noalias() =
                W.middleRows(k * outs, outs).transpose() * G.middleRows(k * outs, outs);
        }
        if (g.image_is_columns()) continue;
        std::fill(image, image + g.image_size(), T(0));
        move_patches(image, scratch.data(), g, false);
    }
}

// dW = sum over n of G[n] columns(X[n])ᵀ, per group.
template <class T>
void conv2d_grad_weight(const Value& grad, const Value& x, const Value& dw, const ConvGeometry& g) {
    MatrixMap<T> dW(dw.data<T>(), g.o, g.group_patch());
    dW.setZero();
    RowMatrix<T> scratch(g.image_is_columns() ? 0 : g.patch(), g.positions());
    const int64_t outs = g.group_outputs(), rows = g.group_patch();
    for (int64_t n = 0; n < g.n; ++n) {
        Eigen::Map<const RowMatrix<T>> G(grad.data<T>() + n * g.o * g.positions(), g.o, g.positions());
        Eigen::Map<const RowMatrix<T>> columns = columns_of(x.data<T>() + n * g.image_size(), scratch, g);
        for (int64_t k = 0; k < g.groups; ++k) {
            if (blas_product(dW.data() + k * outs * rows, rows, G.data() + k * outs * g.positions(), g.positions(),
                             columns.data() + k * rows * g.positions(), g.positions(), outs, rows, g.positions(),
                             false, true, true))
                continue;
            dW.middleRows(k * outs, outs).noalias() +=
                G.middleRows(k * outs, outs) * columns.middleRows(k * rows, rows).transpose();
        }
    }
}

// The first element along one axis of each output position's window that lies in the input
// (the shape rule made sure there is one): where PyTorch puts a window's index when no element
// beats -inf.
std::vector<int64_t> first_inside(int64_t out_size, int64_t stride, int64_t padding, int64_t dilation) {
    std::vector<int64_t> first(out_size);
    for (int64_t o = 0; o < out_size; ++o) {
        int64_t start = o * stride - padding;
        first[o] = start >= 0 ? 0 : (-start + dilation - 1) / dilation;
    }
    return first;
}

// Each window's maximum and its 1-based flat index in the H*W plane, one plane at a time: the
// plane's windows become the columns of a [kH*kW, Ho*Wo] matrix (move_patches, as for conv2d, the
// padding -inf), whose rows are then folded into a running maximum with selects, not branches
// (random data would mispredict them). The rows are contiguous, so the loop vectorises. Window
// elements come in row-major order and only a larger one (or the first NaN) takes over, so ties
// keep the first. A padded element never wins: only the first can, when nothing beats -inf, and
// then the index is the window's first element inside the input, as PyTorch's.
template <class T>
void max_pool2d_forward(const Value& x, const Value& values, const Value& indices, const OpAttrs& a) {
    ConvGeometry g = window_geometry(x.shape, 1, a.kernel_h, a.kernel_w, values.shape, a);
    const int64_t w = g.w, kw = g.kw;
    const int64_t planes = g.n * g.c, positions = g.positions(), window = g.kh * g.kw;
    g.n = g.c = 1;   // move_patches works on one plane
    std::vector<int64_t> offset(window);   // window element q sits this far from the window's first
    for (int64_t q = 0; q < window; ++q) offset[q] = (q / kw) * g.dilation_h * w + (q % kw) * g.dilation_w;
    std::vector<int64_t> first_row = first_inside(g.oh, g.stride_h, g.padding_h, g.dilation_h);
    std::vector<int64_t> first_col = first_inside(g.ow, g.stride_w, g.padding_w, g.dilation_w);
    const bool padded = g.padding_h > 0 || g.padding_w > 0;
    RowMatrix<T> columns(window, positions);
    std::vector<int32_t> winner(positions);   // per window: the element q holding the maximum
    for (int64_t plane = 0; plane < planes; ++plane) {
        move_patches(x.data<T>() + plane * g.h * g.w, columns.data(), g, true, -std::numeric_limits<T>::infinity());
        T* best = values.data<T>() + plane * positions;
        std::copy(columns.data(), columns.data() + positions, best);
        std::fill(winner.begin(), winner.end(), 0);
        for (int64_t q = 1; q < window; ++q) {
            const T* candidates = columns.data() + q * positions;
            for (int64_t t = 0; t < positions; ++t) {
                bool take = is_new_max(candidates[t], best[t]);
                best[t] = take ? candidates[t] : best[t];
                winner[t] = take ? static_cast<int32_t>(q) : winner[t];
            }
        }
        int64_t* where = indices.data<int64_t>() + plane * positions;
        for (int64_t y = 0; y < g.oh; ++y)
            for (int64_t xo = 0; xo < g.ow; ++xo)
                where[y * g.ow + xo] = (y * g.stride_h - g.padding_h) * w + xo * g.stride_w - g.padding_w +
                                       offset[winner[y * g.ow + xo]] + 1;
        if (!padded) continue;
        // Only windows in the first rows or columns start in the padding; where element 0 (in the
        // padding) kept the maximum, the first element inside takes its place.
        for (int64_t y = 0; y < g.oh; ++y) {
            bool top_padded = y * g.stride_h < g.padding_h;
            for (int64_t xo = 0; xo < g.ow; ++xo) {
                bool left_padded = xo * g.stride_w < g.padding_w;
                if (!top_padded && !left_padded) break;   // the rest of the row starts inside
                if (winner[y * g.ow + xo] != 0) continue;
                int64_t q = first_row[y] * kw + first_col[xo];
                where[y * g.ow + xo] = (y * g.stride_h - g.padding_h) * w + xo * g.stride_w - g.padding_w + offset[q] + 1;
            }
        }
    }
}

}  // namespace

void cpu_conv2d(const KernelCall& c) {
    const Value &x = in(c, 0), &weight = in(c, 1), &y = out(c);
    const Value* bias = c.n_inputs > 2 ? c.inputs[2] : nullptr;
    ConvGeometry g = conv_geometry(x.shape, weight.shape, y.shape, c.attrs);
    DISPATCH_FLOAT("conv2d", y.dtype, conv2d_forward<T>(x, weight, bias, y, g));
}

void cpu_conv2d_backward_input(const KernelCall& c) {
    const Value &grad = in(c, 0), &weight = in(c, 1), &dx = out(c);
    ConvGeometry g = conv_geometry(dx.shape, weight.shape, grad.shape, c.attrs);
    DISPATCH_FLOAT("conv2d_backward_input", dx.dtype, conv2d_grad_input<T>(grad, weight, dx, g));
}

void cpu_conv2d_backward_weight(const KernelCall& c) {
    const Value &grad = in(c, 0), &x = in(c, 1), &dw = out(c);
    ConvGeometry g = conv_geometry(x.shape, dw.shape, grad.shape, c.attrs);
    DISPATCH_FLOAT("conv2d_backward_weight", dw.dtype, conv2d_grad_weight<T>(grad, x, dw, g));
}

void cpu_max_pool2d(const KernelCall& c) {
    DISPATCH_FLOAT("max_pool2d", out(c).dtype, max_pool2d_forward<T>(in(c, 0), out(c, 0), out(c, 1), c.attrs));
}

// dx = zeros; each g is added at its window's argmax (an index out of its plane is an error).
void cpu_max_pool2d_backward(const KernelCall& c) {
    const Value &grad = in(c, 0), &indices = in(c, 1), &dx = out(c);
    const Shape &xs = dx.shape, &gs = grad.shape;   // [N,C,H,W] and [N,C,Ho,Wo], or 3-d
    const int64_t plane_size = xs[xs.ndim - 2] * xs[xs.ndim - 1], windows = gs[gs.ndim - 2] * gs[gs.ndim - 1];
    const int64_t planes = xs.ndim == 4 ? xs[0] * xs[1] : xs[0];
    const int64_t* pi = indices.data<int64_t>();
    DISPATCH_FLOAT("max_pool2d_backward", dx.dtype, {
        array_of<T>(dx).setZero();
        const T* pg = grad.data<T>();
        for (int64_t plane = 0; plane < planes; ++plane) {
            T* image = dx.data<T>() + plane * plane_size;
            for (int64_t k = 0; k < windows; ++k, ++pi, ++pg) {
                if (*pi < 1 || *pi > plane_size)
                    engine_fail("max_pool2d_backward: index %lld out of range 1..%lld of an H*W plane",
                                static_cast<long long>(*pi), static_cast<long long>(plane_size));
                image[*pi - 1] += *pg;
            }
        }
    });
}

// ============================================================================================
// [SECTION] layout

// The views (transpose, narrow, expand, ...) copy nothing: their kernels set a layout (view_ops.cpp).

void cpu_sum_to(const KernelCall& c) {
    const Value &x = in(c, 0), &o = out(c);
    RowWalker w(x.shape, o.shape);
    int64_t len = w.row_len;
    DISPATCH_ALL(x.dtype, {
        array_of<T>(o).setZero();
        const T* px = x.data<T>();
        T* po = o.data<T>();
        for (int64_t r = 0; r < w.rows; ++r, w.next()) {
            ConstArrayMap<T> xr(px + r * len, len);
            if (w.step[0]) ArrayMap<T>(po + w.offset[0], len) += xr;
            else po[w.offset[0]] += xr.sum();
        }
    });
}

void cpu_cat(const KernelCall& c) {
    const Value& o = out(c);
    DimSplit whole = dim_split(o.shape, c.attrs.dim);
    size_t elem = dtype_size(o.dtype);
    int64_t offset = 0;   // along dim
    for (int i = 0; i < c.n_inputs; ++i) {
        const Value& x = in(c, i);
        DimSplit part = dim_split(x.shape, c.attrs.dim);
        int64_t block = part.n * part.inner;
        for (int64_t k = 0; k < part.outer; ++k)
            std::memcpy(static_cast<char*>(o.raw()) + ((k * whole.n + offset) * whole.inner) * elem,
                        static_cast<const char*>(x.raw()) + k * block * elem, block * elem);
        offset += part.n;
    }
}

// Copy `length` slices along dim between a narrow tensor and a full one, in either direction.
static void copy_narrow(const Value& full, const Value& part, int dim, int64_t start, bool into_part) {
    DimSplit f = dim_split(full.shape, dim);
    DimSplit p = dim_split(part.shape, dim);
    size_t elem = dtype_size(full.dtype);
    size_t block = p.n * p.inner * elem;
    for (int64_t k = 0; k < f.outer; ++k) {
        char* full_at = static_cast<char*>(full.raw()) + ((k * f.n + start) * f.inner) * elem;
        char* part_at = static_cast<char*>(part.raw()) + k * block;
        if (into_part) std::memcpy(part_at, full_at, block);
        else std::memcpy(full_at, part_at, block);
    }
}

void cpu_narrow_backward(const KernelCall& c) {
    cpu_zeros(c);
    copy_narrow(out(c), in(c, 0), c.attrs.dim, c.attrs.start, false);
}

// Walk the output in order; the input offset starts at the far end of each flipped dim and steps back.
void cpu_flip(const KernelCall& c) {
    const Value &x = in(c, 0), &o = out(c);
    uint32_t mask = op_dims_mask(c.attrs, x.shape.ndim);
    int64_t strides[MAX_DIMS], start = 0;
    contiguous_strides(x.shape, strides);
    for (int d = 0; d < x.shape.ndim; ++d) {
        if (!(mask & (1u << d))) continue;
        start += (x.shape.dims[d] - 1) * strides[d];
        strides[d] = -strides[d];
    }
    OffsetWalker w(o.shape, strides, start);
    int64_t n = o.numel();
    DISPATCH_BY_SIZE(x.dtype, {
        const T* px = x.data<T>();
        T* po = o.data<T>();
        for (int64_t i = 0; i < n; ++i, w.next()) po[i] = px[w.offset];
    });
}

// ============================================================================================
// [SECTION] reductions

namespace {

// o = x reduced over the dims in `mask` (several, in any order): o starts at `init`, and each
// element of x is folded into its place with f(acc, v) -> the new acc.
template <class T, class F>
void reduce_over_mask(const Value& x, const Value& o, uint32_t mask, T init, F f) {
    T* po = o.data<T>();
    for (int64_t i = 0; i < o.numel(); ++i) po[i] = init;
    int64_t strides[MAX_DIMS];   // of the output with the reduced dims kept as 1: 0 along them
    Shape kept = x.shape;
    for (int d = 0; d < kept.ndim; ++d)
        if (mask & (1u << d)) kept.dims[d] = 1;
    contiguous_strides(kept, strides);
    for (int d = 0; d < kept.ndim; ++d)
        if (mask & (1u << d)) strides[d] = 0;
    OffsetWalker w(x.shape, strides);
    const T* px = x.data<T>();
    int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i, w.next()) po[w.offset] = f(po[w.offset], px[i]);
}

template <class T>
void sum_along(const Value& x, const Value& o, const OpAttrs& a) {
    if (a.all) {
        o.data<T>()[0] = const_array_of<T>(x).sum();
        return;
    }
    if (a.dim2 != 0) {   // several dims
        reduce_over_mask<T>(x, o, op_dims_mask(a, x.shape.ndim), T(0), [](T acc, T v) { return acc + v; });
        return;
    }
    DimSplit d = dim_split(x.shape, a.dim);
    const T* px = x.data<T>();
    T* po = o.data<T>();
    for (int64_t k = 0; k < d.outer; ++k) {
        const T* block = px + k * d.n * d.inner;
        if (d.inner == 1) {
            po[k] = ConstArrayMap<T>(block, d.n).sum();
            continue;
        }
        ArrayMap<T> acc(po + k * d.inner, d.inner);
        acc.setZero();
        for (int64_t j = 0; j < d.n; ++j) acc += ConstArrayMap<T>(block + j * d.inner, d.inner);
    }
}

template <class T>
void prod_along(const Value& x, const Value& o, const OpAttrs& a) {
    if (a.all) {
        o.data<T>()[0] = const_array_of<T>(x).prod();
        return;
    }
    reduce_over_mask<T>(x, o, op_dims_mask(a, x.shape.ndim), T(1), [](T acc, T v) { return acc * v; });
}

// amax/amin with NaN propagation (IsNew: is_new_max or is_new_min).
template <class T, bool Max>
void extreme_over(const Value& x, const Value& o, const OpAttrs& a) {
    T init = Max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
    if constexpr (std::numeric_limits<T>::has_infinity)
        init = Max ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    reduce_over_mask<T>(x, o, op_dims_mask(a, x.shape.ndim), init, [](T best, T v) {
        bool take = Max ? is_new_max(v, best) : is_new_min(v, best);
        return take ? v : best;
    });
}

// max (Max) or min with NaN propagation; indices are 1-based, the first among ties. For `all`,
// only the value is produced.
template <class T, bool Max>
void max_along(const Value& x, const Value* values, const Value* indices, const OpAttrs& a) {
    auto is_new = [](T v, T best) { return Max ? is_new_max(v, best) : is_new_min(v, best); };
    const T* px = x.data<T>();
    if (a.all) {
        T best = px[0];
        for (int64_t i = 1; i < x.numel(); ++i)
            if (is_new(px[i], best)) best = px[i];
        values->data<T>()[0] = best;
        return;
    }
    DimSplit d = dim_split(x.shape, a.dim);
    T* pv = values->data<T>();
    int64_t* pi = indices->data<int64_t>();
    for (int64_t k = 0; k < d.outer; ++k) {
        for (int64_t i = 0; i < d.inner; ++i) {
            const T* col = px + k * d.n * d.inner + i;
            T best = col[0];
            int64_t where = 0;
            for (int64_t j = 1; j < d.n; ++j) {
                if (is_new(col[j * d.inner], best)) {
                    best = col[j * d.inner];
                    where = j;
                }
            }
            pv[k * d.inner + i] = best;
            pi[k * d.inner + i] = where + 1;
        }
    }
}

template <class T>
void cumsum_along(const Value& x, const Value& o, int dim) {
    DimSplit d = dim_split(x.shape, dim);
    const T* px = x.data<T>();
    T* po = o.data<T>();
    for (int64_t k = 0; k < d.outer; ++k) {
        const T* block = px + k * d.n * d.inner;
        T* out_block = po + k * d.n * d.inner;
        ArrayMap<T> first(out_block, d.inner);
        first = ConstArrayMap<T>(block, d.inner);
        for (int64_t j = 1; j < d.n; ++j)
            ArrayMap<T>(out_block + j * d.inner, d.inner) =
                ConstArrayMap<T>(out_block + (j - 1) * d.inner, d.inner) + ConstArrayMap<T>(block + j * d.inner, d.inner);
    }
}

// sort / topk along a dim: each line's positions ordered by value (NaN counts as the largest, as
// in PyTorch), ties by position, so the order is total and stable; the first `k` are written
// (k: the output's size along dim). Indices are 1-based.
template <class T>
void sort_along(const Value& x, const Value& values, const Value& indices, int dim, bool descending) {
    DimSplit d = dim_split(x.shape, dim);
    int64_t k = values.shape.dims[dim];
    const T* px = x.data<T>();
    T* pv = values.data<T>();
    int64_t* pi = indices.data<int64_t>();
    std::vector<int64_t> order(static_cast<size_t>(d.n));
    for (int64_t outer = 0; outer < d.outer; ++outer) {
        for (int64_t inner = 0; inner < d.inner; ++inner) {
            const T* line = px + outer * d.n * d.inner + inner;
            auto at = [&](int64_t j) { return line[j * d.inner]; };
            auto before = [&](int64_t a, int64_t b) { return math::sorts_before(at(a), at(b), a, b, descending); };
            for (int64_t j = 0; j < d.n; ++j) order[j] = j;
            if (k < d.n) std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
            else std::sort(order.begin(), order.end(), before);
            for (int64_t j = 0; j < k; ++j) {
                int64_t to = (outer * k + j) * d.inner + inner;
                pv[to] = at(order[j]);
                pi[to] = order[j] + 1;
            }
        }
    }
}

// softmax / log_softmax along a dim, shifted by the max for stability.
template <class T>
void softmax_along(const Value& x, const Value& o, int dim, bool log) {
    if (x.numel() == 0) return;   // nothing to normalise (an empty dim has no row to take a max of)
    DimSplit d = dim_split(x.shape, dim);
    const T* px = x.data<T>();
    T* po = o.data<T>();
    if (d.inner == 1) {
        for (int64_t k = 0; k < d.outer; ++k) {
            ConstArrayMap<T> row(px + k * d.n, d.n);
            ArrayMap<T> y(po + k * d.n, d.n);
            T m = row.maxCoeff();
            y = (row - m).exp();
            T total = y.sum();
            if (log) y = row - m - std::log(total);
            else y /= total;
        }
        return;
    }
    std::vector<T> shift(d.inner), total(d.inner);
    ArrayMap<T> m(shift.data(), d.inner), s(total.data(), d.inner);
    for (int64_t k = 0; k < d.outer; ++k) {
        const T* block = px + k * d.n * d.inner;
        T* out_block = po + k * d.n * d.inner;
        auto row = [&](int64_t j) { return ConstArrayMap<T>(block + j * d.inner, d.inner); };
        auto out_row = [&](int64_t j) { return ArrayMap<T>(out_block + j * d.inner, d.inner); };
        m = row(0);
        for (int64_t j = 1; j < d.n; ++j) m = m.max(row(j));
        s.setZero();
        for (int64_t j = 0; j < d.n; ++j) {
            out_row(j) = (row(j) - m).exp();
            s += out_row(j);
        }
        for (int64_t j = 0; j < d.n; ++j) {
            if (log) out_row(j) = row(j) - m - s.log();
            else out_row(j) /= s;
        }
    }
}

}  // namespace

void cpu_sum(const KernelCall& c) { DISPATCH_ALL(out(c).dtype, sum_along<T>(in(c, 0), out(c), c.attrs)); }

void cpu_prod(const KernelCall& c) { DISPATCH_ALL(out(c).dtype, prod_along<T>(in(c, 0), out(c), c.attrs)); }

void cpu_mean(const KernelCall& c) {
    double count = static_cast<double>(in(c, 0).numel()) / (out(c).numel() ? out(c).numel() : 1);
    DISPATCH_FLOAT("mean", out(c).dtype, {
        sum_along<T>(in(c, 0), out(c), c.attrs);
        array_of<T>(out(c)) /= static_cast<T>(count);
    });
}

void cpu_max(const KernelCall& c) {
    const Value* indices = c.n_outputs > 1 ? c.outputs[1] : nullptr;
    DISPATCH_ALL(out(c).dtype, (max_along<T, true>(in(c, 0), c.outputs[0], indices, c.attrs)));
}

void cpu_min(const KernelCall& c) {
    const Value* indices = c.n_outputs > 1 ? c.outputs[1] : nullptr;
    DISPATCH_ALL(out(c).dtype, (max_along<T, false>(in(c, 0), c.outputs[0], indices, c.attrs)));
}

void cpu_amax(const KernelCall& c) { DISPATCH_ALL(out(c).dtype, (extreme_over<T, true>(in(c, 0), out(c), c.attrs))); }
void cpu_amin(const KernelCall& c) { DISPATCH_ALL(out(c).dtype, (extreme_over<T, false>(in(c, 0), out(c), c.attrs))); }

void cpu_cumsum(const KernelCall& c) { DISPATCH_ALL(out(c).dtype, cumsum_along<T>(in(c, 0), out(c), c.attrs.dim)); }

void cpu_sort(const KernelCall& c) {
    DISPATCH_ALL(out(c).dtype, sort_along<T>(in(c, 0), out(c, 0), out(c, 1), c.attrs.dim, c.attrs.scalar != 0));
}

void cpu_softmax(const KernelCall& c) {
    DISPATCH_FLOAT("softmax", out(c).dtype, softmax_along<T>(in(c, 0), out(c), c.attrs.dim, false));
}

void cpu_log_softmax(const KernelCall& c) {
    DISPATCH_FLOAT("log_softmax", out(c).dtype, softmax_along<T>(in(c, 0), out(c), c.attrs.dim, true));
}

// ============================================================================================
// [SECTION] indexing

static int64_t checked_index(const char* op_name, int64_t k, int64_t size, int dim) {
    if (k < 1 || k > size)
        engine_fail("%s: index %lld out of range 1..%lld along dim %d", op_name, static_cast<long long>(k),
                    static_cast<long long>(size), dim + 1);
    return k - 1;
}

// For each element of `index` (in order): its offset in index, and the offset in a tensor of
// shape `other` at the same coordinates with the one along dim set to 0 (the index may be smaller
// than `other` outside dim, as PyTorch allows). f(at, base) does the rest; base + (k - 1) * stride
// is the element index value k picks.
template <class F>
static void for_each_index(const Shape& index_shape, const Shape& other, int dim, F f) {
    int64_t strides[MAX_DIMS];
    contiguous_strides(other, strides);
    strides[dim] = 0;
    OffsetWalker w(index_shape, strides);
    int64_t n = index_shape.numel();
    for (int64_t at = 0; at < n; ++at, w.next()) f(at, w.offset);
}

static int64_t stride_along(const Shape& s, int dim) {
    int64_t stride = 1;
    for (int d = dim + 1; d < s.ndim; ++d) stride *= s.dims[d];
    return stride;
}

void cpu_gather(const KernelCall& c) {
    const Value &x = in(c, 0), &index = in(c, 1), &o = out(c);
    int dim = c.attrs.dim;
    int64_t size = x.shape.dims[dim], stride = stride_along(x.shape, dim);
    const int64_t* pi = index.data<int64_t>();
    DISPATCH_BY_SIZE(x.dtype, {
        const T* px = x.data<T>();
        T* po = o.data<T>();
        for_each_index(index.shape, x.shape, dim, [&](int64_t at, int64_t base) {
            po[at] = px[base + checked_index("gather", pi[at], size, dim) * stride];
        });
    });
}

void cpu_scatter_add(const KernelCall& c) {
    const Value &src = in(c, 0), &index = in(c, 1), &o = out(c);
    int dim = c.attrs.dim;
    int64_t size = o.shape.dims[dim], stride = stride_along(o.shape, dim);
    const int64_t* pi = index.data<int64_t>();
    DISPATCH_ALL(o.dtype, {
        array_of<T>(o).setZero();
        const T* ps = src.data<T>();
        T* po = o.data<T>();
        for_each_index(index.shape, o.shape, dim, [&](int64_t at, int64_t base) {
            po[base + checked_index("scatter_add", pi[at], size, dim) * stride] += ps[at];
        });
    });
}

// A copy of x, then src written at the indexed places (a place indexed twice gets the last write).
void cpu_scatter(const KernelCall& c) {
    const Value &x = in(c, 0), &index = in(c, 1), &src = in(c, 2), &o = out(c);
    int dim = c.attrs.dim;
    int64_t size = o.shape.dims[dim], stride = stride_along(o.shape, dim);
    const int64_t* pi = index.data<int64_t>();
    std::memcpy(o.raw(), x.raw(), o.numel() * dtype_size(o.dtype));
    DISPATCH_BY_SIZE(o.dtype, {
        const T* ps = src.data<T>();
        T* po = o.data<T>();
        for_each_index(index.shape, o.shape, dim, [&](int64_t at, int64_t base) {
            po[base + checked_index("scatter", pi[at], size, dim) * stride] = ps[at];
        });
    });
}

// ============================================================================================
// [SECTION] copies

void cpu_to(const KernelCall& c) {
    const Value &x = in(c, 0), &o = out(c);
    int64_t n = x.numel();
    DISPATCH_ALL(o.dtype, {
        using Out = T;
        T* po = o.data<Out>();
        DISPATCH_ALL(x.dtype, for (int64_t i = 0; i < n; ++i) po[i] = element_cast<Out>(x.data<T>()[i]));
    });
}

// ============================================================================================
// [SECTION] losses
//
// Each loss is 0-d: the mean over examples, or the sum (attrs.reduction). Sums over examples are
// kept in double. The class losses walk the rows of scores [N,C] (or [C], one row: class_rows, ops.h).

namespace {

// The 0-based column of example i's class. Labels are 1-based: int64, or floats holding whole
// numbers; anything else is an error naming the op, the label, its position and the classes.
int64_t label_column(const char* op_name, const Value& labels, int64_t i, int64_t classes) {
    double label = value_get(labels, i);
    if (label != std::floor(label))
        engine_fail("%s: label %g at position %lld is not a whole number (labels are classes 1..%lld)", op_name, label,
                    static_cast<long long>(i + 1), static_cast<long long>(classes));
    if (label < 1 || label > static_cast<double>(classes))
        engine_fail("%s: label %.0f at position %lld is out of range: there are %lld classes (labels 1..%lld)",
                    op_name, label, static_cast<long long>(i + 1), static_cast<long long>(classes),
                    static_cast<long long>(classes));
    return static_cast<int64_t>(label) - 1;
}

template <class T>
T row_max(const T* row, int64_t n) {
    T m = row[0];
    for (int64_t j = 1; j < n; ++j) m = std::max(m, row[j]);
    return m;
}

// e = exp(x - the max of its row), for all rows at once: one exp over the whole block runs in
// full vector packets, where rows of 10 classes alone would each run Eigen's scalar tail. e should
// be 64-byte aligned (storages are), else Eigen runs scalar exps up to the first aligned element.
template <class T>
void exp_shifted_rows(const T* x, ClassRows r, T* e) {
    for (int64_t i = 0; i < r.n; ++i) {
        const T* row = x + i * r.classes;
        T m = row_max(row, r.classes);
        for (int64_t j = 0; j < r.classes; ++j) e[i * r.classes + j] = row[j] - m;
    }
    ArrayMap<T> all(e, r.n * r.classes);
    all = all.exp();
}

// The loss = the mean (or the sum) over rows i of row_loss(i, row i, its label's column).
template <class T, class F>
void loss_over_rows(const char* op_name, const Value& x, const Value& labels, const Value& o, const OpAttrs& a,
                    F row_loss) {
    ClassRows r = class_rows(x.shape);
    double total = 0;
    for (int64_t i = 0; i < r.n; ++i) {
        int64_t k = label_column(op_name, labels, i, r.classes);
        total += row_loss(i, x.data<T>() + i * r.classes, k);
    }
    o.data<T>()[0] = static_cast<T>(total / reduction_count(a, r.n));
}

// -log softmax(row)[label] = (max - row[label]) + log(sum(e)): finite for large scores too.
template <class T>
void cross_entropy_rows(const Value& x, const Value& labels, const Value& o, const OpAttrs& a) {
    ClassRows r = class_rows(x.shape);
    // Labels are checked before any row is read (with C = 0, every label is out of range).
    for (int64_t i = 0; i < r.n; ++i) label_column("cross_entropy", labels, i, r.classes);
    Value scratch = value_new(x.shape, x.dtype);   // from the storage pool: aligned, no malloc once warm
    T* e = scratch.data<T>();
    exp_shifted_rows(x.data<T>(), r, e);
    loss_over_rows<T>("cross_entropy", x, labels, o, a, [&](int64_t i, const T* row, int64_t k) {
        T sum_e = ConstArrayMap<T>(e + i * r.classes, r.classes).sum();
        return (row_max(row, r.classes) - row[k]) + std::log(sum_e);
    });
}

// dx = g s (softmax(row) - onehot(label)), s = 1 / count.
template <class T>
void cross_entropy_backward_rows(const Value& g, const Value& x, const Value& labels, const Value& o,
                                 const OpAttrs& a) {
    ClassRows r = class_rows(x.shape);
    for (int64_t i = 0; i < r.n; ++i) label_column("cross_entropy_backward", labels, i, r.classes);   // as above
    T scale = static_cast<T>(value_get(g, 0) / reduction_count(a, r.n));
    exp_shifted_rows(x.data<T>(), r, o.data<T>());
    for (int64_t i = 0; i < r.n; ++i) {
        ArrayMap<T> dx(o.data<T>() + i * r.classes, r.classes);
        dx *= scale / dx.sum();
        dx[label_column("cross_entropy_backward", labels, i, r.classes)] -= scale;
    }
}

template <class T>
void nll_loss_rows(const Value& x, const Value& labels, const Value& o, const OpAttrs& a) {
    loss_over_rows<T>("nll_loss", x, labels, o, a, [](int64_t, const T* row, int64_t k) { return -row[k]; });
}

// The hinges of one row: max(0, 1 - x[label] + x[j]) for j != label. `each` gets j and the hinge.
template <class T, class F>
void for_each_hinge(const T* row, int64_t classes, int64_t label, F each) {
    T base = T(1) - row[label];
    for (int64_t j = 0; j < classes; ++j)
        if (j != label) each(j, std::max(T(0), base + row[j]));
}

// Each row's hinges summed, over C.
template <class T>
void multi_margin_rows(const Value& x, const Value& labels, const Value& o, const OpAttrs& a) {
    int64_t classes = class_rows(x.shape).classes;
    loss_over_rows<T>("multi_margin_loss", x, labels, o, a, [classes](int64_t, const T* row, int64_t k) {
        double hinges = 0;
        for_each_hinge(row, classes, k, [&](int64_t, T hinge) { hinges += hinge; });
        return hinges / static_cast<double>(classes);
    });
}

// Each hinge that is on adds g s / C to its column and takes it from the label's column.
template <class T>
void multi_margin_backward_rows(const Value& g, const Value& x, const Value& labels, const Value& o,
                                const OpAttrs& a) {
    ClassRows r = class_rows(x.shape);
    T scale = static_cast<T>(value_get(g, 0) / static_cast<double>(r.classes) / reduction_count(a, r.n));
    for (int64_t i = 0; i < r.n; ++i) {
        int64_t k = label_column("multi_margin_loss_backward", labels, i, r.classes);
        T* dx = o.data<T>() + i * r.classes;
        dx[k] = 0;
        for_each_hinge(x.data<T>() + i * r.classes, r.classes, k, [&](int64_t j, T hinge) {
            dx[j] = hinge > 0 ? scale : T(0);
            if (hinge > 0) dx[k] -= scale;
        });
    }
}

}  // namespace

void cpu_mse_loss(const KernelCall& c) {
    const Value &x = in(c, 0), &y = in(c, 1);
    double count = c.attrs.reduction == REDUCTION_MEAN ? static_cast<double>(x.numel()) : 1;
    DISPATCH_FLOAT("mse_loss", x.dtype, {
        double total = (const_array_of<T>(x) - const_array_of<T>(y)).square().sum();
        out(c).data<T>()[0] = static_cast<T>(total / count);
    });
}

void cpu_cross_entropy(const KernelCall& c) {
    DISPATCH_FLOAT("cross_entropy", in(c, 0).dtype, cross_entropy_rows<T>(in(c, 0), in(c, 1), out(c), c.attrs));
}

void cpu_nll_loss(const KernelCall& c) {
    DISPATCH_FLOAT("nll_loss", in(c, 0).dtype, nll_loss_rows<T>(in(c, 0), in(c, 1), out(c), c.attrs));
}

void cpu_multi_margin_loss(const KernelCall& c) {
    DISPATCH_FLOAT("multi_margin_loss", in(c, 0).dtype, multi_margin_rows<T>(in(c, 0), in(c, 1), out(c), c.attrs));
}

void cpu_cross_entropy_backward(const KernelCall& c) {
    DISPATCH_FLOAT("cross_entropy_backward", out(c).dtype,
                   cross_entropy_backward_rows<T>(in(c, 0), in(c, 1), in(c, 2), out(c), c.attrs));
}

// -g s at each example's label, zero elsewhere.
void cpu_nll_loss_backward(const KernelCall& c) {
    const Value &g = in(c, 0), &labels = in(c, 1), &o = out(c);
    ClassRows r = class_rows(o.shape);
    double value = -value_get(g, 0) / reduction_count(c.attrs, r.n);
    cpu_zeros(c);
    for (int64_t i = 0; i < r.n; ++i)
        value_set(o, i * r.classes + label_column("nll_loss_backward", labels, i, r.classes), value);
}

void cpu_multi_margin_loss_backward(const KernelCall& c) {
    DISPATCH_FLOAT("multi_margin_loss_backward", out(c).dtype,
                   multi_margin_backward_rows<T>(in(c, 0), in(c, 1), in(c, 2), out(c), c.attrs));
}

// ============================================================================================
// [SECTION] in place

void cpu_add_inplace(const KernelCall& c) {
    DISPATCH_ALL(out(c).dtype, T alpha = element_cast<T>(c.attrs.scalar);
                 inplace_loop<T>(out(c), in(c, 1), [alpha](T x, T y) { return x + alpha * y; }));
}

void cpu_sub_inplace(const KernelCall& c) {
    DISPATCH_ALL(out(c).dtype, T alpha = element_cast<T>(c.attrs.scalar);
                 inplace_loop<T>(out(c), in(c, 1), [alpha](T x, T y) { return x - alpha * y; }));
}

void cpu_mul_inplace(const KernelCall& c) {
    DISPATCH_ALL(out(c).dtype, inplace_loop<T>(out(c), in(c, 1), [](T x, T y) { return x * y; }));
}

void cpu_masked_fill_inplace(const KernelCall& c) {
    DISPATCH_ALL(out(c).dtype, T s = element_cast<T>(c.attrs.scalar);
                 inplace_loop<T>(out(c), in(c, 1), [s](T x, T m) { return m != T(0) ? s : x; }));
}

void cpu_zero_inplace(const KernelCall& c) { cpu_zeros(c); }

void cpu_fill_inplace(const KernelCall& c) { cpu_full(c); }

void cpu_copy_inplace(const KernelCall& c) {
    DISPATCH_ALL(out(c).dtype, inplace_loop<T>(out(c), in(c, 1), [](T, T y) { return y; }));
}

// ============================================================================================
// [SECTION] scratch

namespace {

size_t times(size_t a, size_t b) {
    size_t r;
    return __builtin_mul_overflow(a, b, &r) ? SIZE_MAX : r;
}

size_t plus(size_t a, size_t b) {
    size_t r;
    return __builtin_add_overflow(a, b, &r) ? SIZE_MAX : r;
}

size_t bytes_of(const Shape& shape, DType dtype) {
    int64_t numel;
    return shape_numel_fits(shape, &numel) ? times(static_cast<size_t>(numel), dtype_size(dtype)) : SIZE_MAX;
}

// conv2d's column matrix: (C kH kW) rows of (Ho Wo) positions, C the image's channels (3-d or 4-d).
size_t columns_bytes(const Shape& image, const Shape& weight, const Shape& output, DType dtype) {
    if (image.ndim < 3 || weight.ndim != 4 || output.ndim < 2) return 0;
    size_t channels = static_cast<size_t>(image[image.ndim - 3]);
    size_t patch = times(times(channels, static_cast<size_t>(weight[2])), static_cast<size_t>(weight[3]));
    size_t positions = times(static_cast<size_t>(output[output.ndim - 2]), static_cast<size_t>(output[output.ndim - 1]));
    return times(times(patch, positions), dtype_size(dtype));
}

}  // namespace

size_t cpu_kernel_scratch_bytes(OpId op, const Value* const* inputs, int n_inputs, const Shape& output,
                                DType output_dtype, const OpAttrs& attrs) {
    if (op == OP_randperm) return bytes_of(output, DTYPE_I64);   // 1..n before it is written out
    if (n_inputs < 1) return 0;
    switch (op) {
        case OP_eq: case OP_ne: case OP_lt: case OP_le: case OP_gt: case OP_ge:   // int64 inputs: compared as int64 first
        case OP_isnan: case OP_isinf: case OP_isfinite:
            return inputs[0]->dtype == output_dtype ? 0 : bytes_of(output, DTYPE_I64);
        case OP_multinomial:   // a row's weights and running sums
            return inputs[0]->shape.ndim > 0 ? times(static_cast<size_t>(inputs[0]->shape[inputs[0]->shape.ndim - 1]), 16) : 0;
        case OP_conv2d: return n_inputs > 1 ? columns_bytes(inputs[0]->shape, inputs[1]->shape, output, output_dtype) : 0;
        case OP_conv2d_backward_input:
            return n_inputs > 1 ? columns_bytes(output, inputs[1]->shape, inputs[0]->shape, output_dtype) : 0;
        case OP_conv2d_backward_weight:
            return n_inputs > 1 ? columns_bytes(inputs[1]->shape, output, inputs[0]->shape, output_dtype) : 0;
        case OP_max_pool2d: {   // the windows as columns, the winners, the offsets, the first rows and columns inside
            if (output.ndim < 2 || attrs.kernel_h < 1 || attrs.kernel_w < 1) return 0;
            size_t window = times(static_cast<size_t>(attrs.kernel_h), static_cast<size_t>(attrs.kernel_w));
            size_t rows = static_cast<size_t>(output[output.ndim - 2]), cols = static_cast<size_t>(output[output.ndim - 1]);
            size_t positions = times(rows, cols);
            return plus(plus(plus(times(times(window, positions), dtype_size(output_dtype)), times(positions, 4)),
                             times(window, 8)), times(plus(rows, cols), 8));
        }
        case OP_softmax: case OP_log_softmax: return times(bytes_of(inputs[0]->shape, inputs[0]->dtype), 2);
        case OP_cross_entropy: return bytes_of(inputs[0]->shape, inputs[0]->dtype);
        case OP_lstm:   // one step's gates [B,4H] and W_hhᵀ
            return n_inputs > 3 && inputs[0]->shape.ndim == 3
                       ? plus(bytes_of(Shape{inputs[0]->shape[1], inputs[0]->shape[2]}, output_dtype),
                              bytes_of(inputs[3]->shape, output_dtype))
                       : 0;
        case OP_lstm_backward:   // what one step sends back to h [B,H]
            return n_inputs > 3 ? bytes_of(inputs[3]->shape, output_dtype) : 0;
        case OP_sort: case OP_topk:   // one line's positions
            return attrs.dim >= 0 && attrs.dim < inputs[0]->shape.ndim ? times(static_cast<size_t>(inputs[0]->shape.dims[attrs.dim]), 8) : 0;
        default: return 0;
    }
}

}  // namespace td
