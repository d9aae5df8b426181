// op_checks.cpp: see op_checks.h.
#include "op_checks.h"

#include <random>

using namespace td;

namespace td_test {

Tensor run_op(OpId op, const std::vector<Tensor>& inputs, const OpAttrs& attrs) {
    std::vector<const Tensor*> pointers;
    for (const Tensor& t : inputs) pointers.push_back(&t);
    return op_call(op, pointers.data(), static_cast<int>(pointers.size()), attrs);
}

OpAttrs attrs_of(const OpCase& c) {
    OpAttrs attrs = c.attrs;
    if (!c.init_values.empty()) attrs.init_values = c.init_values.data();
    return attrs;
}

OpAttrs attrs_on(const OpCase& c, Device device) {
    OpAttrs attrs = attrs_of(c);
    if (op_info(op_of(c)).flags & OPF_CREATE) attrs.device = device;
    return attrs;
}

OpId op_of(const OpCase& c) {
    OpId op;
    if (!op_find(c.op.c_str(), &op)) FAIL("test row names no op of ops.def: " << c.op);
    return op;
}

bool has_float_input(const OpCase& c) {
    for (const InputCase& in : c.inputs)
        if (dtype_is_float(in.dtype)) return true;
    return false;
}

// L(inputs) = sum(op(inputs)[0] * r), computed from the output values with a plain loop.
double weighted_output_sum(OpId op, const OpCase& c, const std::vector<std::vector<double>>& values,
                           const std::vector<double>& r, Device device) {
    NoGradGuard no_grad;
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
        DType d = dtype_is_float(c.inputs[i].dtype) ? DTYPE_F64 : c.inputs[i].dtype;
        inputs.push_back(make_tensor(c.inputs[i].shape, values[i], d, false, device));
    }
    std::vector<double> y = values_of(run_op(op, inputs, attrs_on(c, device)));
    double total = 0;
    for (size_t k = 0; k < y.size(); ++k) total += y[k] * r[k];
    return total;
}

// Gradients from backward() against central differences, in float64. L = sum(out * r) for fixed
// random r, so backward(out, r) gives dL/dinput. In-place ops get a clone of the leaf as input 0
// (changing a leaf that requires grad in place is refused).
void check_gradients(OpId op, const OpCase& c, Device device) {
    const bool inplace = op_info(op).flags & OPF_INPLACE;
    std::vector<bool> differentiate(c.inputs.size());
    std::vector<Tensor> leaves, inputs;
    std::vector<std::vector<double>> values;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
        const InputCase& in = c.inputs[i];
        bool listed = c.grad_inputs.empty() ||
                      std::find(c.grad_inputs.begin(), c.grad_inputs.end(), static_cast<int>(i)) != c.grad_inputs.end();
        differentiate[i] = dtype_is_float(in.dtype) && listed;
        leaves.push_back(make_tensor(in.shape, in.values, dtype_is_float(in.dtype) ? DTYPE_F64 : in.dtype,
                                     differentiate[i], device));
        values.push_back(in.values);
    }
    inputs = leaves;
    if (inplace) inputs[0] = ops::unary(OP_clone, leaves[0]);

    Tensor y = run_op(op, inputs, attrs_on(c, device));
    CHECK(y.node->tracks_grad);
    CHECK(y.requires_grad());
    if (!y.requires_grad()) return;

    std::mt19937_64 rng(1234);
    std::uniform_real_distribution<double> weight(-1, 1);
    std::vector<double> r(static_cast<size_t>(y.numel()));
    for (double& w : r) w = weight(rng);
    Tensor r_tensor = make_tensor(y.shape(), r, y.dtype(), false, y.value().device());
    backward(y, &r_tensor);

    const double eps = 1e-6;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
        if (!differentiate[i]) continue;
        INFO("gradient of input " << i + 1);
        Tensor grad = grad_of(leaves[i]);
        std::vector<double> analytic(values[i].size(), 0.0);   // no gradient arrived: zero
        if (grad.defined()) {
            CHECK(grad.shape().str() == leaves[i].shape().str());
            CHECK(grad.dtype() == DTYPE_F64);
            CHECK(grad.value().device() == leaves[i].value().device());
            analytic = values_of(grad);
        }
        std::vector<double> numeric(values[i].size());
        for (size_t k = 0; k < values[i].size(); ++k) {
            std::vector<std::vector<double>> plus = values, minus = values;
            plus[i][k] += eps;
            minus[i][k] -= eps;
            numeric[k] = (weighted_output_sum(op, c, plus, r, device) - weighted_output_sum(op, c, minus, r, device)) / (2 * eps);
        }
        check_values(analytic, numeric, 1e-5, 1e-5);
    }
}

}  // namespace td_test
