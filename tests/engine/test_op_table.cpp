// test_op_table.cpp: the one test that drives every op of engine/core/ops.def from its rows in
// op_cases.cpp (rule 6 of docs/design.md), plus the statistics of the random creation ops.
//
// For every OpId: its rows must exist; each row's outputs must have the expected shapes, dtypes and
// values; views and in-place ops must share input 0's storage (in-place ops bump its version);
// differentiable ops must pass a float64 finite-difference gradient check; the others must give
// outputs that do not require grad.
#include <catch2/catch.hpp>

#include <cctype>
#include <map>
#include <random>

#include "backend.h"
#include "device.h"
#include "elementwise.h"
#include "op_cases.h"
#include "op_checks.h"
#include "test_helpers.h"

using namespace td;
using namespace td_test;

namespace {

// Outputs: shapes, dtypes, values; storage sharing for views and in-place ops.
void check_row_values(OpId op, const OpCase& c) {
    const OpInfo& info = op_info(op);
    std::vector<Tensor> inputs;
    for (const InputCase& in : c.inputs) inputs.push_back(make_tensor(in.shape, in.values, in.dtype));
    uint32_t version_before = inputs.empty() ? 0 : inputs[0].value().storage->version;

    Tensor y = run_op(op, inputs, attrs_of(c));
    CHECK(y.node->op == op);
    CHECK(tape_find(y.id()) == y.node.get());
    CHECK(y.node->outputs.size() == static_cast<int>(c.outputs.size()));
    for (int i = 0; i < y.node->outputs.size() && i < static_cast<int>(c.outputs.size()); ++i) {
        const OutputCase& want = c.outputs[i];
        Tensor out(y.node.get(), i);
        INFO("output " << i + 1);
        CHECK(out.shape().str() == want.shape.str());
        CHECK(dtype_name(out.dtype()) == std::string(dtype_name(want.dtype)));
        if (!want.values.empty()) {
            if (want.dtype == DTYPE_F32) check_values(out, want.values, 1e-5, 1e-6);
            else check_values(out, want.values, 1e-11, 1e-12);
        }
    }
    if (c.check) c.check(y);

    if (info.flags & OPF_CREATE) {
        CHECK(y.node->inputs.size() == 0);
        CHECK(y.node->is_leaf());
        CHECK_FALSE(y.requires_grad());
    }
    if (info.flags & (OPF_VIEW | OPF_INPLACE)) {
        CHECK(y.value().storage.get() == inputs[0].value().storage.get());
    } else {
        for (const Tensor& in : inputs) CHECK(y.value().storage.get() != in.value().storage.get());
    }
    if (info.flags & OPF_INPLACE) {
        CHECK(inputs[0].value().storage->version == version_before + 1);
        INFO("input 1 after the in-place op");
        if (!c.outputs[0].values.empty()) check_values(inputs[0], c.outputs[0].values, 1e-5, 1e-6);
    }
}

// An op without a backward rule: even with inputs that require grad, its output does not, and
// its node does not track gradients.
void check_not_tracked(OpId op, const OpCase& c) {
    std::vector<Tensor> inputs;
    for (const InputCase& in : c.inputs) {
        bool is_float = dtype_is_float(in.dtype);
        inputs.push_back(make_tensor(in.shape, in.values, is_float ? DTYPE_F64 : in.dtype, is_float));
    }
    Tensor y = run_op(op, inputs, attrs_of(c));
    CHECK_FALSE(y.requires_grad());
    CHECK_FALSE(y.node->tracks_grad);
}

}  // namespace

