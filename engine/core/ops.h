// ops.h: the op table's types (OpId, OpInfo, OpAttrs), the three call records the table's
// functions receive, and `ops::` — one C++ function per op, for backward rules, bindings and tests.
#pragma once

#include <cmath>
#include <limits>
#include <vector>

#include "tensor.h"

namespace td {

enum OpId : uint16_t {
#define OP(name, ...) OP_##name,
#include "ops.def"
#undef OP
    OP_COUNT
};

enum OpFlags : uint32_t {
    OPF_CREATE = 1 << 0,      // no inputs: a leaf, filled from the attributes
    OPF_VIEW = 1 << 1,        // output 0 shares input 0's storage (no copy)
    OPF_INPLACE = 1 << 2,     // output 0 is input 0's storage, written; its version is bumped
    OPF_FLOAT_ONLY = 1 << 3,  // int64 inputs are converted to float32 first (as PyTorch promotes)
    OPF_PROMOTE = 1 << 4,     // inputs of different dtypes are converted to the wider one
    OPF_SAVES_IN0 = 1 << 5,   // the backward rule reads input 0 (checked for in-place changes)
    OPF_SAVES_IN1 = 1 << 6,   // ... input 1
    OPF_SAVES_OUT0 = 1 << 7,  // ... output 0
    OPF_CUSTOM = 1 << 8,      // a function defined outside the engine (function.h): its kernel runs
                              // the function's own ops and sets the node's outputs
    OPF_STRIDED = 1 << 10,    // the kernel reads strided inputs as they are (views do too); others get
                              // contiguous copies from kernel_run
    OPF_INTERNAL = 1 << 9,    // not called by its own name from Lua: a backward rule's helper, or
                              // reached through an operator or another function (x + 1 is add_scalar)
    OPF_FUNCTIONAL = 1 << 11, // Lua calls it as F.name (torch.nn.functional) only, as PyTorch: not
                              // torch.name or x:name (the activations: gelu, silu, ...)
    OPF_SAVES_IN2 = 1 << 12,  // the backward rule reads input 2 (checked as OPF_SAVES_IN0)
    OPF_SAVES_IN3 = 1 << 13,  // ... input 3
    OPF_SAVES_OUT1 = 1 << 14, // ... output 1
};

// Which OpAttrs fields an op reads, for printing (:graph, DOT labels) and for freeze's guards.
enum AttrsKind : uint8_t {
    ATTRS_NONE, ATTRS_CREATE, ATTRS_SCALAR, ATTRS_CLAMP, ATTRS_DIM, ATTRS_DIM2,
    ATTRS_REDUCE, ATTRS_SHAPE, ATTRS_MATMUL, ATTRS_NARROW, ATTRS_DTYPE,
    ATTRS_WINDOW,   // conv2d, max_pool2d: kernel, stride, padding, dilation (each along H and W), groups, ceil_mode
    ATTRS_LOSS,     // losses: reduction (mean or sum)
    ATTRS_ACTIVATION,   // leaky_relu, elu, gelu, softplus: their parameters in scalar (and hi)
    ATTRS_RANGE,    // linspace, randint: lo and hi
    ATTRS_DIAGONAL, // tril, triu: the diagonal in start
    ATTRS_SAMPLE,   // multinomial: length samples, all = with replacement
    ATTRS_DIMS,     // flip: a set of dims (all, dim or dim2 as in ATTRS_REDUCE: op_dims_mask)
    ATTRS_SORT,     // sort, topk: dim, scalar (1: descending / largest first), length (topk's k)
    ATTRS_REGION,   // as_strided, assign_, region_scatter: shape, strides and start (the offset)
    ATTRS_DEVICE,   // to_device: the device
};

enum Reduction : uint8_t { REDUCTION_MEAN, REDUCTION_SUM };

constexpr int MAX_OUTPUTS = 2;

// Every attribute any op takes, flat, listed once: FIELD(type, name, default, what). The struct
// below, attrs_equal (freeze's common-subexpression check) and the plan file's reader and writer
// are all made from this list, so a field added here is compared and saved without another edit
// (the plan file's format version goes up with it). Dims are 0-based; the Lua side converts.
#define OP_ATTRS_FIELDS(FIELD)                                                                     \
    FIELD(double, scalar, 0, "s, p, alpha, fill value; an activation's parameter (ops.def)")       \
    FIELD(double, lo, -std::numeric_limits<double>::infinity(), "clamp's lower bound; linspace's start, randint's low") \
    FIELD(double, hi, std::numeric_limits<double>::infinity(), "clamp's upper bound; linspace's end, randint's high, softplus's threshold") \
    FIELD(int, dim, 0, "dim, or the first of two")                                                 \
    FIELD(int, dim2, 0, "the second dim; reductions and flip: several dims as a bitmask")          \
    FIELD(bool, all, false, "reduce every element / squeeze all size-1 dims; multinomial: with replacement") \
    FIELD(bool, keepdim, false, "reductions keep the reduced dim as size 1")                       \
    FIELD(bool, trans_a, false, "mm/bmm: read A transposed")                                       \
    FIELD(bool, trans_b, false, "mm/bmm: read B transposed")                                       \
    FIELD(bool, accumulate, false, "mm/bmm: Y += A B (freeze's in-place gradients)")               \
    FIELD(int64_t, start, 0, "narrow's first index, select's index, a region's offset; tril/triu's diagonal") \
    FIELD(int64_t, length, 0, "narrow's length; multinomial's number of samples")                  \
    FIELD(int, kernel_h, 0, "max_pool2d's window along H (conv2d's comes from its weight)")        \
    FIELD(int, kernel_w, 0, "max_pool2d's window along W")                                         \
    FIELD(int, stride_h, 1, "conv2d / pooling stride along H")                                     \
    FIELD(int, stride_w, 1, "conv2d / pooling stride along W")                                     \
    FIELD(int, padding_h, 0, "conv2d / pooling padding along H (each side)")                       \
    FIELD(int, padding_w, 0, "conv2d / pooling padding along W (each side)")                       \
    FIELD(int, dilation_h, 1, "conv2d / pooling: rows between a window's elements along H")        \
    FIELD(int, dilation_w, 1, "conv2d / pooling: columns between a window's elements along W")     \
    FIELD(int, groups, 1, "conv2d: channel groups (each output channel reads C/groups inputs)")    \
    FIELD(bool, ceil_mode, false, "max_pool2d: count windows rounding up (PyTorch's ceil_mode)")   \
    FIELD(Reduction, reduction, REDUCTION_MEAN, "losses: mean or sum")                             \
    FIELD(Shape, shape, Shape(), "created / target / full shape; permute's order")                 \
    FIELD(Shape, strides, Shape(), "a region's strides (as_strided, assign_, region_scatter)")      \
    FIELD(DType, dtype, DTYPE_F32, "created dtype, `to`'s target")                                \
    FIELD(Device, device, DEVICE_CPU, "creation ops: the device made on; to_device: the one copied to")

struct OpAttrs {
#define OP_ATTRS_DECLARE(type, name, initial, what) type name = initial;
    OP_ATTRS_FIELDS(OP_ATTRS_DECLARE)
#undef OP_ATTRS_DECLARE
    // Not an attribute: `tensor`'s numel values, read once at creation (never compared or saved).
    const double* init_values = nullptr;
};

// The window of conv2d and max_pool2d, as PyTorch's arguments give it: each size along H and
// along W. ops:: takes it; it becomes OpAttrs' fields of the same names (window_attrs).
struct Window2d {
    int kernel_h = 0, kernel_w = 0;   // max_pool2d's window; conv2d's kernel is its weight's
    int stride_h = 1, stride_w = 1;
    int padding_h = 0, padding_w = 0;   // on each side
    int dilation_h = 1, dilation_w = 1;
    int groups = 1;                     // conv2d
    bool ceil_mode = false;             // max_pool2d
};

// The class losses read scores [N,C] as N rows of C classes, or [C] as one row (ops.def): every
// backend's kernels and the ONNX export walk them so.
struct ClassRows {
    int64_t n, classes;
};
inline ClassRows class_rows(const Shape& scores) {
    return {scores.ndim == 2 ? scores.dims[0] : 1, scores.dims[scores.ndim - 1]};
}
// What a loss's mean divides by over n rows (1 for the sum).
inline double reduction_count(const OpAttrs& a, int64_t n) {
    return a.reduction == REDUCTION_MEAN ? static_cast<double>(n) : 1;
}

// Every field equal (NaN equals NaN: the same number was given).
bool attrs_equal(const OpAttrs& a, const OpAttrs& b);
// OpAttrs() as one shared constant.
const OpAttrs& op_attrs_default();

// What a shape rule sees and fills.
struct ShapeCall {
    const char* op_name;
    const Value* const* inputs;
    int n_inputs;
    const OpAttrs& attrs;
    int n_outputs = 1;
    Shape shapes[MAX_OUTPUTS];
    DType dtypes[MAX_OUTPUTS] = {DTYPE_F32, DTYPE_F32};

