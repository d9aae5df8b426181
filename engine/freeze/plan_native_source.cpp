// plan_native_source.cpp: freeze to native code, the generator — which steps of a compiled plan
// native code runs, grouped into segments, and the C++ source of each segment (plan_native.h).
//
// The source is written for people as well as for the compiler: each step is a block commented
// with the step as :plan lists it (its recorded node, op, values), the Lua file:line that made it
// and that line's text. Elementwise math is each op's line of elementwise.def, stringised here
// and evaluated per element with scalar_math.h's functions: the formulas exist once.
//
// [SECTION] what runs native   the ops, shapes and values a segment takes
// [SECTION] emit               one step as C++: elementwise loops, fused loops, products, sums
// [SECTION] generate           segments and the whole source
#include "plan_native.h"
#include "plan_internal.h"
#include "source_cache.h"

#include <cctype>
#include <cinttypes>
#include <cmath>
#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

namespace td {

namespace {

// ============================================================================================
// [SECTION] what runs native

// Products up to this many multiply-adds run as native loops; larger ones stay the interpreted
// kernel's (Eigen or BLAS), which is as fast from about 24x24x24 on square products, the call
// included (measured here: 16^3 1.99 against 2.27 µs, 24^3 3.9 against 3.7, 32^3 5.0 against
// 3.8). (B^T is copied to the stack: at most this many elements.)
constexpr int64_t MM_NATIVE_MAX = 16384;

bool float_value(const Plan& plan, int v, DType dtype) {
    const PlanValue& pv = plan.values[v];
    return pv.dtype == dtype && pv.device == DEVICE_CPU;
}

// The value a step writes: its output, or for an accumulation the .grad it adds into.
int written_value(const Plan& plan, const PlanStep& s) {
    return s.kind == STEP_GRAD_ACCUMULATE ? plan.grad_targets[static_cast<size_t>(s.target)].grad_value : s.outputs[0];
}

// The grad target whose .grad a step writes, or -1.
int grad_target_written(const PlanStep& s) {
    return s.kind == STEP_GRAD_ACCUMULATE ? s.target : s.kind == STEP_KERNEL ? s.into_grad : -1;
}

// Whether value v broadcasts to `out` as an elementwise input (NumPy's rule, dims aligned right).
bool broadcasts_to(const Shape& in, const Shape& out) {
    if (in.ndim > out.ndim) return false;
    for (int d = 0; d < in.ndim; ++d) {
        int64_t a = in.dims[in.ndim - 1 - d], b = out.dims[out.ndim - 1 - d];
        if (a != b && a != 1) return false;
    }
    return true;
}

bool mm_native_fits(const Plan& plan, const PlanStep& s) {
    const Shape &a = plan.values[s.inputs[0]].shape, &b = plan.values[s.inputs[1]].shape;
    const Shape& y = plan.values[s.outputs[0]].shape;
    if (a.ndim != 2 || b.ndim != 2 || y.ndim != 2) return false;
    const OpAttrs& at = plan_step_attrs(plan, s);
    int64_t k = at.trans_a ? a.dims[0] : a.dims[1], n = y.dims[1];
    return y.dims[0] * n * k <= MM_NATIVE_MAX;
}

// Whether native code runs this step's op on these shapes.
bool op_runs_native(const Plan& plan, const PlanStep& s) {
    const Shape& out = plan.values[s.outputs[0]].shape;
    if (s.kind == STEP_FUSED) return true;
    if (s.op == OP_mm) return mm_native_fits(plan, s);
    if (s.op == OP_sum || s.op == OP_mean) return plan_step_attrs(plan, s).all && s.inputs.size() == 1;
    const ElementwiseMath* line = elementwise_math(s.op);
    if (!line || static_cast<int>(s.inputs.size()) != line->arity) return false;
    for (int v : s.inputs)
        if (!broadcasts_to(plan.values[v].shape, out)) return false;
    return true;
}

// Whether a view of a contiguous value is contiguous too, whatever its bytes (the shapes and
// attributes are the plan's): a reshape, a transpose of a [1,n] row, a narrow or select along the
// first dim longer than 1 (a row of a matrix). The plan binds it (its offset too) before the
// segment's code, which reads it as any other value. Other views (a transpose of a matrix, a
// column, expand) are not taken.
bool view_keeps_contiguous(const Plan& plan, const PlanStep& s) {
    const Shape& in = plan.values[s.inputs[0]].shape;
    const OpAttrs& at = plan_step_attrs(plan, s);
    int order[MAX_DIMS];   // the input dim each output dim reads
    for (int d = 0; d < in.ndim; ++d) order[d] = d;
    switch (s.op) {
        case OP_reshape: case OP_unsqueeze: case OP_squeeze: case OP_detach: return true;
        case OP_narrow: case OP_select:   // rows of a matrix, xs:narrow(1, t, 1): the dims before have size 1
            if (at.dim < 0 || at.dim >= in.ndim) return false;
            for (int d = 0; d < at.dim; ++d)
                if (in.dims[d] != 1) return false;
            return true;
        case OP_transpose:
            if (at.dim < 0 || at.dim2 < 0 || at.dim >= in.ndim || at.dim2 >= in.ndim) return false;
            std::swap(order[at.dim], order[at.dim2]);
            break;
        case OP_permute:
            if (at.shape.ndim != in.ndim) return false;
            for (int d = 0; d < in.ndim; ++d) order[d] = static_cast<int>(at.shape.dims[d]);
            break;
        default: return false;
    }
    int last = -1;   // the dims longer than 1 keep their order
    for (int d = 0; d < in.ndim; ++d) {
        if (order[d] < 0 || order[d] >= in.ndim) return false;
        if (in.dims[order[d]] == 1) continue;
        if (order[d] < last) return false;
        last = order[d];
    }
    return true;
}

// Before each step that writes into a .grad (PlanStep::into_grad): whether that .grad exists then,
// as plan_file.cpp's check follows it: known at the start only from a GUARD_GRAD_STATE guard (the
// call's inputs are checked against it), nil after a clear, set after any write. GRAD_UNKNOWN where
// the plan cannot tell (the kernel then decides at run time, as interpreted).
enum GradState : int8_t { GRAD_UNKNOWN = -1, GRAD_NIL = 0, GRAD_SET = 1 };
std::vector<GradState> grad_states_before(const Plan& plan) {
    std::vector<GradState> target(plan.grad_targets.size(), GRAD_UNKNOWN), before(plan.steps.size(), GRAD_UNKNOWN);
    for (const PlanGuard& g : plan.guards)
        if (g.kind == GUARD_GRAD_STATE) target[static_cast<size_t>(g.target)] = g.defined ? GRAD_SET : GRAD_NIL;
    for (size_t k = 0; k < plan.steps.size(); ++k) {
        const PlanStep& s = plan.steps[k];
        if (s.kind == STEP_GRAD_CLEAR) target[static_cast<size_t>(s.target)] = GRAD_NIL;
        if (s.kind == STEP_GRAD_ACCUMULATE) {
            before[k] = target[static_cast<size_t>(s.target)];
            target[static_cast<size_t>(s.target)] = GRAD_SET;
        }
        if (s.kind == STEP_KERNEL && s.into_grad >= 0) {
            before[k] = target[static_cast<size_t>(s.into_grad)];
            target[static_cast<size_t>(s.into_grad)] = GRAD_SET;
        }
    }
    return before;
}

// For each value, the step that makes it (-1: an argument, a captured tensor, a constant).
std::vector<int> steps_making_values(const Plan& plan) {
    std::vector<int> made_by(plan.values.size(), -1);
    for (size_t k = 0; k < plan.steps.size(); ++k)
        for (int v : plan.steps[k].outputs) made_by[static_cast<size_t>(v)] = static_cast<int>(k);
    return made_by;
}

// Whether value v is, every call, a view whose elements are not in row-major order: made by a
// view that does not keep a contiguous value contiguous (a transpose of a matrix, narrow,
// expand), or by one that does of such a value. Native code reads values row-major: a segment
// given a strided value would run its steps one by one every call. (An argument's layout, which
// can change from call to call, is checked when the segment runs.)
bool strided_view(const Plan& plan, const std::vector<int>& made_by, int v) {
    for (int k = made_by[static_cast<size_t>(v)]; k >= 0; k = made_by[static_cast<size_t>(v)]) {
        const PlanStep& s = plan.steps[static_cast<size_t>(k)];
        if (s.kind != STEP_KERNEL || !(op_info(s.op).flags & OPF_VIEW)) return false;
        if (!view_keeps_contiguous(plan, s)) return true;
        v = s.inputs[0];
    }
    return false;
}

// Whether step k of a compiled CPU plan runs in a native segment: a kernel or fused step of one
// float dtype throughout, reading no strided view, writing one new value into a buffer of the plan
// or into new bytes; a product written into a .grad whose existence the plan knows (the plan gives
// its bytes before the segment's code runs); or a view that keeps a contiguous value contiguous
// (the plan binds it).
bool step_runs_native(const Plan& plan, size_t k, const std::vector<GradState>& grads, const std::vector<int>& made_by) {
    const PlanStep& s = plan.steps[k];
    for (int v : s.inputs)
        if (strided_view(plan, made_by, v)) return false;
    if (s.kind == STEP_GRAD_ACCUMULATE) {   // .grad += g, or a copy of g when there is none
        int grad = plan.grad_targets[static_cast<size_t>(s.target)].grad_value;
        DType dtype = plan.values[grad].dtype;
        return grads[k] != GRAD_UNKNOWN && dtype_is_float(dtype) && float_value(plan, s.inputs[0], dtype) &&
               plan.values[s.inputs[0]].shape.numel() == plan.values[grad].shape.numel();
    }
    if (s.kind != STEP_KERNEL && s.kind != STEP_FUSED) return false;
    if (s.outputs.size() != 1 || s.inputs.empty()) return false;
    if (s.into_grad >= 0)
        return s.op == OP_mm && grads[k] != GRAD_UNKNOWN && dtype_is_float(plan.values[s.outputs[0]].dtype) &&
               float_value(plan, s.inputs[0], plan.values[s.outputs[0]].dtype) &&
               float_value(plan, s.inputs[1], plan.values[s.outputs[0]].dtype) && mm_native_fits(plan, s);
    if (s.kind == STEP_KERNEL && (op_info(s.op).flags & OPF_INPLACE)) return false;
    if (s.kind == STEP_KERNEL && (op_info(s.op).flags & OPF_VIEW))
        return s.inputs.size() == 1 && float_value(plan, s.inputs[0], plan.values[s.outputs[0]].dtype) &&
               !plan.value_per_call[s.outputs[0]] && view_keeps_contiguous(plan, s);
    int out = s.outputs[0];
    DType dtype = plan.values[out].dtype;
    if (!dtype_is_float(dtype) || !float_value(plan, out, dtype)) return false;
    if (plan.value_buffer[out] < 0 && !plan.value_per_call[out]) return false;
    // An output that shares another value's bytes: only a product added into its buffer (Y += A B).
    bool accumulates = s.kind == STEP_KERNEL && s.op == OP_mm && plan_step_attrs(plan, s).accumulate;
    if (plan.values[out].alias_of >= 0 && !(accumulates && plan.value_buffer[out] >= 0)) return false;
    for (int v : s.inputs)
        if (!float_value(plan, v, dtype)) return false;
    return op_runs_native(plan, s);
}

// ============================================================================================
// [SECTION] emit

std::string number_literal(double x) {
    if (std::isnan(x)) return "std::numeric_limits<T>::quiet_NaN()";
    if (std::isinf(x)) return x > 0 ? "std::numeric_limits<T>::infinity()" : "-std::numeric_limits<T>::infinity()";
    char text[64];
    snprintf(text, sizeof text, "T(%.17g)", x);
    return text;
}

bool uses_word(const char* expression, const char* word) {
    size_t n = strlen(word);
    for (const char* p = strstr(expression, word); p; p = strstr(p + 1, word)) {
        bool before = p == expression || !(isalnum(static_cast<unsigned char>(p[-1])) || p[-1] == '_' || p[-1] == ':');
        bool after = !(isalnum(static_cast<unsigned char>(p[n])) || p[n] == '_');
        if (before && after) return true;
    }
    return false;
}

// `result = T(<op's line>)` with x, y and the attributes it uses bound, as one C++ block.
std::string emit_math(OpId op, const OpAttrs& attrs, const std::string& result, const std::string& x,
                      const std::string& y) {
    const ElementwiseMath* line = elementwise_math(op);
    std::string s = "{ const T x = " + x + ";";
    if (line->arity == 2) s += " const T y = " + y + ";";
    if (uses_word(line->expression, "s")) s += " const T s = " + number_literal(attrs.scalar) + ";";
    if (uses_word(line->expression, "lo")) s += " const T lo = " + number_literal(attrs.lo) + ";";
    if (uses_word(line->expression, "hi")) s += " const T hi = " + number_literal(attrs.hi) + ";";
    return s + " " + result + " = T(" + line->expression + "); }";
}

std::string var(int v) { return "v" + std::to_string(v); }
std::string input_name(size_t j) { return "in" + std::to_string(j); }

// The length of the row an input of shape `in` repeats along a result of shape `out` (its dims,
// after leading 1s, are out's last ones: a bias), or 0 when it is read otherwise.
int64_t row_period(const Shape& in, const Shape& out) {
    if (in == out || in.numel() == 1) return 0;
    int lead = out.ndim - in.ndim, first = 0;
    while (first < in.ndim && in.dims[first] == 1) ++first;
    for (int d = first; d < in.ndim; ++d)
        if (in.dims[d] != out.dims[lead + d]) return 0;
    return in.numel();
}

// The number of consecutive result elements that read one element of an input of shape `in`
// when it is a column repeated along out's last dims (its last dims 1, the others out's: a mean
// over the last dim, kept), or 0 when it is read otherwise.
int64_t column_period(const Shape& in, const Shape& out) {
    if (in == out || in.numel() == 1 || in.ndim != out.ndim) return 0;
    int d = in.ndim - 1;
    int64_t period = 1;
    for (; d >= 0 && in.dims[d] == 1; --d) period *= out.dims[d];
    for (; d >= 0; --d)
        if (in.dims[d] != out.dims[d]) return 0;
    return period > 1 ? period : 0;
}

// The loop over a result's n elements, index i. When every input read as a repeated row or a
// repeated column has the same period P, two loops (the rows, then c along a row: a row input read
// at [c], a column input at [row]), which the compiler vectorises where it would not with i % P
// or i / P.
struct ElementLoop {
    int64_t n, period = 0;
    ElementLoop(int64_t elements, const std::vector<int64_t>& periods) : n(elements) {
        for (int64_t p : periods)
            if (p > 0) period = period == 0 || period == p ? p : -1;
        if (period < 0 || (period > 0 && n % period != 0)) period = 0;
    }
    std::string head() const {
        if (period == 0) return "    for (int64_t i = 0; i < " + std::to_string(n) + "; ++i) {\n";
        return "    for (int64_t row = 0; row < " + std::to_string(n / period) + "; ++row)\n    for (int64_t c = 0; c < " +
               std::to_string(period) + "; ++c) {\n        const int64_t i = row * " + std::to_string(period) + " + c;\n";
    }
    std::string row(const std::string& name, int64_t p) const {
        return p == period ? name + "[c]" : name + "[i % " + std::to_string(p) + "]";
    }
    std::string column(const std::string& name, int64_t p) const {
        return p == period ? name + "[row]" : name + "[i / " + std::to_string(p) + "]";
    }
};

// How input `name` (of shape `in`) is read at flat index i of a result of shape `out`: in place,
// its one element, a row or a column repeated, or by the broadcast strides.
std::string element_of(const std::string& name, const Shape& in, const Shape& out, const ElementLoop& loop) {
    if (in == out) return name + "[i]";
    if (in.numel() == 1) return name + "[0]";
    if (int64_t p = row_period(in, out)) return loop.row(name, p);
    if (int64_t p = column_period(in, out)) return loop.column(name, p);
    int lead = out.ndim - in.ndim;
    std::string index;
    int64_t out_stride = 1, in_stride = 1;
    for (int d = out.ndim - 1; d >= 0; --d) {
        int in_d = d - lead;
        int64_t size = in_d >= 0 ? in.dims[in_d] : 1;
        if (size > 1) {
            char term[96];
            snprintf(term, sizeof term, "%s(i / %" PRId64 " %% %" PRId64 ") * %" PRId64, index.empty() ? "" : " + ", out_stride,
                     out.dims[d], in_stride);
            index += term;
        }
        in_stride *= size;
        out_stride *= out.dims[d];
    }
    return name + "[" + (index.empty() ? "0" : index) + "]";
}

std::string loop_head(int64_t n) { return ElementLoop(n, {}).head(); }

// A kernel's body reads its inputs as in0, in1, ... and writes `out`.
std::string emit_elementwise(const Plan& plan, const PlanStep& s) {
    const Shape& shape = plan.values[s.outputs[0]].shape;
    std::vector<int64_t> periods;
    for (int v : s.inputs) {
        periods.push_back(row_period(plan.values[v].shape, shape));
        periods.push_back(column_period(plan.values[v].shape, shape));
    }
    ElementLoop loop(shape.numel(), periods);
    auto in = [&](size_t j) { return element_of(input_name(j), plan.values[s.inputs[j]].shape, shape, loop); };
    return loop.head() + "        " +
           emit_math(s.op, plan_step_attrs(plan, s), "out[i]", in(0), s.inputs.size() > 1 ? in(1) : "") + "\n    }\n";
}

// A fused step: per element, each op of the chain in a register (r1, r2, ...), the last into the
// result.
std::string emit_fused(const Plan& plan, const PlanStep& s) {
    int n_in = static_cast<int>(s.inputs.size());
    int64_t n = plan.values[s.outputs[0]].shape.numel();
    std::vector<int64_t> periods;
    for (int k = 0; k < n_in; ++k)
        if (s.fused.input_mode(static_cast<size_t>(k)) == FUSED_ROW) periods.push_back(plan.values[s.inputs[k]].shape.numel());
    ElementLoop loop(n, periods);
    auto operand = [&](int k) -> std::string {
        if (k >= n_in) return "r" + std::to_string(k - n_in + 1);
        FusedInputMode mode = s.fused.input_mode(static_cast<size_t>(k));
        std::string name = input_name(static_cast<size_t>(k));
        if (mode == FUSED_FULL) return name + "[i]";
        if (mode == FUSED_SCALAR) return name + "[0]";
        return loop.row(name, plan.values[s.inputs[k]].shape.numel());
    };
    std::string code = loop.head();
    for (size_t j = 0; j < s.fused.size(); ++j) {
        const FusedOp& op = s.fused[j];
        bool last = j + 1 == s.fused.size();
        std::string result = last ? "out[i]" : "r" + std::to_string(j + 1);
        if (!last) code += "        T " + result + ";\n";
        int arity = elementwise_math(op.op)->arity;
        code += "        " +
                emit_math(op.op, plan.attrs[op.attrs], result, operand(op.operands[0]), arity > 1 ? operand(op.operands[1]) : "") +
                "\n";
    }
    return code + "    }\n";
}

// A product; `accumulate` also when it adds into an existing .grad; `a_transposed`: A is read from
// a transposed copy (emit_part).
std::string emit_mm(const Plan& plan, const PlanStep& s, bool accumulate, bool a_transposed) {
    OpAttrs at = plan_step_attrs(plan, s);
    const Shape &a = plan.values[s.inputs[0]].shape, &y = plan.values[s.outputs[0]].shape;
    int64_t k = at.trans_a ? a.dims[0] : a.dims[1];
    at.trans_a = at.trans_a != a_transposed;
    char call[256];
    snprintf(call, sizeof call, "    native::mm<T, %" PRId64 ", %" PRId64 ", %" PRId64 ", %s, %s, %s>(in0, in1, out);\n", y.dims[0],
             y.dims[1], k, at.trans_a ? "true" : "false", at.trans_b ? "true" : "false", accumulate ? "true" : "false");
    return call;
}

std::string emit_sum(const Plan& plan, const PlanStep& s) {
    int64_t n = plan.values[s.inputs[0]].shape.numel();
    std::string sum = "native::sum_all<T, " + std::to_string(n) + ">(in0)";
    if (s.op == OP_mean) sum += " / T(" + std::to_string(n) + ")";
    return "    out[0] = " + sum + ";\n";
}

// .grad += g (add_'s math: x + y), or .grad = a copy of g when there was none.
std::string emit_grad_accumulate(const Plan& plan, const PlanStep& s, GradState grad) {
    return loop_head(plan.values[s.inputs[0]].shape.numel()) + (grad == GRAD_SET ? "        out[i] = out[i] + in0[i];\n" : "        out[i] = in0[i];\n") +
           "    }\n";
}

// The kernel of a step: a function of its inputs' and output's pointers, with its shapes and
// attributes as constants. Steps with the same kernel text share one function. `grad`: whether the
// .grad a step writes into exists then (the product adds into it).
std::string emit_kernel_body(const Plan& plan, const PlanStep& s, GradState grad, bool a_transposed) {
    const char* type = plan.values[written_value(plan, s)].dtype == DTYPE_F64 ? "double" : "float";
    std::string params;
    for (size_t j = 0; j < s.inputs.size(); ++j) params += std::string("const ") + type + "* " + input_name(j) + ", ";
    std::string code = s.kind == STEP_GRAD_ACCUMULATE   ? emit_grad_accumulate(plan, s, grad)
                       : s.kind == STEP_FUSED           ? emit_fused(plan, s)
                       : s.op == OP_mm                  ? emit_mm(plan, s, plan_step_attrs(plan, s).accumulate || grad == GRAD_SET, a_transposed)
                       : s.op == OP_sum || s.op == OP_mean ? emit_sum(plan, s)
                                                        : emit_elementwise(plan, s);
    return "(" + params + type + "* out) {\n    using T = " + type + ";\n" + code + "}\n";
}

// The step's comment (:plan's line, the Lua line and its text) and its kernel's call; `a_copy`,
// when given, is read in place of its first input (a transposed copy).
std::string emit_step_call(const Plan& plan, size_t k, const std::string& kernel, const std::string& a_copy = "") {
    const PlanStep& s = plan.steps[k];
    std::string where = source_loc_str(s.where);
    std::string text = s.where.file >= 0 ? source_line_text(source_file_name(s.where.file), s.where.line) : "";
    size_t first = text.find_first_not_of(" \t");
    text = first == std::string::npos ? "" : text.substr(first);
    std::string args;
    for (size_t j = 0; j < s.inputs.size(); ++j) args += (j == 0 && !a_copy.empty() ? a_copy : var(s.inputs[j])) + ", ";
    std::string call = kernel.empty() ? "    // (a view: " + var(s.outputs[0]) + " is " + var(s.inputs[0]) + "'s bytes, bound by the plan)\n"
                                      : "    " + kernel + "(" + args + var(written_value(plan, s)) + ");\n";
    return "    // step " + std::to_string(k + 1) + (s.phase == PHASE_BACKWARD ? " (backward): " : " (forward): ") +
           plan_step_text(plan, s) + "\n    //   " + where + (text.empty() ? "" : ":  " + text) + "\n" + call;
}

// The kernels of a plan's segments, each distinct one once, in order of first use.
struct Kernels {
    const std::vector<GradState>& grads;   // grad_states_before
    std::unordered_map<std::string, std::string> name_of_body;
    std::string code;
    std::string name_for(const Plan& plan, size_t k, bool a_transposed = false) {
        if (plan.steps[k].kind == STEP_KERNEL && (op_info(plan.steps[k].op).flags & OPF_VIEW)) return "";   // no code
        std::string body = emit_kernel_body(plan, plan.steps[k], grads[k], a_transposed);
        auto found = name_of_body.find(body);
        if (found != name_of_body.end()) return found->second;
        std::string name = "k" + std::to_string(name_of_body.size() + 1);
        name_of_body.emplace(body, name);
        code += "// " + name + ": as step " + std::to_string(k + 1) + " (" + op_info(plan.steps[k].op).name + ")\n" +
                "static __attribute__((noinline)) void " + name + body + "\n";
        return name;
    }
};

// ============================================================================================
// [SECTION] generate

// The values a segment's steps read or write, each once, in order of first use; those among them
// that get new bytes each call; its views and its writes into .grad tensors.
void segment_values(const Plan& plan, NativeSegment& seg, const std::vector<GradState>& grads) {
    std::vector<char> seen(plan.values.size(), 0);
    auto add = [&](int v) {
        if (seen[static_cast<size_t>(v)]) return;
        seen[static_cast<size_t>(v)] = 1;
        seg.values.push_back(v);
    };
    for (size_t k = seg.begin; k < seg.end; ++k) {
        const PlanStep& s = plan.steps[k];
        if (s.kind == STEP_KERNEL && (op_info(s.op).flags & OPF_VIEW)) seg.views.push_back(k);
        int into = s.kind == STEP_GRAD_ACCUMULATE ? s.target : s.kind == STEP_KERNEL ? s.into_grad : -1;
        if (into >= 0) {
            bool first = std::none_of(seg.grad_writes.begin(), seg.grad_writes.end(),
                                      [&](const NativeSegment::GradWrite& w) { return grad_target_written(plan.steps[w.step]) == into; });
            seg.grad_writes.push_back({k, grads[k] == GRAD_SET, first});
        }
        for (int v : s.inputs) add(v);
        if (s.kind == STEP_GRAD_ACCUMULATE) add(written_value(plan, s));
        for (int v : s.outputs) {
            bool fresh = plan.value_per_call[v] && plan.values[v].alias_of < 0 && s.into_grad < 0;
            if (fresh && !seen[static_cast<size_t>(v)]) seg.fresh.push_back(v);
            add(v);
        }
    }
    for (int v : seg.values) {
        bool late = false;
        for (const NativeSegment::GradWrite& w : seg.grad_writes) {
            const PlanStep& s = plan.steps[w.step];
            const PlanValue& pv = plan.values[v];
            late = late || v == written_value(plan, s) || (pv.kind == VALUE_GRAD && pv.index == grad_target_written(s));
        }
        seg.after_grad_writes.push_back(late);
    }
}

// A matrix-vector product Y [M,1] = A x whose A is read row by row (a dot product per row, each
// ending in a sum across lanes) is several times slower than one reading A transposed (a row of
// A^T scaled per element of x). A part whose products read the same A at least twice, an A made
// before the segment (its bytes hold from the part's start until its last read there), copies
// it transposed once at its start: an RNN cell's W_h, read by every step of the unroll.
constexpr int64_t TRANSPOSED_COPY_MAX = 16384;   // elements, on the stack
bool reads_a_transposed_copy(const Plan& plan, const PlanStep& s, const std::unordered_set<int>& made,
                             const std::vector<int>& roots) {
    if (s.kind != STEP_KERNEL || s.op != OP_mm || plan_step_attrs(plan, s).trans_a) return false;
    const Shape &a = plan.values[s.inputs[0]].shape, &y = plan.values[s.outputs[0]].shape;
    return y.dims[1] == 1 && y.dims[0] >= 8 && a.numel() <= TRANSPOSED_COPY_MAX && !made.count(roots[static_cast<size_t>(s.inputs[0])]);
}

// Steps [begin, end) of a segment as a function of the segment's pointer table: each value it uses
// named once (v<N>), the transposed copies it reads, then each step's call. `slot_of[v]`: v's
// index in the table; `made`: the roots (plan_value_roots) of the values the segment's steps write.
std::string emit_part(const Plan& plan, size_t begin, size_t end, const std::string& name,
                      const std::unordered_map<int, size_t>& slot_of, const std::unordered_set<int>& made,
                      const std::vector<int>& roots, Kernels& kernels) {
    std::string declarations, copies, calls;
    std::unordered_map<int, bool> declared;
    std::unordered_map<int, int> copy_reads;
    for (size_t k = begin; k < end; ++k)
        if (reads_a_transposed_copy(plan, plan.steps[k], made, roots)) ++copy_reads[plan.steps[k].inputs[0]];
    for (size_t k = begin; k < end; ++k) {
        const PlanStep& s = plan.steps[k];
        ValueIds used = s.inputs;
        for (int v : s.outputs) used.push_back(v);
        if (s.kind == STEP_GRAD_ACCUMULATE) used.push_back(written_value(plan, s));
        for (int v : used) {
            if (declared[v]) continue;
            declared[v] = true;
            const PlanValue& pv = plan.values[v];
            const char* type = pv.dtype == DTYPE_F64 ? "double" : "float";
            declarations += std::string("    ") + type + "* const " + var(v) + " = static_cast<" + type + "*>(p[" +
                            std::to_string(slot_of.at(v)) + "]);   // " + plan_value_name(plan, v) + " " + pv.shape.str() + "\n";
            auto reads = copy_reads.find(v);
            if (reads == copy_reads.end() || reads->second < 2) continue;
            const Shape& shape = pv.shape;
            copies += std::string("    ") + type + " t" + var(v) + "[" + std::to_string(shape.numel()) + "];   // " +
                      plan_value_name(plan, v) + " transposed, for the " + std::to_string(reads->second) +
                      " products below that read it\n    native::transpose<" + type + ", " + std::to_string(shape.dims[0]) + ", " +
                      std::to_string(shape.dims[1]) + ">(" + var(v) + ", t" + var(v) + ");\n";
        }
        bool copy = reads_a_transposed_copy(plan, s, made, roots) && copy_reads[s.inputs[0]] >= 2;
        calls += emit_step_call(plan, k, kernels.name_for(plan, k, copy), copy ? "t" + var(s.inputs[0]) : "");
    }
    return name + "(void* const* p) {\n" + declarations + copies + calls + "}\n";
}

// A segment: its steps in parts of at most PART_STEPS (a compiler's time grows faster than a
// function's length), then the exported function that runs the parts in order.
constexpr size_t PART_STEPS = 256;
std::string emit_segment(const Plan& plan, const NativeSegment& seg, const std::vector<int>& roots, Kernels& kernels) {
    std::unordered_map<int, size_t> slot_of;
    for (size_t i = 0; i < seg.values.size(); ++i) slot_of[seg.values[i]] = i;
    std::unordered_set<int> made;
    for (size_t k = seg.begin; k < seg.end; ++k) {
        const PlanStep& s = plan.steps[k];
        for (int v : s.outputs) made.insert(roots[static_cast<size_t>(v)]);   // a product added into a buffer: its root's bytes
        int target = grad_target_written(s);   // a .grad written here: its value's bytes change too
        if (target >= 0) made.insert(roots[static_cast<size_t>(plan.grad_targets[static_cast<size_t>(target)].grad_value)]);
    }
    std::string title = "// segment " + seg.symbol + ": steps " + std::to_string(seg.begin + 1) + " to " + std::to_string(seg.end);
    if (seg.end - seg.begin <= PART_STEPS)
        return title + "\nextern \"C\" void " + emit_part(plan, seg.begin, seg.end, seg.symbol, slot_of, made, roots, kernels);
    std::string code, calls;
    for (size_t begin = seg.begin, part = 1; begin < seg.end; begin += PART_STEPS, ++part) {
        size_t end = std::min(seg.end, begin + PART_STEPS);
        std::string name = seg.symbol + "_part" + std::to_string(part);
        code += title + ", part " + std::to_string(part) + ": steps " + std::to_string(begin + 1) + " to " + std::to_string(end) +
                "\nstatic __attribute__((noinline)) void " + emit_part(plan, begin, end, name, slot_of, made, roots, kernels) + "\n";
        calls += "    " + name + "(p);\n";
    }
    return code + title + "\nextern \"C\" void " + seg.symbol + "(void* const* p) {\n" + calls + "}\n";
}

std::string source_header(const Plan& plan, const PlanNative& native) {
    std::string h = "// " + plan.name + " (frozen at " + source_loc_str(plan.where) + "): " +
                    std::to_string(native.native_steps) + " of " + std::to_string(plan.steps.size()) + " steps in " +
                    std::to_string(native.segments.size()) + " native segment" + (native.segments.size() == 1 ? "" : "s") +
                    "; the other steps run as the interpreted plan runs them.\n";
    h += "// Compiled with the prelude: scalar_math.h (the math of elementwise.def's lines) and native_prelude.h.\n";
    h += "// v<N> is plan value N; p[i] the pointer the plan passes for it.\n";
    return h + "using namespace td;\n\n";
}

}  // namespace

std::unique_ptr<PlanNative> plan_native_generate(const Plan& plan) {
    auto native = std::make_unique<PlanNative>();
    if (!plan.compiled) {
        native->why_not = "the plan is not compiled";
        return native;
    }
    if (plan.device != DEVICE_CPU) {
        native->why_not = "the plan runs on " + std::string(device_name(plan.device)) + "; native code is made for CPU plans";
        return native;
    }
    if (plan.steps.size() > MAX_NATIVE_STEPS) {
        native->why_not = "the plan has " + std::to_string(plan.steps.size()) + " steps; native code is made for plans of up to " +
                          std::to_string(MAX_NATIVE_STEPS) +
                          " steps (one block of code per step: a long loop's unroll would take minutes to compile)";
        return native;
    }
    std::vector<GradState> grads = grad_states_before(plan);
    std::vector<int> made_by = steps_making_values(plan);
    for (size_t k = 0; k < plan.steps.size();) {
        size_t end = k;
        while (end < plan.steps.size() && step_runs_native(plan, end, grads, made_by)) ++end;
        NativeSegment seg;
        seg.begin = k;
        seg.end = end;
        segment_values(plan, seg, grads);
        if (end - k > seg.views.size()) {   // a run of views alone has no code: the plan binds them as before
            seg.symbol = "td_segment_" + std::to_string(native->segments.size() + 1);
            native->native_steps += static_cast<int>(end - k);
            native->segments.push_back(std::move(seg));
        }
        k = end > k ? end : k + 1;
    }
    if (native->segments.empty()) {
        native->why_not = "no step of the plan is one native code runs (elementwise ops, fused loops, products up to " +
                          std::to_string(MM_NATIVE_MAX) + " multiply-adds, sums of all elements)";
        return native;
    }
    Kernels kernels{grads, {}, {}};
    std::vector<int> roots = plan_value_roots(plan);
    std::string segments;
    for (const NativeSegment& seg : native->segments) segments += emit_segment(plan, seg, roots, kernels) + "\n";
    native->source = source_header(plan, *native) + kernels.code + segments;
    return native;
}

}  // namespace td