TEST_CASE("op table: every op in ops.def has test rows, and each passes values, gradients and grad tracking") {
    std::map<std::string, std::vector<const OpCase*>> rows_by_op;
    for (const OpCase& c : op_cases()) rows_by_op[c.op].push_back(&c);

    for (int i = 0; i < OP_COUNT; ++i) {
        OpId op = static_cast<OpId>(i);
        const OpInfo& info = op_info(op);
        INFO("op '" << info.name << "'");
        if (info.flags & OPF_CUSTOM) continue;   // runs a function it is given: test_function.cpp
        auto found = rows_by_op.find(info.name);
        if (found == rows_by_op.end()) {
            FAIL_CHECK("op '" << info.name << "' has no test row in tests/engine/op_cases.cpp");
            continue;
        }
        int gradient_checks = 0;
        for (const OpCase* c : found->second) {
            INFO("row '" << c->variant << "'");
            run_guarded("the value check", [&] { check_row_values(op, *c); });
            if (info.backward_rule) {
                if (!c->no_gradcheck.empty() || !has_float_input(*c)) continue;
                run_guarded("the gradient check", [&] { check_gradients(op, *c, DEVICE_CPU); });
                ++gradient_checks;
            } else if (!(info.flags & OPF_CREATE)) {
                run_guarded("the no-grad check", [&] { check_not_tracked(op, *c); });
            }
        }
        if (info.backward_rule && gradient_checks == 0)
            FAIL_CHECK("differentiable op '" << info.name << "' has no row that runs the gradient check");
    }
}

TEST_CASE("op table: every test row names an op of ops.def") {
    for (const OpCase& c : op_cases()) {
        OpId op;
        INFO("row '" << c.variant << "'");
        CHECK(op_find(c.op.c_str(), &op));
    }
}

TEST_CASE("engine_manual_seed makes rand and randn reproducible") {
    auto draw = [](uint64_t seed) {
        engine_manual_seed(seed);
        std::vector<double> u = values_of(ops::create(OP_rand, Shape{50}, DTYPE_F64));
        std::vector<double> n = values_of(ops::create(OP_randn, Shape{50}, DTYPE_F32));
        u.insert(u.end(), n.begin(), n.end());
        return u;
    };
    std::vector<double> first = draw(42), again = draw(42), other = draw(43);
    CHECK(first == again);
    CHECK(first != other);
}

TEST_CASE("randn: 10,000 samples have mean about 0 and standard deviation about 1") {
    engine_manual_seed(7);
    std::vector<double> v = values_of(ops::create(OP_randn, Shape{100, 100}, DTYPE_F64));
    double mean = 0, square = 0;
    for (double x : v) mean += x;
    mean /= static_cast<double>(v.size());
    for (double x : v) square += (x - mean) * (x - mean);
    double stddev = std::sqrt(square / static_cast<double>(v.size() - 1));
    CHECK(std::fabs(mean) < 0.05);   // standard error 0.01
    CHECK(stddev > 0.95);            // standard error about 0.007
    CHECK(stddev < 1.05);
}

TEST_CASE("rand: 10,000 float32 samples lie in 0 <= x < 1 and spread over it") {
    engine_manual_seed(11);
    std::vector<double> v = values_of(ops::create(OP_rand, Shape{10000}, DTYPE_F32));
    int below_tenth = 0, above_nine_tenths = 0;
    bool in_range = true;
    for (double x : v) {
        in_range = in_range && x >= 0 && x < 1;
        below_tenth += x < 0.1;
        above_nine_tenths += x >= 0.9;
    }
    CHECK(in_range);
    CHECK(below_tenth > 850);   // expected 1,000, standard deviation 30
    CHECK(below_tenth < 1150);
    CHECK(above_nine_tenths > 850);
    CHECK(above_nine_tenths < 1150);
}

// The shape rules of elementwise ops (ops.cpp), to find the ops that must be fusable.
namespace td {
void shape_same(ShapeCall&);
void shape_broadcast(ShapeCall&);
void shape_compare(ShapeCall&);
void shape_same_pair(ShapeCall&);
}  // namespace td

