// test_cuda_ops.cpp: every op's test rows (tests/engine/op_cases.cpp) on the GPU against the CPU
// (DESIGN rule 6: "CUDA against CPU"), as ggml's test-backend-ops does: the same inputs on both
// devices, the outputs compared within a tolerance per dtype; then the float64 finite-difference
// gradient check run on the GPU itself. Random ops are compared by shape and dtype only (the GPU's
// counter-based generator draws other numbers), with their rows' own checks.
//
// The device under test is TAPEDECK_TEST_DEVICE ("cuda" unless set; "cpu" runs it CPU against
// CPU). Without a usable GPU the program prints why and exits 77, which CTest reports as skipped.
// With TAPEDECK_EMULATE_GPU=1 "cuda" is the emulated GPU (engine/device_emulated.h: host memory,
// the CPU's kernels): CI runs it so on every run, which checks the device plumbing (creation on a
// device, to_device, the host boundary, autograd there) and this harness, not the CUDA kernels.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>

#include "backend.h"
#include "device.h"
#include "op_checks.h"

using namespace td;
using namespace td_test;

namespace {

Device g_device = DEVICE_CUDA;

bool is_random(OpId op) {
    return op == OP_rand || op == OP_randn || op == OP_randint || op == OP_randperm || op == OP_multinomial;
}

// The row's outputs on `device` (inputs made there, creation ops asked to make them there).
Tensor run_row(OpId op, const OpCase& c, Device device) {
    std::vector<Tensor> inputs;
    for (const InputCase& in : c.inputs) inputs.push_back(make_tensor(in.shape, in.values, in.dtype, false, device));
    return run_op(op, inputs, attrs_on(c, device));
}

void compare_with_cpu(OpId op, const OpCase& c) {
    Tensor expected = run_row(op, c, DEVICE_CPU);
    Tensor actual = run_row(op, c, g_device);
    REQUIRE(actual.node->outputs.size() == expected.node->outputs.size());
    for (int i = 0; i < actual.node->outputs.size(); ++i) {
        INFO("output " << i + 1);
        Tensor want(expected.node.get(), i), got(actual.node.get(), i);
        CHECK(got.shape().str() == want.shape().str());
        CHECK(got.dtype() == want.dtype());
        Device made_on = op == OP_to_device ? c.attrs.device : g_device;
        CHECK(device_name(got.value().device()) == std::string(device_name(made_on)));
        if (is_random(op)) continue;
        if (got.dtype() == DTYPE_F32) check_values(got, values_of(want), 1e-4, 1e-5);
        else if (got.dtype() == DTYPE_F64) check_values(got, values_of(want), 1e-10, 1e-12);
        else check_values(got, values_of(want), 0, 0);
    }
    if (c.check) c.check(actual);
}

template <class F>
void run_guarded(const char* what, F check) {
    try {
        check();
    } catch (const std::exception& e) {
        FAIL_CHECK(what << " threw: " << e.what());
    }
}

}  // namespace

TEST_CASE("every op row on the device gives the CPU's outputs, and its gradients pass the finite-difference check there") {
    INFO("device " << device_name(g_device));
    for (const OpCase& c : op_cases()) {
        OpId op = op_of(c);
        const OpInfo& info = op_info(op);
        INFO("op '" << info.name << "', row '" << c.variant << "'");
        if (!kernel_exists(op, g_device)) {
            WARN("no " << device_name(g_device) << " kernel for " << info.name << ": " << kernel_missing_reason(op, g_device));
            continue;
        }
        run_guarded("the comparison with the cpu", [&] { compare_with_cpu(op, c); });
        if (info.backward_rule && c.no_gradcheck.empty() && has_float_input(c))
            run_guarded("the gradient check", [&] { check_gradients(op, c, g_device); });
    }
}

TEST_CASE("a tensor moved to the device and back keeps its values; the move is an op on the tape, its gradient the move back") {
    Tensor x = make_tensor(Shape{2, 3}, {1, -2, 3.5, 4, 5e-3, -6}, DTYPE_F64, true);
    Tensor on_device = ops::to_device(x, g_device);
    CHECK(on_device.value().device() == g_device);
    Tensor back = ops::to_device(ops::mul_scalar(on_device, 2), DEVICE_CPU);
    check_values(back, {2, -4, 7, 8, 1e-2, -12}, 0, 0);
    Tensor loss = ops::reduce_all(OP_sum, back);
    backward(loss, nullptr);
    check_values(grad_of(x), {2, 2, 2, 2, 2, 2}, 0, 0);
}

TEST_CASE("inputs on two devices are refused, naming both; a 0-d cpu tensor goes with any device") {
    if (g_device == DEVICE_CPU) return;   // one device: nothing to mix
    Tensor a = make_tensor(Shape{2}, {1, 2}, DTYPE_F32, false, g_device);
    Tensor b = make_tensor(Shape{2}, {3, 4}, DTYPE_F32);
    CHECK_THROWS_WITH(ops::add(a, b), Catch::Contains("add: input 1 is on cuda but input 2 is on cpu"));
    Tensor s = make_tensor(Shape{}, {10}, DTYPE_F32);
    check_values(ops::mul(a, s), {10, 20}, 0, 0);
}

int main(int argc, char** argv) {
    const char* chosen = std::getenv("TAPEDECK_TEST_DEVICE");
    if (chosen && !device_parse(chosen, &g_device)) {
        fprintf(stderr, "TAPEDECK_TEST_DEVICE=%s: not a device (cpu or cuda)\n", chosen);
        return 2;
    }
    if (g_device == DEVICE_CUDA && !cuda_available()) {
        printf("skipped: %s\n", cuda_unavailable_reason().c_str());
        return 77;
    }
    if (g_device == DEVICE_CUDA) printf("device: %s\n", cuda_device_name().c_str());
    return Catch::Session().run(argc, argv);
}
