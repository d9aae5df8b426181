// kernels_cpu_reduce.cpp: the CPU kernels that move, fold or pick elements along dims: layout
// (the copies that views leave to kernels), reductions, indexing and the losses. Helpers:
// kernels_cpu_common.h.
//
// [SECTION] layout         sum_to cat narrow_backward flip (views set a layout: view_ops.cpp)
// [SECTION] reductions     sum mean prod max min amax amin cumsum sort topk softmax log_softmax
// [SECTION] indexing       gather scatter_add scatter
// [SECTION] losses         mse_loss cross_entropy nll_loss multi_margin_loss and their derivatives
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
}  // namespace td
