// onnx_ops.cpp: the ONNX mapping table — each op of ops.def as ONNX nodes (opset 17), or the
// reason it is not exported. docs/onnx.md lists it; test_onnx_table checks that no op is missing.
//
// Conventions that differ (docs/onnx.md): our indices (max's, sort's, gather's, class
// labels, max_pool2d's per H*W plane) are 1-based, ONNX's 0-based (MaxPool's flat over NCHW);
// from opset 13 ReduceSum, Squeeze, Unsqueeze take axes as an input while ReduceMean/Max/Min/Prod
// keep them as an attribute; Clip takes its bounds as inputs. Every input is cast to the dtype the
// engine computes in (OPF_PROMOTE) before the node, as ONNX ops take one element type.
//
// [SECTION] builder       names, nodes, constants, attributes, tensors
// [SECTION] helpers       casts, axes, indices
// [SECTION] mappings      one emit function per op (or per family)
// [SECTION] table         OpId -> mapping
#include <cmath>
#include <algorithm>
#include <cstring>
#include <limits>

#include "backend.h"
#include "onnx_builder.h"

namespace td {

// ============================================================================================
// [SECTION] builder

int onnx_dtype(DType dtype) {
    switch (dtype) {
    case DTYPE_F32: return onnx::TensorProto::FLOAT;
    case DTYPE_F64: return onnx::TensorProto::DOUBLE;
    case DTYPE_I64: return onnx::TensorProto::INT64;
    }
    return onnx::TensorProto::UNDEFINED;
}

std::string OnnxBuilder::fresh(const std::string& hint) { return prefix_ + hint + "_" + std::to_string(next_++); }

std::vector<std::string> OnnxBuilder::add(const std::string& op_type, const std::vector<std::string>& inputs, int n_outputs,
                                          std::vector<onnx::AttributeProto> attrs, const std::string& domain) {
    onnx::NodeProto node;
    node.set_op_type(op_type);
    if (!domain.empty()) node.set_domain(domain);
    for (const std::string& in : inputs) node.add_input(in);
    std::vector<std::string> outputs;
    for (int i = 0; i < n_outputs; ++i) {
        outputs.push_back(fresh(op_type));
        node.add_output(outputs.back());
    }
    for (onnx::AttributeProto& a : attrs) *node.add_attribute() = std::move(a);
    nodes_.push_back(std::move(node));
    return outputs;
}

void OnnxBuilder::label_from(size_t first, const std::string& name, const std::string& where) {
    for (size_t i = first; i < nodes_.size(); ++i) {
        if (i == first) nodes_[i].set_name(name);
        nodes_[i].set_doc_string(where);
    }
}

onnx::AttributeProto onnx_attr_int(const char* name, int64_t value) {
    onnx::AttributeProto a;
    a.set_name(name);
    a.set_type(onnx::AttributeProto::INT);
    a.set_i(value);
    return a;
}

onnx::AttributeProto onnx_attr_ints(const char* name, const std::vector<int64_t>& values) {
    onnx::AttributeProto a;
    a.set_name(name);
    a.set_type(onnx::AttributeProto::INTS);
    for (int64_t v : values) a.add_ints(v);
    return a;
}

onnx::AttributeProto onnx_attr_float(const char* name, double value) {
    onnx::AttributeProto a;
    a.set_name(name);
    a.set_type(onnx::AttributeProto::FLOAT);
    a.set_f(static_cast<float>(value));
    return a;
}

onnx::AttributeProto onnx_attr_string(const char* name, const std::string& value) {
    onnx::AttributeProto a;
    a.set_name(name);
    a.set_type(onnx::AttributeProto::STRING);
    a.set_s(value);
    return a;
}

onnx::AttributeProto onnx_attr_tensor(const char* name, const onnx::TensorProto& value) {
    onnx::AttributeProto a;
    a.set_name(name);
    a.set_type(onnx::AttributeProto::TENSOR);
    *a.mutable_t() = value;
    return a;
}

namespace {

// Elements as raw little-endian bytes of `dtype` (x86-64 and every CUDA host are little-endian).
onnx::TensorProto tensor_from_doubles(const std::vector<double>& values, DType dtype, const Shape& shape) {
    onnx::TensorProto t;
    t.set_data_type(onnx_dtype(dtype));
    for (int i = 0; i < shape.ndim; ++i) t.add_dims(shape[i]);
    std::string raw(values.size() * dtype_size(dtype), '\0');
    for (size_t i = 0; i < values.size(); ++i) {
        char* at = raw.data() + i * dtype_size(dtype);
        if (dtype == DTYPE_F32) {
            float f = static_cast<float>(values[i]);
            std::memcpy(at, &f, sizeof f);
        } else if (dtype == DTYPE_F64) {
            std::memcpy(at, &values[i], sizeof(double));
        } else {
            int64_t n = int64_from_double(values[i]);
            std::memcpy(at, &n, sizeof n);
        }
    }
    t.set_raw_data(raw);
    return t;
}

onnx::TensorProto tensor_from_ints(const std::vector<int64_t>& values, const Shape& shape) {
    onnx::TensorProto t;
    t.set_data_type(onnx::TensorProto::INT64);
    for (int i = 0; i < shape.ndim; ++i) t.add_dims(shape[i]);
    t.set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t)));
    return t;
}

}  // namespace

onnx::TensorProto onnx_tensor_of(const Value& value, const std::string& name) {
    Value host = value_contiguous(value_to_host(value));
    onnx::TensorProto t;
    t.set_name(name);
    t.set_data_type(onnx_dtype(host.dtype));
    for (int i = 0; i < host.shape.ndim; ++i) t.add_dims(host.shape[i]);
    t.set_raw_data(std::string(static_cast<const char*>(host.raw()), host.numel() * dtype_size(host.dtype)));
    return t;
}

std::string OnnxBuilder::values(const std::vector<double>& values, DType dtype, const Shape& shape) {
    return add1("Constant", {}, {onnx_attr_tensor("value", tensor_from_doubles(values, dtype, shape))});
}

std::string OnnxBuilder::scalar(double value, DType dtype) { return values({value}, dtype, Shape()); }

// Any size at the cost of one element: ConstantOfShape (an empty shape list makes a 0-d tensor).
std::string OnnxBuilder::filled(double value, DType dtype, const Shape& shape) {
    std::vector<int64_t> dims(shape.dims, shape.dims + shape.ndim);
    return add1("ConstantOfShape", {ints(dims)}, {onnx_attr_tensor("value", tensor_from_doubles({value}, dtype, Shape{1}))});
}

std::string OnnxBuilder::ints(const std::vector<int64_t>& values) {
    return add1("Constant", {}, {onnx_attr_tensor("value", tensor_from_ints(values, Shape{static_cast<int64_t>(values.size())}))});
}

std::string OnnxBuilder::int_scalar(int64_t value) {
    return add1("Constant", {}, {onnx_attr_tensor("value", tensor_from_ints({value}, Shape()))});
}

std::string OnnxBuilder::cast(const std::string& x, DType from, DType to) {
    if (from == to) return x;
    return add1("Cast", {x}, {onnx_attr_int("to", onnx_dtype(to))});
}

std::string OnnxBuilder::scatter_flat(const std::string& x, const Shape& shape, const std::vector<int64_t>& indices,
                                      const std::string& updates) {
    std::string flat = add1("Reshape", {x, ints({-1})});
    std::string at = add1("Reshape", {ints(indices), ints({static_cast<int64_t>(indices.size()), 1})});
    std::string scattered = add1("ScatterND", {flat, at, add1("Reshape", {updates, ints({-1})})});
    return add1("Reshape", {scattered, ints(std::vector<int64_t>(shape.dims, shape.dims + shape.ndim))});
}

// ============================================================================================
// [SECTION] helpers

