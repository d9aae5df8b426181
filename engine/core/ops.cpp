// ops.cpp: the op table built from ops.def, with each op's shape rule and backward rule.
//
// [SECTION] table          op_table[], op_find, op_grad_rule (grad_rules.def), op_describe_attrs
// [SECTION] shape rules    output shapes and dtypes, and the errors for bad input
// [SECTION] backward rules gradients of the inputs, written with ops:: (so they are recorded)
// [SECTION] ops::          one C++ function per op
#include "ops.h"

#include <cstring>
#include <functional>

#include "backend.h"
#include "device_emulated.h"
#include "elementwise.h"
#include "kernels_cpu.h"
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

// Whether a kernel that reads contiguous values needs copies made for this call: an input that is
// a strided view; an in-place op writing through a strided view (it runs on a copy, written back);
// an in-place op's other input that shares the written storage (it is read from a copy, so the
// writes cannot change what is still to be read).
static bool needs_contiguous_copies(const OpInfo& info, const KernelCall& c) {
    if (info.flags & (OPF_VIEW | OPF_STRIDED)) return false;
    for (int i = 0; i < c.n_inputs; ++i)
        if (c.inputs[i]->strided()) return true;
    if (!(info.flags & OPF_INPLACE)) return false;
    if (c.outputs[0]->strided()) return true;
    for (int i = 1; i < c.n_inputs; ++i)
        if (c.inputs[i]->storage.get() == c.outputs[0]->storage.get()) return true;
    return false;
}

static void kernel_run_on_copies(const OpInfo& info, KernelFn kernel, const KernelCall& c) {
    bool inplace = info.flags & OPF_INPLACE;
    constexpr int INLINE = 4;   // most ops have few inputs: no heap for them (this runs per op on views)
    Value copies_inline[INLINE];
    const Value* inputs_inline[INLINE];
    std::vector<Value> copies_heap(c.n_inputs > INLINE ? c.n_inputs : 0);
    std::vector<const Value*> inputs_heap(c.n_inputs > INLINE ? c.n_inputs : 0);
    Value* copies = c.n_inputs > INLINE ? copies_heap.data() : copies_inline;
    const Value** inputs = c.n_inputs > INLINE ? inputs_heap.data() : inputs_inline;
    for (int i = 0; i < c.n_inputs; ++i) {
        const Value& v = *c.inputs[i];
        bool aliases = inplace && i > 0 && v.storage.get() == c.outputs[0]->storage.get();
        inputs[i] = &v;
        if (v.strided() || aliases || (inplace && i == 0 && c.outputs[0]->strided())) {
            copies[i] = value_new(v.shape, v.dtype, v.device());
            value_copy_elements(copies[i], v);
            inputs[i] = &copies[i];
        }
    }
    Value* outputs[MAX_OUTPUTS];
    for (int i = 0; i < c.n_outputs; ++i) outputs[i] = c.outputs[i];
    bool write_back = inplace && c.outputs[0]->strided();
    if (write_back) outputs[0] = &copies[0];   // input 0 is the written tensor: run on its copy
    KernelCall call{inputs, c.n_inputs, outputs, c.n_outputs, c.attrs};
    kernel(call);
    if (write_back) value_copy_elements(*c.outputs[0], copies[0]);
}

// A kernel call kept for later (the emulated GPU's capture, device_emulated.h): the values are
// copied (they share the storages, as a CUDA graph keeps the pointers), so are the attributes.
static std::function<void()> deferred_kernel_call(OpId op, KernelFn kernel, const KernelCall& call) {
    std::vector<Value> inputs, outputs;
    for (int i = 0; i < call.n_inputs; ++i) inputs.push_back(*call.inputs[i]);
    for (int i = 0; i < call.n_outputs; ++i) outputs.push_back(*call.outputs[i]);
    OpAttrs attrs = call.attrs;
    attrs.init_values = nullptr;
    return [op, kernel, inputs, outputs, attrs]() mutable {
        std::vector<const Value*> in;
        std::vector<Value*> out;
        for (const Value& v : inputs) in.push_back(&v);
        for (Value& v : outputs) out.push_back(&v);
        KernelCall again{in.data(), static_cast<int>(in.size()), out.data(), static_cast<int>(out.size()), attrs};
        EmulatedKernelScope running;
        const OpInfo& info = op_table[op];
        if (needs_contiguous_copies(info, again)) kernel_run_on_copies(info, kernel, again);
        else kernel(again);
    };
}

// The device whose kernel runs a call: its outputs' (a copy between devices, `to_device`, runs on
// the device it copies to), else its inputs'.
static Device call_device(const KernelCall& call) {
    if (call.n_outputs > 0 && call.outputs[0]->storage) return call.outputs[0]->device();
    return call.n_inputs > 0 ? call.inputs[0]->device() : DEVICE_CPU;
}

