// test_cuda_ops.cpp: every op's test rows (tests/engine/op_cases.cpp) on the GPU against the CPU
// (rule 6 of docs/design.md: "CUDA against CPU"), as ggml's test-backend-ops does: the same inputs on both
// devices, the outputs compared within a tolerance per dtype; then the float64 finite-difference
// gradient check run on the GPU itself. Random ops are compared by shape and dtype only (the GPU's
// counter-based generator draws other numbers), with their rows' own checks.
//
// The device under test is TAPEDECK_TEST_DEVICE ("cuda" unless set; "cpu" runs it CPU against
// CPU). Without a usable GPU the program prints why and exits 77, which CTest reports as skipped.
// With TAPEDECK_EMULATE_GPU=1 "cuda" is the emulated GPU (engine/backends/device_emulated.h: host memory,
// the CPU's kernels): CI runs it so on every run, which checks the device plumbing (creation on a
// device, to_device, the host boundary, autograd there) and this harness, not the CUDA kernels.
#define CATCH_CONFIG_RUNNER
#define CATCH_CONFIG_EXTERNAL_INTERFACES   // TestEventListenerBase: the failed-assertion count
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>

#include "backend.h"
#include "device.h"
#include "op_checks.h"

using namespace td;
using namespace td_test;

namespace {

Device g_device = DEVICE_CUDA;

// Failed assertions so far (FailureCounter): a row failed when the count grew while it ran.
size_t g_failed_assertions = 0;

struct FailureCounter : Catch::TestEventListenerBase {
    using TestEventListenerBase::TestEventListenerBase;
    bool assertionEnded(const Catch::AssertionStats& stats) override {
        if (!stats.assertionResult.isOk()) ++g_failed_assertions;
        return true;
    }
};

// The dtype a row is counted under in the tally: its first input's, else its first output's.
DType row_dtype(const OpCase& c) {
    if (!c.inputs.empty()) return c.inputs[0].dtype;
    return c.outputs.empty() ? DTYPE_F32 : c.outputs[0].dtype;
}

// The ops that run in cuBLAS or cuDNN rather than in our kernels: TAPEDECK_TEST_OUR_KERNELS=1
// leaves their rows out (compute-sanitizer's run in scripts/gpu_run.sh checks our kernels only).
bool library_op(OpId op) {
    return op == OP_mm || op == OP_bmm || op == OP_conv2d || op == OP_conv2d_backward_input || op == OP_conv2d_backward_weight;
}

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

}  // namespace

TEST_CASE("every op row on the device gives the CPU's outputs, and its gradients pass the finite-difference check there") {
    INFO("device " << device_name(g_device));
    const char* ours = std::getenv("TAPEDECK_TEST_OUR_KERNELS");
    bool our_kernels_only = ours && std::string(ours) == "1";
    std::map<std::string, std::pair<int, int>> tally;   // dtype -> rows, rows failed
    for (const OpCase& c : op_cases()) {
        OpId op = op_of(c);
        const OpInfo& info = op_info(op);
        INFO("op '" << info.name << "', row '" << c.variant << "'");
        if (!kernel_exists(op, g_device)) {
            WARN("no " << device_name(g_device) << " kernel for " << info.name << ": " << kernel_missing_reason(op, g_device));
            continue;
        }
        if (our_kernels_only && library_op(op)) continue;
        size_t failed_before = g_failed_assertions;
        run_guarded("the comparison with the cpu", [&] { compare_with_cpu(op, c); });
        if (info.backward_rule && c.no_gradcheck.empty() && has_float_input(c))
            run_guarded("the gradient check", [&] { check_gradients(op, c, g_device); });
        auto& [rows, failed] = tally[dtype_name(row_dtype(c))];
        ++rows;
        failed += g_failed_assertions > failed_before;
    }
    for (auto& [dtype, counts] : tally)
        printf("op rows on %s, %s: %d passed, %d failed\n", device_name(g_device), dtype.c_str(), counts.first - counts.second,
               counts.second);
}