namespace {

[[noreturn]] void refuse_call(const OnnxOpCall& c, const std::string& why) {
    engine_fail("%s: %s", op_info(c.op).name, why.c_str());
}

// Input i in dtype `to`.
std::string input_as(OnnxOpCall& c, int i, DType to) { return c.b.cast(c.in[i], c.in_dtype[i], to); }
// Input i in the dtype of output 0 (what the engine computes in).
std::string input_out(OnnxOpCall& c, int i) { return input_as(c, i, c.out_dtype[0]); }
void result(OnnxOpCall& c, const std::string& name) { c.out = {name}; }

DType promoted(DType a, DType b) {
    if (a == DTYPE_F64 || b == DTYPE_F64) return DTYPE_F64;
    if (a == DTYPE_F32 || b == DTYPE_F32) return DTYPE_F32;
    return DTYPE_I64;
}

std::vector<int64_t> dims_of(const Shape& s) { return std::vector<int64_t>(s.dims, s.dims + s.ndim); }

std::vector<int64_t> axes_of_mask(uint32_t mask, int ndim) {
    std::vector<int64_t> axes;
    for (int d = 0; d < ndim; ++d)
        if (mask & (1u << d)) axes.push_back(d);
    return axes;
}

std::vector<int64_t> all_axes(int ndim) { return axes_of_mask(ndim >= 32 ? ~0u : (1u << ndim) - 1, ndim); }

// A 1-based index tensor as ONNX's 0-based int64.
std::string zero_based(OnnxOpCall& c, int i) { return c.b.add1("Sub", {input_as(c, i, DTYPE_I64), c.b.int_scalar(1)}); }
// A 0-based int64 index as ours.
std::string one_based(OnnxBuilder& b, const std::string& index) { return b.add1("Add", {index, b.int_scalar(1)}); }

// A reduction over `axes` (ReduceSum takes them as an input from opset 13, the others as an attribute).
std::string reduce(OnnxBuilder& b, const char* op_type, const std::string& x, const std::vector<int64_t>& axes, bool keepdims) {
    if (std::strcmp(op_type, "ReduceSum") == 0)
        return b.add1(op_type, {x, b.ints(axes)}, {onnx_attr_int("keepdims", keepdims)});
    return b.add1(op_type, {x}, {onnx_attr_ints("axes", axes), onnx_attr_int("keepdims", keepdims)});
}

// The mean or sum of every element (a loss's reduction).
std::string reduce_loss(OnnxBuilder& b, Reduction reduction, const std::string& x, int ndim) {
    if (ndim == 0) return x;
    return reduce(b, reduction == REDUCTION_MEAN ? "ReduceMean" : "ReduceSum", x, all_axes(ndim), false);
}

// The flat row-major element indices of a region (offset start, strides) of shape `shape`.
std::vector<int64_t> region_indices(const OpAttrs& a) {
    const Shape& shape = a.shape;
    std::vector<int64_t> out(static_cast<size_t>(shape.numel()));
    std::vector<int64_t> at(static_cast<size_t>(shape.ndim), 0);
    for (int64_t& index : out) {
        int64_t flat = a.start;
        for (int d = 0; d < shape.ndim; ++d) flat += at[d] * a.strides[d];
        index = flat;
        for (int d = shape.ndim - 1; d >= 0; --d) {
            if (++at[d] < shape[d]) break;
            at[d] = 0;
        }
    }
    return out;
}

// An image batch [N,C,H,W] from a 3-d image [C,H,W] (unsqueezed), and back.
std::string as_batch(OnnxBuilder& b, const std::string& x, int ndim) {
    return ndim == 4 ? x : b.add1("Unsqueeze", {x, b.ints({0})});
}
std::string from_batch(OnnxBuilder& b, const std::string& y, int ndim) {
    return ndim == 4 ? y : b.add1("Squeeze", {y, b.ints({0})});
}

std::vector<onnx::AttributeProto> window_attrs(const OpAttrs& a, bool with_kernel, int64_t kh, int64_t kw) {
    std::vector<onnx::AttributeProto> attrs = {
        onnx_attr_ints("strides", {a.stride_h, a.stride_w}),
        onnx_attr_ints("pads", {a.padding_h, a.padding_w, a.padding_h, a.padding_w}),
        onnx_attr_ints("dilations", {a.dilation_h, a.dilation_w}),
    };
    if (with_kernel) attrs.push_back(onnx_attr_ints("kernel_shape", {kh, kw}));
    return attrs;
}

// One-hot rows of the 0-based labels (int64, [N] or 0-d) over `classes`, in `dtype`.
std::string one_hot(OnnxBuilder& b, const std::string& labels, int64_t classes, DType dtype) {
    std::vector<int64_t> iota(static_cast<size_t>(classes));
    for (int64_t i = 0; i < classes; ++i) iota[i] = i;
    std::string column = b.add1("Unsqueeze", {labels, b.ints({-1})});
    return b.add1("Cast", {b.add1("Equal", {column, b.ints(iota)})}, {onnx_attr_int("to", onnx_dtype(dtype))});
}

// ============================================================================================
// [SECTION] mappings

// --- creation -------------------------------------------------------------------------------

// A deterministic creation op (zeros, eye, arange, ...): its values, made by the CPU kernel now.
void emit_created(OnnxOpCall& c) {
    Value made = value_new(c.out_shape[0], c.out_dtype[0], DEVICE_CPU);
    OpAttrs attrs = c.attrs;
    attrs.device = DEVICE_CPU;
    Value* outs[] = {&made};
    kernel_for(c.op, DEVICE_CPU)(KernelCall{nullptr, 0, outs, 1, attrs});
    std::vector<double> values(static_cast<size_t>(made.numel()));
    for (size_t i = 0; i < values.size(); ++i) values[i] = value_get(made, static_cast<int64_t>(i));
    result(c, c.b.values(values, c.out_dtype[0], c.out_shape[0]));
}

void warn_random(OnnxOpCall& c) {
    if (c.warnings)
        c.warnings->push_back(std::string(op_info(c.op).name) +
                              ": exported as ONNX's random op; its numbers come from the runtime's generator, not tapedeck's");
}

void emit_random(OnnxOpCall& c) {
    warn_random(c);
    std::vector<onnx::AttributeProto> attrs = {onnx_attr_int("dtype", onnx_dtype(c.out_dtype[0])),
                                               onnx_attr_ints("shape", dims_of(c.out_shape[0]))};
    if (c.op == OP_randn) result(c, c.b.add1("RandomNormal", {}, attrs));
    else result(c, c.b.add1("RandomUniform", {}, attrs));
}

void emit_randint(OnnxOpCall& c) {
    warn_random(c);
    std::string u = c.b.add1("RandomUniform", {}, {onnx_attr_int("dtype", onnx::TensorProto::DOUBLE),
                                                   onnx_attr_ints("shape", dims_of(c.out_shape[0])),
                                                   onnx_attr_float("low", c.attrs.lo), onnx_attr_float("high", c.attrs.hi)});
    result(c, c.b.cast(c.b.add1("Floor", {u}), DTYPE_F64, c.out_dtype[0]));
}

// --- elementwise ------------------------------------------------------------------------------

constexpr const char* binary_type(OpId op) {
    switch (op) {
    case OP_add: return "Add";
    case OP_sub: return "Sub";
    case OP_mul: return "Mul";
    case OP_div: return "Div";
    case OP_pow_tensor: return "Pow";
    case OP_maximum: case OP_clamp_min: return "Max";
    case OP_minimum: case OP_clamp_max: return "Min";
    default: return "";
    }
}

void emit_binary(OnnxOpCall& c) {
    std::string a = input_out(c, 0), b = input_out(c, 1), y = c.b.add1(binary_type(c.op), {a, b});
    if ((c.op == OP_maximum || c.op == OP_minimum) && c.out_dtype[0] != DTYPE_I64) {
        // NaN if either is (ONNX leaves Max/Min of a NaN open): a + b is NaN then
        std::string either = c.b.add1("Or", {c.b.add1("IsNaN", {a}), c.b.add1("IsNaN", {b})});
        y = c.b.add1("Where", {either, c.b.add1("Add", {a, b}), y});
    }
    result(c, y);
}

void emit_compare(OnnxOpCall& c) {
    DType t = c.in.size() == 2 ? promoted(c.in_dtype[0], c.in_dtype[1]) : c.in_dtype[0];
    std::string a = input_as(c, 0, t), b = input_as(c, 1, t), truth;
    switch (c.op) {
    case OP_eq: truth = c.b.add1("Equal", {a, b}); break;
    case OP_ne: truth = c.b.add1("Not", {c.b.add1("Equal", {a, b})}); break;
    case OP_lt: truth = c.b.add1("Less", {a, b}); break;
    case OP_le: truth = c.b.add1("LessOrEqual", {a, b}); break;
    case OP_gt: truth = c.b.add1("Greater", {a, b}); break;
    default: truth = c.b.add1("GreaterOrEqual", {a, b}); break;
    }
    result(c, c.b.add1("Cast", {truth}, {onnx_attr_int("to", onnx_dtype(c.out_dtype[0]))}));
}

// Input i is non-zero, as a bool tensor.
std::string nonzero(OnnxOpCall& c, int i) {
    return c.b.add1("Not", {c.b.add1("Equal", {c.in[i], c.b.scalar(0, c.in_dtype[i])})});
}

void emit_masked_fill(OnnxOpCall& c) {
    std::string filled = c.b.add1("Where", {nonzero(c, 1), c.b.scalar(c.attrs.scalar, c.out_dtype[0]), input_out(c, 0)});
    // The mask may broadcast over x, never grow it: the result has x's shape.
    result(c, filled);
}

void emit_where(OnnxOpCall& c) { result(c, c.b.add1("Where", {nonzero(c, 0), c.in[1], c.in[2]})); }

void emit_scalar_op(OnnxOpCall& c) {
    std::string x = input_out(c, 0), s = c.b.scalar(c.attrs.scalar, c.out_dtype[0]);
    switch (c.op) {
    case OP_add_scalar: result(c, c.b.add1("Add", {x, s})); break;
    case OP_mul_scalar: result(c, c.b.add1("Mul", {x, s})); break;
    case OP_div_scalar: result(c, c.b.add1("Div", {x, s})); break;
    case OP_rsub_scalar: result(c, c.b.add1("Sub", {s, x})); break;
    case OP_rdiv_scalar: result(c, c.b.add1("Div", {s, x})); break;
    default: result(c, c.b.add1("Pow", {x, s})); break;   // pow
    }
}

constexpr const char* unary_type(OpId op) {
    switch (op) {
    case OP_neg: return "Neg";
    case OP_exp: return "Exp";
    case OP_log: return "Log";
    case OP_sqrt: return "Sqrt";
    case OP_abs: return "Abs";
    case OP_sign: return "Sign";
    case OP_tanh: return "Tanh";
    case OP_sigmoid: return "Sigmoid";
    case OP_relu: return "Relu";
    case OP_sin: return "Sin";
    case OP_cos: return "Cos";
    case OP_reciprocal: return "Reciprocal";
    case OP_floor: return "Floor";
    case OP_ceil: return "Ceil";
    case OP_round: return "Round";
    default: return "";
    }
}

void emit_unary(OnnxOpCall& c) {
    std::string x = input_out(c, 0);
    bool integer = c.out_dtype[0] == DTYPE_I64;
    if (integer && (c.op == OP_floor || c.op == OP_ceil || c.op == OP_round)) result(c, c.b.add1("Identity", {x}));
    else result(c, c.b.add1(unary_type(c.op), {x}));
}

void emit_unary_composed(OnnxOpCall& c) {
    OnnxBuilder& b = c.b;
    DType t = c.out_dtype[0];
    std::string x = input_out(c, 0);
    switch (c.op) {
    case OP_log1p: result(c, b.add1("Log", {b.add1("Add", {x, b.scalar(1, t)})})); break;
    case OP_expm1: result(c, b.add1("Sub", {b.add1("Exp", {x}), b.scalar(1, t)})); break;
    case OP_rsqrt: result(c, b.add1("Reciprocal", {b.add1("Sqrt", {x})})); break;
    case OP_square: result(c, b.add1("Mul", {x, x})); break;
    default:   // trunc
        if (t == DTYPE_I64) result(c, b.add1("Identity", {x}));
        else result(c, b.add1("Mul", {b.add1("Sign", {x}), b.add1("Floor", {b.add1("Abs", {x})})}));
        break;
    }
}

void emit_clamp(OnnxOpCall& c) {
    DType t = c.out_dtype[0];
    std::string lo = std::isinf(c.attrs.lo) ? "" : c.b.scalar(c.attrs.lo, t);
    std::string hi = std::isinf(c.attrs.hi) ? "" : c.b.scalar(c.attrs.hi, t);
    result(c, c.b.add1("Clip", {input_out(c, 0), lo, hi}));
}

void emit_float_test(OnnxOpCall& c) {   // isnan, isinf, isfinite
    OnnxBuilder& b = c.b;
    DType out = c.out_dtype[0];
    if (c.in_dtype[0] == DTYPE_I64) {   // whole numbers are finite
        result(c, b.filled(c.op == OP_isfinite ? 1 : 0, out, c.out_shape[0]));
        return;
    }
    std::string truth;
    if (c.op == OP_isnan) truth = b.add1("IsNaN", {c.in[0]});
    else if (c.op == OP_isinf) truth = b.add1("IsInf", {c.in[0]});
    else truth = b.add1("Not", {b.add1("Or", {b.add1("IsNaN", {c.in[0]}), b.add1("IsInf", {c.in[0]})})});
    result(c, b.add1("Cast", {truth}, {onnx_attr_int("to", onnx_dtype(out))}));
}

// --- activations ------------------------------------------------------------------------------

constexpr double GELU_TANH_K = 0.7978845608028654;   // sqrt(2 / pi)
constexpr double GELU_TANH_C = 0.044715;

// gelu(x): x Phi(x), or the tanh approximation (attrs.scalar = 1).
std::string gelu_of(OnnxBuilder& b, const std::string& x, DType t, bool tanh_form) {
    std::string half_x = b.add1("Mul", {x, b.scalar(0.5, t)});
    if (!tanh_form) {
        std::string erf = b.add1("Erf", {b.add1("Mul", {x, b.scalar(M_SQRT1_2, t)})});
        return b.add1("Mul", {half_x, b.add1("Add", {erf, b.scalar(1, t)})});
    }
    std::string cube = b.add1("Mul", {b.add1("Mul", {x, x}), x});
    std::string inner = b.add1("Mul", {b.add1("Add", {x, b.add1("Mul", {cube, b.scalar(GELU_TANH_C, t)})}), b.scalar(GELU_TANH_K, t)});
    return b.add1("Mul", {half_x, b.add1("Add", {b.add1("Tanh", {inner}), b.scalar(1, t)})});
}

// gelu'(x): Phi(x) + x phi(x), or the tanh form's derivative.
std::string gelu_derivative(OnnxBuilder& b, const std::string& x, DType t, bool tanh_form) {
    std::string x2 = b.add1("Mul", {x, x});
    if (!tanh_form) {
        std::string cdf = b.add1("Mul", {b.add1("Add", {b.add1("Erf", {b.add1("Mul", {x, b.scalar(M_SQRT1_2, t)})}), b.scalar(1, t)}),
                                         b.scalar(0.5, t)});
        std::string pdf = b.add1("Mul", {b.add1("Exp", {b.add1("Mul", {x2, b.scalar(-0.5, t)})}), b.scalar(0.3989422804014327, t)});
        return b.add1("Add", {cdf, b.add1("Mul", {x, pdf})});
    }
    std::string u = b.add1("Mul", {b.add1("Add", {x, b.add1("Mul", {b.add1("Mul", {x2, x}), b.scalar(GELU_TANH_C, t)})}),
                                   b.scalar(GELU_TANH_K, t)});
    std::string th = b.add1("Tanh", {u});
    std::string left = b.add1("Mul", {b.add1("Add", {th, b.scalar(1, t)}), b.scalar(0.5, t)});
    std::string sech2 = b.add1("Sub", {b.scalar(1, t), b.add1("Mul", {th, th})});
    std::string du = b.add1("Mul", {b.add1("Add", {b.scalar(1, t), b.add1("Mul", {x2, b.scalar(3 * GELU_TANH_C, t)})}),
                                    b.scalar(GELU_TANH_K, t)});
    std::string right = b.add1("Mul", {b.add1("Mul", {b.add1("Mul", {x, b.scalar(0.5, t)}), sech2}), du});
    return b.add1("Add", {left, right});
}

void emit_activation(OnnxOpCall& c) {
    OnnxBuilder& b = c.b;
    DType t = c.out_dtype[0];
    std::string x = input_out(c, 0);
    double s = c.attrs.scalar;
    switch (c.op) {
    case OP_leaky_relu: result(c, b.add1("LeakyRelu", {x}, {onnx_attr_float("alpha", s)})); break;
    case OP_elu: result(c, b.add1("Elu", {x}, {onnx_attr_float("alpha", s)})); break;
    case OP_gelu: result(c, gelu_of(b, x, t, s != 0)); break;
    case OP_silu: result(c, b.add1("Mul", {x, b.add1("Sigmoid", {x})})); break;
    default: {   // softplus: ln(1 + e^(s x)) / s, or x where s x > threshold
        std::string sx = b.add1("Mul", {x, b.scalar(s, t)});
        std::string soft = b.add1("Div", {b.add1("Softplus", {sx}), b.scalar(s, t)});
        result(c, b.add1("Where", {b.add1("Greater", {sx, b.scalar(c.attrs.hi, t)}), x, soft}));
    }
    }
}

void emit_triangle(OnnxOpCall& c) {
    result(c, c.b.add1("Trilu", {c.in[0], c.b.int_scalar(c.attrs.start)}, {onnx_attr_int("upper", c.op == OP_triu)}));
}

// --- activation derivatives: (grad, saved) -> dx --------------------------------------------

void emit_activation_backward(OnnxOpCall& c) {
    OnnxBuilder& b = c.b;
    DType t = c.out_dtype[0];
    std::string g = input_out(c, 0), y = input_out(c, 1), zero = b.scalar(0, t), one = b.scalar(1, t);
    switch (c.op) {
    case OP_tanh_backward: result(c, b.add1("Mul", {g, b.add1("Sub", {one, b.add1("Mul", {y, y})})})); break;
    case OP_sigmoid_backward: result(c, b.add1("Mul", {b.add1("Mul", {g, y}), b.add1("Sub", {one, y})})); break;
    case OP_relu_backward: result(c, b.add1("Where", {b.add1("Greater", {y, zero}), g, zero})); break;
    case OP_gelu_backward: result(c, b.add1("Mul", {g, gelu_derivative(b, y, t, c.attrs.scalar != 0)})); break;
    default: {   // clamp_backward: grad where lo <= x <= hi
        std::string inside = b.add1("Not", {b.add1("IsNaN", {y})});
        if (t == DTYPE_I64) inside = b.add1("Equal", {y, y});
        if (!std::isinf(c.attrs.lo)) inside = b.add1("And", {inside, b.add1("GreaterOrEqual", {y, b.scalar(c.attrs.lo, t)})});
        if (!std::isinf(c.attrs.hi)) inside = b.add1("And", {inside, b.add1("LessOrEqual", {y, b.scalar(c.attrs.hi, t)})});
        result(c, b.add1("Where", {inside, g, zero}));
    }
    }
}

// --- products -----------------------------------------------------------------------------

void emit_mm(OnnxOpCall& c) {
    if (c.attrs.accumulate) refuse_call(c, "a product accumulated into its output (freeze's in-place pass) is not exported");
    OnnxBuilder& b = c.b;
    DType t = c.out_dtype[0];
    std::string a = input_out(c, 0), bb = input_out(c, 1);
    if (t != DTYPE_I64) {   // Gemm reads either operand transposed
        result(c, b.add1("Gemm", {a, bb}, {onnx_attr_int("transA", c.attrs.trans_a), onnx_attr_int("transB", c.attrs.trans_b)}));
        return;
    }
    if (c.attrs.trans_a) a = b.add1("Transpose", {a}, {onnx_attr_ints("perm", {1, 0})});
    if (c.attrs.trans_b) bb = b.add1("Transpose", {bb}, {onnx_attr_ints("perm", {1, 0})});
    result(c, b.add1("MatMul", {a, bb}));
}

void emit_bmm(OnnxOpCall& c) {
    if (c.attrs.accumulate) refuse_call(c, "a product accumulated into its output (freeze's in-place pass) is not exported");
    OnnxBuilder& b = c.b;
    std::string a = input_out(c, 0), bb = input_out(c, 1);
    if (c.attrs.trans_a) a = b.add1("Transpose", {a}, {onnx_attr_ints("perm", {0, 2, 1})});
    if (c.attrs.trans_b) bb = b.add1("Transpose", {bb}, {onnx_attr_ints("perm", {0, 2, 1})});
    result(c, b.add1("MatMul", {a, bb}));
}

// --- recurrent layers: unrolled, one group of nodes per step (T is fixed in a plan) ---------

std::string concat(OnnxBuilder& b, const std::vector<std::string>& parts, int64_t axis) {
    return b.add1("Concat", parts, {onnx_attr_int("axis", axis)});
}
std::string step_of(OnnxBuilder& b, const std::string& x, int64_t step) {   // x[step] of [T, ...]
    return b.add1("Gather", {x, b.int_scalar(step)}, {onnx_attr_int("axis", 0)});
}
std::string one_minus(OnnxBuilder& b, const std::string& x, DType t) { return b.add1("Sub", {b.scalar(1, t), x}); }

// lstm: per step gates = xw[t] + h W_hhᵀ, split into i, f, g, o; c = f c + i g; h = o tanh(c).
void emit_lstm(OnnxOpCall& c) {
    OnnxBuilder& b = c.b;
    DType t = c.out_dtype[0];
    int64_t steps = c.in_shape[0][0];
    if (steps == 0) {
        c.out = {b.filled(0, t, c.out_shape[0]), b.filled(0, t, c.out_shape[1])};
        return;
    }
    std::string xw = input_out(c, 0), h = input_out(c, 1), cell = input_out(c, 2);
    std::string w_t = b.add1("Transpose", {input_out(c, 3)}, {onnx_attr_ints("perm", {1, 0})});
    std::vector<std::string> hs, states;
    for (int64_t s = 0; s < steps; ++s) {
        std::string pre = b.add1("Add", {step_of(b, xw, s), b.add1("MatMul", {h, w_t})});
        std::vector<std::string> gate = b.add("Split", {pre}, 4, {onnx_attr_int("axis", 1)});
        std::string i = b.add1("Sigmoid", {gate[0]}), f = b.add1("Sigmoid", {gate[1]});
        std::string g = b.add1("Tanh", {gate[2]}), o = b.add1("Sigmoid", {gate[3]});
        cell = b.add1("Add", {b.add1("Mul", {f, cell}), b.add1("Mul", {i, g})});
        h = b.add1("Mul", {o, b.add1("Tanh", {cell})});
        hs.push_back(b.add1("Unsqueeze", {h, b.ints({0})}));
        states.push_back(b.add1("Unsqueeze", {concat(b, {i, f, g, o, cell}, 1), b.ints({0})}));
    }
    c.out = {concat(b, hs, 0), concat(b, states, 0)};
}

// lstm_backward: the steps walked back as the CPU kernel does (a 0-d gradient: zeros).
void emit_lstm_backward(OnnxOpCall& c) {
    OnnxBuilder& b = c.b;
    DType t = c.out_dtype[0];
    const Shape& state_shape = c.in_shape[2];
    int64_t steps = state_shape[0], batch = state_shape[1], hidden = state_shape[2] / 5;
    std::string dh_next = b.filled(0, t, Shape{batch, hidden}), dc_next = dh_next;
    if (steps == 0) {
        c.out = {b.filled(0, t, c.out_shape[0]), dc_next};
        return;
    }
    auto gradient = [&](int i, const Shape& full) { return c.in_shape[i].ndim == 0 ? b.filled(0, t, full) : input_out(c, i); };
    std::string grad_h = gradient(0, Shape{steps, batch, hidden}), grad_state = gradient(1, state_shape);
    std::string state = input_out(c, 2), c0 = input_out(c, 3), w = input_out(c, 4);
    std::vector<std::vector<std::string>> states(static_cast<size_t>(steps));   // each step's i f g o c
    for (int64_t s = 0; s < steps; ++s) states[s] = b.add("Split", {step_of(b, state, s)}, 5, {onnx_attr_int("axis", 1)});
    std::vector<std::string> d_steps(static_cast<size_t>(steps));
    for (int64_t s = steps - 1; s >= 0; --s) {
        const std::vector<std::string>& st = states[s];
        std::vector<std::string> gs = b.add("Split", {step_of(b, grad_state, s)}, 5, {onnx_attr_int("axis", 1)});
        const std::string &i = st[0], &f = st[1], &g = st[2], &o = st[3];
        std::string c_prev = s > 0 ? states[s - 1][4] : c0;
        std::string tc = b.add1("Tanh", {st[4]});
        std::string dh = b.add1("Add", {step_of(b, grad_h, s), dh_next});
        std::string from_h = b.add1("Mul", {b.add1("Mul", {dh, o}), one_minus(b, b.add1("Mul", {tc, tc}), t)});
        std::string dc = b.add1("Add", {b.add1("Add", {dc_next, gs[4]}), from_h});
        std::string di = b.add1("Add", {b.add1("Mul", {dc, g}), gs[0]});
        std::string df = b.add1("Add", {b.add1("Mul", {dc, c_prev}), gs[1]});
        std::string dg = b.add1("Add", {b.add1("Mul", {dc, i}), gs[2]});
        std::string d_o = b.add1("Add", {b.add1("Mul", {dh, tc}), gs[3]});
        std::string d_gates = concat(b, {b.add1("Mul", {di, b.add1("Mul", {i, one_minus(b, i, t)})}),
                                         b.add1("Mul", {df, b.add1("Mul", {f, one_minus(b, f, t)})}),
                                         b.add1("Mul", {dg, one_minus(b, b.add1("Mul", {g, g}), t)}),
                                         b.add1("Mul", {d_o, b.add1("Mul", {o, one_minus(b, o, t)})})}, 1);
        d_steps[s] = b.add1("Unsqueeze", {d_gates, b.ints({0})});
        dc_next = b.add1("Mul", {dc, f});
        if (s > 0) dh_next = b.add1("MatMul", {d_gates, w});
    }
    c.out = {concat(b, d_steps, 0), dc_next};
}

// --- convolution and pooling ----------------------------------------------------------------

void emit_conv2d(OnnxOpCall& c) {
    OnnxBuilder& b = c.b;
    int nd = c.in_shape[0].ndim;
    const Shape& w = c.in_shape[1];
    std::vector<std::string> ins = {as_batch(b, input_out(c, 0), nd), input_out(c, 1)};
    if (c.in.size() == 3) ins.push_back(input_out(c, 2));
    std::vector<onnx::AttributeProto> attrs = window_attrs(c.attrs, true, w[2], w[3]);
    attrs.push_back(onnx_attr_int("group", c.attrs.groups));
    result(c, from_batch(b, b.add1("Conv", ins, attrs), nd));
}

// dX = conv2d_backward_input(G, W): ConvTranspose, its output padded to X's size.
void emit_conv2d_backward_input(OnnxOpCall& c) {
    OnnxBuilder& b = c.b;
    const Shape &g = c.in_shape[0], &w = c.in_shape[1], &x = c.attrs.shape;
    int nd = g.ndim;
    const OpAttrs& a = c.attrs;
    int64_t h = x[nd - 2], wd = x[nd - 1], ho = g[nd - 2], wo = g[nd - 1];
    int64_t pad_h = h - ((ho - 1) * a.stride_h - 2 * a.padding_h + a.dilation_h * (w[2] - 1) + 1);
    int64_t pad_w = wd - ((wo - 1) * a.stride_w - 2 * a.padding_w + a.dilation_w * (w[3] - 1) + 1);
    std::vector<onnx::AttributeProto> attrs = window_attrs(a, true, w[2], w[3]);
    attrs.push_back(onnx_attr_int("group", a.groups));
    attrs.push_back(onnx_attr_ints("output_padding", {pad_h, pad_w}));
    std::string y = b.add1("ConvTranspose", {as_batch(b, input_out(c, 0), nd), input_out(c, 1)}, attrs);
    result(c, from_batch(b, y, nd));
}

// dW = conv2d_backward_weight(G, X): a convolution of X's channels (as the batch) by G's (as the
// kernels), stride and dilation swapped, cut to W's window, then [C/groups, O] -> [O, C/groups].
// With groups, X's channels become [C/groups, groups * N] and G's [groups * O/groups, N], so that
// a grouped convolution pairs each group's inputs with its outputs.
void emit_conv2d_backward_weight(OnnxOpCall& c) {
    OnnxBuilder& b = c.b;
    const Shape &g = c.in_shape[0], &x = c.in_shape[1], &w = c.attrs.shape;
    int nd = g.ndim;
    const OpAttrs& a = c.attrs;
    int64_t n = nd == 4 ? g[0] : 1, groups = a.groups;
    int64_t out_per_group = g[nd - 3] / groups, in_per_group = x[nd - 3] / groups;
    std::string xb = b.add1("Reshape", {input_out(c, 1), b.ints({n, groups, in_per_group, x[nd - 2], x[nd - 1]})});
    std::string xt = b.add1("Reshape", {b.add1("Transpose", {xb}, {onnx_attr_ints("perm", {2, 1, 0, 3, 4})}),
                                        b.ints({in_per_group, groups * n, x[nd - 2], x[nd - 1]})});
    std::string gb = b.add1("Reshape", {input_out(c, 0), b.ints({n, groups, out_per_group, g[nd - 2], g[nd - 1]})});
    std::string gt = b.add1("Reshape", {b.add1("Transpose", {gb}, {onnx_attr_ints("perm", {1, 2, 0, 3, 4})}),
                                        b.ints({groups * out_per_group, n, g[nd - 2], g[nd - 1]})});
    std::string y = b.add1("Conv", {xt, gt}, {onnx_attr_ints("strides", {a.dilation_h, a.dilation_w}),
                                             onnx_attr_ints("dilations", {a.stride_h, a.stride_w}),
                                             onnx_attr_ints("pads", {a.padding_h, a.padding_w, a.padding_h, a.padding_w}),
                                             onnx_attr_int("group", groups)});
    std::string cut = b.add1("Slice", {y, b.ints({0, 0}), b.ints({w[2], w[3]}), b.ints({2, 3})});
    result(c, b.add1("Transpose", {cut}, {onnx_attr_ints("perm", {1, 0, 2, 3})}));
}

// max_pool2d: MaxPool's values, and its flat NCHW 0-based indices as ours (1-based per H*W plane).
void emit_max_pool2d(OnnxOpCall& c) {
    OnnxBuilder& b = c.b;
    const Shape& x = c.in_shape[0];
    int nd = x.ndim;
    const OpAttrs& a = c.attrs;
    std::vector<onnx::AttributeProto> attrs = window_attrs(a, true, a.kernel_h, a.kernel_w);
    if (a.ceil_mode) {   // PyTorch's ceil_mode drops a last window that would start in the padding,
                         // ONNX's does not: pad the end just enough for our output size instead
        const Shape& y = c.out_shape[0];
        int64_t end_h = (y[nd - 2] - 1) * a.stride_h + a.dilation_h * (a.kernel_h - 1) + 1 - x[nd - 2] - a.padding_h;
        int64_t end_w = (y[nd - 1] - 1) * a.stride_w + a.dilation_w * (a.kernel_w - 1) + 1 - x[nd - 1] - a.padding_w;
        attrs[1] = onnx_attr_ints("pads", {a.padding_h, a.padding_w, std::max<int64_t>(end_h, 0), std::max<int64_t>(end_w, 0)});
    }
    std::vector<std::string> yi = b.add("MaxPool", {as_batch(b, input_out(c, 0), nd)}, 2, attrs);
    std::string plane = b.add1("Mod", {yi[1], b.int_scalar(x[nd - 2] * x[nd - 1])});
    c.out = {from_batch(b, yi[0], nd), from_batch(b, one_based(b, plane), nd)};
}

// dx = zeros; dx[i] += g at each window's argmax i: ScatterElements (add) along each H*W plane.
void emit_max_pool2d_backward(OnnxOpCall& c) {
    OnnxBuilder& b = c.b;
    const Shape &g = c.in_shape[0], &x = c.attrs.shape;
    int nd = g.ndim;
    int64_t n = nd == 4 ? g[0] : 1, ch = g[nd - 3];
    std::vector<int64_t> rows = {n, ch, g[nd - 2] * g[nd - 1]};
    std::string g_rows = b.add1("Reshape", {input_out(c, 0), b.ints(rows)});
    std::string i_rows = b.add1("Reshape", {zero_based(c, 1), b.ints(rows)});
    std::string zeros = b.filled(0, c.out_dtype[0], Shape{n, ch, x[nd - 2] * x[nd - 1]});
    std::string dx = b.add1("ScatterElements", {zeros, i_rows, g_rows}, {onnx_attr_int("axis", 2), onnx_attr_string("reduction", "add")});
    result(c, b.add1("Reshape", {dx, b.ints(dims_of(x))}));
}

// --- views and layout -------------------------------------------------------------------------

void emit_transpose(OnnxOpCall& c) {
    int nd = c.in_shape[0].ndim;
    std::vector<int64_t> perm(static_cast<size_t>(nd));
    for (int i = 0; i < nd; ++i) perm[i] = i;
    if (c.op == OP_permute) {
        for (int i = 0; i < nd; ++i) perm[i] = c.attrs.shape[i];
    } else {
        std::swap(perm[c.attrs.dim], perm[c.attrs.dim2]);
    }
    result(c, c.b.add1("Transpose", {c.in[0]}, {onnx_attr_ints("perm", perm)}));
}

// reshape, unsqueeze, squeeze: the output's shape is known, one Reshape.
void emit_reshape(OnnxOpCall& c) { result(c, c.b.add1("Reshape", {c.in[0], c.b.ints(dims_of(c.out_shape[0]))})); }

void emit_expand(OnnxOpCall& c) { result(c, c.b.add1("Expand", {c.in[0], c.b.ints(dims_of(c.out_shape[0]))})); }

void emit_narrow(OnnxOpCall& c) {
    int64_t start = c.attrs.start;
    result(c, c.b.add1("Slice", {c.in[0], c.b.ints({start}), c.b.ints({start + c.attrs.length}), c.b.ints({c.attrs.dim})}));
}

void emit_select(OnnxOpCall& c) {
    result(c, c.b.add1("Gather", {c.in[0], c.b.int_scalar(c.attrs.start)}, {onnx_attr_int("axis", c.attrs.dim)}));
}

void emit_as_strided(OnnxOpCall& c) {
    OnnxBuilder& b = c.b;
    std::vector<int64_t> indices = region_indices(c.attrs);
    std::string flat = b.add1("Reshape", {c.in[0], b.ints({-1})});
    std::string picked = b.add1("Gather", {flat, b.ints(indices)}, {onnx_attr_int("axis", 0)});
    result(c, b.add1("Reshape", {picked, b.ints(dims_of(c.out_shape[0]))}));
}

void emit_identity(OnnxOpCall& c) { result(c, c.b.add1("Identity", {c.in[0]})); }

void emit_to(OnnxOpCall& c) {
    result(c, c.b.add1("Cast", {c.in[0]}, {onnx_attr_int("to", onnx_dtype(c.out_dtype[0]))}));
}

void emit_sum_to(OnnxOpCall& c) {
    const Shape &x = c.in_shape[0], &target = c.out_shape[0];
    std::vector<int64_t> axes;
    int lead = x.ndim - target.ndim;
    for (int d = 0; d < x.ndim; ++d)
        if (d < lead || (target[d - lead] == 1 && x[d] != 1)) axes.push_back(d);
    std::string summed = axes.empty() ? c.in[0] : reduce(c.b, "ReduceSum", c.in[0], axes, true);
    result(c, c.b.add1("Reshape", {summed, c.b.ints(dims_of(target))}));
}

void emit_cat(OnnxOpCall& c) {
    std::vector<std::string> ins;
    for (size_t i = 0; i < c.in.size(); ++i) ins.push_back(input_out(c, static_cast<int>(i)));
    result(c, c.b.add1("Concat", ins, {onnx_attr_int("axis", c.attrs.dim)}));
}

void emit_narrow_backward(OnnxOpCall& c) {
    const Shape& full = c.attrs.shape;
    std::vector<int64_t> pads(static_cast<size_t>(2 * full.ndim), 0);
    pads[c.attrs.dim] = c.attrs.start;
    pads[full.ndim + c.attrs.dim] = full[c.attrs.dim] - c.attrs.start - c.attrs.length;
    result(c, c.b.add1("Pad", {c.in[0], c.b.ints(pads)}));
}

void emit_flip(OnnxOpCall& c) {
    int nd = c.in_shape[0].ndim;
    std::vector<int64_t> axes = axes_of_mask(op_dims_mask(c.attrs, nd), nd);
    if (axes.empty()) {
        result(c, c.b.add1("Identity", {c.in[0]}));
        return;
    }
    std::vector<int64_t> starts(axes.size(), -1), ends(axes.size(), std::numeric_limits<int64_t>::min()), steps(axes.size(), -1);
    result(c, c.b.add1("Slice", {c.in[0], c.b.ints(starts), c.b.ints(ends), c.b.ints(axes), c.b.ints(steps)}));
}

void emit_region_scatter(OnnxOpCall& c) {   // region_scatter and assign_: x with its region := v
    result(c, c.b.scatter_flat(input_out(c, 0), c.in_shape[0], region_indices(c.attrs), input_out(c, 1)));
}

// --- reductions ---------------------------------------------------------------------------

constexpr const char* reduce_type(OpId op) {
    switch (op) {
    case OP_sum: return "ReduceSum";
    case OP_mean: return "ReduceMean";
    case OP_prod: return "ReduceProd";
    case OP_max: case OP_amax: return "ReduceMax";
    default: return "ReduceMin";
    }
}

void emit_reduce(OnnxOpCall& c) {
    int nd = c.in_shape[0].ndim;
    std::string x = input_out(c, 0);
    std::vector<int64_t> axes = axes_of_mask(op_dims_mask(c.attrs, nd), nd);
    if (nd == 0 || axes.empty()) result(c, c.b.add1("Identity", {x}));
    else result(c, reduce(c.b, reduce_type(c.op), x, axes, c.attrs.keepdim));
}

// max and min over one dim: the values and the 1-based index of the first winner.
void emit_max(OnnxOpCall& c) {
    if (c.attrs.all) {   // the value only (shape_max gives no index then; a dim of a 0-d tensor is an error)
        emit_reduce(c);
        return;
    }
    OnnxBuilder& b = c.b;
    std::vector<onnx::AttributeProto> attrs = {onnx_attr_int("axis", c.attrs.dim), onnx_attr_int("keepdims", c.attrs.keepdim),
                                               onnx_attr_int("select_last_index", 0)};
    std::string index = b.add1(c.op == OP_max ? "ArgMax" : "ArgMin", {c.in[0]}, attrs);
    c.out = {reduce(b, reduce_type(c.op), c.in[0], {c.attrs.dim}, c.attrs.keepdim), one_based(b, index)};
}

void emit_cumsum(OnnxOpCall& c) { result(c, c.b.add1("CumSum", {input_out(c, 0), c.b.int_scalar(c.attrs.dim)})); }

void emit_sort(OnnxOpCall& c) {
    OnnxBuilder& b = c.b;
    int64_t k = c.op == OP_topk ? c.attrs.length : c.in_shape[0][c.attrs.dim];
    std::vector<std::string> vi = b.add("TopK", {c.in[0], b.ints({k})}, 2,
                                        {onnx_attr_int("axis", c.attrs.dim), onnx_attr_int("largest", c.attrs.scalar == 1),
                                         onnx_attr_int("sorted", 1)});
    c.out = {vi[0], one_based(b, vi[1])};
}

void emit_softmax(OnnxOpCall& c) {
    result(c, c.b.add1(c.op == OP_softmax ? "Softmax" : "LogSoftmax", {input_out(c, 0)}, {onnx_attr_int("axis", c.attrs.dim)}));
}

// --- indexing -------------------------------------------------------------------------------

void emit_gather(OnnxOpCall& c) {
    result(c, c.b.add1("GatherElements", {c.in[0], zero_based(c, 1)}, {onnx_attr_int("axis", c.attrs.dim)}));
}

// src cut to the index's shape (PyTorch's scatter reads only that much of it; ONNX wants equal shapes).
std::string cut_to(OnnxOpCall& c, const std::string& src, const Shape& src_shape, const Shape& shape) {
    if (src_shape == shape) return src;
    std::vector<int64_t> zeros(static_cast<size_t>(shape.ndim), 0);
    return c.b.add1("Slice", {src, c.b.ints(zeros), c.b.ints(dims_of(shape)), c.b.ints(all_axes(shape.ndim))});
}

void emit_scatter_add(OnnxOpCall& c) {
    std::string zeros = c.b.filled(0, c.out_dtype[0], c.out_shape[0]);
    std::string src = cut_to(c, c.in[0], c.in_shape[0], c.in_shape[1]);
    result(c, c.b.add1("ScatterElements", {zeros, zero_based(c, 1), src},
                       {onnx_attr_int("axis", c.attrs.dim), onnx_attr_string("reduction", "add")}));
}

void emit_scatter(OnnxOpCall& c) {
    std::string src = cut_to(c, input_out(c, 2), c.in_shape[2], c.in_shape[1]);
    result(c, c.b.add1("ScatterElements", {c.in[0], zero_based(c, 1), src}, {onnx_attr_int("axis", c.attrs.dim)}));
}

// --- losses -------------------------------------------------------------------------------

void emit_mse_loss(OnnxOpCall& c) {
    std::string d = c.b.add1("Sub", {input_out(c, 0), input_out(c, 1)});
    result(c, reduce_loss(c.b, c.attrs.reduction, c.b.add1("Mul", {d, d}), c.in_shape[0].ndim));
}

// The scores' entry at each row's label, [N,1] (or [1] for one example): labels 0-based int64.
std::string at_labels(OnnxBuilder& b, const std::string& scores, const std::string& labels0) {
    return b.add1("GatherElements", {scores, b.add1("Unsqueeze", {labels0, b.ints({-1})})}, {onnx_attr_int("axis", -1)});
}

void emit_class_loss(OnnxOpCall& c) {   // cross_entropy, nll_loss, multi_margin_loss
    OnnxBuilder& b = c.b;
    DType t = c.out_dtype[0];
    const Shape& x_shape = c.in_shape[0];
    std::string x = input_out(c, 0), labels = zero_based(c, 1);
    std::string per_row;   // [N,1] or [1]
    if (c.op == OP_cross_entropy) {
        per_row = b.add1("Neg", {at_labels(b, b.add1("LogSoftmax", {x}, {onnx_attr_int("axis", -1)}), labels)});
    } else if (c.op == OP_nll_loss) {
        per_row = b.add1("Neg", {at_labels(b, x, labels)});
    } else {   // sum over j != label of max(0, 1 - x[label] + x[j]), / C (the j = label term is 1)
        int64_t classes = x_shape[x_shape.ndim - 1];
        std::string margins = b.add1("Relu", {b.add1("Add", {b.add1("Sub", {b.scalar(1, t), at_labels(b, x, labels)}), x})});
        std::string row = b.add1("Sub", {reduce(b, "ReduceSum", margins, {-1}, true), b.scalar(1, t)});
        per_row = b.add1("Div", {row, b.scalar(static_cast<double>(classes), t)});
    }
    result(c, reduce_loss(b, c.attrs.reduction, per_row, x_shape.ndim));
}

// cross_entropy_backward (g, x, labels), multi_margin_loss_backward (g, x, labels) and
// nll_loss_backward (g, labels; attrs.shape = the scores' shape).
void emit_class_loss_backward(OnnxOpCall& c) {
    OnnxBuilder& b = c.b;
    DType t = c.out_dtype[0];
    const Shape& scores = c.out_shape[0];
    int64_t classes = scores[scores.ndim - 1];
    double scale = 1 / reduction_count(c.attrs, class_rows(scores).n);   // 1/N for the mean
    std::string g = b.add1("Mul", {input_out(c, 0), b.scalar(scale, t)});
    std::string labels = zero_based(c, c.op == OP_nll_loss_backward ? 1 : 2);
    std::string onehot = one_hot(b, labels, classes, t);
    if (c.op == OP_nll_loss_backward) {
        result(c, b.add1("Mul", {onehot, b.add1("Neg", {g})}));
        return;
    }
    std::string x = input_out(c, 1);
    if (c.op == OP_cross_entropy_backward) {
        std::string p = b.add1("Softmax", {x}, {onnx_attr_int("axis", -1)});
        result(c, b.add1("Mul", {b.add1("Sub", {p, onehot}), g}));
        return;
    }
    // multi_margin_loss: g s / C where 1 - x[label] + x[j] > 0 (j != label), minus their count at the label
    std::string margin = b.add1("Add", {b.add1("Sub", {b.scalar(1, t), at_labels(b, x, labels)}), x});
    std::string active = b.add1("Cast", {b.add1("Greater", {margin, b.scalar(0, t)})}, {onnx_attr_int("to", onnx_dtype(t))});
    std::string others = b.add1("Mul", {active, b.add1("Sub", {b.scalar(1, t), onehot})});
    std::string count = reduce(b, "ReduceSum", others, {-1}, true);
    std::string local = b.add1("Sub", {others, b.add1("Mul", {onehot, count})});
    result(c, b.add1("Mul", {local, b.add1("Div", {g, b.scalar(static_cast<double>(classes), t)})}));
}

// --- in place: the written tensor's new contents -----------------------------------------------

void emit_inplace(OnnxOpCall& c) {
    OnnxBuilder& b = c.b;
    DType t = c.out_dtype[0];
    std::string x = c.in[0];
    switch (c.op) {
    case OP_add_: case OP_sub_: {
        std::string y = input_as(c, 1, t);
        if (c.attrs.scalar != 1) y = b.add1("Mul", {y, b.scalar(c.attrs.scalar, t)});
        result(c, b.add1(c.op == OP_add_ ? "Add" : "Sub", {x, y}));
        break;
    }
    case OP_mul_: result(c, b.add1("Mul", {x, input_as(c, 1, t)})); break;
    case OP_zero_: result(c, b.filled(0, t, c.out_shape[0])); break;
    case OP_fill_: result(c, b.filled(c.attrs.scalar, t, c.out_shape[0])); break;
    case OP_copy_: result(c, b.add1("Expand", {input_as(c, 1, t), b.ints(dims_of(c.out_shape[0]))})); break;
    case OP_masked_fill_: emit_masked_fill(c); break;
    default: emit_region_scatter(c); break;   // assign_
    }
}

}  // namespace