void kernel_run(OpId op, const KernelCall& call) {
    const OpInfo& info = op_table[op];
    bool any_element = call.n_outputs == 0;
    for (int i = 0; i < call.n_outputs && !any_element; ++i) any_element = call.outputs[i]->numel() > 0;
    if (!any_element && !(info.flags & OPF_VIEW)) return;
    Device device = call_device(call);
    KernelFn kernel = kernel_for(op, device);
    if (device != DEVICE_CPU && device_emulated()) {   // the CPU kernel reads the emulated device's memory
        if (emulated_capturing() && !(info.flags & OPF_VIEW)) {
            emulated_capture_add(deferred_kernel_call(op, kernel, call));
            return;
        }
        EmulatedKernelScope running;
        if (needs_contiguous_copies(info, call)) kernel_run_on_copies(info, kernel, call);
        else kernel(call);
        return;
    }
    if (needs_contiguous_copies(info, call)) kernel_run_on_copies(info, kernel, call);
    else kernel(call);
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

// ============================================================================================
// [SECTION] backward rules
//
// Each computes grad_input[i] for the inputs that need it, from grad_output and the saved values, using
// ops:: calls. Broadcast inputs get their gradient summed back to their own shape.

static Tensor reduce_to(const Tensor& g, const Shape& shape) {
    return g.shape() == shape ? g : ops::sum_to(g, shape);
}

void backward_identity(BackwardCall& c) { c.grad_input[0] = c.grad_output[0]; }

void backward_none(BackwardCall&) {}

void backward_add(BackwardCall& c) {
    for (int i = 0; i < 2; ++i)
        if (c.needs_grad(i)) c.grad_input[i] = reduce_to(c.grad_output[0], c.input_shape(i));
}

void backward_sub(BackwardCall& c) {
    if (c.needs_grad(0)) c.grad_input[0] = reduce_to(c.grad_output[0], c.input_shape(0));
    if (c.needs_grad(1)) c.grad_input[1] = reduce_to(ops::neg(c.grad_output[0]), c.input_shape(1));
}

void backward_mul(BackwardCall& c) {
    const Tensor& g = c.grad_output[0];
    if (c.needs_grad(0)) c.grad_input[0] = reduce_to(ops::mul(g, c.input(1)), c.input_shape(0));
    if (c.needs_grad(1)) c.grad_input[1] = reduce_to(ops::mul(g, c.input(0)), c.input_shape(1));
}

void backward_div(BackwardCall& c) {   // y = a / b: da = g / b, db = -g * y / b
    const Tensor& g = c.grad_output[0];
    if (c.needs_grad(0)) c.grad_input[0] = reduce_to(ops::div(g, c.input(1)), c.input_shape(0));
    if (c.needs_grad(1))
        c.grad_input[1] = reduce_to(ops::neg(ops::div(ops::mul(g, c.output(0)), c.input(1))), c.input_shape(1));
}

// A 0-d tensor of x's dtype holding s (a comparison's other side, where's constant choice).
static Tensor constant_like(const Tensor& x, double s) { return ops::create(OP_full, Shape{}, x.dtype(), s, x.value().device()); }

// y = a ^ b, as PyTorch's pow_backward_self and pow_backward_exponent:
// da = g * b * a^(b-1), but 0 where b == 0 (0^0 has a zero gradient, not NaN);
// db = g * y * ln a (NaN where a < 0), but 0 where a == 0 and b >= 0. Computed only when b needs
// a gradient, so a constant exponent never spreads it.
void backward_pow_tensor(BackwardCall& c) {
    const Tensor& g = c.grad_output[0];
    if (c.needs_grad(0)) {
        Tensor exponent_minus_1 = ops::add_scalar(c.input(1), -1);
        Tensor local = ops::mul(c.input(1), ops::pow_tensor(c.input(0), exponent_minus_1));
        Tensor da = ops::where(ops::compare_scalar(OP_eq, c.input(1), 0), constant_like(g, 0), ops::mul(g, local));
        c.grad_input[0] = reduce_to(da, c.input_shape(0));
    }
    if (c.needs_grad(1)) {
        Tensor zero_base = ops::mul(ops::compare_scalar(OP_eq, c.input(0), 0), ops::compare_scalar(OP_ge, c.input(1), 0));
        Tensor y_log_a = ops::mul(c.output(0), ops::unary(OP_log, c.input(0)));
        c.grad_input[1] = reduce_to(ops::mul(g, ops::where(zero_base, constant_like(g, 0), y_log_a)), c.input_shape(1));
    }
}

void backward_mul_scalar(BackwardCall& c) { c.grad_input[0] = ops::mul_scalar(c.grad_output[0], c.attrs().scalar); }

void backward_div_scalar(BackwardCall& c) { c.grad_input[0] = ops::div_scalar(c.grad_output[0], c.attrs().scalar); }

void backward_neg(BackwardCall& c) { c.grad_input[0] = ops::neg(c.grad_output[0]); }

void backward_rdiv_scalar(BackwardCall& c) {   // y = s / x: dx = -g * y / x
    c.grad_input[0] = ops::neg(ops::div(ops::mul(c.grad_output[0], c.output(0)), c.input(0)));
}

void backward_pow(BackwardCall& c) {   // y = x^p: dx = g * p * x^(p-1); x^0 has a zero gradient (PyTorch's)
    double p = c.attrs().scalar;
    const Tensor& g = c.grad_output[0];
    if (p == 0) {
        c.grad_input[0] = ops::create(OP_zeros, c.input_shape(0), g.dtype(), 0, g.value().device());
    } else if (p == 1) {
        c.grad_input[0] = g;
    } else if (p == 2) {
        c.grad_input[0] = ops::mul(g, ops::mul_scalar(c.input(0), 2));
    } else {
        c.grad_input[0] = ops::mul(g, ops::mul_scalar(ops::pow(c.input(0), p - 1), p));
    }
}

void backward_exp(BackwardCall& c) { c.grad_input[0] = ops::mul(c.grad_output[0], c.output(0)); }

void backward_log(BackwardCall& c) { c.grad_input[0] = ops::div(c.grad_output[0], c.input(0)); }

void backward_sqrt(BackwardCall& c) {
    c.grad_input[0] = ops::div(c.grad_output[0], ops::mul_scalar(c.output(0), 2));
}

void backward_abs(BackwardCall& c) {
    c.grad_input[0] = ops::mul(c.grad_output[0], ops::unary(OP_sign, c.input(0)));
}

// Whole-number results (sign, floor, round, ...): a zero gradient, as PyTorch.
void backward_zeros(BackwardCall& c) {
    c.grad_input[0] = ops::create(OP_zeros, c.input_shape(0), c.grad_output[0].dtype(), 0, c.grad_output[0].value().device());
}

void backward_sin(BackwardCall& c) { c.grad_input[0] = ops::mul(c.grad_output[0], ops::unary(OP_cos, c.input(0))); }

void backward_cos(BackwardCall& c) { c.grad_input[0] = ops::neg(ops::mul(c.grad_output[0], ops::unary(OP_sin, c.input(0)))); }

void backward_log1p(BackwardCall& c) { c.grad_input[0] = ops::div(c.grad_output[0], ops::add_scalar(c.input(0), 1)); }

void backward_expm1(BackwardCall& c) { c.grad_input[0] = ops::mul(c.grad_output[0], ops::add_scalar(c.output(0), 1)); }

void backward_reciprocal(BackwardCall& c) {   // y = 1/x: dx = -g y^2
    c.grad_input[0] = ops::neg(ops::mul(c.grad_output[0], ops::unary(OP_square, c.output(0))));
}

void backward_rsqrt(BackwardCall& c) {   // y = x^-1/2: dx = -g y^3 / 2
    c.grad_input[0] = ops::mul(c.grad_output[0], ops::mul_scalar(ops::pow(c.output(0), 3), -0.5));
}

void backward_square(BackwardCall& c) { c.grad_input[0] = ops::mul(c.grad_output[0], ops::mul_scalar(c.input(0), 2)); }

void backward_tanh(BackwardCall& c) {
    c.grad_input[0] = ops::activation_backward(OP_tanh_backward, c.grad_output[0], c.output(0));
}

void backward_sigmoid(BackwardCall& c) {
    c.grad_input[0] = ops::activation_backward(OP_sigmoid_backward, c.grad_output[0], c.output(0));
}

void backward_relu(BackwardCall& c) {
    c.grad_input[0] = ops::activation_backward(OP_relu_backward, c.grad_output[0], c.output(0));
}

void backward_clamp(BackwardCall& c) {
    c.grad_input[0] = ops::clamp_backward(c.grad_output[0], c.input(0), c.attrs().lo, c.attrs().hi);
}

// The activation derivatives are ops too, so they have derivatives (a second-order graph).
void backward_tanh_backward(BackwardCall& c) {   // out = g (1 - y^2)
    const Tensor& gg = c.grad_output[0];
    if (c.needs_grad(0)) c.grad_input[0] = ops::activation_backward(OP_tanh_backward, gg, c.input(1));
    if (c.needs_grad(1))
        c.grad_input[1] = ops::mul(ops::mul(gg, c.input(0)), ops::mul_scalar(c.input(1), -2));
}

void backward_sigmoid_backward(BackwardCall& c) {   // out = g y (1 - y)
    const Tensor& gg = c.grad_output[0];
    if (c.needs_grad(0)) c.grad_input[0] = ops::activation_backward(OP_sigmoid_backward, gg, c.input(1));
    if (c.needs_grad(1))
        c.grad_input[1] = ops::mul(ops::mul(gg, c.input(0)), ops::add_scalar(ops::mul_scalar(c.input(1), -2), 1));
}

void backward_relu_backward(BackwardCall& c) {
    if (c.needs_grad(0)) c.grad_input[0] = ops::activation_backward(OP_relu_backward, c.grad_output[0], c.input(1));
}

void backward_clamp_backward(BackwardCall& c) {
    if (c.needs_grad(0))
        c.grad_input[0] = ops::clamp_backward(c.grad_output[0], c.input(1), c.attrs().lo, c.attrs().hi);
}

// maximum and minimum as PyTorch: a tie shares g evenly; the loser gets nothing. `a_loses` is the
// comparison under which input 0 gets no gradient (lt for maximum), `b_loses` input 1's.
static void backward_extremum(BackwardCall& c, OpId a_loses, OpId b_loses) {
    const Tensor& g = c.grad_output[0];
    Tensor shared = ops::where(ops::eq(c.input(0), c.input(1)), ops::mul_scalar(g, 0.5), g);
    if (c.needs_grad(0))
        c.grad_input[0] = reduce_to(ops::masked_fill(shared, ops::compare(a_loses, c.input(0), c.input(1)), 0), c.input_shape(0));
    if (c.needs_grad(1))
        c.grad_input[1] = reduce_to(ops::masked_fill(shared, ops::compare(b_loses, c.input(0), c.input(1)), 0), c.input_shape(1));
}

void backward_maximum(BackwardCall& c) { backward_extremum(c, OP_lt, OP_gt); }
void backward_minimum(BackwardCall& c) { backward_extremum(c, OP_gt, OP_lt); }

// clamp_min(x, lo) as PyTorch: dx = g where x >= lo (a tie is x's), dlo = g where x < lo.
// `keeps` is the comparison of x with the bound under which x keeps the gradient.
static void backward_clamp_bound(BackwardCall& c, OpId keeps, OpId bound_wins) {
    const Tensor& g = c.grad_output[0];
    Tensor zero = constant_like(g, 0);
    if (c.needs_grad(0))
        c.grad_input[0] = reduce_to(ops::where(ops::compare(keeps, c.input(0), c.input(1)), g, zero), c.input_shape(0));
    if (c.needs_grad(1))
        c.grad_input[1] = reduce_to(ops::where(ops::compare(bound_wins, c.input(0), c.input(1)), g, zero), c.input_shape(1));
}

void backward_clamp_min(BackwardCall& c) { backward_clamp_bound(c, OP_ge, OP_lt); }
void backward_clamp_max(BackwardCall& c) { backward_clamp_bound(c, OP_le, OP_gt); }

void backward_where(BackwardCall& c) {   // da = g where condition, db = g elsewhere
    const Tensor& g = c.grad_output[0];
    Tensor zero = constant_like(g, 0);
    if (c.needs_grad(1)) c.grad_input[1] = reduce_to(ops::where(c.input(0), g, zero), c.input_shape(1));
    if (c.needs_grad(2)) c.grad_input[2] = reduce_to(ops::where(c.input(0), zero, g), c.input_shape(2));
}

// The activations' gradients, with PyTorch's formulas (its *_backward kernels), written with ops.
void backward_leaky_relu(BackwardCall& c) {   // dx = g where x > 0, else g * slope
    const Tensor& g = c.grad_output[0];
    c.grad_input[0] = ops::where(ops::compare_scalar(OP_gt, c.input(0), 0), g, ops::mul_scalar(g, c.attrs().scalar));
}

void backward_elu(BackwardCall& c) {   // dx = g where x > 0, else g * alpha * e^x
    const Tensor& g = c.grad_output[0];
    Tensor negative = ops::mul(ops::mul_scalar(g, c.attrs().scalar), ops::unary(OP_exp, c.input(0)));
    c.grad_input[0] = ops::where(ops::compare_scalar(OP_gt, c.input(0), 0), g, negative);
}

void backward_gelu(BackwardCall& c) { c.grad_input[0] = ops::gelu_backward(c.grad_output[0], c.input(0), c.attrs().scalar); }

void backward_silu(BackwardCall& c) {   // s = sigmoid(x): dx = g s (1 + x (1 - s))
    Tensor s = ops::unary(OP_sigmoid, c.input(0));
    Tensor local = ops::add_scalar(ops::mul(c.input(0), ops::rsub_scalar(s, 1)), 1);
    c.grad_input[0] = ops::mul(ops::mul(c.grad_output[0], s), local);
}

void backward_softplus(BackwardCall& c) {   // dx = g where beta x > threshold, else g sigmoid(beta x)
    const Tensor& g = c.grad_output[0];
    Tensor beta_x = ops::mul_scalar(c.input(0), c.attrs().scalar);
    Tensor smooth = ops::mul(g, ops::unary(OP_sigmoid, beta_x));
    c.grad_input[0] = ops::where(ops::compare_scalar(OP_gt, beta_x, c.attrs().hi), g, smooth);
}

// out = g gelu'(x): dg = gelu_backward(gg, x), dx = gg g gelu''(x), with
// gelu''(x) = phi(x) (2 - x^2) (exact; phi the normal density), or for the tanh form
// (t = tanh(u), u = k (x + c x^3)): (1 - t^2) (u' - x t u'^2 + x u'' / 2).
void backward_gelu_backward(BackwardCall& c) {
    const Tensor& gg = c.grad_output[0];
    const Tensor& x = c.input(1);
    if (c.needs_grad(0)) c.grad_input[0] = ops::gelu_backward(gg, x, c.attrs().scalar);
    if (!c.needs_grad(1)) return;
    Tensor x2 = ops::unary(OP_square, x);
    Tensor second;
    if (c.attrs().scalar == 0) {
        Tensor phi = ops::mul_scalar(ops::unary(OP_exp, ops::mul_scalar(x2, -0.5)), 0.5 * M_2_SQRTPI * M_SQRT1_2);
        second = ops::mul(phi, ops::rsub_scalar(x2, 2));
    } else {
        const double k = M_SQRT2 * M_2_SQRTPI * 0.5, cubic = 0.044715;
        Tensor t = ops::unary(OP_tanh, ops::mul_scalar(ops::add(x, ops::mul_scalar(ops::mul(x2, x), cubic)), k));
        Tensor du = ops::mul_scalar(ops::add_scalar(ops::mul_scalar(x2, 3 * cubic), 1), k);
        Tensor inner = ops::sub(du, ops::mul(ops::mul(x, t), ops::unary(OP_square, du)));
        inner = ops::add(inner, ops::mul_scalar(x2, 3 * k * cubic));   // x u'' / 2 = 3 k c x^2
        second = ops::mul(ops::rsub_scalar(ops::unary(OP_square, t), 1), inner);
    }
    c.grad_input[1] = ops::mul(ops::mul(gg, c.input(0)), second);
}

void backward_tril(BackwardCall& c) { c.grad_input[0] = ops::triangle(OP_tril, c.grad_output[0], c.attrs().start); }
void backward_triu(BackwardCall& c) { c.grad_input[0] = ops::triangle(OP_triu, c.grad_output[0], c.attrs().start); }

// Y = op(A) op(B), op = optional transpose. The gradients are products again, with the
// transposes folded into flags rather than copies.
// lstm: lstm_backward walks the steps back and gives every step's gate gradient (which is xw's) and
// c0's; h0's and W_hh's are products of those gates with W_hh and with the h each step read. It has
// no derivative of its own: a create_graph pass is refused here (as PyTorch refuses one through its
// fused cuDNN RNN), naming the way to the per-step form.
void backward_lstm(BackwardCall& c) {
    if (grad_enabled())
        engine_fail("lstm: nn.LSTM's fused layer has no second derivative (create_graph); set "
                    "torch.backends.fused_lstm = false before the forward pass to record each step as ops");
    const Tensor h = c.output(0), state = c.output(1), h0 = c.input(1), c0 = c.input(2), w_hh = c.input(3);
    auto gradient_or_none = [&](int i) {
        return c.grad_output[i].defined() ? c.grad_output[i] : ops::create(OP_zeros, Shape(), h.dtype(), 0, h.value().device());
    };
    Tensor d_gates = ops::lstm_backward(gradient_or_none(0), gradient_or_none(1), state, c0, w_hh);
    int64_t steps = h.value().shape[0], batch = h.value().shape[1], hidden = h.value().shape[2];
    if (c.needs_grad(0)) c.grad_input[0] = d_gates;
    if (c.needs_grad(1)) c.grad_input[1] = ops::mm(ops::select(d_gates, 0, 0), w_hh);
    if (c.needs_grad(2)) c.grad_input[2] = Tensor(d_gates.node.get(), 1);
    if (c.needs_grad(3)) {   // sum over steps of dgates[t]ᵀ h[t-1]: one product over every step
        Tensor h_before = steps == 1 ? ops::unsqueeze(h0, 0)
                                     : ops::cat({ops::unsqueeze(h0, 0), ops::narrow(h, 0, 0, steps - 1)}, 0);
        c.grad_input[3] = ops::mm(ops::reshape(d_gates, Shape{steps * batch, 4 * hidden}),
                                  ops::reshape(h_before, Shape{steps * batch, hidden}), true, false);
    }
}

void backward_matmul(BackwardCall& c) {
    const Tensor& g = c.grad_output[0];
    Tensor a = c.input(0), b = c.input(1);
    bool ta = c.attrs().trans_a, tb = c.attrs().trans_b;
    auto product = [&](const Tensor& x, const Tensor& y, bool tx, bool ty) {
        return c.node->op == OP_bmm ? ops::bmm(x, y, tx, ty) : ops::mm(x, y, tx, ty);
    };
    if (c.needs_grad(0)) {
        if (!ta) c.grad_input[0] = product(g, b, false, !tb);   // dA = g op(B)ᵀ
        else c.grad_input[0] = product(b, g, tb, true);         // dA = (g op(B)ᵀ)ᵀ = op(B) gᵀ
    }
    if (c.needs_grad(1)) {
        if (!tb) c.grad_input[1] = product(a, g, !ta, false);   // dB = op(A)ᵀ g
        else c.grad_input[1] = product(g, a, true, ta);         // dB = (op(A)ᵀ g)ᵀ = gᵀ op(A)
    }
}

// The window a conv2d / max_pool2d node was recorded with, to pass on to its gradient's ops.
static Window2d window_of(const OpAttrs& a) {
    Window2d w;
    w.kernel_h = a.kernel_h, w.kernel_w = a.kernel_w;
    w.stride_h = a.stride_h, w.stride_w = a.stride_w;
    w.padding_h = a.padding_h, w.padding_w = a.padding_w;
    w.dilation_h = a.dilation_h, w.dilation_w = a.dilation_w;
    w.groups = a.groups;
    w.ceil_mode = a.ceil_mode;
    return w;
}

// Y = conv2d(X, W) + b is linear in X and in W, so each gradient is the other operand run
// through one of the backward ops; the bias gathers G over every sample and position.
void backward_conv2d(BackwardCall& c) {
    const Tensor& g = c.grad_output[0];
    Window2d window = window_of(c.attrs());
    if (c.needs_grad(0)) c.grad_input[0] = ops::conv2d_backward_input(g, c.input(1), c.input_shape(0), window);
    if (c.needs_grad(1)) c.grad_input[1] = ops::conv2d_backward_weight(g, c.input(0), c.input_shape(1), window);
    if (c.node->inputs.size() == 3 && c.needs_grad(2)) {   // two sums along contiguous rows: ~7x faster than sum_to
        const Shape& y = g.shape();   // [N,O,Ho,Wo] or [O,Ho,Wo]
        int64_t n = y.ndim == 4 ? y[0] : 1;
        Tensor rows = ops::reshape(g, Shape{n, y[y.ndim - 3], y[y.ndim - 2] * y[y.ndim - 1]});
        c.grad_input[2] = ops::reduce(OP_sum, ops::reduce(OP_sum, rows, 2, false), 0, false);
    }
}

// The three conv ops are one bilinear form read three ways: sum(G * conv2d(X, W)) is also
// sum(conv2d_backward_input(G, W) * X) and sum(conv2d_backward_weight(G, X) * W). So with Z the
// upstream gradient of dX = conv2d_backward_input(G, W): dG = conv2d(Z, W), dW = conv2d_backward_weight(G, Z).
void backward_conv2d_backward_input(BackwardCall& c) {
    const Tensor& z = c.grad_output[0];
    Window2d window = window_of(c.attrs());
    if (c.needs_grad(0)) c.grad_input[0] = ops::conv2d(z, c.input(1), Tensor(), window);
    if (c.needs_grad(1)) c.grad_input[1] = ops::conv2d_backward_weight(c.input(0), z, c.input_shape(1), window);
}

// ... and with Z the upstream gradient of dW = conv2d_backward_weight(G, X): dG = conv2d(X, Z),
// dX = conv2d_backward_input(G, Z).
void backward_conv2d_backward_weight(BackwardCall& c) {
    const Tensor& z = c.grad_output[0];
    Window2d window = window_of(c.attrs());
    if (c.needs_grad(0)) c.grad_input[0] = ops::conv2d(c.input(1), z, Tensor(), window);
    if (c.needs_grad(1)) c.grad_input[1] = ops::conv2d_backward_input(c.input(0), z, c.input_shape(1), window);
}

void backward_max_pool2d(BackwardCall& c) {
    c.grad_input[0] = ops::max_pool2d_backward(c.grad_output[0], c.output(1), c.input_shape(0), window_of(c.attrs()));
}

// max_pool2d_backward puts each g at its window's argmax, so its gradient reads Z back from
// there: a gather along each flattened H*W plane.
void backward_max_pool2d_backward(BackwardCall& c) {
    if (!c.needs_grad(0)) return;
    const Shape &g = c.input_shape(0), &x = c.attrs().shape;   // [N,C,Ho,Wo] and [N,C,H,W], or 3-d
    int64_t planes = x.ndim == 4 ? x[0] * x[1] : x[0];
    Tensor z_planes = ops::reshape(c.grad_output[0], Shape{planes, x[x.ndim - 2] * x[x.ndim - 1]});
    Tensor indices = ops::reshape(c.input(1), Shape{planes, g[g.ndim - 2] * g[g.ndim - 1]});
    c.grad_input[0] = ops::reshape(ops::gather(z_planes, 1, indices), g);
}

void backward_transpose(BackwardCall& c) {
    c.grad_input[0] = ops::transpose(c.grad_output[0], c.attrs().dim, c.attrs().dim2);
}

void backward_reshape(BackwardCall& c) { c.grad_input[0] = ops::reshape(c.grad_output[0], c.input_shape(0)); }

void backward_expand(BackwardCall& c) { c.grad_input[0] = reduce_to(c.grad_output[0], c.input_shape(0)); }

void backward_sum_to(BackwardCall& c) { c.grad_input[0] = ops::expand(c.grad_output[0], c.input_shape(0)); }

void backward_cat(BackwardCall& c) {
    int dim = c.attrs().dim;
    int64_t offset = 0;
    for (int i = 0; i < c.node->inputs.size(); ++i) {
        int64_t length = c.input_shape(i).dims[dim];
        if (c.needs_grad(i)) c.grad_input[i] = ops::narrow(c.grad_output[0], dim, offset, length);
        offset += length;
    }
}

void backward_narrow(BackwardCall& c) {
    c.grad_input_slice(0, c.grad_output[0], c.attrs().dim, c.attrs().start);
}

void backward_narrow_backward(BackwardCall& c) {
    c.grad_input[0] = ops::narrow(c.grad_output[0], c.attrs().dim, c.attrs().start, c.attrs().length);
}

// The input's shape with the reduced dims as 1: what a reduction with keepdim gives.
static Shape kept_shape(const BackwardCall& c) {
    Shape s = c.input_shape(0);
    uint32_t mask = op_dims_mask(c.attrs(), s.ndim);
    for (int d = 0; d < s.ndim; ++d)
        if (mask & (1u << d)) s.dims[d] = 1;
    return s;
}

// A reduction's output (or its gradient) with the reduced dims back as size 1 (over every dim, a
// 0-d result already broadcasts against the input as it is).
static Tensor kept(const BackwardCall& c, const Tensor& y) {
    Shape s = kept_shape(c);
    if (y.shape() == s || c.attrs().all) return y;
    if (!c.attrs().all && c.attrs().dim2 == 0) return ops::unsqueeze(y, c.attrs().dim);
    return ops::reshape(y, s);
}

// The gradient of a reduction, spread back over the input's shape.
static Tensor spread_reduced_grad(const BackwardCall& c, const Tensor& g) {
    return ops::expand(kept(c, g), c.input_shape(0));
}

void backward_sum(BackwardCall& c) { c.grad_input[0] = spread_reduced_grad(c, c.grad_output[0]); }

void backward_mean(BackwardCall& c) {
    double count = static_cast<double>(c.input_shape(0).numel()) / c.output(0).numel();
    c.grad_input[0] = ops::div_scalar(spread_reduced_grad(c, c.grad_output[0]), count);
}

// y = prod of x: dx_i = g * (the product of the others). Written without dividing by a zero: with
// no zero in the group, g y / x_i; with one zero, g (product of the rest) at the zero and 0
// elsewhere; with two or more, 0 (PyTorch's answer, also at zeros).
void backward_prod(BackwardCall& c) {
    const Tensor x = c.input(0);
    uint32_t mask = op_dims_mask(c.attrs(), x.shape().ndim);
    Tensor zero = ops::eq(x, ops::create(OP_zeros, Shape{}, x.dtype()));
    Tensor x_safe = ops::masked_fill(x, zero, 1);
    Tensor prod_safe = ops::reduce_dims(OP_prod, x_safe, mask, true);
    Tensor zeros_count = ops::reduce_dims(OP_sum, zero, mask, true);
    Tensor no_zero = ops::eq(zeros_count, ops::create(OP_zeros, Shape{}, zeros_count.dtype()));
    Tensor one_zero = ops::eq(zeros_count, ops::create(OP_ones, Shape{}, zeros_count.dtype()));
    Tensor others = ops::add(ops::mul(no_zero, ops::div(prod_safe, x_safe)), ops::mul(ops::mul(one_zero, zero), prod_safe));
    c.grad_input[0] = ops::mul(kept(c, c.grad_output[0]), others);
}

// amax/amin: the gradient is shared evenly among the elements equal to the result, as PyTorch.
void backward_amax(BackwardCall& c) {
    uint32_t mask = op_dims_mask(c.attrs(), c.input_shape(0).ndim);
    Tensor winners = ops::eq(c.input(0), kept(c, c.output(0)));
    Tensor count = ops::reduce_dims(OP_sum, winners, mask, true);
    c.grad_input[0] = ops::mul(winners, ops::div(kept(c, c.grad_output[0]), count));
}

// y = running sum along dim: dx = the running sum of g from the end.
void backward_cumsum(BackwardCall& c) {
    uint32_t along = 1u << c.attrs().dim;
    c.grad_input[0] = ops::flip(ops::cumsum(ops::flip(c.grad_output[0], along), c.attrs().dim), along);
}

// sort, topk: each value goes back to where it came from.
void backward_sort(BackwardCall& c) {
    c.grad_input[0] = ops::scatter_add(c.grad_output[0], c.attrs().dim, c.output(1), c.input_shape(0));
}

void backward_flip(BackwardCall& c) { c.grad_input[0] = ops::call(OP_flip, {&c.grad_output[0]}, c.attrs()); }

// y = x with src written at index: x's gradient is g without the overwritten places; src's is g read there.
void backward_scatter(BackwardCall& c) {
    const Tensor& g = c.grad_output[0];
    int dim = c.attrs().dim;
    Tensor index = c.input(1);
    if (c.needs_grad(0)) c.grad_input[0] = ops::scatter(g, dim, index, ops::create(OP_zeros, index.shape(), g.dtype(), 0, g.value().device()));
    if (c.needs_grad(2)) c.grad_input[2] = ops::gather(g, dim, index);
}

void backward_max(BackwardCall& c) {
    const OpAttrs& a = c.attrs();
    const Tensor& g = c.grad_output[0];
    if (a.all) {   // shared evenly among ties, as PyTorch does
        Tensor mask = ops::eq(c.input(0), c.output(0));
        Tensor share = ops::div(g, ops::reduce_all(OP_sum, mask));
        c.grad_input[0] = ops::mul(mask, share);
        return;
    }
    Tensor indices = c.output(1);
    Tensor g_kept = a.keepdim ? g : ops::unsqueeze(g, a.dim);
    Tensor i_kept = a.keepdim ? indices : ops::unsqueeze(indices, a.dim);
    c.grad_input[0] = ops::scatter_add(g_kept, a.dim, i_kept, c.input_shape(0));
}

// The gradient through y = softmax(x) along dim: dx = y * (g - sum(g * y)).
static Tensor softmax_grad(const Tensor& g, const Tensor& y, int dim) {
    Tensor dot = ops::reduce(OP_sum, ops::mul(g, y), dim, true);
    return ops::mul(y, ops::sub(g, dot));
}

void backward_softmax(BackwardCall& c) { c.grad_input[0] = softmax_grad(c.grad_output[0], c.output(0), c.attrs().dim); }

void backward_log_softmax(BackwardCall& c) {   // dx = g - e^y * sum(g)
    const Tensor& g = c.grad_output[0];
    Tensor total = ops::reduce(OP_sum, g, c.attrs().dim, true);
    c.grad_input[0] = ops::sub(g, ops::mul(ops::unary(OP_exp, c.output(0)), total));
}

void backward_gather(BackwardCall& c) {
    if (c.needs_grad(0))
        c.grad_input[0] = ops::scatter_add(c.grad_output[0], c.attrs().dim, c.input(1), c.input_shape(0));
}

void backward_scatter_add(BackwardCall& c) {
    if (c.needs_grad(0)) c.grad_input[0] = ops::gather(c.grad_output[0], c.attrs().dim, c.input(1));
}

void backward_to(BackwardCall& c) { c.grad_input[0] = ops::to(c.grad_output[0], c.node->inputs[0].value().dtype); }
void backward_to_device(BackwardCall& c) {
    c.grad_input[0] = ops::to_device(c.grad_output[0], c.node->inputs[0].value().device());
}

// l = sum (or mean) of (a - b)^2: da = g * 2 (a - b) / count, db = -da.
void backward_mse_loss(BackwardCall& c) {
    double count = c.attrs().reduction == REDUCTION_MEAN ? static_cast<double>(c.input_shape(0).numel()) : 1;
    Tensor da = ops::mul(ops::sub(c.input(0), c.input(1)), ops::mul_scalar(c.grad_output[0], 2 / count));
    if (c.needs_grad(0)) c.grad_input[0] = da;
    if (c.needs_grad(1)) c.grad_input[1] = ops::neg(da);
}

void backward_cross_entropy(BackwardCall& c) {
    if (c.needs_grad(0))
        c.grad_input[0] = ops::class_loss_backward(OP_cross_entropy_backward, c.grad_output[0], c.input(0), c.input(1),
                                                c.attrs().reduction);
}

void backward_nll_loss(BackwardCall& c) {
    if (c.needs_grad(0))
        c.grad_input[0] = ops::nll_loss_backward(c.grad_output[0], c.input(1), c.input_shape(0), c.attrs().reduction);
}

void backward_multi_margin_loss(BackwardCall& c) {
    if (c.needs_grad(0))
        c.grad_input[0] = ops::class_loss_backward(OP_multi_margin_loss_backward, c.grad_output[0], c.input(0),
                                                c.input(1), c.attrs().reduction);
}

// The loss derivatives are linear in their gradient g: out = g * local(x). The gradient of g is
// then sum(gg * local(x)), with local(x) the same op run with g = 1.
static Tensor grad_of_loss_grad(const BackwardCall& c, const Tensor& gg) {
    Tensor one = ops::create(OP_ones, Shape{}, c.output(0).dtype());
    Tensor local = ops::class_loss_backward(c.node->op, one, c.input(1), c.input(2), c.attrs().reduction);
    return ops::reduce_all(OP_sum, ops::mul(gg, local));
}

// out = g s (p - onehot), p = softmax(x) along rows: dg as above; dx = g s * softmax_grad(gg, p).
void backward_cross_entropy_backward(BackwardCall& c) {
    const Tensor& gg = c.grad_output[0];
    if (c.needs_grad(0)) c.grad_input[0] = grad_of_loss_grad(c, gg);
    if (c.needs_grad(1)) {
        int rows_dim = c.input_shape(1).ndim - 1;
        double s = c.attrs().reduction == REDUCTION_MEAN && rows_dim == 1 ? 1.0 / c.input_shape(1).dims[0] : 1;
        Tensor p = ops::softmax(c.input(1), rows_dim);
        c.grad_input[1] = ops::mul(softmax_grad(gg, p, rows_dim), ops::mul_scalar(c.input(0), s));
    }
}

// out = nll_loss's derivative, -g s at each label: its adjoint is nll_loss itself, dg = nll_loss(gg).
void backward_nll_loss_backward(BackwardCall& c) {
    if (c.needs_grad(0))
        c.grad_input[0] = ops::class_loss(OP_nll_loss, c.grad_output[0], c.input(1), c.attrs().reduction);
}

// The hinge's derivative is piecewise constant in x: x gets no gradient (zero), g gets one.
void backward_multi_margin_loss_backward(BackwardCall& c) {
    if (c.needs_grad(0)) c.grad_input[0] = grad_of_loss_grad(c, c.grad_output[0]);
}

void backward_add_inplace(BackwardCall& c) {
    const Tensor& g = c.grad_output[0];
    double alpha = c.attrs().scalar;
    if (c.needs_grad(0)) c.grad_input[0] = g;
    if (c.needs_grad(1)) c.grad_input[1] = reduce_to(alpha == 1 ? g : ops::mul_scalar(g, alpha), c.input_shape(1));
}

void backward_sub_inplace(BackwardCall& c) {
    const Tensor& g = c.grad_output[0];
    if (c.needs_grad(0)) c.grad_input[0] = g;
    if (c.needs_grad(1)) c.grad_input[1] = reduce_to(ops::mul_scalar(g, -c.attrs().scalar), c.input_shape(1));
}

void backward_mul_inplace(BackwardCall& c) {   // the multiplier's gradient is refused at record time
    if (c.needs_grad(0)) c.grad_input[0] = ops::mul(c.grad_output[0], c.input(1));
}

void backward_masked_fill(BackwardCall& c) {   // y = s where mask, else x: dx = g where not mask, else 0
    if (c.needs_grad(0)) c.grad_input[0] = ops::masked_fill(c.grad_output[0], c.input(1), 0);
}

void backward_copy_inplace(BackwardCall& c) {
    if (c.needs_grad(1)) c.grad_input[1] = reduce_to(c.grad_output[0], c.input_shape(1));
}

// ============================================================================================
// [SECTION] ops::

namespace ops {

Tensor call(OpId op, std::initializer_list<const Tensor*> inputs, const OpAttrs& attrs) {
    return op_call(op, inputs.begin(), static_cast<int>(inputs.size()), attrs);
}

static OpAttrs scalar_attrs(double s) {
    OpAttrs a;
    a.scalar = s;
    return a;
}

static OpAttrs dim_attrs(int dim) {
    OpAttrs a;
    a.dim = dim;
    return a;
}

static OpAttrs shape_attrs(const Shape& shape) {
    OpAttrs a;
    a.shape = shape;
    return a;
}

Tensor add(const Tensor& a, const Tensor& b) { return call(OP_add, {&a, &b}); }
Tensor sub(const Tensor& a, const Tensor& b) { return call(OP_sub, {&a, &b}); }
Tensor mul(const Tensor& a, const Tensor& b) { return call(OP_mul, {&a, &b}); }
Tensor div(const Tensor& a, const Tensor& b) { return call(OP_div, {&a, &b}); }
Tensor eq(const Tensor& a, const Tensor& b) { return call(OP_eq, {&a, &b}); }
Tensor compare(OpId op, const Tensor& a, const Tensor& b) { return call(op, {&a, &b}); }

// The mask as x's dtype, so one kernel loop reads both.
// A float mask becomes exact 1/0 first (ne 0), so that no non-zero value turns into 0 on the way
// (0.5 into int64, 1e-300 into float32): non-zero is true, whatever the dtype.
static Tensor mask_like(const Tensor& mask, const Tensor& x) {
    if (!mask.defined() || !x.defined() || mask.dtype() == x.dtype()) return mask;
    Tensor truth = dtype_is_float(mask.dtype()) ? compare_scalar(OP_ne, mask, 0) : mask;
    return truth.dtype() == x.dtype() ? truth : to(truth, x.dtype());
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
    Tensor m = mask_like(mask, x);
    return call(OP_masked_fill, {&x, &m}, scalar_attrs(value));
}
// An int64 tensor with a fractional number becomes float32 first, as PyTorch promotes.
static Tensor with_scalar(OpId op, const Tensor& x, double s) {
    if (x.defined() && x.dtype() == DTYPE_I64 && s != std::floor(s)) {
        Tensor as_float = to(x, DTYPE_F32);
        return call(op, {&as_float}, scalar_attrs(s));
    }
    return call(op, {&x}, scalar_attrs(s));
}

Tensor add_scalar(const Tensor& x, double s) { return with_scalar(OP_add_scalar, x, s); }
Tensor mul_scalar(const Tensor& x, double s) { return with_scalar(OP_mul_scalar, x, s); }
Tensor div_scalar(const Tensor& x, double s) { return call(OP_div_scalar, {&x}, scalar_attrs(s)); }
Tensor rsub_scalar(const Tensor& x, double s) { return with_scalar(OP_rsub_scalar, x, s); }
Tensor rdiv_scalar(const Tensor& x, double s) { return call(OP_rdiv_scalar, {&x}, scalar_attrs(s)); }
// int64 ^ a whole p stays int64 (as PyTorch); a fractional p computes in float32.
Tensor pow(const Tensor& x, double p) {
    if (x.defined() && x.dtype() == DTYPE_I64 && p == std::floor(p) && p < 0)
        engine_fail("pow: integers to negative integer powers are not allowed (x is int64, the exponent %g)", p);
    return with_scalar(OP_pow, x, p);
}

Tensor pow_tensor(const Tensor& base, const Tensor& exponent) { return call(OP_pow_tensor, {&base, &exponent}); }

// base ^ exponent with the base a 0-d tensor, so that 0 ^ x and (-2) ^ x follow PyTorch (values and
// gradients: pow_tensor's). An int64 exponent stays int64 with a whole base, else float32.
Tensor rpow_scalar(double base, const Tensor& exponent) {
    if (!exponent.defined()) return pow_tensor(exponent, exponent);   // op_call reports the missing tensor
    DType dtype = exponent.dtype() == DTYPE_I64 && base != std::floor(base) ? DTYPE_F32 : exponent.dtype();
    Tensor b = create(OP_full, Shape{}, dtype, base, exponent.value().device());
    return pow_tensor(b, exponent);
}
Tensor unary(OpId op, const Tensor& x) { return call(op, {&x}); }
Tensor neg(const Tensor& x) { return call(OP_neg, {&x}); }

Tensor clamp(const Tensor& x, double lo, double hi) {
    OpAttrs a;
    a.lo = lo;
    a.hi = hi;
    return call(OP_clamp, {&x}, a);
}

Tensor activation_backward(OpId op, const Tensor& grad, const Tensor& saved) { return call(op, {&grad, &saved}); }

Tensor compare_scalar(OpId op, const Tensor& x, double s) {
    if (!x.defined()) return compare(op, x, x);   // op_call reports the missing tensor
    return compare(op, x, create(OP_full, Shape{}, x.dtype(), s, x.value().device()));
}

Tensor maximum(const Tensor& a, const Tensor& b) { return call(OP_maximum, {&a, &b}); }
Tensor minimum(const Tensor& a, const Tensor& b) { return call(OP_minimum, {&a, &b}); }

Tensor clamp_tensor(const Tensor& x, const Tensor* lo, const Tensor* hi) {
    Tensor y = x;
    if (lo) y = call(OP_clamp_min, {&y, lo});
    if (hi) y = call(OP_clamp_max, {&y, hi});
    return y;
}

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
    if (!condition.defined() || !a.defined() || !b.defined()) return call(OP_where, {&condition, &a, &b});
    const Value* choices[2] = {&a.value(), &b.value()};
    DType dtype = promote_dtypes(choices, 2);
    Tensor a_as = a.dtype() == dtype ? a : to(a, dtype);
    Tensor b_as = b.dtype() == dtype ? b : to(b, dtype);
    return call(OP_where, {&condition, &a_as, &b_as});
}

Tensor activation(OpId op, const Tensor& x, double s, double hi) {
    OpAttrs a;
    a.scalar = s;
    a.hi = hi;
    return call(op, {&x}, a);
}

Tensor gelu_backward(const Tensor& grad, const Tensor& x, double approximate) {
    return call(OP_gelu_backward, {&grad, &x}, scalar_attrs(approximate));
}

Tensor triangle(OpId op, const Tensor& x, int64_t diagonal) {
    OpAttrs a;
    a.start = diagonal;
    return call(op, {&x}, a);
}

Tensor multinomial(const Tensor& probs, int64_t n, bool replacement) {
    OpAttrs a;
    a.length = n;
    a.all = replacement;
    return call(OP_multinomial, {&probs}, a);
}

Tensor clamp_backward(const Tensor& grad, const Tensor& x, double lo, double hi) {
    OpAttrs a;
    a.lo = lo;
    a.hi = hi;
    return call(OP_clamp_backward, {&grad, &x}, a);
}

static Tensor product(OpId op, const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
    OpAttrs attrs;
    attrs.trans_a = trans_a;
    attrs.trans_b = trans_b;
    return call(op, {&a, &b}, attrs);
}

Tensor lstm(const Tensor& xw, const Tensor& h0, const Tensor& c0, const Tensor& w_hh) {
    return call(OP_lstm, {&xw, &h0, &c0, &w_hh});
}
Tensor lstm_backward(const Tensor& grad_h, const Tensor& grad_state, const Tensor& state, const Tensor& c0,
                     const Tensor& w_hh) {
    return call(OP_lstm_backward, {&grad_h, &grad_state, &state, &c0, &w_hh});
}
Tensor mm(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) { return product(OP_mm, a, b, trans_a, trans_b); }
Tensor bmm(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) { return product(OP_bmm, a, b, trans_a, trans_b); }

// matmul as PyTorch's torch.matmul: a 1-d operand is a row (left) or column (right) vector whose
// added dim is removed again; 2-d by 2-d is mm; a batch (3-d or more) times a matrix folds the batch
// into rows; otherwise the batch dims (all but the last two) broadcast against each other, both
// operands are expanded to them and folded into one batch for bmm. Shapes are checked here, so
// errors name matmul, the op the script called.
Tensor matmul(const Tensor& a, const Tensor& b) {
    if (!a.defined() || !b.defined()) return mm(a, b);   // op_call reports the missing tensor
    const Shape &sa = a.shape(), &sb = b.shape();
    if (sa.ndim < 1 || sb.ndim < 1)
        engine_fail("matmul: both operands need at least 1 dim, got %s and %s", sa.str().c_str(), sb.str().c_str());
    int64_t inner_a = sa[sa.ndim - 1], inner_b = sb.ndim == 1 ? sb[0] : sb[sb.ndim - 2];
    if (inner_a != inner_b)
        engine_fail("matmul: shapes %s and %s do not match (%lld columns against %lld rows)", sa.str().c_str(),
                    sb.str().c_str(), static_cast<long long>(inner_a), static_cast<long long>(inner_b));

    if (sa.ndim == 1) return squeeze(matmul(unsqueeze(a, 0), b), sb.ndim == 1 ? 0 : sb.ndim - 2);
    if (sb.ndim == 1) return squeeze(matmul(a, unsqueeze(b, 1)), sa.ndim - 1);
    if (sa.ndim == 2 && sb.ndim == 2) return mm(a, b);
    if (sb.ndim == 2) {   // a batch times one matrix: fold the batch into rows
        int64_t rows = 1;
        for (int d = 0; d < sa.ndim - 1; ++d) rows *= sa[d];
        Tensor product = mm(reshape(a, Shape{rows, inner_a}), b);
        Shape out = sa;
        out.dims[out.ndim - 1] = sb[1];
        return reshape(product, out);
    }
    Shape batch_a = sa, batch_b = sb;   // the dims before the last two
    batch_a.ndim = sa.ndim - 2;
    batch_b.ndim = sb.ndim - 2;
    Shape batch;
    try {
        batch = broadcast_shapes("matmul", batch_a, batch_b);
    } catch (const EngineError&) {
        engine_fail("matmul: the batch dims of %s and %s cannot be broadcast together", sa.str().c_str(), sb.str().c_str());
    }
    if (batch.ndim + 2 > MAX_DIMS) engine_fail("matmul: tensors have at most %d dims", MAX_DIMS);
    int64_t n = sa[sa.ndim - 2], m = sb[sb.ndim - 1], count = batch.numel();
    auto as_batch = [&](const Tensor& t, int64_t rows, int64_t cols) {
        Shape full = batch;
        full.dims[full.ndim++] = rows;
        full.dims[full.ndim++] = cols;
        Tensor wide = t.shape() == full ? t : expand(t, full);
        if (batch.ndim == 1) return wide;
        return reshape(wide, Shape{count, rows, cols});
    };
    Tensor product = bmm(as_batch(a, n, inner_a), as_batch(b, inner_b, m));
    if (batch.ndim == 1) return product;
    Shape out = batch;
    out.dims[out.ndim++] = n;
    out.dims[out.ndim++] = m;
    return reshape(product, out);
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
    Tensor y;
    if (x.defined() && w.defined() && x.shape().ndim == 2 && w.shape().ndim == 2) {
        if (x.shape()[1] != w.shape()[1])
            engine_fail("linear: input %s does not match weight %s (expected [N,%lld])", x.shape().str().c_str(),
                        w.shape().str().c_str(), static_cast<long long>(w.shape()[1]));
        y = mm(x, w, false, true);   // reads w transposed: no transpose node, no copy
    } else {
        y = matmul(x, transpose(w, 0, 1));
    }
    return b.defined() ? add(y, b) : y;
}

// A window as the attrs of a conv2d / max_pool2d node (`shape`: the backward ops' target shape).
static OpAttrs window_attrs(const Window2d& w, const Shape& shape = Shape()) {
    OpAttrs a;
    a.kernel_h = w.kernel_h, a.kernel_w = w.kernel_w;
    a.stride_h = w.stride_h, a.stride_w = w.stride_w;
    a.padding_h = w.padding_h, a.padding_w = w.padding_w;
    a.dilation_h = w.dilation_h, a.dilation_w = w.dilation_w;
    a.groups = w.groups;
    a.ceil_mode = w.ceil_mode;
    a.shape = shape;
    return a;
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Window2d& window) {
    Window2d w = window;
    w.kernel_h = w.kernel_w = 0;   // the weight's
    w.ceil_mode = false;
    OpAttrs a = window_attrs(w);
    if (!bias.defined()) return call(OP_conv2d, {&x, &weight}, a);
    return call(OP_conv2d, {&x, &weight, &bias}, a);
}

// Along one axis, "same" padding totals dilation * (kernel - 1): half on each side, and when that
// is odd one more at the end. An output computed with one more row of padding on both sides and
// its first row dropped is exactly that (each kept row reads the rows the asymmetric padding gives).
Tensor conv2d_same(const Tensor& x, const Tensor& weight, const Tensor& bias, const Window2d& window) {
    if (window.stride_h != 1 || window.stride_w != 1)
        engine_fail("conv2d: padding=\"same\" is not supported for strided convolutions (stride %d, %d)",
                    window.stride_h, window.stride_w);
    if (!x.defined() || !weight.defined() || weight.shape().ndim != 4 || window.dilation_h < 1 || window.dilation_w < 1)
        return conv2d(x, weight, bias, window);   // the op's checks say what is wrong
    int64_t total_h = int64_t(window.dilation_h) * (weight.shape()[2] - 1);
    int64_t total_w = int64_t(window.dilation_w) * (weight.shape()[3] - 1);
    if (total_h / 2 + total_h % 2 > INT32_MAX || total_w / 2 + total_w % 2 > INT32_MAX)
        engine_fail("conv2d: padding=\"same\" needs a padding over 2^31 (kernel %lldx%lld, dilation %d, %d)",
                    static_cast<long long>(weight.shape()[2]), static_cast<long long>(weight.shape()[3]),
                    window.dilation_h, window.dilation_w);
    Window2d w = window;
    w.padding_h = static_cast<int>(total_h / 2 + total_h % 2);
    w.padding_w = static_cast<int>(total_w / 2 + total_w % 2);
    Tensor y = conv2d(x, weight, bias, w);
    int nd = y.shape().ndim;
    if (total_h % 2) y = narrow(y, nd - 2, 1, y.shape()[nd - 2] - 1);
    if (total_w % 2) y = narrow(y, nd - 1, 1, y.shape()[nd - 1] - 1);
    return y;
}

Tensor conv2d_backward_input(const Tensor& grad, const Tensor& weight, const Shape& input_shape, const Window2d& window) {
    return call(OP_conv2d_backward_input, {&grad, &weight}, window_attrs(window, input_shape));
}

Tensor conv2d_backward_weight(const Tensor& grad, const Tensor& x, const Shape& weight_shape, const Window2d& window) {
    return call(OP_conv2d_backward_weight, {&grad, &x}, window_attrs(window, weight_shape));
}

Tensor max_pool2d(const Tensor& x, const Window2d& window) {
    Window2d w = window;
    w.groups = 1;
    return call(OP_max_pool2d, {&x}, window_attrs(w));
}

Tensor max_pool2d_backward(const Tensor& grad, const Tensor& indices, const Shape& input_shape, const Window2d& window) {
    return call(OP_max_pool2d_backward, {&grad, &indices}, window_attrs(window, input_shape));
}

// A 0-d tensor flattens to [1], as in PyTorch.
Tensor flatten(const Tensor& x, int start_dim, int end_dim) {
    if (!x.defined()) return reshape(x, Shape{-1});   // op_call reports the missing tensor
    const Shape& s = x.shape();
    if (s.ndim == 0) return reshape(x, Shape{1});
    if (start_dim < 0 || end_dim >= s.ndim)
        engine_fail("flatten: dims %d..%d out of range for %s", start_dim + 1, end_dim + 1, s.str().c_str());
    if (start_dim > end_dim)
        engine_fail("flatten: start_dim %d comes after end_dim %d (shape %s)", start_dim + 1, end_dim + 1,
                    s.str().c_str());
    Shape flat;
    for (int i = 0; i < start_dim; ++i) flat.dims[flat.ndim++] = s.dims[i];
    int64_t merged = 1;
    for (int i = start_dim; i <= end_dim; ++i) merged *= s.dims[i];
    flat.dims[flat.ndim++] = merged;
    for (int i = end_dim + 1; i < s.ndim; ++i) flat.dims[flat.ndim++] = s.dims[i];
    return reshape(x, flat);
}

Tensor transpose(const Tensor& x, int d1, int d2) {
    OpAttrs a;
    a.dim = d1;
    a.dim2 = d2;
    return call(OP_transpose, {&x}, a);
}

Tensor unsqueeze(const Tensor& x, int dim) { return call(OP_unsqueeze, {&x}, dim_attrs(dim)); }

Tensor squeeze(const Tensor& x, int dim) {
    OpAttrs a = dim_attrs(dim < 0 ? 0 : dim);
    a.all = dim < 0;
    return call(OP_squeeze, {&x}, a);
}

Tensor expand(const Tensor& x, const Shape& shape) { return call(OP_expand, {&x}, shape_attrs(shape)); }
Tensor sum_to(const Tensor& x, const Shape& shape) { return call(OP_sum_to, {&x}, shape_attrs(shape)); }

Tensor cat(const std::vector<Tensor>& xs, int dim) {
    std::vector<const Tensor*> inputs;
    for (const Tensor& x : xs) inputs.push_back(&x);
    return op_call(OP_cat, inputs.data(), static_cast<int>(inputs.size()), dim_attrs(dim));
}

Tensor narrow(const Tensor& x, int dim, int64_t start, int64_t length) {
    OpAttrs a = dim_attrs(dim);
    a.start = start;
    a.length = length;
    return call(OP_narrow, {&x}, a);
}

Tensor narrow_backward(const Tensor& g, int dim, int64_t start, const Shape& full) {
    OpAttrs a = dim_attrs(dim);
    a.start = start;
    a.length = g.defined() && dim < g.shape().ndim ? g.shape()[dim] : 0;
    a.shape = full;
    return call(OP_narrow_backward, {&g}, a);
}

Tensor reduce(OpId op, const Tensor& x, int dim, bool keepdim) {
    OpAttrs a = dim_attrs(dim);
    a.keepdim = keepdim;
    return call(op, {&x}, a);
}

Tensor reduce_all(OpId op, const Tensor& x) {
    OpAttrs a;
    a.all = true;
    return call(op, {&x}, a);
}

// One dim in attrs.dim, several in attrs.dim2, every dim (or none given) as attrs.all.
static OpAttrs dims_attrs(uint32_t mask, int ndim) {
    OpAttrs a;
    uint32_t every = ndim >= 32 ? ~0u : (1u << ndim) - 1;
    if (__builtin_popcount(mask) == 1) a.dim = __builtin_ctz(mask);
    else if (mask == 0 || mask == every) a.all = true;
    else a.dim2 = static_cast<int>(mask);
    return a;
}

Tensor reduce_dims(OpId op, const Tensor& x, uint32_t mask, bool keepdim) {
    OpAttrs a = dims_attrs(mask, x.defined() ? x.shape().ndim : 0);
    a.keepdim = keepdim;
    return call(op, {&x}, a);
}

Tensor cumsum(const Tensor& x, int dim) { return call(OP_cumsum, {&x}, dim_attrs(dim)); }

Tensor sort(const Tensor& x, int dim, bool descending) {
    OpAttrs a = dim_attrs(dim);
    a.scalar = descending ? 1 : 0;
    return call(OP_sort, {&x}, a);
}

Tensor topk(const Tensor& x, int64_t k, int dim, bool largest) {
    OpAttrs a = dim_attrs(dim);
    a.scalar = largest ? 1 : 0;
    a.length = k;
    return call(OP_topk, {&x}, a);
}

Tensor flip(const Tensor& x, uint32_t mask) { return call(OP_flip, {&x}, dims_attrs(mask, x.defined() ? x.shape().ndim : 0)); }

Tensor scatter(const Tensor& x, int dim, const Tensor& index, const Tensor& src) {
    return call(OP_scatter, {&x, &index, &src}, dim_attrs(dim));
}

Tensor softmax(const Tensor& x, int dim) { return call(OP_softmax, {&x}, dim_attrs(dim)); }
Tensor log_softmax(const Tensor& x, int dim) { return call(OP_log_softmax, {&x}, dim_attrs(dim)); }
Tensor gather(const Tensor& x, int dim, const Tensor& index) { return call(OP_gather, {&x, &index}, dim_attrs(dim)); }

Tensor scatter_add(const Tensor& src, int dim, const Tensor& index, const Shape& shape) {
    OpAttrs a = dim_attrs(dim);
    a.shape = shape;
    return call(OP_scatter_add, {&src, &index}, a);
}

Tensor to(const Tensor& x, DType dtype) {
    OpAttrs a;
    a.dtype = dtype;
    return call(OP_to, {&x}, a);
}

static OpAttrs loss_attrs(Reduction reduction) {
    OpAttrs a;
    a.reduction = reduction;
    return a;
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
    return call(OP_mse_loss, {&input, &target}, loss_attrs(reduction));
}

Tensor class_loss(OpId op, const Tensor& scores, const Tensor& labels, Reduction reduction) {
    return call(op, {&scores, &labels}, loss_attrs(reduction));
}

Tensor class_loss_backward(OpId op, const Tensor& grad, const Tensor& scores, const Tensor& labels,
                           Reduction reduction) {
    return call(op, {&grad, &scores, &labels}, loss_attrs(reduction));
}

Tensor nll_loss_backward(const Tensor& grad, const Tensor& labels, const Shape& scores_shape, Reduction reduction) {
    OpAttrs a = loss_attrs(reduction);
    a.shape = scores_shape;
    return call(OP_nll_loss_backward, {&grad, &labels}, a);
}

Tensor to_device(const Tensor& x, Device device) {
    if (x.value().device() == device) return x;
    OpAttrs a;
    a.device = device;
    return call(OP_to_device, {&x}, a);
}
Tensor create(OpId op, const Shape& shape, DType dtype, double fill, Device device) {
    OpAttrs a;
    a.shape = shape;
    a.dtype = dtype;
    a.scalar = fill;
    a.device = device;
    return op_call(op, nullptr, 0, a);
}

Tensor create_range(OpId op, const Shape& shape, DType dtype, double lo, double hi, Device device) {
    OpAttrs a;
    a.device = device;
    a.shape = shape;
    a.dtype = dtype;
    a.lo = lo;
    a.hi = hi;
    return op_call(op, nullptr, 0, a);
}

// PyTorch's count, ceil((end - start) / step), and values start + i * step computed in float64
// (int64 for an int64 result) and then converted: arange(n) scaled and shifted, so the graph shows
// arange, mul_scalar and add_scalar nodes.
Tensor arange_range(double start, double end, double step, DType dtype, Device device) {
    if (step == 0) engine_fail("arange: step must be nonzero");
    if (!std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step))
        engine_fail("arange: start, end and step must be finite, got %g, %g and %g", start, end, step);
    if ((step > 0 && end < start) || (step < 0 && end > start))
        engine_fail("arange: the step %g goes away from end (start %g, end %g)", step, start, end);
    double count = std::ceil((end - start) / step);
    if (count > 0x1p62) engine_fail("arange: %g elements are more than a tensor can hold", count);
    DType compute = dtype == DTYPE_I64 ? DTYPE_I64 : DTYPE_F64;
    Tensor y = create(OP_arange, Shape{static_cast<int64_t>(count)}, compute, 0, device);
    if (step != 1) y = mul_scalar(y, step);
    if (start != 0) y = add_scalar(y, start);
    if (y.dtype() != dtype) y = to(y, dtype);
    return y;
}