namespace {

// A tensor of `shape` with values from a fixed generator (rounded to `step` when step > 0, so
// that reductions meet ties), on the CPU.
Tensor seeded(const Shape& shape, DType dtype, uint64_t seed, double step = 0) {
    std::vector<double> values(static_cast<size_t>(shape.numel()));
    uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
    for (double& v : values) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        v = static_cast<double>(state >> 11) / 9007199254740992.0 * 4 - 2;   // [-2, 2)
        if (step > 0) v = std::round(v / step) * step;
    }
    return make_tensor(shape, values, dtype);
}

// op(inputs on the device) against op(inputs on the CPU): every output, within a tolerance
// relative to the output's largest magnitude.
void compare_large(const char* what, const std::function<Tensor(const std::vector<Tensor>&)>& op,
                   const std::vector<Tensor>& cpu_inputs) {
    INFO(what);
    std::vector<Tensor> device_inputs;
    for (const Tensor& t : cpu_inputs) device_inputs.push_back(ops::to_device(t, g_device));
    Tensor want = op(cpu_inputs), got = op(device_inputs);
    REQUIRE(got.node->outputs.size() == want.node->outputs.size());
    for (int i = 0; i < got.node->outputs.size(); ++i) {
        Tensor w(want.node.get(), i), g(got.node.get(), i);
        INFO("output " << i + 1);
        CHECK(g.value().device() == g_device);
        CHECK(g.shape().str() == w.shape().str());
        std::vector<double> expected = values_of(w), actual = values_of(g);
        double largest = 0;
        for (double x : expected) largest = std::max(largest, std::fabs(x));
        double tolerance = w.dtype() == DTYPE_I64 ? 0 : (w.dtype() == DTYPE_F32 ? 1e-4 : 1e-10) * std::max(largest, 1.0);
        size_t bad = 0, first_bad = 0;
        for (size_t k = 0; k < expected.size(); ++k)
            if (!(std::fabs(actual[k] - expected[k]) <= tolerance) && !(std::isnan(actual[k]) && std::isnan(expected[k])))
                if (bad++ == 0) first_bad = k;
        INFO("first difference at " << first_bad << ": " << (bad ? actual[first_bad] : 0) << " vs "
                                    << (bad ? expected[first_bad] : 0));
        CHECK(bad == 0);
    }
}

}  // namespace

