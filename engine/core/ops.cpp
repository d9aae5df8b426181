// ops.cpp: the op table built from ops.def, with each op's shape rule. Its backward rules are in
// backward_rules.cpp, the ops:: functions in ops_calls.cpp (one per op) and ops_compose.cpp (built
// from several ops), and kernel_run in backends/kernel_run.cpp.
//
// [SECTION] table          op_table[], op_find, op_grad_rule (grad_rules.def), op_describe_attrs
// [SECTION] shape rules    output shapes and dtypes, and the errors for bad input
#include "ops.h"

#include <cstring>

#include "elementwise.h"
#include "tape.h"

namespace td {

// Every rule named in the table, declared once from the table itself.
#define OP(name, n_in, n_out, flags, attrs, shape_rule, backward_rule, cpu_kernel, math) \
    void shape_rule(ShapeCall&);                                                         \
    void backward_rule(BackwardCall&);
#include "ops.def"
#undef OP

// ============================================================================================
// [SECTION] table

const OpInfo op_table[OP_COUNT] = {
#define OP(name, n_in, n_out, flags, attrs, shape_rule, backward_rule, cpu_kernel, math) \
    {#name, n_in, n_out, flags, attrs, shape_rule,                                       \
     backward_rule == not_differentiable ? nullptr : backward_rule, math},
#include "ops.def"
#undef OP
};

void not_differentiable(BackwardCall&) {}

bool op_is_simple_method(OpId op) {
    const OpInfo& info = op_table[op];
    return elementwise_math(op) && info.n_inputs == 1 && info.attrs_kind == ATTRS_NONE &&
           !(info.flags & (OPF_INTERNAL | OPF_FUNCTIONAL));
}

bool op_find(const char* name, OpId* out) {
    for (int i = 0; i < OP_COUNT; ++i) {
        if (strcmp(op_table[i].name, name) == 0) {
            *out = static_cast<OpId>(i);
            return true;
        }
    }
    return false;
}

// The rule lines of op's GRAD_RULE row in grad_rules.def, ending with nullptr; nullptr when it has none.
static const char* const* grad_rule_lines(OpId op) {
    switch (op) {
#define GRAD_RULE(name, ...)                                       \
    case OP_##name: {                                              \
        static const char* const lines[] = {__VA_ARGS__, nullptr}; \
        return lines;                                              \
    }
#define GRAD_RULE_FOR(name, attrs_text, ...)
#include "grad_rules.def"
#undef GRAD_RULE
#undef GRAD_RULE_FOR
        default: return nullptr;
    }
}

// The lines of op's GRAD_RULE_FOR row for attributes that read `attrs_text`; nullptr when none.
static const char* const* grad_rule_lines_for(OpId op, const std::string& attrs_text) {
#define GRAD_RULE(name, ...)
#define GRAD_RULE_FOR(name, attrs, ...)                                \
    if (op == OP_##name && attrs_text == (attrs)) {                    \
        static const char* const lines[] = {__VA_ARGS__, nullptr};     \
        return lines;                                                  \
    }
#include "grad_rules.def"
#undef GRAD_RULE
#undef GRAD_RULE_FOR
    return nullptr;
}

static int count_lines(const char* const* lines) {
    int count = 0;
    while (lines && lines[count]) ++count;
    return count;
}

int op_grad_rule_count(OpId op) { return count_lines(grad_rule_lines(op)); }

const char* op_grad_rule(OpId op, int input, const OpAttrs* attrs) {
    const OpInfo& info = op_table[op];
    bool variadic = info.n_inputs < 0;
    if (input < 0 || (!variadic && input >= info.n_inputs)) return nullptr;
    if (!info.backward_rule) return NOT_DIFFERENTIABLE_RULE;
    const char* const* lines = attrs ? grad_rule_lines_for(op, op_describe_attrs(op, *attrs)) : nullptr;
    if (!lines) lines = grad_rule_lines(op);
    int count = count_lines(lines);
    if (variadic && count == 1) return lines[0];   // "each input x_i: ..."
    return input < count ? lines[input] : nullptr;
}

std::string one_based(int64_t index) {
    if (index == std::numeric_limits<int64_t>::max()) return "9223372036854775808";
    return std::to_string(index + 1);
}

static std::string number_str(double x) {
    char buffer[32];
    snprintf(buffer, sizeof buffer, "%g", x);
    return buffer;
}

// A window's size along H and W: "2" when both are the same, else "2,1".
static std::string window_pair_str(int h, int w) {
    if (h == w) return std::to_string(h);
    return std::to_string(h) + "," + std::to_string(w);
}

// "dim=2", or "dims=1,3" for several (attrs.dim2's bitmask), 1-based.
static std::string dims_str(const OpAttrs& a) {
    if (a.dim2 == 0) return "dim=" + std::to_string(int64_t(a.dim) + 1);
    std::string s = "dims=";
    for (int d = 0; d < 32; ++d)
        if (static_cast<uint32_t>(a.dim2) & (1u << d)) s += (s.size() > 5 ? "," : "") + std::to_string(d + 1);
    return s;
}