    ShapeCall(const char* name, const Value* const* in, int n, const OpAttrs& a)
        : op_name(name), inputs(in), n_inputs(n), attrs(a) {}

    // Every output shape passes here: a negative size or an element count that overflows is an
    // error naming the op, whatever arithmetic the rule did.
    void set_output(int i, const Shape& shape, DType dtype) {
        shape_checked_numel(shape, op_name);
        shapes[i] = shape;
        dtypes[i] = dtype;
        if (i + 1 > n_outputs) n_outputs = i + 1;
    }
};

// What a kernel sees: input values, output values (allocated, or aliased for views and in-place
// ops), attributes. Kernels know nothing of nodes, hooks or autograd; every value of a call is on
// one device, whose backend's kernel runs (backend.h; a copy between devices is `to_device`).
struct KernelCall {
    const Value* const* inputs;
    int n_inputs;
    Value* const* outputs;
    int n_outputs;
    const OpAttrs& attrs;
};

struct Node;
struct Tensor;
struct BackwardCall;

typedef void (*ShapeRule)(ShapeCall& call);
typedef void (*BackwardRule)(BackwardCall& call);

struct OpInfo {
    const char* name;
    int n_inputs;   // -1: variadic (one or more)
    int max_outputs;
    uint32_t flags;
    AttrsKind attrs_kind;
    ShapeRule shape_rule;
    BackwardRule backward_rule;
    const char* math;
};

extern const OpInfo op_table[OP_COUNT];

inline const OpInfo& op_info(OpId op) { return op_table[op]; }
// Whether Lua gets x:name() and torch.name(x) for `op` from the table itself: an elementwise op
// (elementwise.def) of one tensor, without attributes, not OPF_INTERNAL.
bool op_is_simple_method(OpId op);
bool op_find(const char* name, OpId* out);
// The gradient rule of `op` for its input `input` (0-based): one line for people from the op's row
// in grad_rules.def, "dA = grad · Bᵀ"; with a node's `attrs`, its GRAD_RULE_FOR row for them when
// there is one (mm(Bᵀ): "dA = grad · B"). A variadic op's single "each input" rule is every
// input's. A not-differentiable op gives NOT_DIFFERENTIABLE_RULE; nullptr when the op has no such input.
const char* op_grad_rule(OpId op, int input, const OpAttrs* attrs = nullptr);
// How many rule lines grad_rules.def's GRAD_RULE row gives `op` (0: no row, as for a
// not-differentiable op).
int op_grad_rule_count(OpId op);
constexpr const char* NOT_DIFFERENTIABLE_RULE = "no gradient (the op is not differentiable)";
// A 0-based index as the user writes it (1-based), for messages: no overflow at the largest int64
// (an index from a loaded plan file may be anything).
std::string one_based(int64_t index);
// "dim=2 keepdim" style description of the attributes an op uses (dims shown 1-based).
std::string op_describe_attrs(OpId op, const OpAttrs& attrs);

// A user's dim (1-based, or negative counting from the end) as a 0-based dim of a tensor with
// `ndim` dims; an error naming `op_name` when it is out of range.
int dim_normalize(const char* op_name, int64_t dim, int ndim);

// The dtype ops that promote (OPF_PROMOTE) compute in, as PyTorch's result_type: the widest
// dtype of the inputs with dims; a 0-d input only counts when it is of a higher category (float
// beside int64), or when every input is 0-d. float32 [3] * float64 0-d is float32.
DType promote_dtypes(const Value* const* inputs, int n_inputs);
// The dims a reduction (ATTRS_REDUCE) or flip (ATTRS_DIMS) works on, as a bitmask (bit d: dim d,
// 0-based) of a tensor with `ndim` dims: every dim when attrs.all; the set attrs.dim2 when it is not
// 0 (several dims); else attrs.dim alone. The shape rules check the dims are in range.
uint32_t op_dims_mask(const OpAttrs& attrs, int ndim);
// A reshape's target with its -1 resolved; an error naming op_name when the counts differ.
Shape reshape_target(const char* op_name, const Shape& from, const Shape& to);

// Broadcast two shapes NumPy-style; on mismatch an error naming `op_name` and both shapes.
Shape broadcast_shapes(const char* op_name, const Shape& a, const Shape& b);

// Whether `x` can be viewed with shape `to` without a copy; the view's strides into `strides`.
bool view_strides_for(const Value& x, const Shape& to, int64_t* strides);

// ---------------------------------------------------------------------------------------------
// ops:: — call an op (records a node and runs it). Dims are 0-based here.

namespace ops {
Tensor call(OpId op, std::initializer_list<const Tensor*> inputs, const OpAttrs& attrs = op_attrs_default());

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor compare(OpId op, const Tensor& a, const Tensor& b);   // OP_eq, OP_lt, OP_le, OP_gt, OP_ge
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);   // mask broadcasts to x
Tensor masked_fill_(Tensor& x, const Tensor& mask, double value);
Tensor add_scalar(const Tensor& x, double s);
Tensor mul_scalar(const Tensor& x, double s);
Tensor div_scalar(const Tensor& x, double s);
Tensor rsub_scalar(const Tensor& x, double s);
Tensor rdiv_scalar(const Tensor& x, double s);
Tensor pow(const Tensor& x, double p);
Tensor pow_tensor(const Tensor& base, const Tensor& exponent);   // elementwise base ^ exponent, broadcast
Tensor rpow_scalar(double base, const Tensor& exponent);         // e^(exponent * ln base)
Tensor unary(OpId op, const Tensor& x);   // neg, exp, log, sqrt, abs, sign, tanh, sigmoid, relu, clone, detach
Tensor neg(const Tensor& x);
Tensor clamp(const Tensor& x, double lo, double hi);
Tensor activation_backward(OpId op, const Tensor& grad, const Tensor& saved);   // tanh_backward etc.
Tensor clamp_backward(const Tensor& grad, const Tensor& x, double lo, double hi);
Tensor clamp_tensor(const Tensor& x, const Tensor* lo, const Tensor* hi);   // bounds as tensors (broadcast); either may be null
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);   // a, b promoted; condition any dtype
// y = x <op> s elementwise (OP_eq, OP_ne, OP_lt, ...), s as a 0-d tensor of x's dtype.
Tensor compare_scalar(OpId op, const Tensor& x, double s);
// The activations (ATTRS_ACTIVATION): leaky_relu(s = slope), elu(s = alpha), gelu(s = 0 exact, 1
// tanh), softplus(s = beta, hi = threshold); silu takes no parameter.
Tensor activation(OpId op, const Tensor& x, double s = 0, double hi = 0);
Tensor gelu_backward(const Tensor& grad, const Tensor& x, double approximate);
Tensor triangle(OpId op, const Tensor& x, int64_t diagonal);   // tril, triu
// n samples of the categories 1..k of each row of probabilities (int64, 1-based).
Tensor multinomial(const Tensor& probs, int64_t n, bool replacement);
// linspace (steps values from start to end) and randint (whole numbers in [low, high)).
Tensor create_range(OpId op, const Shape& shape, DType dtype, double lo, double hi, Device device = DEVICE_CPU);
// torch.arange(start, end, step): start, start + step, ... before end (PyTorch's count and values).
Tensor arange_range(double start, double end, double step, DType dtype, Device device = DEVICE_CPU);
Tensor mm(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);
Tensor bmm(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);
Tensor matmul(const Tensor& a, const Tensor& b);   // mm for 2-D, bmm for 3-D
// A whole LSTM layer (ops.def's lstm): h [T,B,H]; output 1 (Tensor(node, 1)): the state [T,B,5H],
// each step's i, f, g, o and c. lstm_backward: the gates' gradient [T,B,4H]; output 1: c0's. A 0-d
// grad_h or grad_state stands for no gradient (zero everywhere).
Tensor lstm(const Tensor& xw, const Tensor& h0, const Tensor& c0, const Tensor& w_hh);
Tensor lstm_backward(const Tensor& grad_h, const Tensor& grad_state, const Tensor& state, const Tensor& c0,
                     const Tensor& w_hh);