// ============================================================================================
// [SECTION] table

namespace {

// One row per op of ops.def: its mapping, or {nullptr, "", why it cannot be exported}. A table, so
// that adding an op is adding a row; the static_assert below fails the build when an op has none.
struct OnnxMappingRow {
    OpId op;
    OnnxOpMapping mapping;
};
constexpr OnnxMappingRow MAPPING_ROWS[] = {
    {OP_tensor, {nullptr, "", "never a step: a plan holds torch.tensor's values as a constant (an initializer)"}},
    {OP_zeros, {emit_created, "Constant (values made at export)"}},
    {OP_ones, {emit_created, "Constant (values made at export)"}},
    {OP_full, {emit_created, "Constant (values made at export)"}},
    {OP_eye, {emit_created, "Constant (values made at export)"}},
    {OP_arange, {emit_created, "Constant (values made at export)"}},
    {OP_linspace, {emit_created, "Constant (values made at export)"}},
    {OP_rand, {emit_random, "RandomUniform (the runtime's generator; a warning)"}},
    {OP_randn, {emit_random, "RandomNormal (the runtime's generator; a warning)"}},
    {OP_randint, {emit_randint, "Floor(RandomUniform) (the runtime's generator; a warning)"}},
    {OP_randperm, {nullptr, "", "no ONNX op draws a permutation"}},
    {OP_multinomial, {nullptr, "", "ONNX's Multinomial draws with replacement only, from log-probabilities; not exported"}},
    {OP_add, {emit_binary, binary_type(OP_add)}},
    {OP_sub, {emit_binary, binary_type(OP_sub)}},
    {OP_mul, {emit_binary, binary_type(OP_mul)}},
    {OP_div, {emit_binary, binary_type(OP_div)}},
    {OP_pow_tensor, {emit_binary, binary_type(OP_pow_tensor)}},
    {OP_clamp_min, {emit_binary, binary_type(OP_clamp_min)}},
    {OP_clamp_max, {emit_binary, binary_type(OP_clamp_max)}},
    {OP_maximum, {emit_binary, "Max; NaN where either is (Where(IsNaN)), as PyTorch"}},
    {OP_minimum, {emit_binary, "Min; NaN where either is (Where(IsNaN)), as PyTorch"}},
    {OP_eq, {emit_compare, "Equal, Cast"}},
    {OP_ne, {emit_compare, "Not(Equal), Cast"}},
    {OP_lt, {emit_compare, "Less, Cast"}},
    {OP_le, {emit_compare, "LessOrEqual, Cast"}},
    {OP_gt, {emit_compare, "Greater, Cast"}},
    {OP_ge, {emit_compare, "GreaterOrEqual, Cast"}},
    {OP_masked_fill, {emit_masked_fill, "Where(Not(Equal(mask, 0)), s, x)"}},
    {OP_where, {emit_where, "Where(Not(Equal(condition, 0)), a, b)"}},
    {OP_add_scalar, {emit_scalar_op, "Add(x, s)"}},
    {OP_mul_scalar, {emit_scalar_op, "Mul(x, s)"}},
    {OP_div_scalar, {emit_scalar_op, "Div(x, s)"}},
    {OP_rsub_scalar, {emit_scalar_op, "Sub(s, x)"}},
    {OP_rdiv_scalar, {emit_scalar_op, "Div(s, x)"}},
    {OP_pow, {emit_scalar_op, "Pow(x, p)"}},
    {OP_neg, {emit_unary, unary_type(OP_neg)}},
    {OP_exp, {emit_unary, unary_type(OP_exp)}},
    {OP_log, {emit_unary, unary_type(OP_log)}},
    {OP_sqrt, {emit_unary, unary_type(OP_sqrt)}},
    {OP_abs, {emit_unary, unary_type(OP_abs)}},
    {OP_sign, {emit_unary, unary_type(OP_sign)}},
    {OP_tanh, {emit_unary, unary_type(OP_tanh)}},
    {OP_sigmoid, {emit_unary, unary_type(OP_sigmoid)}},
    {OP_relu, {emit_unary, unary_type(OP_relu)}},
    {OP_sin, {emit_unary, unary_type(OP_sin)}},
    {OP_cos, {emit_unary, unary_type(OP_cos)}},
    {OP_reciprocal, {emit_unary, unary_type(OP_reciprocal)}},
    {OP_floor, {emit_unary, unary_type(OP_floor)}},
    {OP_ceil, {emit_unary, unary_type(OP_ceil)}},
    {OP_round, {emit_unary, unary_type(OP_round)}},
    {OP_log1p, {emit_unary_composed, "Log(Add(x, 1))"}},
    {OP_expm1, {emit_unary_composed, "Sub(Exp(x), 1)"}},
    {OP_rsqrt, {emit_unary_composed, "Reciprocal(Sqrt(x))"}},
    {OP_square, {emit_unary_composed, "Mul(x, x)"}},
    {OP_trunc, {emit_unary_composed, "Mul(Sign(x), Floor(Abs(x)))"}},
    {OP_clamp, {emit_clamp, "Clip (bounds as inputs)"}},
    {OP_isnan, {emit_float_test, "IsNaN, Cast"}},
    {OP_isinf, {emit_float_test, "IsInf, Cast"}},
    {OP_isfinite, {emit_float_test, "Not(Or(IsNaN, IsInf)), Cast"}},
    {OP_leaky_relu, {emit_activation, "LeakyRelu"}},
    {OP_elu, {emit_activation, "Elu"}},
    {OP_gelu, {emit_activation, "x/2 (1 + Erf(x/sqrt 2)), or the tanh form (Gelu is opset 20)"}},
    {OP_silu, {emit_activation, "Mul(x, Sigmoid(x))"}},
    {OP_softplus, {emit_activation, "Where(s x > threshold, x, Softplus(s x) / s)"}},
    {OP_tril, {emit_triangle, "Trilu"}},
    {OP_triu, {emit_triangle, "Trilu"}},
    {OP_tanh_backward, {emit_activation_backward, "g (1 - y^2)"}},
    {OP_sigmoid_backward, {emit_activation_backward, "g y (1 - y)"}},
    {OP_relu_backward, {emit_activation_backward, "Where(y > 0, g, 0)"}},
    {OP_clamp_backward, {emit_activation_backward, "Where(lo <= x <= hi, g, 0)"}},
    {OP_gelu_backward, {emit_activation_backward, "g gelu'(x) with Erf, Exp (or Tanh)"}},
    {OP_mm, {emit_mm, "Gemm (transA, transB); MatMul for int64"}},
    {OP_bmm, {emit_bmm, "MatMul (Transpose for a transposed operand)"}},
    {OP_conv2d, {emit_conv2d, "Conv"}},
    {OP_conv2d_backward_input, {emit_conv2d_backward_input, "ConvTranspose (output_padding to X's size)"}},
    {OP_conv2d_backward_weight, {emit_conv2d_backward_weight, "Conv over X's channels by G's (grouped), Slice, Transpose"}},
    {OP_lstm, {emit_lstm, "unrolled: per step MatMul, Split, Sigmoid/Tanh, Mul, Add; Concat"}},
    {OP_lstm_backward, {emit_lstm_backward, "unrolled: the steps back, per step Split, Mul, Add, MatMul; Concat"}},
    {OP_max_pool2d, {emit_max_pool2d, "MaxPool (its indices: Mod(i, H*W) + 1)"}},
    {OP_max_pool2d_backward, {emit_max_pool2d_backward, "ScatterElements (add) over each H*W plane"}},
    {OP_transpose, {emit_transpose, "Transpose"}},
    {OP_permute, {emit_transpose, "Transpose"}},
    {OP_reshape, {emit_reshape, "Reshape (to the known shape)"}},
    {OP_unsqueeze, {emit_reshape, "Reshape (to the known shape)"}},
    {OP_squeeze, {emit_reshape, "Reshape (to the known shape)"}},
    {OP_expand, {emit_expand, "Expand"}},
    {OP_narrow, {emit_narrow, "Slice"}},
    {OP_select, {emit_select, "Gather (a 0-d index)"}},
    {OP_as_strided, {emit_as_strided, "Gather of the flat elements at the region's indices"}},
    {OP_contiguous, {emit_identity, "Identity"}},
    {OP_clone, {emit_identity, "Identity"}},
    {OP_detach, {emit_identity, "Identity"}},
    {OP_to_device, {emit_identity, "Identity"}},
    {OP_sum_to, {emit_sum_to, "ReduceSum (keepdims), Reshape"}},
    {OP_cat, {emit_cat, "Concat"}},
    {OP_narrow_backward, {emit_narrow_backward, "Pad (zeros)"}},
    {OP_flip, {emit_flip, "Slice (steps -1)"}},
    {OP_region_scatter, {emit_region_scatter, "ScatterND of the flat elements"}},
    {OP_sum, {emit_reduce, reduce_type(OP_sum)}},
    {OP_mean, {emit_reduce, reduce_type(OP_mean)}},
    {OP_prod, {emit_reduce, reduce_type(OP_prod)}},
    {OP_amax, {emit_reduce, reduce_type(OP_amax)}},
    {OP_amin, {emit_reduce, reduce_type(OP_amin)}},
    {OP_max, {emit_max, "ReduceMax; ArgMax + 1"}},
    {OP_min, {emit_max, "ReduceMin; ArgMin + 1"}},
    {OP_cumsum, {emit_cumsum, "CumSum"}},
    {OP_sort, {emit_sort, "TopK (its indices + 1)"}},
    {OP_topk, {emit_sort, "TopK (its indices + 1)"}},
    {OP_softmax, {emit_softmax, "Softmax"}},
    {OP_log_softmax, {emit_softmax, "LogSoftmax"}},
    {OP_gather, {emit_gather, "GatherElements (index - 1)"}},
    {OP_scatter_add, {emit_scatter_add, "ScatterElements (reduction add) into zeros"}},
    {OP_scatter, {emit_scatter, "ScatterElements"}},
    {OP_to, {emit_to, "Cast"}},
    {OP_mse_loss, {emit_mse_loss, "Sub, Mul, ReduceMean / ReduceSum"}},
    {OP_cross_entropy, {emit_class_loss, "LogSoftmax, GatherElements, Neg, ReduceMean / ReduceSum"}},
    {OP_nll_loss, {emit_class_loss, "GatherElements, Neg, ReduceMean / ReduceSum"}},
    {OP_multi_margin_loss, {emit_class_loss, "GatherElements, Relu, ReduceSum, ..."}},
    {OP_cross_entropy_backward, {emit_class_loss_backward, "(Softmax(x) - one-hot) g s"}},
    {OP_nll_loss_backward, {emit_class_loss_backward, "-(one-hot) g s"}},
    {OP_multi_margin_loss_backward, {emit_class_loss_backward, "Greater, Cast, ReduceSum, ..."}},
    {OP_add_, {emit_inplace, "Add(x, alpha y), the new x (later reads see it)"}},
    {OP_sub_, {emit_inplace, "Sub(x, alpha y), the new x (later reads see it)"}},
    {OP_mul_, {emit_inplace, "Mul(x, y), the new x (later reads see it)"}},
    {OP_zero_, {emit_inplace, "ConstantOfShape 0, the new x"}},
    {OP_fill_, {emit_inplace, "ConstantOfShape s, the new x"}},
    {OP_copy_, {emit_inplace, "Expand(Cast(y)), the new x"}},
    {OP_masked_fill_, {emit_inplace, "Where(Not(Equal(mask, 0)), s, x), the new x"}},
    {OP_assign_, {emit_inplace, "ScatterND of the flat elements"}},
    {OP_function, {nullptr, "", "never a step: a custom function's own ops are recorded, and exported instead"}},
    {OP_function_backward, {nullptr, "", "never a step: a custom function's own ops are recorded, and exported instead"}},
};

// The first op with no row in MAPPING_ROWS (or with two), OP_COUNT when every op has exactly one.
constexpr int first_op_without_one_row() {
    for (int op = 0; op < OP_COUNT; ++op) {
        int rows = 0;
        for (const OnnxMappingRow& row : MAPPING_ROWS) rows += row.op == op;
        if (rows != 1) return op;
    }
    return OP_COUNT;
}
static_assert(first_op_without_one_row() == OP_COUNT,
              "every op of ops.def has exactly one row in MAPPING_ROWS (onnx_ops.cpp): its ONNX mapping, "
              "or {nullptr, \"\", why it cannot be exported}; the number is the op's OpId");

}  // namespace

const OnnxOpMapping& onnx_op_mapping(OpId op) {
    static const std::vector<OnnxOpMapping> table = [] {
        std::vector<OnnxOpMapping> rows(OP_COUNT);
        for (const OnnxMappingRow& row : MAPPING_ROWS) rows[row.op] = row.mapping;
        return rows;
    }();
    return table[op];
}

bool onnx_op_is_function(OpId op) {
    std::string name = op_info(op).name;
    const std::string suffix = "_backward";
    return name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
           onnx_op_mapping(op).emit != nullptr;
}

}  // namespace td