std::string op_describe_attrs(OpId op, const OpAttrs& a) {
    switch (op_table[op].attrs_kind) {
        case ATTRS_NONE: return "";
        case ATTRS_CREATE: {
            std::string s = op == OP_full ? "value=" + number_str(a.scalar) : "";
            if (a.device != DEVICE_CPU) s += std::string(s.empty() ? "" : " ") + "device=" + device_name(a.device);
            return s;
        }
        case ATTRS_DEVICE: return device_name(a.device);
        case ATTRS_SCALAR:
            if (op == OP_add_ || op == OP_sub_) return a.scalar == 1 ? "" : "alpha=" + number_str(a.scalar);
            if (op == OP_pow) return "p=" + number_str(a.scalar);
            return "s=" + number_str(a.scalar);
        case ATTRS_CLAMP: {
            std::string s;
            if (std::isfinite(a.lo)) s += "min=" + number_str(a.lo);
            if (std::isfinite(a.hi)) s += std::string(s.empty() ? "" : " ") + "max=" + number_str(a.hi);
            return s;
        }
        case ATTRS_DIM:
            if (op == OP_squeeze && a.all) return "";
            return "dim=" + std::to_string(int64_t(a.dim) + 1);
        case ATTRS_DIM2: return "dims=" + std::to_string(int64_t(a.dim) + 1) + "," + std::to_string(int64_t(a.dim2) + 1);
        case ATTRS_REDUCE:
            if (a.all) return "";
            return dims_str(a) + (a.keepdim ? " keepdim" : "");
        case ATTRS_DIMS: return a.all ? "all dims" : dims_str(a);
        case ATTRS_SORT: {
            std::string s = op == OP_topk ? "k=" + std::to_string(a.length) + " " : "";
            s += "dim=" + std::to_string(int64_t(a.dim) + 1);
            if (op == OP_topk) return s + (a.scalar != 0 ? " largest" : " smallest");
            return s + (a.scalar != 0 ? " descending" : "");
        }
        case ATTRS_SHAPE:
            if (op == OP_permute) {
                std::string dims;
                for (int i = 0; i < a.shape.ndim; ++i) dims += (i ? "," : "") + std::to_string(a.shape.dims[i] + 1);
                return "dims=" + dims;
            }
            if (op == OP_scatter_add) return "dim=" + std::to_string(int64_t(a.dim) + 1) + " shape=" + a.shape.str();
            return "shape=" + a.shape.str();
        case ATTRS_MATMUL: {
            std::string s;
            if (a.trans_a) s += "Aᵀ";
            if (a.trans_b) s += std::string(s.empty() ? "" : " ") + "Bᵀ";
            if (a.accumulate) s += std::string(s.empty() ? "" : " ") + "+=";
            return s;
        }
        case ATTRS_NARROW:
            if (op == OP_select) return "dim=" + std::to_string(int64_t(a.dim) + 1) + " index=" + one_based(a.start);
            return "dim=" + std::to_string(int64_t(a.dim) + 1) + " start=" + one_based(a.start) +
                   " length=" + std::to_string(a.length);
        case ATTRS_DTYPE: return dtype_name(a.dtype);
        case ATTRS_WINDOW: {
            std::string s = a.kernel_h || a.kernel_w ? "kernel=" + window_pair_str(a.kernel_h, a.kernel_w) + " " : "";
            s += "stride=" + window_pair_str(a.stride_h, a.stride_w);
            if (a.padding_h || a.padding_w) s += " padding=" + window_pair_str(a.padding_h, a.padding_w);
            if (a.dilation_h != 1 || a.dilation_w != 1) s += " dilation=" + window_pair_str(a.dilation_h, a.dilation_w);
            if (a.groups != 1) s += " groups=" + std::to_string(a.groups);
            if (a.ceil_mode) s += " ceil_mode";
            return s;
        }
        case ATTRS_LOSS: return a.reduction == REDUCTION_SUM ? "reduction=sum" : "";
        case ATTRS_ACTIVATION:
            if (op == OP_leaky_relu) return "negative_slope=" + number_str(a.scalar);
            if (op == OP_elu) return "alpha=" + number_str(a.scalar);
            if (op == OP_softplus) return "beta=" + number_str(a.scalar) + " threshold=" + number_str(a.hi);
            return a.scalar != 0 ? "approximate=tanh" : "";   // gelu, gelu_backward
        case ATTRS_RANGE:
            if (op == OP_randint) return "low=" + number_str(a.lo) + " high=" + number_str(a.hi);
            return "start=" + number_str(a.lo) + " end=" + number_str(a.hi);
        case ATTRS_DIAGONAL: return a.start ? "diagonal=" + std::to_string(a.start) : "";
        case ATTRS_SAMPLE: return "samples=" + std::to_string(a.length) + (a.all ? " replacement" : "");
        case ATTRS_REGION:
            return "shape=" + a.shape.str() + " strides=" + a.strides.str() + " offset=" + std::to_string(a.start);
    }
    return "";
}

namespace {
bool same_attr(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }
template <class T>
bool same_attr(const T& a, const T& b) { return a == b; }
}  // namespace

bool attrs_equal(const OpAttrs& a, const OpAttrs& b) {
#define OP_ATTRS_SAME(type, name, initial, what) &&same_attr(a.name, b.name)
    return true OP_ATTRS_FIELDS(OP_ATTRS_SAME);
#undef OP_ATTRS_SAME
}

const OpAttrs& op_attrs_default() {
    static const OpAttrs* defaults = new OpAttrs();   // immortal, as the engine's other singletons
    return *defaults;
}

uint32_t op_dims_mask(const OpAttrs& a, int ndim) {
    if (a.all) return ndim >= 32 ? ~0u : (1u << ndim) - 1;
    if (a.dim2 != 0) return static_cast<uint32_t>(a.dim2);
    return a.dim >= 0 && a.dim < 32 ? 1u << a.dim : 0;
}

int dim_normalize(const char* op_name, int64_t dim, int ndim) {
    int64_t d = dim < 0 ? dim + ndim : dim - 1;
    if (dim == 0 || d < 0 || d >= ndim) {
        if (ndim == 0) engine_fail("%s: dim %lld out of range: the tensor is 0-d (a single number)", op_name, static_cast<long long>(dim));
        engine_fail("%s: dim %lld out of range for a %d-d tensor (expected 1..%d or -%d..-1)", op_name,
                    static_cast<long long>(dim), ndim, ndim, ndim);
    }
    return static_cast<int>(d);
}

// ============================================================================================
// [SECTION] shape rules

static int dtype_rank(DType d) { return d == DTYPE_F64 ? 2 : d == DTYPE_F32 ? 1 : 0; }

DType promote_dtypes(const Value* const* inputs, int n_inputs) {
    bool any_dims = false, any_zero_d = false;
    DType dims_dtype = DTYPE_I64, zero_d_dtype = DTYPE_I64;
    for (int i = 0; i < n_inputs; ++i) {
        DType d = inputs[i]->dtype;
        DType& widest = inputs[i]->shape.ndim > 0 ? dims_dtype : zero_d_dtype;
        (inputs[i]->shape.ndim > 0 ? any_dims : any_zero_d) = true;
        if (dtype_rank(d) > dtype_rank(widest)) widest = d;
    }
    if (!any_dims) return zero_d_dtype;
    if (any_zero_d && !dtype_is_float(dims_dtype) && dtype_is_float(zero_d_dtype)) return zero_d_dtype;
    return dims_dtype;
}

Shape broadcast_shapes(const char* op_name, const Shape& a, const Shape& b) {
    if (a == b) return a;
    Shape out;
    out.ndim = a.ndim > b.ndim ? a.ndim : b.ndim;
    for (int i = 0; i < out.ndim; ++i) {   // aligned from the right
        int ia = a.ndim - out.ndim + i, ib = b.ndim - out.ndim + i;
        int64_t da = ia >= 0 ? a.dims[ia] : 1, db = ib >= 0 ? b.dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            engine_fail("%s: shapes %s and %s cannot be broadcast together", op_name, a.str().c_str(),
                        b.str().c_str());
        out.dims[i] = da == 1 ? db : da;
    }
    return out;
}

static const Value& in(const ShapeCall& c, int i) { return *c.inputs[i]; }

