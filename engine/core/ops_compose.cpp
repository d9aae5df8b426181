// ops_compose.cpp: the ops:: functions built from other ops (the last block of ops.h). Each records
// the ops it is made of (so the graph, the debugger and freeze see them), and their backward rules
// give the gradient PyTorch gives for the whole. They check their arguments first, so errors name
// the function the user called.
//
// [SECTION] helpers
// [SECTION] reductions   var std norm logsumexp argmax/argmin
// [SECTION] shape        stack split chunk unbind roll repeat tile unflatten
// [SECTION] indexing     index_select scatter_add_into diag
// [SECTION] products     dot outer addmm
// [SECTION] einsum
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops.h"
#include "tape.h"

namespace td {
namespace ops {

// ============================================================================================
// [SECTION] helpers

namespace {

void check_defined(const Tensor& x, const char* name) {
    if (!x.defined()) engine_fail("%s: expected a tensor", name);
}

// int64 tensors compute in float32, as the ops that are float only (OPF_FLOAT_ONLY) do.
Tensor as_float(const Tensor& x) { return dtype_is_float(x.dtype()) ? x : to(x, DTYPE_F32); }

// The number of elements a reduction over `mask` folds into each result.
int64_t reduced_count(const Shape& s, uint32_t mask) {
    int64_t n = 1;
    for (int d = 0; d < s.ndim; ++d)
        if (mask & (1u << d)) n *= s.dims[d];
    return n;
}

uint32_t every_dim(int ndim) { return ndim >= 32 ? ~0u : (1u << ndim) - 1; }

// x's shape with the dims in mask removed (keepdim = false) or set to 1.
Shape reduced(const Shape& s, uint32_t mask, bool keepdim) {
    Shape out;
    for (int d = 0; d < s.ndim; ++d) {
        if (!(mask & (1u << d))) out.dims[out.ndim++] = s.dims[d];
        else if (keepdim) out.dims[out.ndim++] = 1;
    }
    return out;
}

Tensor index_tensor(const Shape& shape, const std::vector<double>& values) {
    return from_values(shape, DTYPE_I64, values.data());
}

}  // namespace

// ============================================================================================
// [SECTION] reductions

// sum((x - mean)^2) / (N - correction), N the count reduced (PyTorch divides by max(0, N - correction)).
Tensor var(const Tensor& x, uint32_t mask, double correction, bool keepdim, const char* name) {
    check_defined(x, name);
    Tensor xf = as_float(x);
    if (mask == 0) mask = every_dim(x.shape().ndim);
    Tensor deviation = sub(xf, reduce_dims(OP_mean, xf, mask, true));
    Tensor squares = reduce_dims(OP_sum, unary(OP_square, deviation), mask, keepdim);
    double divisor = std::max(0.0, static_cast<double>(reduced_count(x.shape(), mask)) - correction);
    return div_scalar(squares, divisor);
}

Tensor std_dev(const Tensor& x, uint32_t mask, double correction, bool keepdim) {
    return unary(OP_sqrt, var(x, mask, correction, keepdim, "std"));
}

// p = 1: sum |x|; p = 2: sqrt(sum x^2); p = inf / -inf: amax / amin of |x|; other p > 0: (sum |x|^p)^(1/p).
Tensor norm(const Tensor& x, double p, uint32_t mask, bool keepdim) {
    check_defined(x, "norm");
    if (!(p > 0)) engine_fail("norm: p must be positive or inf, got %g", p);
    Tensor xf = as_float(x);
    if (p == 2) return unary(OP_sqrt, reduce_dims(OP_sum, unary(OP_square, xf), mask, keepdim));
    Tensor magnitude = unary(OP_abs, xf);
    if (std::isinf(p)) return reduce_dims(OP_amax, magnitude, mask, keepdim);
    if (p == 1) return reduce_dims(OP_sum, magnitude, mask, keepdim);
    return pow(reduce_dims(OP_sum, pow(magnitude, p), mask, keepdim), 1 / p);
}

// m + log(sum(e^(x - m))) with m the (detached) max, 0 where it is infinite, as PyTorch computes it.
Tensor logsumexp(const Tensor& x, uint32_t mask, bool keepdim) {
    check_defined(x, "logsumexp");
    Tensor xf = as_float(x);
    if (mask == 0) mask = every_dim(x.shape().ndim);
    Tensor m = unary(OP_detach, reduce_dims(OP_amax, xf, mask, true));
    Tensor infinite = eq(unary(OP_abs, m), create(OP_full, Shape{}, m.dtype(), INFINITY, m.value().device()));
    m = masked_fill(m, infinite, 0);
    Tensor total = unary(OP_log, reduce_dims(OP_sum, unary(OP_exp, sub(xf, m)), mask, keepdim));
    return add(total, keepdim ? m : reshape(m, reduced(m.shape(), mask, false)));
}

Tensor arg_reduce(OpId op, const Tensor& x, int dim, bool keepdim) {
    check_defined(x, op == OP_max ? "argmax" : "argmin");
    Tensor result = dim < 0 ? reduce(op, reshape(x, Shape{-1}), 0, false) : reduce(op, x, dim, keepdim);
    return Tensor(result.node.get(), 1);
}

// ============================================================================================
// [SECTION] shape

Tensor stack(const std::vector<Tensor>& xs, int dim) {
    if (xs.empty()) engine_fail("stack: needs at least one tensor");
    for (size_t i = 0; i < xs.size(); ++i) {
        check_defined(xs[i], "stack");
        if (xs[i].shape() != xs[0].shape())
            engine_fail("stack: tensor %zu has shape %s but tensor 1 has %s (all must be equal)", i + 1,
                        xs[i].shape().str().c_str(), xs[0].shape().str().c_str());
    }
    std::vector<Tensor> lifted;
    for (const Tensor& x : xs) lifted.push_back(unsqueeze(x, dim));
    return cat(lifted, dim);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int dim) {
    check_defined(x, "split");
    int64_t total = 0, size = x.shape().dims[dim];
    for (int64_t s : sizes) {
        if (s < 0) engine_fail("split: sizes must not be negative, got %lld", static_cast<long long>(s));
        total += s;
    }
    if (total != size)
        engine_fail("split: the sizes add up to %lld but dim %d has size %lld", static_cast<long long>(total), dim + 1,
                    static_cast<long long>(size));
    std::vector<Tensor> pieces;
    int64_t start = 0;
    for (int64_t s : sizes) {
        pieces.push_back(narrow(x, dim, start, s));
        start += s;
    }
    return pieces;
}

std::vector<Tensor> split_size(const Tensor& x, int64_t size, int dim) {
    check_defined(x, "split");
    int64_t n = x.shape().dims[dim];
    if (size <= 0 && n > 0) engine_fail("split: the size of the pieces must be positive, got %lld", static_cast<long long>(size));
    std::vector<int64_t> sizes;
    for (int64_t start = 0; start < n; start += size) sizes.push_back(std::min(size, n - start));
    if (sizes.empty()) sizes.push_back(0);
    return split(x, sizes, dim);
}

// PyTorch's chunk: pieces of ceil(n / chunks), the last smaller; fewer than `chunks` when they run out.
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int dim) {
    check_defined(x, "chunk");
    if (chunks <= 0) engine_fail("chunk: the number of chunks must be positive, got %lld", static_cast<long long>(chunks));
    int64_t n = x.shape().dims[dim];
    return split_size(x, std::max<int64_t>(1, (n + chunks - 1) / chunks), dim);
}

std::vector<Tensor> unbind(const Tensor& x, int dim) {
    check_defined(x, "unbind");
    std::vector<Tensor> slices;
    for (int64_t i = 0; i < x.shape().dims[dim]; ++i) slices.push_back(squeeze(narrow(x, dim, i, 1), dim));
    return slices;
}

// Each shift is two narrows put back in the other order; without dims, x is rolled flattened.
Tensor roll(const Tensor& x, const std::vector<int64_t>& shifts, const std::vector<int>& dims) {
    check_defined(x, "roll");
    if (dims.empty()) {
        if (shifts.size() != 1) engine_fail("roll: without dims, give one shift (got %zu)", shifts.size());
        return reshape(roll(reshape(x, Shape{-1}), shifts, {0}), x.shape());
    }
    if (shifts.size() != dims.size())
        engine_fail("roll: %zu shifts for %zu dims (give one shift per dim)", shifts.size(), dims.size());
    Tensor y = x;
    for (size_t i = 0; i < dims.size(); ++i) {
        int64_t n = y.shape().dims[dims[i]];
        if (n == 0) continue;
        int64_t s = ((shifts[i] % n) + n) % n;
        if (s == 0) continue;
        y = cat({narrow(y, dims[i], n - s, s), narrow(y, dims[i], 0, n - s)}, dims[i]);
    }
    return y;
}

// Along each dim with r copies: a size-1 dim in front of it is expanded to r and merged into it.
Tensor repeat(const Tensor& x, const std::vector<int64_t>& repeats, const char* name) {
    check_defined(x, name);
    const Shape& s = x.shape();
    int n = static_cast<int>(repeats.size());
    if (n < s.ndim)
        engine_fail("%s: %d repeats for a %d-d tensor (give at least one per dim)", name, n, s.ndim);
    if (n > MAX_DIMS) engine_fail("%s: tensors have at most %d dims, got %d repeats", name, MAX_DIMS, n);
    for (int64_t r : repeats)
        if (r < 0) engine_fail("%s: repeats must not be negative, got %lld", name, static_cast<long long>(r));
    Shape padded;   // x with leading 1s, one dim per repeat
    padded.ndim = n;
    for (int d = 0; d < n; ++d) padded.dims[d] = d < n - s.ndim ? 1 : s.dims[d - (n - s.ndim)];
    Tensor y = padded == s ? x : reshape(x, padded);
    for (int d = 0; d < n; ++d) {
        int64_t r = repeats[d];
        if (r == 1) continue;
        Shape now = y.shape(), merged = now;
        merged.dims[d] *= r;
        if (now.ndim == MAX_DIMS) {   // no room for the extra dim: r copies side by side
            y = cat(std::vector<Tensor>(static_cast<size_t>(std::max<int64_t>(r, 1)), y), d);
            if (r == 0) y = narrow(y, d, 0, 0);
            continue;
        }
        Shape wide = unsqueeze(y, d).shape();
        wide.dims[d] = r;
        y = reshape(expand(unsqueeze(y, d), wide), merged);
    }
    return y;
}

// PyTorch's tile: fewer repeats than dims are padded with 1s in front.
Tensor tile(const Tensor& x, std::vector<int64_t> repeats) {
    check_defined(x, "tile");
    while (static_cast<int>(repeats.size()) < x.shape().ndim) repeats.insert(repeats.begin(), 1);
    return repeat(x, repeats, "tile");
}

Tensor unflatten(const Tensor& x, int dim, const Shape& sizes) {
    check_defined(x, "unflatten");
    const Shape& s = x.shape();
    if (sizes.ndim == 0) engine_fail("unflatten: needs at least one size");
    if (s.ndim - 1 + sizes.ndim > MAX_DIMS) engine_fail("unflatten: tensors have at most %d dims", MAX_DIMS);
    int64_t known = 1;
    int infer = -1;
    for (int i = 0; i < sizes.ndim; ++i) {
        if (sizes.dims[i] == -1 && infer < 0) infer = i;
        else if (sizes.dims[i] < 0) engine_fail("unflatten: bad size %lld in %s", static_cast<long long>(sizes.dims[i]), sizes.str().c_str());
        else known *= sizes.dims[i];
    }
    Shape filled = sizes;
    int64_t n = s.dims[dim];
    if (infer >= 0) filled.dims[infer] = known > 0 && n % known == 0 ? n / known : -1;
    if (filled.numel() != n || (infer >= 0 && filled.dims[infer] < 0))
        engine_fail("unflatten: sizes %s do not multiply to %lld, the size of dim %d", sizes.str().c_str(),
                    static_cast<long long>(n), dim + 1);
    Shape out;
    for (int d = 0; d < dim; ++d) out.dims[out.ndim++] = s.dims[d];
    for (int i = 0; i < filled.ndim; ++i) out.dims[out.ndim++] = filled.dims[i];
    for (int d = dim + 1; d < s.ndim; ++d) out.dims[out.ndim++] = s.dims[d];
    return reshape(x, out);
}

// ============================================================================================
// [SECTION] indexing

// A gather with the 1-d index laid along dim and expanded over the other dims: its backward,
// a scatter_add, is PyTorch's index_select backward (index_add).
Tensor index_select(const Tensor& x, int dim, const Tensor& index) {
    check_defined(x, "index_select");
    check_defined(index, "index_select");
    if (index.dtype() != DTYPE_I64)
        engine_fail("index_select: the index must be an int64 tensor, got %s", dtype_name(index.dtype()));
    if (index.shape().ndim > 1) engine_fail("index_select: the index must be 1-d, got %s", index.shape().str().c_str());
    Shape along;   // [1,..,k,..,1]
    along.ndim = x.shape().ndim;
    for (int d = 0; d < along.ndim; ++d) along.dims[d] = d == dim ? index.numel() : 1;
    Shape full = x.shape();
    full.dims[dim] = index.numel();
    return gather(x, dim, expand(reshape(index, along), full));
}

// src cut to index's shape where it is larger (PyTorch reads only that corner of it).
static Tensor fit_source(const Tensor& src, const Tensor& index, const char* name) {
    const Shape &s = src.shape(), &i = index.shape();
    bool fits = s.ndim == i.ndim;
    for (int d = 0; fits && d < s.ndim; ++d) fits = i.dims[d] <= s.dims[d];
    if (!fits)
        engine_fail("%s: index shape %s is larger than source shape %s", name, i.str().c_str(), s.str().c_str());
    Tensor y = src;
    for (int d = 0; d < s.ndim; ++d)
        if (i.dims[d] < s.dims[d]) y = narrow(y, d, 0, i.dims[d]);
    return y;
}

Tensor scatter_add_into(const Tensor& x, int dim, const Tensor& index, const Tensor& src) {
    check_defined(x, "scatter_add");
    check_defined(index, "scatter_add");
    check_defined(src, "scatter_add");
    if (src.dtype() != x.dtype())
        engine_fail("scatter_add: the source is %s but the tensor is %s (they must be the same dtype)",
                    dtype_name(src.dtype()), dtype_name(x.dtype()));
    return add(x, scatter_add(fit_source(src, index, "scatter_add"), dim, index, x.shape()));
}

// 1-d x: a matrix with x on diagonal `offset` (scattered into rows, zero rows added above or
// below); 2-d x: diagonal `offset` read out with a gather.
Tensor diag(const Tensor& x, int64_t offset) {
    check_defined(x, "diag");
    const Shape& s = x.shape();
    int64_t up = std::max<int64_t>(offset, 0), down = std::max<int64_t>(-offset, 0);
    if (s.ndim == 1) {
        int64_t n = s.dims[0], size = n + up + down;
        std::vector<double> cols;
        for (int64_t i = 0; i < n; ++i) cols.push_back(static_cast<double>(i + up + 1));
        Tensor rows = scatter_add(reshape(x, Shape{n, 1}), 1, index_tensor(Shape{n, 1}, cols), Shape{n, size});
        if (up + down == 0) return rows;
        Tensor zero_rows = create(OP_zeros, Shape{up + down, size}, x.dtype(), 0, x.value().device());
        return cat(offset > 0 ? std::vector<Tensor>{rows, zero_rows} : std::vector<Tensor>{zero_rows, rows}, 0);
    }
    if (s.ndim != 2) engine_fail("diag: expects a 1-d or 2-d tensor, got %s", s.str().c_str());
    int64_t length = std::max<int64_t>(0, std::min(s.dims[0] - down, s.dims[1] - up));
    std::vector<double> cols;
    for (int64_t i = 0; i < length; ++i) cols.push_back(static_cast<double>(i + up + 1));
    Tensor band = narrow(x, 0, length > 0 ? down : 0, length);
    return reshape(gather(band, 1, index_tensor(Shape{length, 1}, cols)), Shape{length});
}

// ============================================================================================
// [SECTION] products

Tensor dot(const Tensor& a, const Tensor& b) {
    check_defined(a, "dot");
    check_defined(b, "dot");
    if (a.shape().ndim != 1 || b.shape().ndim != 1 || a.shape() != b.shape())
        engine_fail("dot: expects two 1-d tensors of the same size, got %s and %s", a.shape().str().c_str(),
                    b.shape().str().c_str());
    return reduce_all(OP_sum, mul(a, b));
}

Tensor outer(const Tensor& a, const Tensor& b) {
    check_defined(a, "outer");
    check_defined(b, "outer");
    if (a.shape().ndim != 1 || b.shape().ndim != 1)
        engine_fail("outer: expects two 1-d tensors, got %s and %s", a.shape().str().c_str(), b.shape().str().c_str());
    return mul(unsqueeze(a, 1), unsqueeze(b, 0));
}

// beta * input + alpha * m1 m2; with beta = 0 the input is not read (its NaNs do not spread), as PyTorch.
Tensor addmm(const Tensor& input, const Tensor& m1, const Tensor& m2, double beta, double alpha) {
    check_defined(input, "addmm");
    Tensor product = mm(m1, m2);
    if (input.shape().ndim > 2 || broadcast_shapes("addmm", input.shape(), product.shape()) != product.shape())
        engine_fail("addmm: input %s does not broadcast to the product's shape %s", input.shape().str().c_str(),
                    product.shape().str().c_str());
    if (alpha != 1) product = mul_scalar(product, alpha);
    if (beta == 0) return product;
    return add(beta == 1 ? input : mul_scalar(input, beta), product);
}

// ============================================================================================
// [SECTION] einsum
//
// Each operand first loses its repeated letters (a diagonal: "ii") and the letters no other
// operand and not the output has (summed). Then the operands are contracted left to right with
// one bmm each: letters in both that are still needed later are batch dims, letters in both that
// are not are summed by the product, the rest are rows (left) and columns (right). Finally the
// result is permuted into the output's order.

namespace {

struct Term {
    Tensor t;
    std::string letters;   // one per dim of t
};

bool has(const std::string& s, char c) { return s.find(c) != std::string::npos; }

// t's dims reordered to `letters` (a permutation of term.letters).
Tensor ordered(const Term& term, const std::string& letters) {
    if (term.letters == letters) return term.t;
    Shape order;
    for (char c : letters) order.dims[order.ndim++] = static_cast<int64_t>(term.letters.find(c));
    return permute(term.t, order);
}

int64_t size_of(const Term& term, const std::string& letters) {
    int64_t n = 1;
    for (char c : letters) n *= term.t.shape().dims[term.letters.find(c)];
    return n;
}

// The diagonal of dims p < q (equal sizes n): both moved last, merged, every (n+1)-th element kept.
Term diagonal(const Term& term, size_t p, size_t q) {
    std::string rest;
    Shape order;
    for (size_t d = 0; d < term.letters.size(); ++d)
        if (d != p && d != q) {
            rest += term.letters[d];
            order.dims[order.ndim++] = static_cast<int64_t>(d);
        }
    order.dims[order.ndim++] = static_cast<int64_t>(p);
    order.dims[order.ndim++] = static_cast<int64_t>(q);
    Tensor moved = permute(term.t, order);
    Shape s = moved.shape();
    int64_t n = s.dims[s.ndim - 1];
    Shape merged = s;
    merged.ndim -= 1;
    merged.dims[merged.ndim - 1] = n * n;
    std::vector<double> picks;
    for (int64_t i = 0; i < n; ++i) picks.push_back(static_cast<double>(i * (n + 1) + 1));
    Tensor d = index_select(reshape(moved, merged), merged.ndim - 1, index_tensor(Shape{n}, picks));
    return Term{d, rest + term.letters[p]};
}

// Sums the letters of term that `keep` does not hold.
Term sum_unneeded(const Term& term, const std::string& keep) {
    uint32_t mask = 0;
    std::string rest;
    for (size_t d = 0; d < term.letters.size(); ++d) {
        if (has(keep, term.letters[d])) rest += term.letters[d];
        else mask |= 1u << d;
    }
    if (mask == 0) return term;
    return Term{reduce_dims(OP_sum, term.t, mask, false), rest};
}

Term contract(const Term& a, const Term& b, const std::string& needed_later) {
    std::string batch, summed, left, right;
    for (char c : a.letters) {
        if (!has(b.letters, c)) left += c;
        else if (has(needed_later, c)) batch += c;
        else summed += c;
    }
    for (char c : b.letters)
        if (!has(a.letters, c)) right += c;
    int64_t nb = size_of(a, batch), nl = size_of(a, left), ns = size_of(a, summed), nr = size_of(b, right);
    // Each operand as [batch, rows, cols]; read transposed by bmm when that is already its order.
    bool trans_a = a.letters == batch + summed + left && a.letters != batch + left + summed;
    bool trans_b = b.letters == batch + right + summed && b.letters != batch + summed + right;
    Tensor ta = ordered(a, trans_a ? batch + summed + left : batch + left + summed);
    Tensor tb = ordered(b, trans_b ? batch + right + summed : batch + summed + right);
    ta = reshape(ta, trans_a ? Shape{nb, ns, nl} : Shape{nb, nl, ns});
    tb = reshape(tb, trans_b ? Shape{nb, nr, ns} : Shape{nb, ns, nr});
    Tensor product = bmm(ta, tb, trans_a, trans_b);
    Shape out;
    for (char c : batch) out.dims[out.ndim++] = a.t.shape().dims[a.letters.find(c)];
    for (char c : left) out.dims[out.ndim++] = a.t.shape().dims[a.letters.find(c)];
    for (char c : right) out.dims[out.ndim++] = b.t.shape().dims[b.letters.find(c)];
    return Term{reshape(product, out), batch + left + right};
}

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands) {
    std::string eq;
    for (char c : equation)
        if (c != ' ') eq += c;
    if (eq.find("...") != std::string::npos) engine_fail("einsum: '...' (ellipsis) is not supported; name every dim");
    size_t arrow = eq.find("->");
    std::string lhs = eq.substr(0, arrow), output;
    std::vector<std::string> inputs;
    for (size_t start = 0;;) {
        size_t comma = lhs.find(',', start);
        inputs.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    if (inputs.size() != operands.size())
        engine_fail("einsum: '%s' has %zu operands but %zu tensors were given", equation.c_str(), inputs.size(),
                    operands.size());
    std::string all;
    for (const std::string& term : inputs) all += term;
    if (arrow == std::string::npos) {   // implicit output: the letters seen once, in order
        for (char c = 'A'; c <= 'z'; ++c)
            if (is_letter(c) && std::count(all.begin(), all.end(), c) == 1) output += c;
    } else {
        output = eq.substr(arrow + 2);
    }
    for (char c : all + output)
        if (!is_letter(c)) engine_fail("einsum: '%s': '%c' is not a letter (dims are named a-z, A-Z)", equation.c_str(), c);
    for (char c : output) {
        if (!has(all, c)) engine_fail("einsum: '%s': output dim '%c' is in no operand", equation.c_str(), c);
        if (std::count(output.begin(), output.end(), c) > 1)
            engine_fail("einsum: '%s': output dim '%c' appears twice", equation.c_str(), c);
    }
    std::vector<Term> terms;
    int64_t sizes[128];
    std::fill(sizes, sizes + 128, -1);
    for (size_t i = 0; i < inputs.size(); ++i) {
        check_defined(operands[i], "einsum");
        const Shape& s = operands[i].shape();
        if (static_cast<int>(inputs[i].size()) != s.ndim)
            engine_fail("einsum: operand %zu is %s (%d dims) but '%s' names %zu", i + 1, s.str().c_str(), s.ndim,
                        inputs[i].c_str(), inputs[i].size());
        for (int d = 0; d < s.ndim; ++d) {
            int64_t& known = sizes[static_cast<int>(inputs[i][d])];
            if (known >= 0 && known != s.dims[d])
                engine_fail("einsum: dim '%c' has size %lld in one place and %lld in another", inputs[i][d],
                            static_cast<long long>(known), static_cast<long long>(s.dims[d]));
            known = s.dims[d];
        }
        terms.push_back(Term{operands[i], inputs[i]});
    }
    // Diagonals, then the letters only this operand has and the output does not.
    for (size_t i = 0; i < terms.size(); ++i) {
        for (bool again = true; again;) {
            again = false;
            const std::string& l = terms[i].letters;
            for (size_t p = 0; p < l.size() && !again; ++p) {
                size_t q = l.find(l[p], p + 1);
                if (q != std::string::npos) {
                    terms[i] = diagonal(terms[i], p, q);
                    again = true;
                }
            }
        }
        std::string elsewhere = output;
        for (size_t j = 0; j < terms.size(); ++j)
            if (j != i) elsewhere += terms[j].letters;
        terms[i] = sum_unneeded(terms[i], elsewhere);
    }
    Term result = terms[0];
    for (size_t i = 1; i < terms.size(); ++i) {
        std::string later = output;
        for (size_t j = i + 1; j < terms.size(); ++j) later += terms[j].letters;
        result = contract(sum_unneeded(result, later + terms[i].letters), sum_unneeded(terms[i], later + result.letters), later);
    }
    result = sum_unneeded(result, output);
    return ordered(result, output);
}

}  // namespace ops
}  // namespace td
