// test_errors.cpp: errors are values for the user (rule 10 of docs/design.md). Each names the op and the
// shapes, and the tape survives it.
#include <catch2/catch.hpp>

#include "test_helpers.h"

using namespace td;
using namespace td_test;
using Catch::Matchers::Contains;

namespace {

Tensor zeros(const Shape& s, DType dtype = DTYPE_F64) { return ops::create(OP_zeros, s, dtype); }
Tensor sum_all(const Tensor& x) { return ops::reduce_all(OP_sum, x); }

}  // namespace

TEST_CASE("error: mm of mismatched shapes names both shapes") {
    Tensor w = zeros(Shape{20, 20}), x = zeros(Shape{10, 1});
    CHECK_THROWS_AS(ops::mm(w, x), EngineError);
    CHECK_THROWS_WITH(ops::mm(w, x), "mm: shapes [20,20] and [10,1] do not match");
    CHECK_THROWS_WITH(ops::mm(zeros(Shape{3}), x), "mm: expects two 2-d matrices, got [3] and [10,1]");
    CHECK_THROWS_WITH(ops::bmm(zeros(Shape{2, 3, 4}), zeros(Shape{3, 4, 5})),
                      "bmm: shapes [2,3,4] and [3,4,5] do not match");
}

// A window of `stride` and `padding` along both axes (max_pool2d: `kernel` too).
Window2d square(int stride, int padding, int kernel = 0) {
    Window2d w;
    w.kernel_h = w.kernel_w = kernel;
    w.stride_h = w.stride_w = stride;
    w.padding_h = w.padding_w = padding;
    return w;
}