// The op rows use small tensors; these sizes take the kernels' other paths: block-level and
// split reductions (more than 32 and more than 8,192 elements per output), long softmax rows,
// products and convolutions past one tile, ties in max and sort.
TEST_CASE("large inputs on the device give the CPU's outputs (the kernels' block, split and tiled paths)") {
    INFO("device " << device_name(g_device));
    for (DType dtype : {DTYPE_F32, DTYPE_F64}) {
        INFO(dtype_name(dtype));
        Tensor big = seeded(Shape{300, 1000}, dtype, 1);
        Tensor tied = seeded(Shape{64, 5000}, dtype, 2, 0.5);
        compare_large("sum of every element", [](auto& in) { return ops::reduce_all(OP_sum, in[0]); }, {big});
        compare_large("sum over dim 1", [](auto& in) { return ops::reduce(OP_sum, in[0], 0, false); }, {big});
        compare_large("mean over dim 2", [](auto& in) { return ops::reduce(OP_mean, in[0], 1, true); }, {big});
        compare_large("sum over a long dim", [](auto& in) { return ops::reduce_all(OP_sum, in[0]); },
                      {seeded(Shape{100000}, dtype, 3)});
        compare_large("max over dim 2 with ties", [](auto& in) { return ops::reduce(OP_max, in[0], 1, false); }, {tied});
        compare_large("min over dim 1 with ties", [](auto& in) { return ops::reduce(OP_min, in[0], 0, false); }, {tied});
        compare_large("amax of every element", [](auto& in) { return ops::reduce_all(OP_amax, in[0]); }, {tied});
        compare_large("softmax over rows of 5000", [](auto& in) { return ops::softmax(in[0], 1); }, {tied});
        compare_large("log_softmax over dim 1", [](auto& in) { return ops::log_softmax(in[0], 0); }, {big});
        compare_large("cumsum over 5000", [](auto& in) { return ops::cumsum(in[0], 1); }, {tied});
        compare_large("sort with ties", [](auto& in) { return ops::sort(in[0], 1, true); }, {seeded(Shape{8, 3000}, dtype, 4, 0.25)});
        compare_large("mm 257x513 . 513x129", [](auto& in) { return ops::mm(in[0], in[1]); },
                      {seeded(Shape{257, 513}, dtype, 5), seeded(Shape{513, 129}, dtype, 6)});
        compare_large("mm with both read transposed", [](auto& in) { return ops::mm(in[0], in[1], true, true); },
                      {seeded(Shape{513, 257}, dtype, 7), seeded(Shape{129, 513}, dtype, 8)});
        compare_large("bmm 16 x 65x33 . 33x70", [](auto& in) { return ops::bmm(in[0], in[1]); },
                      {seeded(Shape{16, 65, 33}, dtype, 9), seeded(Shape{16, 33, 70}, dtype, 10)});
        Window2d window;
        window.padding_h = window.padding_w = 1;
        compare_large("conv2d 8x3x32x32, 16 filters 3x3", [window](auto& in) { return ops::conv2d(in[0], in[1], in[2], window); },
                      {seeded(Shape{8, 3, 32, 32}, dtype, 11), seeded(Shape{16, 3, 3, 3}, dtype, 12), seeded(Shape{16}, dtype, 13)});
        // Operands that are views at an offset (image 2 of 3: 9 elements in, 36 or 72 bytes, off a
        // 16-byte boundary, which some cuDNN engines refuse): copied to an aligned block first.
        compare_large("conv2d and its backward ops on views at an offset", [window](auto& in) {
            Tensor x = ops::narrow(in[0], 0, 1, 1), g = ops::narrow(in[2], 0, 1, 1);
            return ops::add(ops::add(ops::reduce_all(OP_sum, ops::conv2d(x, in[1], Tensor(), window)),
                                     ops::reduce_all(OP_sum, ops::conv2d_backward_input(g, in[1], x.shape(), window))),
                            ops::reduce_all(OP_sum, ops::conv2d_backward_weight(g, x, in[1].shape(), window)));
        }, {seeded(Shape{3, 1, 3, 3}, dtype, 16), seeded(Shape{2, 1, 3, 3}, dtype, 17), seeded(Shape{3, 2, 3, 3}, dtype, 18)});
        Window2d pool;
        pool.kernel_h = pool.kernel_w = 2;
        pool.stride_h = pool.stride_w = 2;
        compare_large("max_pool2d 2x2 with ties", [pool](auto& in) { return ops::max_pool2d(in[0], pool); },
                      {seeded(Shape{8, 16, 32, 32}, dtype, 14, 0.5)});
        std::vector<double> labels(512);
        for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<double>(i % 1000 + 1);
        compare_large("cross_entropy 512 x 1000 classes", [](auto& in) { return ops::class_loss(OP_cross_entropy, in[0], in[1]); },
                      {seeded(Shape{512, 1000}, dtype, 15), make_tensor(Shape{512}, labels, DTYPE_I64)});
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
    // In place, the written tensor says where the op runs: a CPU scalar cannot take a GPU tensor.
    CHECK_THROWS_WITH(ops::add_(s, a), Catch::Contains("add_: input 1 is on cpu but input 2 is on cuda"));
    check_values(s, {10}, 0, 0);
}

CATCH_REGISTER_LISTENER(FailureCounter)

int main(int argc, char** argv) {
    const char* chosen = std::getenv("TAPEDECK_TEST_DEVICE");
    if (chosen && !device_parse(chosen, &g_device)) {
        fprintf(stderr, "TAPEDECK_TEST_DEVICE=%s: not a device (cpu or cuda)\n", chosen);
        return 2;
    }
    if (g_device == DEVICE_CUDA && !cuda_available()) {
        // On the GPU machine (scripts/gpu_run.sh) a missing GPU is the failure, not a skip.
        const char* required = std::getenv("TAPEDECK_REQUIRE_GPU");
        if (required && std::string(required) == "1") {
            printf("FAILED: TAPEDECK_REQUIRE_GPU=1 and no usable GPU: %s\n", cuda_unavailable_reason().c_str());
            return 1;
        }
        printf("skipped: %s\n", cuda_unavailable_reason().c_str());
        return 77;
    }
    if (g_device == DEVICE_CUDA) printf("device: %s\n", cuda_device_name().c_str());
    return Catch::Session().run(argc, argv);
}
