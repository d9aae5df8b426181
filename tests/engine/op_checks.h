// op_checks.h: running an op's test row (op_cases.h) and checking its gradients, on any device:
// test_op_table.cpp runs every row on the CPU, tests/cuda/test_cuda_ops.cpp on the GPU.
#pragma once

#include "op_cases.h"
#include "test_helpers.h"

namespace td_test {

td::OpId op_of(const OpCase& c);   // the row's op (a failed test when it names none)
td::Tensor run_op(td::OpId op, const std::vector<td::Tensor>& inputs, const td::OpAttrs& attrs);
// The row's attributes (with `tensor`'s values); attrs_on also makes a creation op's output on `device`.
td::OpAttrs attrs_of(const OpCase& c);
td::OpAttrs attrs_on(const OpCase& c, td::Device device);
bool has_float_input(const OpCase& c);
// L(inputs) = sum(op(inputs)[0] * r) in float64 on `device`, from the output values read back.
double weighted_output_sum(td::OpId op, const OpCase& c, const std::vector<std::vector<double>>& values,
                           const std::vector<double>& r, td::Device device);
// Gradients from backward() on `device` against central differences computed there, in float64.
void check_gradients(td::OpId op, const OpCase& c, td::Device device);

// Runs `check`; an engine error becomes a failed check naming it, so one bad row does not hide
// the rows after it.
template <class F>
void run_guarded(const char* what, F check) {
    try {
        check();
    } catch (const std::exception& e) {
        FAIL_CHECK(what << " threw: " << e.what());
    }
}

}  // namespace td_test