TEST_CASE("op table: every elementwise op has its math line in elementwise.def, so freeze fuses it") {
    for (int i = 0; i < OP_COUNT; ++i) {
        OpId op = static_cast<OpId>(i);
        const OpInfo& info = op_info(op);
        INFO("op " << info.name);
        bool elementwise_rule = info.shape_rule == shape_same || info.shape_rule == shape_broadcast ||
                                info.shape_rule == shape_compare || info.shape_rule == shape_same_pair;
        bool moves_or_writes = info.flags & (OPF_VIEW | OPF_INPLACE | OPF_CREATE | OPF_CUSTOM | OPF_STRIDED);
        if (elementwise_rule && !moves_or_writes) CHECK(elementwise_math(op) != nullptr);
        if (elementwise_math(op)) CHECK(elementwise_math(op)->arity == info.n_inputs);
    }
}

TEST_CASE("op table: the ops Lua registers from the table are elementwise ops of one tensor") {
    int from_table = 0;
    for (int i = 0; i < OP_COUNT; ++i) {
        OpId op = static_cast<OpId>(i);
        if (!op_is_simple_method(op)) continue;
        ++from_table;
        INFO("op " << op_info(op).name);
        CHECK(op_info(op).n_inputs == 1);
        CHECK(op_info(op).attrs_kind == ATTRS_NONE);
        CHECK_FALSE(op_info(op).flags & OPF_INTERNAL);
    }
    OpId sin;
    REQUIRE(op_find("sin", &sin));
    CHECK(op_is_simple_method(sin));
    CHECK(from_table >= 20);
}

namespace {
// A value of each attribute type that differs from `v`.
double other_than(double v) { return v == 0.25 ? 0.5 : 0.25; }
int other_than(int v) { return v + 1; }
int64_t other_than(int64_t v) { return v + 1; }
bool other_than(bool v) { return !v; }
Reduction other_than(Reduction v) { return v == REDUCTION_SUM ? REDUCTION_MEAN : REDUCTION_SUM; }
DType other_than(DType v) { return v == DTYPE_F64 ? DTYPE_F32 : DTYPE_F64; }
Device other_than(Device v) { return v == DEVICE_CPU ? DEVICE_CUDA : DEVICE_CPU; }
Shape other_than(const Shape& v) { return v == Shape{3} ? Shape{4} : Shape{3}; }
}  // namespace