static void check_dim(const ShapeCall& c, int dim, int ndim) {
    if (dim < 0 || dim >= ndim)
        engine_fail("%s: dim %lld out of range for a %d-d tensor", c.op_name, static_cast<long long>(dim) + 1, ndim);
}

// Attributes are checked here, by the shape rules, for every caller: op_call, a plan file's steps
// (plan_load runs each step's rule) and any later one. A kernel reads only what its rule checked.

// attrs.dtype: one of the dtypes (a file or a caller may hold any byte).
static void check_dtype_attr(const ShapeCall& c) {
    if (c.attrs.dtype != DTYPE_F32 && c.attrs.dtype != DTYPE_F64 && c.attrs.dtype != DTYPE_I64)
        engine_fail("%s: unknown dtype %d", c.op_name, static_cast<int>(c.attrs.dtype));
}

// attrs.shape where it is the shape of a tensor (not a reshape's target, which may hold a -1):
// no negative size, and an element count that fits.
static void check_shape_attr(const ShapeCall& c) { shape_checked_numel(c.attrs.shape, c.op_name); }

static void check_reduction_attr(const ShapeCall& c) {
    if (c.attrs.reduction != REDUCTION_MEAN && c.attrs.reduction != REDUCTION_SUM)
        engine_fail("%s: unknown reduction %d (mean or sum)", c.op_name, static_cast<int>(c.attrs.reduction));
}

void shape_create(ShapeCall& c) {
    for (int i = 0; i < c.attrs.shape.ndim; ++i)
        if (c.attrs.shape.dims[i] < 0)
            engine_fail("%s: negative size in shape %s", c.op_name, c.attrs.shape.str().c_str());
    check_dtype_attr(c);
    c.set_output(0, c.attrs.shape, c.attrs.dtype);
}

void shape_broadcast(ShapeCall& c) {
    c.set_output(0, broadcast_shapes(c.op_name, in(c, 0).shape, in(c, 1).shape), in(c, 0).dtype);
}

// Comparisons of two tensors (broadcast) and tests of one (isnan): 1 or 0 in the float dtype.
void shape_compare(ShapeCall& c) {
    DType dtype = dtype_is_float(in(c, 0).dtype) ? in(c, 0).dtype : DTYPE_F32;
    if (c.n_inputs == 1) c.set_output(0, in(c, 0).shape, dtype);
    else c.set_output(0, broadcast_shapes(c.op_name, in(c, 0).shape, in(c, 1).shape), dtype);
}

// where(condition, a, b): the three shapes broadcast together; a and b of one dtype.
void shape_where(ShapeCall& c) {
    if (in(c, 1).dtype != in(c, 2).dtype)
        engine_fail("%s: the two choices must have one dtype, got %s and %s", c.op_name, dtype_name(in(c, 1).dtype),
                    dtype_name(in(c, 2).dtype));
    Shape s = broadcast_shapes(c.op_name, broadcast_shapes(c.op_name, in(c, 0).shape, in(c, 1).shape), in(c, 2).shape);
    c.set_output(0, s, in(c, 1).dtype);
}

// tril, triu: a matrix or a batch of them (the last two dims).
void shape_triangle(ShapeCall& c) {
    if (in(c, 0).shape.ndim < 2)
        engine_fail("%s: expects a matrix (2 or more dims), got %s", c.op_name, in(c, 0).shape.str().c_str());
    c.set_output(0, in(c, 0).shape, in(c, 0).dtype);
}

void shape_randint(ShapeCall& c) {
    if (!(c.attrs.lo < c.attrs.hi))
        engine_fail("%s: low (%g) must be less than high (%g)", c.op_name, c.attrs.lo, c.attrs.hi);
    if (c.attrs.lo != std::floor(c.attrs.lo) || c.attrs.hi != std::floor(c.attrs.hi) || std::fabs(c.attrs.lo) > 0x1p62 ||
        std::fabs(c.attrs.hi) > 0x1p62)
        engine_fail("%s: low and high must be whole numbers below 2^62 in size, got %g and %g", c.op_name, c.attrs.lo,
                    c.attrs.hi);
    shape_create(c);
}

// multinomial: probabilities [k] or [m,k] (float) -> [n] or [m,n] int64.
void shape_multinomial(ShapeCall& c) {
    const Value& p = in(c, 0);
    if (!dtype_is_float(p.dtype))
        engine_fail("%s: the probabilities must be float32 or float64, got %s", c.op_name, dtype_name(p.dtype));
    if (p.shape.ndim != 1 && p.shape.ndim != 2)
        engine_fail("%s: expects probabilities of 1 or 2 dims, got %s", c.op_name, p.shape.str().c_str());
    int64_t k = p.shape.dims[p.shape.ndim - 1];
    if (k == 0) engine_fail("%s: there are no categories (shape %s)", c.op_name, p.shape.str().c_str());
    if (c.attrs.length <= 0)
        engine_fail("%s: the number of samples must be positive, got %lld", c.op_name, static_cast<long long>(c.attrs.length));
    if (!c.attrs.all && c.attrs.length > k)
        engine_fail("%s: cannot draw %lld samples from %lld categories without replacement", c.op_name,
                    static_cast<long long>(c.attrs.length), static_cast<long long>(k));
    Shape s = p.shape;
    s.dims[s.ndim - 1] = c.attrs.length;
    c.set_output(0, s, DTYPE_I64);
}

void shape_same(ShapeCall& c) { c.set_output(0, in(c, 0).shape, in(c, 0).dtype); }

void shape_same_pair(ShapeCall& c) {
    if (in(c, 0).shape != in(c, 1).shape)
        engine_fail("%s: shapes %s and %s must be equal", c.op_name, in(c, 0).shape.str().c_str(),
                    in(c, 1).shape.str().c_str());
    c.set_output(0, in(c, 0).shape, in(c, 0).dtype);
}

void shape_softmax(ShapeCall& c) {
    check_dim(c, c.attrs.dim, in(c, 0).shape.ndim);
    c.set_output(0, in(c, 0).shape, in(c, 0).dtype);
}

// rows x cols of a matrix operand as the product reads it
static void matrix_dims(const Shape& s, int first, bool transposed, int64_t* rows, int64_t* cols) {
    *rows = transposed ? s.dims[first + 1] : s.dims[first];
    *cols = transposed ? s.dims[first] : s.dims[first + 1];
}

static void fail_matmul_shapes(const ShapeCall& c) {
    engine_fail("%s: shapes %s%s and %s%s do not match", c.op_name, in(c, 0).shape.str().c_str(),
                c.attrs.trans_a ? "ᵀ" : "", in(c, 1).shape.str().c_str(), c.attrs.trans_b ? "ᵀ" : "");
}