Tensor from_values(const Shape& shape, DType dtype, const double* values, Device device) {
    OpAttrs a;
    a.device = device;
    a.shape = shape;
    a.dtype = dtype;
    a.init_values = values;
    return op_call(OP_tensor, nullptr, 0, a);
}

// An in-place op returns its output; when autograd tracks it, x now stands for that new node
// (its history includes the in-place step), as in PyTorch.
static Tensor rebase(Tensor& x, const Tensor& result) {
    if (result.node->tracks_grad) x = result;
    return x;
}

Tensor add_(Tensor& x, const Tensor& y, double alpha) { return rebase(x, call(OP_add_, {&x, &y}, scalar_attrs(alpha))); }
Tensor sub_(Tensor& x, const Tensor& y, double alpha) { return rebase(x, call(OP_sub_, {&x, &y}, scalar_attrs(alpha))); }

Tensor mul_(Tensor& x, const Tensor& y) {
    if (grad_enabled() && y.defined() && y.requires_grad())
        engine_fail("mul_: the multiplier requires grad, and an in-place product cannot pass a gradient to it "
                    "(use x * y instead)");
    return rebase(x, call(OP_mul_, {&x, &y}));
}

Tensor mul_(Tensor& x, double s) {
    Tensor multiplier = create(OP_full, Shape{}, x.dtype(), s, x.value().device());
    return mul_(x, multiplier);
}
Tensor zero_(Tensor& x) { return rebase(x, call(OP_zero_, {&x})); }
Tensor fill_(Tensor& x, double s) { return rebase(x, call(OP_fill_, {&x}, scalar_attrs(s))); }
Tensor copy_(Tensor& x, const Tensor& src) { return rebase(x, call(OP_copy_, {&x, &src})); }

Tensor masked_fill_(Tensor& x, const Tensor& mask, double value) {
    Tensor m = mask_like(mask, x);
    return rebase(x, call(OP_masked_fill_, {&x, &m}, scalar_attrs(value)));
}

}  // namespace ops

}  // namespace td