TEST_CASE("op attrs: attrs_equal tells apart a change in any field of OP_ATTRS_FIELDS (freeze's CSE relies on it)") {
    const OpAttrs defaults;
    CHECK(attrs_equal(defaults, OpAttrs()));
#define CHANGE_ONE_FIELD(type, name, initial, what)                      \
    {                                                                    \
        OpAttrs changed;                                                 \
        changed.name = other_than(changed.name);                         \
        INFO("field " #name);                                            \
        CHECK_FALSE(attrs_equal(defaults, changed));                     \
        CHECK(attrs_equal(changed, changed));                            \
    }
    OP_ATTRS_FIELDS(CHANGE_ONE_FIELD)
#undef CHANGE_ONE_FIELD
    OpAttrs nan_scalar;
    nan_scalar.scalar = std::nan("");
    CHECK(attrs_equal(nan_scalar, nan_scalar));   // the same NaN given twice is the same op
}

TEST_CASE("elementwise.def: each line's scalar form (what a GPU kernel would run) gives what the CPU kernel gives") {
    const std::vector<double> xs = {0.3, 0.75, 1.0, 1.5, 2.7, 0.05};   // inside every line's domain
    const std::vector<double> ys = {1.2, 0.0, 2.0, 0.5, 0.9, 3.5};     // a zero: masked_fill keeps x there
    OpAttrs attrs;
    attrs.scalar = 1.5;
    attrs.lo = 0.5;
    attrs.hi = 1.4;
    for (int i = 0; i < OP_COUNT; ++i) {
        OpId op = static_cast<OpId>(i);
        const ElementwiseMath* math = elementwise_math(op);
        if (!math) continue;
        INFO("op " << op_info(op).name);
        Tensor x = make_tensor(Shape{6}, xs, DTYPE_F64), y = make_tensor(Shape{6}, ys, DTYPE_F64);
        const Tensor* inputs[2] = {&x, &y};
        Tensor out = op_call(op, inputs, math->arity, attrs);
        for (int k = 0; k < 6; ++k) {
            double expected = math->scalar(xs[k], ys[k], attrs);
            CHECK(value_get(out.value(), k) == Approx(expected).epsilon(1e-13));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// grad_rules.def: the text of each gradient rule, which the debugger prints at a backward group.

namespace {

// The variable a rule line gives the gradient of: "A" in "dA = grad · Bᵀ", "x" in
// "dx[i] = ...", "x_i" in "each input x_i: dx_i = ..."; "" for "no gradient (...)".
std::string rule_variable(const std::string& rule) {
    std::string assignment = rule;
    if (rule.rfind("each input ", 0) == 0) assignment = rule.substr(rule.find(": ") + 2);
    if (assignment.rfind("no gradient (", 0) == 0) return "";
    size_t end = assignment.find_first_of(" [");
    if (assignment[0] != 'd' || end == std::string::npos || end < 2) return "?";
    return assignment.substr(1, end - 1);
}

// Whether `word` occurs in `text` as a word of its own (not inside a longer name).
bool has_word(const std::string& text, const std::string& word) {
    auto is_name_char = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; };
    for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
        bool starts = at == 0 || !is_name_char(text[at - 1]);
        size_t after = at + word.size();
        bool ends = after >= text.size() || !is_name_char(text[after]) || std::isdigit(static_cast<unsigned char>(text[after]));
        if (starts && ends) return true;
    }
    return false;
}

}  // namespace

// grad_rules.def's GRAD_RULE_FOR rows: the rules of an op for attributes that change its formula.
struct RuleVariant {
    OpId op;
    std::string attrs;
    std::vector<std::string> lines;
};

std::vector<RuleVariant> rule_variants() {
    return {
#define GRAD_RULE(name, ...)
#define GRAD_RULE_FOR(name, attrs, ...) {OP_##name, attrs, {__VA_ARGS__}},
#include "grad_rules.def"
#undef GRAD_RULE
#undef GRAD_RULE_FOR
    };
}

// Checks one rule line: "dNAME = ..." with NAME a letter of `math`, "each input NAME: dNAME = ...",
// or "no gradient (...)".
void check_rule_line(const std::string& rule, const char* math) {
    INFO("rule \"" << rule << "\"");
    std::string variable = rule_variable(rule);
    CHECK(variable != "?");
    if (variable.empty()) return;
    CHECK(rule.find(" = ") != std::string::npos);
    if (rule.rfind("each input ", 0) == 0) {   // "each input x_i: dx_i = ...": the name it gives
        CHECK(rule.compare(11, variable.size() + 1, variable + ":") == 0);
        return;
    }
    CHECK(has_word(math, variable));   // the letters of the op's math comment
}

TEST_CASE("op table: every differentiable op has its gradient rule as text, one line per input") {
    for (int i = 0; i < OP_COUNT; ++i) {
        OpId op = static_cast<OpId>(i);
        const OpInfo& info = op_info(op);
        INFO("op '" << info.name << "' (engine/core/grad_rules.def)");
        int count = op_grad_rule_count(op);
        if (!info.backward_rule) {
            CHECK(count == 0);   // a rule for an op without a backward would be a lie
            CHECK(std::string(op_grad_rule(op, 0) ? op_grad_rule(op, 0) : "") ==
                  (info.n_inputs == 0 ? "" : NOT_DIFFERENTIABLE_RULE));
            continue;
        }
        if (info.n_inputs >= 0) {
            CHECK(count == info.n_inputs);
            CHECK(op_grad_rule(op, info.n_inputs) == nullptr);
        } else if (count == 1) {   // a list of any length: one rule for each input
            CHECK(std::string(op_grad_rule(op, 0)).rfind("each input ", 0) == 0);
            CHECK(op_grad_rule(op, 5) == op_grad_rule(op, 0));
        } else {
            CHECK(count >= 2);
        }
        for (int input = 0; input < count; ++input) check_rule_line(op_grad_rule(op, input), info.math);
    }
    for (const RuleVariant& v : rule_variants()) {
        INFO("GRAD_RULE_FOR(" << op_info(v.op).name << ", \"" << v.attrs << "\")");
        CHECK(op_info(v.op).backward_rule != nullptr);
        CHECK(static_cast<int>(v.lines.size()) == op_grad_rule_count(v.op));
        for (const std::string& line : v.lines) check_rule_line(line, op_info(v.op).math);
    }
}

TEST_CASE("op_grad_rule: the rules the debugger shows for mm, tanh, pow and cat") {
    CHECK(std::string(op_grad_rule(OP_mm, 0)) == "dA = grad · Bᵀ");
    CHECK(std::string(op_grad_rule(OP_mm, 1)) == "dB = Aᵀ · grad");
    CHECK(std::string(op_grad_rule(OP_tanh, 0)) == "dx = grad * (1 - y^2)");
    CHECK(std::string(op_grad_rule(OP_exp, 0)) == "dx = grad * y");
    CHECK(std::string(op_grad_rule(OP_pow_tensor, 1)).rfind("db = grad * a^b * log(a)", 0) == 0);
    CHECK(std::string(op_grad_rule(OP_cat, 3)) == op_grad_rule(OP_cat, 0));
    CHECK(op_grad_rule(OP_tanh, 1) == nullptr);
    CHECK(op_grad_rule(OP_tanh, -1) == nullptr);
    CHECK(std::string(op_grad_rule(OP_eq, 1)) == NOT_DIFFERENTIABLE_RULE);
}

TEST_CASE("op_grad_rule: a node's attributes pick its rows (mm(Bᵀ), nn.Linear's Y = A Bᵀ)") {
    OpAttrs plain, trans_b, both;
    trans_b.trans_b = true;
    both.trans_a = both.trans_b = true;
    CHECK(std::string(op_grad_rule(OP_mm, 0, &plain)) == "dA = grad · Bᵀ");
    CHECK(std::string(op_grad_rule(OP_mm, 0, &trans_b)) == "dA = grad · B (Y = A Bᵀ)");
    CHECK(std::string(op_grad_rule(OP_mm, 1, &trans_b)) == "dB = gradᵀ · A (Y = A Bᵀ)");
    CHECK(std::string(op_grad_rule(OP_bmm, 1, &both)) == "dB[i] = grad[i]ᵀ · A[i]ᵀ (Y[i] = A[i]ᵀ B[i]ᵀ)");
    OpAttrs accumulate = trans_b;   // no row for "Bᵀ +=": the op's own
    accumulate.accumulate = true;
    CHECK(std::string(op_grad_rule(OP_mm, 1, &accumulate)) == "dB = Aᵀ · grad");
    // Every row (mm's and bmm's transposes) names attributes as the debugger shows them.
    for (const RuleVariant& v : rule_variants()) {
        bool reachable = false;
        for (int flags = 0; flags < 4; ++flags) {
            OpAttrs a;
            a.trans_a = flags & 1;
            a.trans_b = flags & 2;
            reachable = reachable || op_describe_attrs(v.op, a) == v.attrs;
        }
        INFO("GRAD_RULE_FOR(" << op_info(v.op).name << ", \"" << v.attrs << "\")");
        CHECK(reachable);
    }
}

TEST_CASE("op table: in a build with CUDA, every op has a CUDA kernel or a documented reason (tapedeck --ops)") {
    if (!cuda_built()) return;   // no CUDA table to check
    for (int i = 0; i < OP_COUNT; ++i) {
        OpId op = static_cast<OpId>(i);
        INFO("op '" << op_info(op).name << "'");
        const char* missing = kernel_missing_reason(op, DEVICE_CUDA);
        if (missing) CHECK(std::string(missing) != "not written yet");
    }
}