void shape_mm(ShapeCall& c) {
    const Shape &a = in(c, 0).shape, &b = in(c, 1).shape;
    if (a.ndim != 2 || b.ndim != 2)
        engine_fail("%s: expects two 2-d matrices, got %s and %s", c.op_name, a.str().c_str(), b.str().c_str());
    int64_t ar, ac, br, bc;
    matrix_dims(a, 0, c.attrs.trans_a, &ar, &ac);
    matrix_dims(b, 0, c.attrs.trans_b, &br, &bc);
    if (ac != br) fail_matmul_shapes(c);
    c.set_output(0, Shape{ar, bc}, in(c, 0).dtype);
}

void shape_bmm(ShapeCall& c) {
    const Shape &a = in(c, 0).shape, &b = in(c, 1).shape;
    if (a.ndim != 3 || b.ndim != 3)
        engine_fail("%s: expects two 3-d batches of matrices, got %s and %s", c.op_name, a.str().c_str(),
                    b.str().c_str());
    int64_t ar, ac, br, bc;
    matrix_dims(a, 1, c.attrs.trans_a, &ar, &ac);
    matrix_dims(b, 1, c.attrs.trans_b, &br, &bc);
    if (a.dims[0] != b.dims[0] || ac != br) fail_matmul_shapes(c);
    c.set_output(0, Shape{a.dims[0], ar, bc}, in(c, 0).dtype);
}

// ---------------------------------------------------------------------------------------------
// lstm: xw [T,B,4H], h0 [B,H], c0 [B,H], W_hh [4H,H] (ops.def), each named in an error.

static void check_lstm_operand(const ShapeCall& c, const char* what, const Shape& got, const Shape& want) {
    if (got != want)
        engine_fail("%s: %s must be %s, got %s", c.op_name, what, want.str().c_str(), got.str().c_str());
}

void shape_lstm(ShapeCall& c) {
    const Shape& xw = in(c, 0).shape;
    if (xw.ndim != 3 || xw[2] % 4 != 0)
        engine_fail("%s: the projected input xw must be [steps, batch, 4*hidden], got %s", c.op_name, xw.str().c_str());
    int64_t steps = xw[0], batch = xw[1], hidden = xw[2] / 4;
    check_lstm_operand(c, "h0", in(c, 1).shape, Shape{batch, hidden});
    check_lstm_operand(c, "c0", in(c, 2).shape, Shape{batch, hidden});
    check_lstm_operand(c, "W_hh", in(c, 3).shape, Shape{4 * hidden, hidden});
    c.set_output(0, Shape{steps, batch, hidden}, in(c, 0).dtype);
    c.set_output(1, Shape{steps, batch, 5 * hidden}, in(c, 0).dtype);
}

// Inputs: the gradients of h and of the state (each full-shaped, or 0-d for none), the state, c0, W_hh.
void shape_lstm_backward(ShapeCall& c) {
    const Shape& state = in(c, 2).shape;
    if (state.ndim != 3 || state[2] % 5 != 0)
        engine_fail("%s: the state must be [steps, batch, 5*hidden], got %s", c.op_name, state.str().c_str());
    int64_t steps = state[0], batch = state[1], hidden = state[2] / 5;
    if (in(c, 0).shape.ndim != 0) check_lstm_operand(c, "the gradient of h", in(c, 0).shape, Shape{steps, batch, hidden});
    if (in(c, 1).shape.ndim != 0) check_lstm_operand(c, "the gradient of the state", in(c, 1).shape, state);
    check_lstm_operand(c, "c0", in(c, 3).shape, Shape{batch, hidden});
    check_lstm_operand(c, "W_hh", in(c, 4).shape, Shape{4 * hidden, hidden});
    c.set_output(0, Shape{steps, batch, 4 * hidden}, in(c, 2).dtype);
    c.set_output(1, Shape{batch, hidden}, in(c, 2).dtype);
}

// ---------------------------------------------------------------------------------------------
// conv2d and max_pool2d: windows along H and W, PyTorch's arithmetic and PyTorch's checks.

// "2" when both sizes are the same, else "(2, 1)" (PyTorch's tuple), for messages.
static std::string size_pair(int64_t h, int64_t w) {
    if (h == w) return std::to_string(h);
    return "(" + std::to_string(h) + ", " + std::to_string(w) + ")";
}

// An image batch [N,C,H,W], or one image [C,H,W] read as a batch of one (PyTorch's unbatched input).
struct ImageDims {
    int64_t n, c, h, w;
    bool batched;
};

static ImageDims image_dims(const Shape& s) {
    if (s.ndim == 4) return {s[0], s[1], s[2], s[3], true};
    return {1, s[0], s[1], s[2], false};
}

// The image shape [N, channels, h, w], or [channels, h, w] for an unbatched `like`.
static Shape image_shape(const ImageDims& like, int64_t channels, int64_t h, int64_t w) {
    if (like.batched) return Shape{like.n, channels, h, w};
    return Shape{channels, h, w};
}

// The span of a window of `kernel` elements `dilation` apart: (kernel - 1) * dilation + 1,
// saturating at INT64_MAX (a weight dim times a huge dilation).
static int64_t window_extent(int64_t kernel, int dilation) {
    int64_t extent;
    if (__builtin_mul_overflow(kernel - 1, int64_t(dilation), &extent) || extent == INT64_MAX) return INT64_MAX;
    return extent + 1;
}

// How many windows fit along an axis of `size` padded by `padding` on both sides, PyTorch's
// formula: floor, or with ceil_mode rounding up, but then a last window must start inside the
// input or the left padding. Zero or negative when none fits (the callers say so). Sizes fit a
// tensor (< 2^62) and attrs an int: no overflow.
static int64_t window_count(int64_t size, int64_t extent, int stride, int padding, bool ceil_mode) {
    int64_t room = size + 2 * int64_t(padding) - extent;   // how far the window can move
    if (room < 0) return 0;
    int64_t count = (ceil_mode ? room + stride - 1 : room) / stride + 1;
    if (ceil_mode && (count - 1) * stride >= size + padding) --count;
    return count;
}

// Whether one of the first `count` windows along an axis has every element in the padding
// (outside [0, size)): possible with dilation. Only windows that start in the left padding can.
static bool window_in_padding(int64_t size, int64_t kernel, int stride, int padding, int dilation, int64_t count) {
    for (int64_t o = 0; o < count && o * stride < padding; ++o) {
        int64_t start = o * stride - padding;                       // < 0
        int64_t first = (-start + dilation - 1) / dilation;         // the first element at 0 or after
        if (first >= kernel || start + first * dilation >= size) return true;
    }
    return false;
}