// y = x wᵀ + b, as nn.Linear: w is [out, in]; b ([out]) may be undefined.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b);
// conv2d of x [N,C,H,W] (or one image [C,H,W]) with weight [O,C/groups,kH,kW]; bias [O] or an
// empty Tensor for none. The window's kernel and ceil_mode are not read (the weight gives the kernel).
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Window2d& window = Window2d());
// PyTorch's padding="same" (stride 1 only): the output has the input's H and W. The window's own
// padding is not read; an odd total padding puts the extra row / column at the bottom / right, as
// PyTorch does (here: one more on both sides, and the first output row / column dropped by a narrow).
Tensor conv2d_same(const Tensor& x, const Tensor& weight, const Tensor& bias, const Window2d& window);
Tensor conv2d_backward_input(const Tensor& grad, const Tensor& weight, const Shape& input_shape, const Window2d& window);
Tensor conv2d_backward_weight(const Tensor& grad, const Tensor& x, const Shape& weight_shape, const Window2d& window);
// The maximum of each window of x [N,C,H,W] or [C,H,W]; output 1 (Tensor(node, 1)): the 1-based
// index of each maximum in its H*W plane (int64). groups is not read.
Tensor max_pool2d(const Tensor& x, const Window2d& window);
Tensor max_pool2d_backward(const Tensor& grad, const Tensor& indices, const Shape& input_shape, const Window2d& window);
Tensor flatten(const Tensor& x, int start_dim, int end_dim);   // dims start..end merged into one (a reshape)
Tensor transpose(const Tensor& x, int d1, int d2);
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor unsqueeze(const Tensor& x, int dim);
Tensor squeeze(const Tensor& x, int dim);   // dim < 0: every size-1 dim
Tensor expand(const Tensor& x, const Shape& shape);
Tensor sum_to(const Tensor& x, const Shape& shape);
Tensor cat(const std::vector<Tensor>& xs, int dim);
Tensor narrow(const Tensor& x, int dim, int64_t start, int64_t length);
Tensor narrow_backward(const Tensor& g, int dim, int64_t start, const Shape& full);
Tensor reduce(OpId op, const Tensor& x, int dim, bool keepdim);   // sum, mean, prod, max, min, amax, amin over one dim
Tensor reduce_all(OpId op, const Tensor& x);                       // ... of every element
// sum, mean, prod, amax, amin over the dims in `mask` (bit d: dim d; 0 or every dim: all of them),
// stored canonically: one dim in attrs.dim, several in attrs.dim2, every dim as attrs.all.
Tensor reduce_dims(OpId op, const Tensor& x, uint32_t mask, bool keepdim);
Tensor cumsum(const Tensor& x, int dim);
// sort along dim; output 1 holds the 1-based int64 index each value came from (ties keep order)
Tensor sort(const Tensor& x, int dim, bool descending);
Tensor topk(const Tensor& x, int64_t k, int dim, bool largest);   // the first k of sort; output 1 as sort's
Tensor flip(const Tensor& x, uint32_t mask);   // reversed along the dims in mask
// x with x[..index[..i..]..] = src[..i..] along dim (index no larger than src anywhere, nor than x
// outside dim, as PyTorch's scatter)
Tensor scatter(const Tensor& x, int dim, const Tensor& index, const Tensor& src);
Tensor softmax(const Tensor& x, int dim);
Tensor log_softmax(const Tensor& x, int dim);
Tensor gather(const Tensor& x, int dim, const Tensor& index);
Tensor scatter_add(const Tensor& src, int dim, const Tensor& index, const Shape& shape);
Tensor to(const Tensor& x, DType dtype);
Tensor to_device(const Tensor& x, Device device);   // x itself when already there
// Losses (0-d). Labels: 1-based classes, int64 or floats holding whole numbers.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = REDUCTION_MEAN);
// cross_entropy, nll_loss, multi_margin_loss of scores [N,C] (or [C]) and labels [N] (or 0-d)
Tensor class_loss(OpId op, const Tensor& scores, const Tensor& labels, Reduction reduction = REDUCTION_MEAN);
// cross_entropy_backward, multi_margin_loss_backward: grad (0-d) times the loss's derivative
Tensor class_loss_backward(OpId op, const Tensor& grad, const Tensor& scores, const Tensor& labels,
                           Reduction reduction);