TEST_CASE("error: conv2d and max_pool2d name the op, the problem and the shapes") {
    Tensor x = zeros(Shape{1, 3, 5, 5}), w = zeros(Shape{8, 3, 3, 3}), b = zeros(Shape{8});
    const std::string shapes = "(input [1,3,5,5], weight [8,3,3,3])";
    CHECK(ops::conv2d(x, w, b, square(1, 1)).shape().str() == "[1,8,5,5]");
    CHECK(ops::conv2d(zeros(Shape{3, 5, 5}), w, b, square(1, 0)).shape().str() == "[8,3,3]");   // one image
    CHECK_THROWS_WITH(ops::conv2d(x, zeros(Shape{8, 1, 3, 3}), b, square(1, 0)),
                      "conv2d: the input's channels (3) do not match the weight's (1) (input [1,3,5,5], weight [8,1,3,3])");
    CHECK_THROWS_WITH(ops::conv2d(x, zeros(Shape{8, 3, 7, 3}), b, square(1, 0)),
                      "conv2d: the kernel 7x3 is larger than the padded input 5x5 "
                      "(input [1,3,5,5], weight [8,3,7,3], padding 0)");
    CHECK_NOTHROW(ops::conv2d(x, zeros(Shape{8, 3, 7, 3}), b, square(1, 1)));   // 7x7 once padded: it fits
    CHECK_THROWS_WITH(ops::conv2d(zeros(Shape{5, 5}), w, b, square(1, 0)),
                      "conv2d: expects an input [N,C,H,W] or [C,H,W] and a 4-d weight [O,C/groups,kH,kW], got input [5,5], "
                      "weight [8,3,3,3]");
    CHECK_THROWS_WITH(ops::conv2d(x, zeros(Shape{8, 3, 3}), b, square(1, 0)), Contains("and a 4-d weight"));
    CHECK_THROWS_WITH(ops::conv2d(x, w, zeros(Shape{4}), square(1, 0)),
                      "conv2d: the bias must have shape [8] (one value per output channel), got [4] " + shapes);
    CHECK_THROWS_WITH(ops::conv2d(x, w, zeros(Shape{8, 1}), square(1, 0)), Contains("got [8,1]"));
    CHECK_THROWS_WITH(ops::conv2d(x, w, b, square(0, 0)), "conv2d: stride must be at least 1, got 0 " + shapes);
    CHECK_THROWS_WITH(ops::conv2d(x, w, b, square(1, -1)), "conv2d: padding must not be negative, got -1 " + shapes);
    CHECK_THROWS_WITH(ops::call(OP_conv2d, {&x}),
                      "conv2d: expects 2 or 3 tensor inputs (input, weight and an optional bias), got 1");
    CHECK_THROWS_WITH(ops::conv2d_backward_input(zeros(Shape{1, 8, 4, 4}), w, x.shape(), square(1, 1)),
                      "conv2d_backward_input: the gradient has shape [1,8,4,4] but the forward output has shape [1,8,5,5]");

    Window2d odd = square(1, 0);
    odd.stride_w = 0;
    CHECK_THROWS_WITH(ops::conv2d(x, w, b, odd), "conv2d: stride must be at least 1, got (1, 0) " + shapes);
    Window2d dilated = square(1, 0);
    dilated.dilation_h = 3;
    CHECK_THROWS_WITH(ops::conv2d(x, w, b, dilated),
                      "conv2d: the kernel 3x3 (dilation (3, 1)) is larger than the padded input 5x5 " + shapes.substr(0, shapes.size() - 1) +
                          ", padding 0)");
    dilated.dilation_h = 0;
    CHECK_THROWS_WITH(ops::conv2d(x, w, b, dilated), "conv2d: dilation must be at least 1, got (0, 1) " + shapes);
    Window2d grouped = square(1, 0);
    grouped.groups = 0;
    CHECK_THROWS_WITH(ops::conv2d(x, w, b, grouped), "conv2d: groups must be at least 1, got 0 " + shapes);
    grouped.groups = 3;
    Tensor w3 = zeros(Shape{8, 1, 3, 3});
    CHECK_THROWS_WITH(ops::conv2d(x, w3, b, grouped),
                      "conv2d: the weight's output channels (8) are not divisible by groups (3) (input [1,3,5,5], weight [8,1,3,3])");
    grouped.groups = 2;
    CHECK_THROWS_WITH(ops::conv2d(zeros(Shape{1, 4, 5, 5}), w3, b, grouped),
                      "conv2d: the input's channels (4) do not match the weight's (1) times groups (2) (input [1,4,5,5], weight [8,1,3,3])");
    Window2d strided = square(2, 0);
    CHECK_THROWS_WITH(ops::conv2d_same(x, w, b, strided),
                      "conv2d: padding=\"same\" is not supported for strided convolutions (stride 2, 2)");

    CHECK(ops::max_pool2d(x, square(2, 0, 2)).shape().str() == "[1,3,2,2]");
    CHECK_THROWS_WITH(ops::max_pool2d(x, square(6, 0, 6)), "max_pool2d: the kernel 6x6 is larger than the input 5x5 (input [1,3,5,5])");
    CHECK_THROWS_WITH(ops::max_pool2d(zeros(Shape{5, 5}), square(2, 0, 2)),
                      "max_pool2d: expects an input [N,C,H,W] or [C,H,W], got [5,5]");
    CHECK_THROWS_WITH(ops::max_pool2d(x, square(1, 0, 0)), "max_pool2d: kernel must be at least 1, got 0 (input [1,3,5,5])");
    CHECK_THROWS_WITH(ops::max_pool2d(x, square(0, 0, 2)), "max_pool2d: stride must be at least 1, got 0 (input [1,3,5,5])");
    CHECK_THROWS_WITH(ops::max_pool2d(x, square(2, 2, 3)),
                      "max_pool2d: padding must be at most half the kernel size, got padding 2 and kernel 3x3 (input [1,3,5,5])");
    Window2d wide = square(1, 0, 2);
    wide.dilation_w = 6;
    CHECK_THROWS_WITH(ops::max_pool2d(x, wide),
                      "max_pool2d: the kernel 2x2 (dilation (1, 6)) is larger than the input 5x5 (input [1,3,5,5])");
    Window2d hollow = square(1, 1, 2);   // the first window's elements sit at -1 and 2 along W: both outside [0, 2)
    hollow.dilation_w = 3;
    CHECK_THROWS_WITH(ops::max_pool2d(zeros(Shape{1, 2, 2}), hollow),
                      "max_pool2d: a window lies wholly in the padding (kernel 2x2, dilation (1, 3), padding 1) (input [1,2,2])");
    Tensor g = zeros(Shape{1, 3, 2, 2});
    CHECK_THROWS_WITH(ops::max_pool2d_backward(g, zeros(Shape{1, 3, 2, 2}, DTYPE_F32), x.shape(), square(2, 0, 2)),
                      "max_pool2d_backward: the indices must be an int64 tensor, got float32");
    Tensor outside = make_tensor(Shape{1, 1, 1, 1}, {5}, DTYPE_I64);
    CHECK_THROWS_WITH(ops::max_pool2d_backward(zeros(Shape{1, 1, 1, 1}), outside, Shape{1, 1, 2, 2}, square(2, 0, 2)),
                      "max_pool2d_backward: index 5 out of range 1..4 of an H*W plane");
}