// Stride and dilation at least 1, padding not negative: what every window op reads.
static void check_window(const ShapeCall& c, const std::string& shapes) {
    const OpAttrs& a = c.attrs;
    if (a.stride_h < 1 || a.stride_w < 1)
        engine_fail("%s: stride must be at least 1, got %s (%s)", c.op_name, size_pair(a.stride_h, a.stride_w).c_str(),
                    shapes.c_str());
    if (a.padding_h < 0 || a.padding_w < 0)
        engine_fail("%s: padding must not be negative, got %s (%s)", c.op_name,
                    size_pair(a.padding_h, a.padding_w).c_str(), shapes.c_str());
    if (a.dilation_h < 1 || a.dilation_w < 1)
        engine_fail("%s: dilation must be at least 1, got %s (%s)", c.op_name,
                    size_pair(a.dilation_h, a.dilation_w).c_str(), shapes.c_str());
}

// The channels check of conv2d: C = the weight's C/groups times groups, O divisible by groups.
static void check_conv2d_groups(const ShapeCall& c, int64_t channels, const Shape& weight, const std::string& shapes) {
    int groups = c.attrs.groups;
    if (groups < 1) engine_fail("%s: groups must be at least 1, got %d (%s)", c.op_name, groups, shapes.c_str());
    if (weight[0] % groups != 0)
        engine_fail("%s: the weight's output channels (%lld) are not divisible by groups (%d) (%s)", c.op_name,
                    static_cast<long long>(weight[0]), groups, shapes.c_str());
    if (groups == 1 && channels != weight[1])
        engine_fail("%s: the input's channels (%lld) do not match the weight's (%lld) (%s)", c.op_name,
                    static_cast<long long>(channels), static_cast<long long>(weight[1]), shapes.c_str());
    if (channels % groups != 0 || channels / groups != weight[1])
        engine_fail("%s: the input's channels (%lld) do not match the weight's (%lld) times groups (%d) (%s)",
                    c.op_name, static_cast<long long>(channels), static_cast<long long>(weight[1]), groups,
                    shapes.c_str());
}

// The output shape [N,O,Ho,Wo] (or [O,Ho,Wo]) of a conv2d of `input` [N,C,H,W] (or [C,H,W]) with
// `weight` [O,C/groups,kH,kW] at the call's stride, padding, dilation and groups, or an error
// naming the op and both shapes. The backward ops check their operands with it too.
static Shape conv2d_output_shape(const ShapeCall& c, const Shape& input, const Shape& weight) {
    std::string shapes = "input " + input.str() + ", weight " + weight.str();
    if ((input.ndim != 3 && input.ndim != 4) || weight.ndim != 4)
        engine_fail("%s: expects an input [N,C,H,W] or [C,H,W] and a 4-d weight [O,C/groups,kH,kW], got %s",
                    c.op_name, shapes.c_str());
    check_window(c, shapes);
    if (weight.numel() == 0) engine_fail("%s: the weight has a dim of size 0 (%s)", c.op_name, shapes.c_str());
    ImageDims x = image_dims(input);
    check_conv2d_groups(c, x.c, weight, shapes);
    const OpAttrs& a = c.attrs;
    int64_t extent_h = window_extent(weight[2], a.dilation_h), extent_w = window_extent(weight[3], a.dilation_w);
    int64_t padded_h = x.h + 2 * int64_t(a.padding_h), padded_w = x.w + 2 * int64_t(a.padding_w);
    if (extent_h > padded_h || extent_w > padded_w) {
        std::string dilated = a.dilation_h == 1 && a.dilation_w == 1 ? "" : " (dilation " + size_pair(a.dilation_h, a.dilation_w) + ")";
        engine_fail("%s: the kernel %lldx%lld%s is larger than the padded input %lldx%lld (%s, padding %s)", c.op_name,
                    static_cast<long long>(weight[2]), static_cast<long long>(weight[3]), dilated.c_str(),
                    static_cast<long long>(padded_h), static_cast<long long>(padded_w), shapes.c_str(),
                    size_pair(a.padding_h, a.padding_w).c_str());
    }
    return image_shape(x, weight[0], window_count(x.h, extent_h, a.stride_h, a.padding_h, false),
                       window_count(x.w, extent_w, a.stride_w, a.padding_w, false));
}

// Inputs: x, weight and an optional bias [O].
void shape_conv2d(ShapeCall& c) {
    if (c.n_inputs != 2 && c.n_inputs != 3)
        engine_fail("%s: expects 2 or 3 tensor inputs (input, weight and an optional bias), got %d", c.op_name,
                    c.n_inputs);
    const Shape &input = in(c, 0).shape, &weight = in(c, 1).shape;
    Shape out = conv2d_output_shape(c, input, weight);
    if (c.n_inputs == 3 && in(c, 2).shape != Shape{weight[0]})
        engine_fail("%s: the bias must have shape [%lld] (one value per output channel), got %s (input %s, weight %s)",
                    c.op_name, static_cast<long long>(weight[0]), in(c, 2).shape.str().c_str(), input.str().c_str(),
                    weight.str().c_str());
    c.set_output(0, out, in(c, 0).dtype);
}

static void check_output_grad(const ShapeCall& c, const Shape& output) {
    if (in(c, 0).shape != output)
        engine_fail("%s: the gradient has shape %s but the forward output has shape %s", c.op_name,
                    in(c, 0).shape.str().c_str(), output.str().c_str());
}

// Inputs: grad of the output, weight. attrs.shape: the forward input's shape.
void shape_conv2d_backward_input(ShapeCall& c) {
    check_shape_attr(c);
    check_output_grad(c, conv2d_output_shape(c, c.attrs.shape, in(c, 1).shape));
    c.set_output(0, c.attrs.shape, in(c, 0).dtype);
}

// Inputs: grad of the output, the forward input. attrs.shape: the weight's shape.
void shape_conv2d_backward_weight(ShapeCall& c) {
    check_shape_attr(c);
    check_output_grad(c, conv2d_output_shape(c, in(c, 1).shape, c.attrs.shape));
    c.set_output(0, c.attrs.shape, in(c, 0).dtype);
}

