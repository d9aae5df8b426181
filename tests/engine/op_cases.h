// op_cases.h: the test rows of the op table (rule 6: one test drives every op from the table).
//
// Each row names an op of engine/core/ops.def by its name string, gives its inputs and attributes and
// the outputs expected, computed independently of the kernels (by hand, closed forms, or plain
// loops in test_helpers.h). test_op_table.cpp runs every row, then checks the gradients of every
// differentiable op against finite differences. An op with no row fails the suite.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tape.h"

namespace td_test {

struct InputCase {
    td::Shape shape;
    std::vector<double> values;
    td::DType dtype = td::DTYPE_F32;
};

struct OutputCase {
    td::Shape shape;
    std::vector<double> values;   // empty: values not compared (random ops; see OpCase::check)
    td::DType dtype = td::DTYPE_F32;
};

struct OpCase {
    std::string op;                   // the name in ops.def
    std::string variant;              // what this row exercises, for failure messages
    std::vector<InputCase> inputs;
    td::OpAttrs attrs;
    std::vector<OutputCase> outputs;  // one per output the op produces
    std::vector<double> init_values;  // `tensor`: the values given (attrs.init_values points here)
    // Inputs the gradient check differentiates; empty: every float input.
    std::vector<int> grad_inputs;
    // Why this row skips the gradient check ("" = run it). Every differentiable op must still
    // have at least one row that runs it.
    std::string no_gradcheck;
    // Extra checks on output 0 (random ops).
    std::function<void(const td::Tensor&)> check;
};

// Every row, in ops.def order.
const std::vector<OpCase>& op_cases();

}  // namespace td_test
