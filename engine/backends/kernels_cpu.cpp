// kernels_cpu.cpp: the CPU kernels of the ops that make or walk elements (Eigen for the math), the
// fused LSTM layer (its gates are elementwise math), and what every CPU kernel allocates beyond its
// outputs. The others: kernels_cpu_products.cpp (mm, bmm, convolution, pooling) and
// kernels_cpu_reduce.cpp (layout, reductions, indexing, losses); their shared helpers are in
// kernels_cpu_common.h; views' kernels in view_ops.cpp.
//
// [SECTION] creation       tensor zeros ones full rand randn eye arange
// [SECTION] elementwise    elementwise.def made into functors, kernels, span functions (elementwise_math)
// [SECTION] recurrent      lstm lstm_backward (a whole layer per call: matmul_into and the gate math)
// [SECTION] copies         to (clone is elementwise: x)
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
#include "kernels_cpu_common.h"
#include "tape.h"

namespace td {

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
        // A fused multiply-add, as PyTorch's compiled kernels do (CPU and CUDA alike): the same
        // int64 values at every -march and on the GPU (linspace(-20, 4, 10)[6] is -3, not -4).
        for (int64_t i = 0; i < steps; ++i)
            p[i] = steps == 1 ? start : i < halfway ? element_cast<T>(std::fma(step, static_cast<Step>(i), static_cast<Step>(start)))
                               : element_cast<T>(std::fma(-step, static_cast<Step>(steps - i - 1), static_cast<Step>(end)));   // int64: saturates
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
        std::vector<ElementwiseMath> t(OP_COUNT, ElementwiseMath{0, nullptr, nullptr, nullptr, nullptr});
#define ONE_INPUT(name, dtypes, expression)                                                             \
    t[OP_##name] = {1, span_one_input<name##_math, float>, span_one_input<name##_math, double>,              \
                    [](double x, double y, const OpAttrs& a) { return name##_math::scalar(x, y, Scalars<double>(a)); }, \
                    #expression};
#define TWO_INPUTS(name, dtypes, expression)                                                            \
    t[OP_##name] = {2, span_two_inputs<name##_math, float>, span_two_inputs<name##_math, double>,            \
                    [](double x, double y, const OpAttrs& a) { return name##_math::scalar(x, y, Scalars<double>(a)); }, \
                    #expression};
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