// PyTorch's max_pool2d checks: a kernel of at least 1 whose window the kernel can number with
// an int32, padding at most half the kernel.
static void check_pool_kernel(const ShapeCall& c, const std::string& shapes) {
    const OpAttrs& a = c.attrs;
    if (a.kernel_h < 1 || a.kernel_w < 1)
        engine_fail("%s: kernel must be at least 1, got %s (%s)", c.op_name, size_pair(a.kernel_h, a.kernel_w).c_str(),
                    shapes.c_str());
    if (int64_t(a.kernel_h) * a.kernel_w > INT32_MAX)   // the kernel numbers a window's elements with int32
        engine_fail("%s: the kernel %dx%d has more than %d elements (%s)", c.op_name, a.kernel_h, a.kernel_w, INT32_MAX,
                    shapes.c_str());
    check_window(c, shapes);
    if (a.padding_h > a.kernel_h / 2 || a.padding_w > a.kernel_w / 2)
        engine_fail("%s: padding must be at most half the kernel size, got padding %s and kernel %dx%d (%s)", c.op_name,
                    size_pair(a.padding_h, a.padding_w).c_str(), a.kernel_h, a.kernel_w, shapes.c_str());
}

// The output shape [N,C,Ho,Wo] (or [C,Ho,Wo]) of max_pool2d of `input` with the call's window, or
// an error: an output of no window, or a window wholly in the padding (it would have no maximum).
static Shape max_pool2d_output_shape(const ShapeCall& c, const Shape& input) {
    std::string shapes = "input " + input.str();
    if (input.ndim != 3 && input.ndim != 4)
        engine_fail("%s: expects an input [N,C,H,W] or [C,H,W], got %s", c.op_name, input.str().c_str());
    check_pool_kernel(c, shapes);
    const OpAttrs& a = c.attrs;
    ImageDims x = image_dims(input);
    int64_t extent_h = window_extent(a.kernel_h, a.dilation_h), extent_w = window_extent(a.kernel_w, a.dilation_w);
    int64_t oh = window_count(x.h, extent_h, a.stride_h, a.padding_h, a.ceil_mode);
    int64_t ow = window_count(x.w, extent_w, a.stride_w, a.padding_w, a.ceil_mode);
    if (oh < 1 || ow < 1) {   // only when the window is larger than the padded input
        std::string dilated = a.dilation_h == 1 && a.dilation_w == 1 ? "" : " (dilation " + size_pair(a.dilation_h, a.dilation_w) + ")";
        bool padded = a.padding_h != 0 || a.padding_w != 0;
        if (padded) shapes += ", padding " + size_pair(a.padding_h, a.padding_w);
        engine_fail("%s: the kernel %dx%d%s is larger than the %sinput %lldx%lld (%s)", c.op_name, a.kernel_h, a.kernel_w,
                    dilated.c_str(), padded ? "padded " : "", static_cast<long long>(x.h + 2 * int64_t(a.padding_h)),
                    static_cast<long long>(x.w + 2 * int64_t(a.padding_w)), shapes.c_str());
    }
    if (window_in_padding(x.h, a.kernel_h, a.stride_h, a.padding_h, a.dilation_h, oh) ||
        window_in_padding(x.w, a.kernel_w, a.stride_w, a.padding_w, a.dilation_w, ow))
        engine_fail("%s: a window lies wholly in the padding (kernel %dx%d, dilation %s, padding %s) (%s)", c.op_name,
                    a.kernel_h, a.kernel_w, size_pair(a.dilation_h, a.dilation_w).c_str(),
                    size_pair(a.padding_h, a.padding_w).c_str(), shapes.c_str());
    return image_shape(x, x.c, oh, ow);
}

void shape_max_pool2d(ShapeCall& c) {
    Shape out = max_pool2d_output_shape(c, in(c, 0).shape);
    c.set_output(0, out, in(c, 0).dtype);
    c.set_output(1, out, DTYPE_I64);
}

// Inputs: grad of the output, the forward's indices. attrs.shape: the forward input's shape.
void shape_max_pool2d_backward(ShapeCall& c) {
    check_shape_attr(c);
    if (in(c, 1).dtype != DTYPE_I64)
        engine_fail("%s: the indices must be an int64 tensor, got %s", c.op_name, dtype_name(in(c, 1).dtype));
    Shape out = max_pool2d_output_shape(c, c.attrs.shape);
    check_output_grad(c, out);
    if (in(c, 1).shape != out)
        engine_fail("%s: the indices have shape %s but the forward output has shape %s", c.op_name,
                    in(c, 1).shape.str().c_str(), out.str().c_str());
    c.set_output(0, c.attrs.shape, in(c, 0).dtype);
}

void shape_transpose(ShapeCall& c) {
    Shape s = in(c, 0).shape;
    check_dim(c, c.attrs.dim, s.ndim);
    check_dim(c, c.attrs.dim2, s.ndim);
    std::swap(s.dims[c.attrs.dim], s.dims[c.attrs.dim2]);
    c.set_output(0, s, in(c, 0).dtype);
}

// The target shape with a -1 (at most one) replaced by what makes the element counts agree.
Shape reshape_target(const char* op_name, const Shape& from, const Shape& to) {
    Shape s = to;
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < s.ndim; ++i) {
        if (s.dims[i] == -1) {
            if (infer >= 0) engine_fail("%s: only one dimension can be -1 in %s", op_name, to.str().c_str());
            infer = i;
        } else if (s.dims[i] < 0) {
            engine_fail("%s: negative size in shape %s", op_name, to.str().c_str());
        } else if (__builtin_mul_overflow(known, s.dims[i], &known)) {
            known = -1;   // more elements than any tensor holds: cannot match
        }
    }
    if (infer >= 0 && known > 0 && from.numel() % known == 0) s.dims[infer] = from.numel() / known;
    int64_t numel = 0;
    if (!shape_numel_fits(s, &numel) || numel != from.numel() || (infer >= 0 && known <= 0))
        engine_fail("%s: cannot view %s (%lld elements) as %s", op_name, from.str().c_str(),
                    static_cast<long long>(from.numel()), to.str().c_str());
    return s;
}

void shape_reshape(ShapeCall& c) {
    c.set_output(0, reshape_target(c.op_name, in(c, 0).shape, c.attrs.shape), in(c, 0).dtype);
}

void shape_unsqueeze(ShapeCall& c) {
    const Shape& x = in(c, 0).shape;
    if (x.ndim >= MAX_DIMS) engine_fail("%s: tensors have at most %d dims", c.op_name, MAX_DIMS);
    check_dim(c, c.attrs.dim, x.ndim + 1);
    Shape s;
    s.ndim = x.ndim + 1;
    for (int i = 0, j = 0; i < s.ndim; ++i) s.dims[i] = i == c.attrs.dim ? 1 : x.dims[j++];
    c.set_output(0, s, in(c, 0).dtype);
}

void shape_squeeze(ShapeCall& c) {
    const Shape& x = in(c, 0).shape;
    if (!c.attrs.all) check_dim(c, c.attrs.dim, x.ndim);
    Shape s;
    for (int i = 0; i < x.ndim; ++i) {
        bool drop = x.dims[i] == 1 && (c.attrs.all || i == c.attrs.dim);
        if (!drop) s.dims[s.ndim++] = x.dims[i];
    }
    c.set_output(0, s, in(c, 0).dtype);
}