Tensor nll_loss_backward(const Tensor& grad, const Tensor& labels, const Shape& scores_shape, Reduction reduction);
// zeros/ones/full/rand/randn/eye/arange on `device`
Tensor create(OpId op, const Shape& shape, DType dtype, double fill = 0, Device device = DEVICE_CPU);
Tensor from_values(const Shape& shape, DType dtype, const double* values, Device device = DEVICE_CPU);   // `tensor`
// In place (return x, rebased when autograd needs it).
Tensor add_(Tensor& x, const Tensor& y, double alpha = 1);
Tensor sub_(Tensor& x, const Tensor& y, double alpha = 1);
Tensor mul_(Tensor& x, const Tensor& y);
Tensor mul_(Tensor& x, double s);   // x *= s (a `full` leaf holds s, as PyTorch wraps a number)
Tensor zero_(Tensor& x);
Tensor fill_(Tensor& x, double s);
Tensor copy_(Tensor& x, const Tensor& src);

// ---- Built from the ops above (ops_compose.cpp): the recorded nodes are those ops, and the
// gradients PyTorch gives follow from theirs. Errors name the function (`name`, what the user
// called) and its arguments. Dims are 0-based; masks as reduce_dims's.
Tensor var(const Tensor& x, uint32_t mask, double correction, bool keepdim, const char* name = "var");
Tensor std_dev(const Tensor& x, uint32_t mask, double correction, bool keepdim);   // sqrt(var)
Tensor norm(const Tensor& x, double p, uint32_t mask, bool keepdim);   // p > 0, or inf (amax of |x|)
Tensor logsumexp(const Tensor& x, uint32_t mask, bool keepdim);
// argmax/argmin (op OP_max or OP_min): over dim, or over the flattened tensor when dim < 0
Tensor arg_reduce(OpId op, const Tensor& x, int dim, bool keepdim);
Tensor stack(const std::vector<Tensor>& xs, int dim);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int dim);   // sizes add up to the dim's size
std::vector<Tensor> split_size(const Tensor& x, int64_t size, int dim);   // pieces of `size`, the last smaller
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int dim);
std::vector<Tensor> unbind(const Tensor& x, int dim);
Tensor roll(const Tensor& x, const std::vector<int64_t>& shifts, const std::vector<int>& dims);   // dims empty: flattened
Tensor repeat(const Tensor& x, const std::vector<int64_t>& repeats, const char* name = "repeat");
Tensor tile(const Tensor& x, std::vector<int64_t> repeats);
Tensor unflatten(const Tensor& x, int dim, const Shape& sizes);   // sizes may hold one -1
Tensor index_select(const Tensor& x, int dim, const Tensor& index);   // index: 1-d, 1-based int64
Tensor scatter_add_into(const Tensor& x, int dim, const Tensor& index, const Tensor& src);   // PyTorch's scatter_add
Tensor diag(const Tensor& x, int64_t offset);
Tensor dot(const Tensor& a, const Tensor& b);
Tensor outer(const Tensor& a, const Tensor& b);
Tensor addmm(const Tensor& input, const Tensor& m1, const Tensor& m2, double beta, double alpha);
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);
// Views (view_ops.cpp): they share x's storage. reshape copies first when x's layout cannot be
// viewed with the new shape (as PyTorch); view refuses then.
Tensor view(const Tensor& x, const Shape& shape);
Tensor permute(const Tensor& x, const Shape& order);        // order: 0-based dims
Tensor select(const Tensor& x, int dim, int64_t index);     // 0-based index; the dim goes
Tensor contiguous(const Tensor& x);                         // x itself when already contiguous
// Regions: a view as numbers (shape, strides, start) relative to a contiguous base.
OpAttrs region_of_view(const Tensor& view, const Tensor& base);
Tensor as_strided(const Tensor& x, const OpAttrs& region);
Tensor region_scatter(const Tensor& x, const Tensor& values, const OpAttrs& region);   // a copy of x, region := values
Tensor assign_(Tensor& x, const Tensor& values, const OpAttrs& region);   // x[region] = values, rebased
}  // namespace ops

}  // namespace td