TEST_CASE("error: flatten names the dims it was given") {
    Tensor x = zeros(Shape{2, 3, 4});
    CHECK(ops::flatten(x, 1, 2).shape().str() == "[2,12]");
    CHECK(ops::flatten(make_scalar(1), 0, 0).shape().str() == "[1]");
    CHECK_THROWS_WITH(ops::flatten(x, 2, 1), "flatten: start_dim 3 comes after end_dim 2 (shape [2,3,4])");
    CHECK_THROWS_WITH(ops::flatten(x, 0, 3), "flatten: dims 1..4 out of range for [2,3,4]");
}

TEST_CASE("error: backward() on a non-scalar without a gradient") {
    Tensor x = make_leaf(Shape{2, 3}, {1, 2, 3, 4, 5, 6});
    Tensor y = ops::mul_scalar(x, 2);
    CHECK_THROWS_WITH(backward(y, nullptr), Contains("has shape [2,3]") && Contains("needs a single element"));
    CHECK_FALSE(grad_of(x).defined());
}

TEST_CASE("error: backward() with a gradient of the wrong shape") {
    Tensor x = make_leaf(Shape{2, 3}, {1, 2, 3, 4, 5, 6});
    Tensor y = ops::mul_scalar(x, 2);
    Tensor g = zeros(Shape{3, 2});
    CHECK_THROWS_WITH(backward(y, &g), "backward: the gradient has shape [3,2] but the tensor has shape [2,3]");
}

TEST_CASE("error: backward() on a tensor that does not require grad") {
    Tensor x = make_tensor(Shape{2}, {1, 2});
    Tensor loss = sum_all(x);
    CHECK_THROWS_WITH(backward(loss, nullptr),
                      "backward: tensor #" + std::to_string(loss.id()) +
                          " does not require grad (nothing that made it has requires_grad=true)");
    CHECK_THROWS_WITH(backward(Tensor(), nullptr), "backward: not a tensor");
}

TEST_CASE("error: a dim out of range names the op, the dim and the valid range") {
    CHECK_THROWS_WITH(dim_normalize("sum", 3, 2), "sum: dim 3 out of range for a 2-d tensor (expected 1..2 or -2..-1)");
    CHECK_THROWS_WITH(dim_normalize("sum", 0, 2), "sum: dim 0 out of range for a 2-d tensor (expected 1..2 or -2..-1)");
    CHECK_THROWS_WITH(dim_normalize("softmax", -3, 2),
                      "softmax: dim -3 out of range for a 2-d tensor (expected 1..2 or -2..-1)");
    CHECK_THROWS_WITH(dim_normalize("max", 1, 0), "max: dim 1 out of range: the tensor is 0-d (a single number)");
    CHECK(dim_normalize("sum", 1, 2) == 0);
    CHECK(dim_normalize("sum", 2, 2) == 1);
    CHECK(dim_normalize("sum", -1, 2) == 1);
    CHECK(dim_normalize("sum", -2, 2) == 0);
    // The shape rules check 0-based dims again (dims shown 1-based).
    CHECK_THROWS_WITH(ops::reduce(OP_sum, zeros(Shape{2, 3}), 2, false), "sum: dim 3 out of range for a 2-d tensor");
}