void shape_expand(ShapeCall& c) {
    const Shape &x = in(c, 0).shape, &to = c.attrs.shape;
    if (x.ndim > to.ndim || broadcast_shapes(c.op_name, x, to) != to)
        engine_fail("%s: cannot broadcast %s to %s", c.op_name, x.str().c_str(), to.str().c_str());
    c.set_output(0, to, in(c, 0).dtype);
}

void shape_sum_to(ShapeCall& c) {
    const Shape &x = in(c, 0).shape, &to = c.attrs.shape;
    if (to.ndim > x.ndim || broadcast_shapes(c.op_name, x, to) != x)
        engine_fail("%s: cannot sum %s down to %s", c.op_name, x.str().c_str(), to.str().c_str());
    c.set_output(0, to, in(c, 0).dtype);
}

void shape_cat(ShapeCall& c) {
    const Shape& first = in(c, 0).shape;
    check_dim(c, c.attrs.dim, first.ndim);
    Shape s = first;
    s.dims[c.attrs.dim] = 0;
    for (int i = 0; i < c.n_inputs; ++i) {
        const Shape& x = in(c, i).shape;
        bool fits = x.ndim == first.ndim;
        for (int d = 0; fits && d < x.ndim; ++d) fits = d == c.attrs.dim || x.dims[d] == first.dims[d];
        if (!fits)
            engine_fail("%s: tensor %d has shape %s, which does not match %s outside dim %d", c.op_name, i + 1,
                        x.str().c_str(), first.str().c_str(), c.attrs.dim + 1);
        if (__builtin_add_overflow(s.dims[c.attrs.dim], x.dims[c.attrs.dim], &s.dims[c.attrs.dim]))
            engine_fail("%s: the sizes along dim %d add up to more than a tensor can hold", c.op_name, c.attrs.dim + 1);
    }
    c.set_output(0, s, in(c, 0).dtype);
}

static void check_narrow_range(const ShapeCall& c, const Shape& full) {
    check_dim(c, c.attrs.dim, full.ndim);
    int64_t size = full.dims[c.attrs.dim];
    if (c.attrs.start < 0 || c.attrs.length < 0 || c.attrs.start > size || c.attrs.length > size - c.attrs.start)
        engine_fail("%s: start %s length %lld out of range for size %lld along dim %d", c.op_name,
                    one_based(c.attrs.start).c_str(), static_cast<long long>(c.attrs.length),
                    static_cast<long long>(size), c.attrs.dim + 1);
}

void shape_narrow(ShapeCall& c) {
    check_narrow_range(c, in(c, 0).shape);
    Shape s = in(c, 0).shape;
    s.dims[c.attrs.dim] = c.attrs.length;
    c.set_output(0, s, in(c, 0).dtype);
}

void shape_narrow_backward(ShapeCall& c) {
    check_narrow_range(c, c.attrs.shape);
    Shape expected = c.attrs.shape;
    expected.dims[c.attrs.dim] = c.attrs.length;
    if (in(c, 0).shape != expected)
        engine_fail("%s: input %s does not fit %s", c.op_name, in(c, 0).shape.str().c_str(), expected.str().c_str());
    c.set_output(0, c.attrs.shape, in(c, 0).dtype);
}

// The dims of attrs (op_dims_mask) checked against a tensor of `ndim` dims.
static uint32_t checked_dims_mask(const ShapeCall& c, int ndim) {
    if (c.attrs.all) return op_dims_mask(c.attrs, ndim);
    if (c.attrs.dim2 == 0) {
        check_dim(c, c.attrs.dim, ndim);
    } else if (c.attrs.dim2 < 0 || (ndim < 31 && c.attrs.dim2 >= (1 << ndim))) {
        engine_fail("%s: dims (bitmask %d) out of range for a %d-d tensor", c.op_name, c.attrs.dim2, ndim);
    }
    return op_dims_mask(c.attrs, ndim);
}

static Shape reduced_shape(const ShapeCall& c) {
    const Shape& x = in(c, 0).shape;
    uint32_t mask = checked_dims_mask(c, x.ndim);
    Shape s;
    for (int i = 0; i < x.ndim; ++i) {
        if (!(mask & (1u << i))) s.dims[s.ndim++] = x.dims[i];
        else if (c.attrs.keepdim) s.dims[s.ndim++] = 1;
    }
    return s;
}

void shape_reduce(ShapeCall& c) { c.set_output(0, reduced_shape(c), in(c, 0).dtype); }

// amax, amin: like the other reductions, but a reduced dim may not be empty (no maximum to take).
void shape_amax(ShapeCall& c) {
    Shape s = reduced_shape(c);
    const Shape& x = in(c, 0).shape;
    uint32_t mask = op_dims_mask(c.attrs, x.ndim);
    for (int d = 0; d < x.ndim; ++d)
        if ((mask & (1u << d)) && x.dims[d] == 0) engine_fail("%s: dim %d is empty", c.op_name, d + 1);
    if (x.ndim == 0 && x.numel() == 0) engine_fail("%s: the tensor is empty", c.op_name);
    c.set_output(0, s, in(c, 0).dtype);
}

void shape_flip(ShapeCall& c) {
    checked_dims_mask(c, in(c, 0).shape.ndim);
    c.set_output(0, in(c, 0).shape, in(c, 0).dtype);
}

// sort: the input's shape; topk: k (attrs.length) along dim. Both: values and int64 indices.
void shape_sort(ShapeCall& c) {
    const Shape& x = in(c, 0).shape;
    check_dim(c, c.attrs.dim, x.ndim);
    if (c.attrs.scalar != 0 && c.attrs.scalar != 1)
        engine_fail("%s: the direction (attrs.scalar) must be 0 or 1, got %g", c.op_name, c.attrs.scalar);
    Shape s = x;
    if (std::string(c.op_name) == "topk") {
        if (c.attrs.length < 0 || c.attrs.length > x.dims[c.attrs.dim])
            engine_fail("%s: k %lld out of range for size %lld along dim %d", c.op_name,
                        static_cast<long long>(c.attrs.length), static_cast<long long>(x.dims[c.attrs.dim]),
                        c.attrs.dim + 1);
        s.dims[c.attrs.dim] = c.attrs.length;
    }
    c.set_output(0, s, in(c, 0).dtype);
    c.set_output(1, s, DTYPE_I64);
}

