// test_onnx_ops.cpp: the ONNX mapping table (engine/io/onnx/onnx_ops.cpp) against the op table.
//
//   - every op of ops.def maps to ONNX or says why it is not exported;
//   - every test row (tests/engine/op_cases.h) of an op that maps is recorded as a plan (its inputs
//     the plan's arguments; forward, then backward of sum(output * r) when the output has a
//     gradient) and exported, backward ops as functions and inlined. The models go to
//     $TAPEDECK_ONNX_OP_CASES (default ./op_cases) with their inputs and the eager results, for
//     check_onnx_cases.py to run in ONNX Runtime (ctest: onnx.op_cases_run).
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "../engine/op_checks.h"
#include "onnx_export.h"
#include "state_file.h"

using namespace td;
using namespace td_test;

namespace {

std::string cases_dir() {
    const char* dir = std::getenv("TAPEDECK_ONNX_OP_CASES");
    std::string path = dir ? dir : "op_cases";
    std::filesystem::create_directories(path);
    return path;
}

bool random_op(OpId op) { return op == OP_rand || op == OP_randn || op == OP_randint; }

// Rows exported and checked by ONNX's checker but not compared in ONNX Runtime, and why
// (docs/onnx.md says the same): "" for the others.
std::string not_compared(OpId op, const OpCase& c) {
    if (random_op(op)) return "its numbers come from the runtime's generator";
    bool nan = false;
    for (const InputCase& in : c.inputs)
        for (double v : in.values) nan |= std::isnan(v);
    if ((op == OP_sort || op == OP_topk) && nan) return "TopK orders NaN otherwise (we sort NaN as the largest, as PyTorch)";
    if ((op == OP_sum || op == OP_prod) && c.variant.find("int64 overflow") != std::string::npos)
        return "ONNX leaves int64 overflow undefined, and ONNX Runtime's ReduceSum and ReduceProd do not wrap";
    return "";
}

// The row recorded as a plan, exported twice, and its files written (random ops: exported only).
void export_row(const OpCase& c, int row, const std::string& dir) {
    OpId op = op_of(c);
    bool inplace = op_info(op).flags & OPF_INPLACE;
    std::vector<Tensor> args;
    std::vector<std::string> names;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
        const InputCase& in = c.inputs[i];
        bool listed = c.grad_inputs.empty() ||
                      std::find(c.grad_inputs.begin(), c.grad_inputs.end(), static_cast<int>(i)) != c.grad_inputs.end();
        args.push_back(make_tensor(in.shape, in.values, in.dtype, dtype_is_float(in.dtype) && listed && c.no_gradcheck.empty()));
        names.push_back("in" + std::to_string(i + 1));
    }
    plan_record_begin(c.op, args, names, SourceLoc());
    std::vector<Tensor> outputs;
    try {
        std::vector<Tensor> inputs = args;
        if (inplace && !inputs.empty()) inputs[0] = ops::unary(OP_clone, inputs[0]);
        Tensor y = run_op(op, inputs, attrs_of(c));
        for (int k = 0; k < y.node->outputs.size(); ++k) outputs.push_back(Tensor(y.node.get(), k));
        if (y.requires_grad() && c.no_gradcheck.empty()) {
            std::mt19937_64 rng(static_cast<uint64_t>(row) + 1);
            std::uniform_real_distribution<double> uniform(-1, 1);
            std::vector<double> r(static_cast<size_t>(y.shape().numel()));
            for (double& v : r) v = uniform(rng);
            Tensor weights = make_tensor(y.shape(), r, y.dtype(), false);
            backward(ops::reduce_all(OP_sum, ops::mul(y, weights)), nullptr);
        }
    } catch (...) {
        plan_record_abort();
        throw;
    }
    std::shared_ptr<const Plan> recorded(plan_record_end(outputs));
    std::string name = dir + "/" + c.op + "_" + std::to_string(row);
    OnnxExportOptions options;
    OnnxExportResult exported = onnx_export(recorded, options, name + ".onnx");
    options.inline_backward = true;
    onnx_export(recorded, options, name + ".inline.onnx");
    if (!not_compared(op, c).empty()) {
        std::filesystem::remove(name + ".onnx");
        std::filesystem::remove(name + ".inline.onnx");
        return;
    }
    StateEntries inputs, expected;
    for (size_t i = 0; i < args.size(); ++i) inputs.push_back({names[i], STATE_TENSOR, args[i].value(), ""});
    for (const std::string& out : exported.outputs) {
        Value value;
        if (out == "output") value = outputs[0].value();
        else if (out == "output_2") value = outputs[1].value();
        else {
            size_t i = static_cast<size_t>(std::stoi(out.substr(2))) - 1;   // "in2.grad"
            value = grad_of(args[i]).value();
        }
        expected.push_back({out, STATE_TENSOR, value, ""});
    }
    state_save(inputs, name + ".inputs.npz", false);
    state_save(expected, name + ".expected.npz", false);
}

}  // namespace

// A mapping names the ONNX ops it becomes (an elementwise op of one tensor forgotten in
// unary_type names none); a refusal has no emit function. The problems are listed by op.
TEST_CASE("every op maps to ONNX or says why it is not exported") {
    std::vector<std::string> problems;
    for (int i = 0; i < OP_COUNT; ++i) {
        OpId op = static_cast<OpId>(i);
        const OnnxOpMapping& m = onnx_op_mapping(op);
        std::string name = op_info(op).name, onnx = m.onnx, refusal = m.refusal;
        if (!m.emit && refusal.empty())
            problems.push_back("op " + name + " has no ONNX mapping and no reason why it cannot have one "
                               "(MAPPING_ROWS, engine/io/onnx/onnx_ops.cpp)");
        if (m.emit && !refusal.empty()) problems.push_back("op " + name + " both maps to ONNX and is refused: " + refusal);
        if (m.emit && onnx.empty())
            problems.push_back("op " + name + " maps to ONNX but names no ONNX op (for an elementwise op of one "
                               "tensor: its ONNX name in unary_type, engine/io/onnx/onnx_ops.cpp)");
    }
    CHECK(problems == std::vector<std::string>{});
}

TEST_CASE("every op row exports to ONNX") {
    std::string dir = cases_dir();
    int row = 0, exported = 0;
    for (const OpCase& c : op_cases()) {
        ++row;
        OpId op = op_of(c);
        if (!onnx_op_mapping(op).emit) continue;
        std::string what = c.op + " (" + c.variant + ")";
        run_guarded(what.c_str(), [&] { export_row(c, row, dir); });
        ++exported;
    }
    CHECK(exported > 100);
}