TEST_CASE("error: gather with an index out of range names the index, the range and the dim") {
    Tensor x = make_tensor(Shape{2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
    Tensor too_big = make_tensor(Shape{2, 1}, {1, 5}, DTYPE_I64);
    CHECK_THROWS_WITH(ops::gather(x, 1, too_big), "gather: index 5 out of range 1..4 along dim 2");
    Tensor zero = make_tensor(Shape{2, 1}, {0, 1}, DTYPE_I64);   // indices are 1-based
    CHECK_THROWS_WITH(ops::gather(x, 1, zero), "gather: index 0 out of range 1..4 along dim 2");
    Tensor as_float = make_tensor(Shape{2, 1}, {1, 2}, DTYPE_F32);
    CHECK_THROWS_WITH(ops::gather(x, 1, as_float), "gather: the index must be an int64 tensor, got float32");
    Tensor src = make_tensor(Shape{2, 1}, {1, 1});
    CHECK_THROWS_WITH(ops::scatter_add(src, 1, too_big, Shape{2, 4}), "scatter_add: index 5 out of range 1..4 along dim 2");
}

TEST_CASE("error: mse_loss needs equal shapes and names both") {
    CHECK_THROWS_WITH(ops::mse_loss(zeros(Shape{2, 3}), zeros(Shape{3})),
                      "mse_loss: input [2,3] and target [3] must have the same shape");
}

TEST_CASE("error: class losses name the op and both shapes when input and labels do not fit") {
    Tensor labels = make_tensor(Shape{3}, {1, 2, 1}, DTYPE_I64);
    CHECK_THROWS_WITH(ops::class_loss(OP_cross_entropy, zeros(Shape{2, 4}), labels),
                      "cross_entropy: input [2,4] and labels [3] do not match (expected input [N,C] with labels [N], "
                      "or input [C] with one label)");
    CHECK_THROWS_WITH(ops::class_loss(OP_nll_loss, zeros(Shape{2, 3, 4}), labels), Contains("nll_loss: input [2,3,4] and labels [3]"));
    CHECK_THROWS_WITH(ops::class_loss(OP_multi_margin_loss, zeros(Shape{3}), labels),
                      Contains("multi_margin_loss: input [3] and labels [3] do not match"));
    CHECK_THROWS_WITH(ops::class_loss(OP_cross_entropy, zeros(Shape{3, 2}, DTYPE_I64), labels),
                      "cross_entropy: the input must be float32 or float64, got int64");
}

TEST_CASE("error: a label out of range names the op, the label, its position and the classes") {
    Tensor scores = zeros(Shape{2, 3});
    CHECK_THROWS_WITH(ops::class_loss(OP_cross_entropy, scores, make_tensor(Shape{2}, {1, 4}, DTYPE_I64)),
                      "cross_entropy: label 4 at position 2 is out of range: there are 3 classes (labels 1..3)");
    CHECK_THROWS_WITH(ops::class_loss(OP_nll_loss, scores, make_tensor(Shape{2}, {0, 1}, DTYPE_I64)),   // 1-based
                      "nll_loss: label 0 at position 1 is out of range: there are 3 classes (labels 1..3)");
    CHECK_THROWS_WITH(ops::class_loss(OP_multi_margin_loss, scores, make_tensor(Shape{2}, {2, -1}, DTYPE_I64)),
                      "multi_margin_loss: label -1 at position 2 is out of range: there are 3 classes (labels 1..3)");
    CHECK_THROWS_WITH(ops::class_loss(OP_cross_entropy, scores, make_tensor(Shape{2}, {3, 4}, DTYPE_F32)),
                      "cross_entropy: label 4 at position 2 is out of range: there are 3 classes (labels 1..3)");
}

TEST_CASE("error: float labels must hold whole numbers; whole ones work as int64 labels do") {
    Tensor scores = make_tensor(Shape{2, 3}, {0.5, -1.2, 2.0, 1.5, -0.3, 0.8});
    CHECK_THROWS_WITH(ops::class_loss(OP_cross_entropy, scores, make_tensor(Shape{2}, {1, 2.5}, DTYPE_F32)),
                      "cross_entropy: label 2.5 at position 2 is not a whole number (labels are classes 1..3)");
    double as_float = item(ops::class_loss(OP_cross_entropy, scores, make_tensor(Shape{2}, {3, 1}, DTYPE_F32)));
    double as_int = item(ops::class_loss(OP_cross_entropy, scores, make_tensor(Shape{2}, {3, 1}, DTYPE_I64)));
    CHECK(as_float == as_int);
}

TEST_CASE("error: a loss's derivative rows take a 0-d gradient") {
    Tensor labels = make_tensor(Shape{2}, {1, 2}, DTYPE_I64);
    CHECK_THROWS_WITH(ops::class_loss_backward(OP_cross_entropy_backward, zeros(Shape{2}), zeros(Shape{2, 3}), labels,
                                               REDUCTION_MEAN),
                      "cross_entropy_backward: the gradient of a loss is 0-d, got [2]");
    CHECK_THROWS_WITH(ops::nll_loss_backward(zeros(Shape{}), labels, Shape{3, 3}, REDUCTION_SUM),
                      Contains("nll_loss_backward: input [3,3] and labels [2] do not match"));
}

TEST_CASE("error: backward after an in-place change to a tensor saved for backward names the op") {
    Tensor x = make_leaf(Shape{3}, {0.1, 0.2, 0.3});
    Tensor y = ops::unary(OP_tanh, x);   // tanh saves its output
    Tensor loss = sum_all(y);
    {
        NoGradGuard no_grad;
        ops::add_(y, make_tensor(Shape{3}, {1, 1, 1}));
    }
    CHECK_THROWS_WITH(backward(loss, nullptr),
                      Contains("backward: tanh #" + std::to_string(y.id())) && Contains("in-place") &&
                          Contains("its output") && Contains("version 0, now 1"));
}

TEST_CASE("error: an in-place change through a view is caught too (versions belong to the storage)") {
    Tensor x = make_leaf(Shape{2, 2}, {1, 2, 3, 4});
    Tensor w = make_tensor(Shape{2, 2}, {1, 1, 1, 1});
    Tensor y = ops::mul(w, x);              // mul saves both inputs: w among them
    Tensor w_view = ops::reshape(w, Shape{4});
    ops::mul_(w_view, 2);            // w does not require grad: allowed, and w changes
    CHECK_THROWS_WITH(backward(sum_all(y), nullptr), Contains("mul") && Contains("its first input"));
}

TEST_CASE("error: an in-place op on a leaf that requires grad, while grad is enabled") {
    Tensor x = make_leaf(Shape{2}, {1, 2});
    Tensor one = make_tensor(Shape{2}, {1, 1});
    std::string leaf = "tensor #" + std::to_string(x.id()) + " is a leaf that requires grad";
    CHECK_THROWS_WITH(ops::add_(x, one), Contains("add_: " + leaf) && Contains("torch.no_grad"));
    CHECK_THROWS_WITH(ops::mul_(x, 2), Contains("mul_: " + leaf));
    CHECK_THROWS_WITH(ops::zero_(x), Contains("zero_: " + leaf));
    check_values(x, {1, 2});   // refused before the kernel ran
    CHECK(x.value().storage->version == 0);
}

TEST_CASE("error: an in-place op on a view of a leaf that requires grad, while grad is enabled") {
    // reshape shares the leaf's storage, so changing the view in place changes the leaf: it needs
    // the same refusal as the leaf itself (PyTorch: "a view of a leaf Variable that requires grad
    // is being used in an in-place operation").
    Tensor x = make_leaf(Shape{2, 2}, {1, 2, 3, 4});
    Tensor view = ops::reshape(x, Shape{4});
    CHECK_THROWS_WITH(ops::add_(view, make_tensor(Shape{4}, {1, 1, 1, 1})),
                      Contains("add_: ") && Contains("leaf") && Contains("requires grad"));
    check_values(x, {1, 2, 3, 4});   // the leaf is unchanged

    // Under no_grad it is allowed, as for the leaf itself.
    Tensor w = make_leaf(Shape{2, 2}, {1, 2, 3, 4});
    {
        NoGradGuard no_grad;
        Tensor w_view = ops::reshape(w, Shape{4});
        ops::add_(w_view, make_tensor(Shape{4}, {1, 1, 1, 1}));
    }
    check_values(w, {2, 3, 4, 5});
}

TEST_CASE("error: mul_ refuses a multiplier that requires grad") {
    Tensor x = ops::mul_scalar(make_leaf(Shape{2}, {1, 2}), 1);
    Tensor m = make_leaf(Shape{2}, {3, 4});
    CHECK_THROWS_WITH(ops::mul_(x, m), Contains("mul_: the multiplier requires grad"));
}

TEST_CASE("error: wrong input counts and missing tensors name the op") {
    Tensor a = make_tensor(Shape{2}, {1, 2});
    CHECK_THROWS_WITH(ops::call(OP_add, {&a}), "add: expects 2 tensor inputs, got 1");
    Tensor empty;
    CHECK_THROWS_WITH(ops::add(a, empty), "add: input 2 is not a tensor");
    CHECK_THROWS_WITH(ops::reshape(a, Shape{3}), "reshape: cannot view [2] (2 elements) as [3]");
    CHECK_THROWS_WITH(ops::create(OP_zeros, Shape{2, -1}, DTYPE_F32), "zeros: negative size in shape [2,-1]");
}

TEST_CASE("error: the tape survives an error, the failed node is gone and later ops work") {
    Tensor x = make_tensor(Shape{2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
    Tensor bad = make_tensor(Shape{2, 1}, {9, 1}, DTYPE_I64);
    int64_t live = tape_live_count();
    size_t bytes = storage_bytes_live();
    CHECK_THROWS(ops::gather(x, 1, bad));        // fails in the kernel, after the node was recorded
    CHECK_THROWS(ops::mm(x, x));                 // fails in the shape rule
    CHECK(tape_live_count() == live);
    CHECK(storage_bytes_live() == bytes);
    CHECK(grad_enabled());
    Tensor ok = ops::gather(x, 1, make_tensor(Shape{2, 1}, {4, 1}, DTYPE_I64));
    check_values(ok, {4, 5});
}

TEST_CASE("error: an error inside backward restores the grad mode and leaves no pending gradients") {
    Tensor x = make_leaf(Shape{2}, {0.5, 1});
    Tensor y = ops::unary(OP_exp, x);   // exp saves its output
    Tensor loss = sum_all(y);
    {
        NoGradGuard no_grad;
        ops::mul_(y, 2);
    }
    CHECK_THROWS(backward(loss, nullptr));
    CHECK(grad_enabled());
    CHECK(engine_recording().phase == PHASE_FORWARD);
    CHECK(engine_recording().group_node == nullptr);
    for (Node* n = tape_first(); n; n = n->tape_next)
        for (const Output& out : n->outputs) CHECK_FALSE(out.pending.defined());
    // A new graph from the same leaf still works.
    backward(sum_all(ops::mul_scalar(x, 3)), nullptr);
    check_values(grad_of(x), {3, 3});
}