void shape_max(ShapeCall& c) {
    if (!c.attrs.all && c.attrs.dim2 != 0)
        engine_fail("%s: reduces one dim or every dim, not several (use amax/amin)", c.op_name);
    Shape s = reduced_shape(c);   // checks the dim first
    if (!c.attrs.all && in(c, 0).shape.ndim > 0 && in(c, 0).shape.dims[c.attrs.dim] == 0)
        engine_fail("%s: dim %d is empty", c.op_name, c.attrs.dim + 1);
    if (in(c, 0).numel() == 0) engine_fail("%s: the tensor is empty", c.op_name);
    c.set_output(0, s, in(c, 0).dtype);
    if (!c.attrs.all) c.set_output(1, s, DTYPE_I64);
}

// The index of gather/scatter: int64, as many dims as `like`, and no larger outside dim (PyTorch's rule).
static void check_index_tensor(const ShapeCall& c, const Value& index, const Shape& like, int dim) {
    if (index.dtype != DTYPE_I64)
        engine_fail("%s: the index must be an int64 tensor, got %s", c.op_name, dtype_name(index.dtype));
    bool fits = index.shape.ndim == like.ndim;
    for (int d = 0; fits && d < like.ndim; ++d) fits = d == dim || index.shape.dims[d] <= like.dims[d];
    if (!fits)
        engine_fail("%s: index shape %s does not fit %s outside dim %d (it must have as many dims, and be no "
                    "larger outside dim %d)",
                    c.op_name, index.shape.str().c_str(), like.str().c_str(), dim + 1, dim + 1);
}

void shape_gather(ShapeCall& c) {
    check_dim(c, c.attrs.dim, in(c, 0).shape.ndim);
    check_index_tensor(c, in(c, 1), in(c, 0).shape, c.attrs.dim);
    c.set_output(0, in(c, 1).shape, in(c, 0).dtype);
}

void shape_scatter_add(ShapeCall& c) {
    check_shape_attr(c);
    check_dim(c, c.attrs.dim, c.attrs.shape.ndim);
    if (in(c, 1).shape != in(c, 0).shape)
        engine_fail("%s: index shape %s must equal source shape %s", c.op_name, in(c, 1).shape.str().c_str(),
                    in(c, 0).shape.str().c_str());
    check_index_tensor(c, in(c, 1), c.attrs.shape, c.attrs.dim);
    c.set_output(0, c.attrs.shape, in(c, 0).dtype);
}

// Inputs: x, index, src (src's shape is index's). The output is x's shape.
void shape_scatter(ShapeCall& c) {
    const Shape& x = in(c, 0).shape;
    check_dim(c, c.attrs.dim, x.ndim);
    check_index_tensor(c, in(c, 1), x, c.attrs.dim);
    if (in(c, 2).shape != in(c, 1).shape)
        engine_fail("%s: index shape %s must equal source shape %s", c.op_name, in(c, 1).shape.str().c_str(),
                    in(c, 2).shape.str().c_str());
    if (in(c, 2).dtype != in(c, 0).dtype)
        engine_fail("%s: the source is %s but the tensor is %s (they must be the same dtype)", c.op_name,
                    dtype_name(in(c, 2).dtype), dtype_name(in(c, 0).dtype));
    c.set_output(0, x, in(c, 0).dtype);
}

void shape_to_device(ShapeCall& c) { c.set_output(0, in(c, 0).shape, in(c, 0).dtype); }

void shape_to(ShapeCall& c) {
    check_dtype_attr(c);
    c.set_output(0, in(c, 0).shape, c.attrs.dtype);
}

void shape_mse_loss(ShapeCall& c) {
    check_reduction_attr(c);
    if (in(c, 0).shape != in(c, 1).shape)
        engine_fail("%s: input %s and target %s must have the same shape", c.op_name, in(c, 0).shape.str().c_str(),
                    in(c, 1).shape.str().c_str());
    c.set_output(0, Shape{}, in(c, 0).dtype);
}

// Scores [N,C] with labels [N], or one example: scores [C] with a 0-d label (or [1]).
static void check_class_shapes(const ShapeCall& c, const Shape& scores, const Shape& labels) {
    bool rows = scores.ndim == 2 && labels.ndim == 1 && labels.dims[0] == scores.dims[0];
    bool one = scores.ndim == 1 && labels.ndim <= 1 && labels.numel() == 1;
    if (!rows && !one)
        engine_fail("%s: input %s and labels %s do not match (expected input [N,C] with labels [N], or input [C] "
                    "with one label)",
                    c.op_name, scores.str().c_str(), labels.str().c_str());
}

static void check_float(const ShapeCall& c, const Value& x, const char* what) {
    if (!dtype_is_float(x.dtype))
        engine_fail("%s: the %s must be float32 or float64, got %s", c.op_name, what, dtype_name(x.dtype));
}

static void check_loss_grad(const ShapeCall& c) {
    check_float(c, in(c, 0), "gradient");
    if (in(c, 0).shape.ndim != 0)
        engine_fail("%s: the gradient of a loss is 0-d, got %s", c.op_name, in(c, 0).shape.str().c_str());
}

// cross_entropy, nll_loss, multi_margin_loss: (scores, labels) -> a 0-d loss.
void shape_class_loss(ShapeCall& c) {
    check_reduction_attr(c);
    check_float(c, in(c, 0), "input");
    check_class_shapes(c, in(c, 0).shape, in(c, 1).shape);
    c.set_output(0, Shape{}, in(c, 0).dtype);
}

// cross_entropy_backward, multi_margin_loss_backward: (grad, scores, labels) -> the scores' shape.
void shape_class_loss_backward(ShapeCall& c) {
    check_reduction_attr(c);
    check_loss_grad(c);
    check_float(c, in(c, 1), "input");
    check_class_shapes(c, in(c, 1).shape, in(c, 2).shape);
    c.set_output(0, in(c, 1).shape, in(c, 1).dtype);
}

// nll_loss_backward: (grad, labels) -> attrs.shape, the shape of nll_loss's input.
void shape_nll_loss_backward(ShapeCall& c) {
    check_reduction_attr(c);
    check_shape_attr(c);
    check_loss_grad(c);
    check_class_shapes(c, c.attrs.shape, in(c, 1).shape);
    c.set_output(0, c.attrs.shape, in(c, 0).dtype);
}

void shape_inplace(ShapeCall& c) {
    const Shape &x = in(c, 0).shape, &y = in(c, 1).shape;
    if (y.ndim > x.ndim || broadcast_shapes(c.op_name, x, y) != x)
        engine_fail("%s: cannot broadcast %s into %s", c.op_name, y.str().c_str(), x.str().c_str());
    c.set_output(0, x, in(c, 0).dtype);
}

}  // namespace td
