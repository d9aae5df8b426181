// test_op_attrs.cpp: the shape rules check every attribute their op's kernel reads, for every
// caller (op_call here; plan files in test_plan_file.cpp): a dim out of range, a number that does
// not fit an int64 tensor, window arithmetic with huge padding, sizes that add or multiply past
// 64 bits. Each is an error naming the op, never a kernel reading out of bounds.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "test_helpers.h"

using namespace td;
using namespace td_test;

namespace {

std::string error_of(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const EngineError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("op attrs: max checks its dim before reading the size along it") {
    Tensor x = make_tensor(Shape{2, 3}, {1, 2, 3, 4, 5, 6});
    OpAttrs a;
    a.dim = 7;
    CHECK(error_of([&] { ops::call(OP_max, {&x}, a); }) == "max: dim 8 out of range for a 2-d tensor");
    a.dim = -5;
    CHECK(error_of([&] { ops::call(OP_max, {&x}, a); }) == "max: dim -4 out of range for a 2-d tensor");
}

TEST_CASE("op attrs: a number converted to an int64 tensor must fit int64") {
    Tensor n = make_tensor(Shape{2}, {1, 2}, DTYPE_I64);
    CHECK(error_of([&] { ops::create(OP_full, Shape{2}, DTYPE_I64, 1e300); }) == "full: value 1e+300 does not fit an int64 tensor");
    CHECK(error_of([&] { ops::create(OP_full, Shape{2}, DTYPE_I64, std::nan("")); }) == "full: value nan does not fit an int64 tensor");
    CHECK(error_of([&] { ops::add_scalar(n, 0x1p63); }).find("add_scalar: the number 9.22337e+18 does not fit an int64 tensor") == 0);
    CHECK(error_of([&] { ops::mul_scalar(n, -INFINITY); }).find("mul_scalar: the number -inf does not fit") == 0);
    CHECK(error_of([&] { ops::clamp(n, 1e300, INFINITY); }) == "clamp: min 1e+300 does not fit an int64 tensor");
    CHECK(error_of([&] { ops::clamp(n, -INFINITY, -1e20); }) == "clamp: max -1e+20 does not fit an int64 tensor");
    Tensor m = ops::unary(OP_clone, n);
    CHECK(error_of([&] { ops::fill_(m, 1e19); }) == "fill_: the number 1e+19 does not fit an int64 tensor");
    CHECK(error_of([&] { ops::add_(m, n, 1e30); }) == "add_: the number 1e+30 does not fit an int64 tensor");
    Tensor mask = make_tensor(Shape{2}, {1, 0}, DTYPE_I64);
    CHECK(error_of([&] { ops::masked_fill(n, mask, -1e30); }) == "masked_fill: the number -1e+30 does not fit an int64 tensor");
    // what fits still works, and floats take any number
    CHECK(values_of(ops::clamp(n, 2, INFINITY)) == std::vector<double>{2, 2});
    CHECK(values_of(ops::add_scalar(n, -0x1p62)) == std::vector<double>{1 - 0x1p62, 2 - 0x1p62});
    Tensor f = make_tensor(Shape{1}, {1}, DTYPE_F32);
    CHECK(std::isinf(values_of(ops::add_scalar(f, 1e300))[0]));
}

TEST_CASE("op attrs: conv2d's window arithmetic does not overflow with huge padding") {
    Tensor x = ops::create(OP_zeros, Shape{1, 1, 3, 3}, DTYPE_F32);
    Tensor w = ops::create(OP_zeros, Shape{1, 1, 2, 2}, DTYPE_F32);
    // 3 + 2 * 2^30 used to overflow int: now the output is [1,1,2^31+2,2^31+2], too large to make
    std::string error = error_of([&] { ops::conv2d(x, w, Tensor(), 1, 1 << 30); });
    CHECK(error.rfind("conv2d", 0) == 0);
    error = error_of([&] { ops::conv2d(x, w, Tensor(), 1, std::numeric_limits<int>::max()); });
    CHECK(error.rfind("conv2d", 0) == 0);
    CHECK(error_of([&] { ops::max_pool2d(x, 46341, 1); }).rfind("max_pool2d: kernel 46341 is larger", 0) == 0);
}

TEST_CASE("op attrs: sizes that add or multiply past 64 bits are errors (cat, reshape)") {
    Tensor wide = ops::create(OP_zeros, Shape{0, int64_t(1) << 62}, DTYPE_F32);
    CHECK(error_of([&] { ops::cat({wide, wide}, 1); }) == "cat: the sizes along dim 2 add up to more than a tensor can hold");
    Tensor x = ops::create(OP_zeros, Shape{4}, DTYPE_F32);
    CHECK(error_of([&] { ops::reshape(x, Shape{int64_t(1) << 40, int64_t(1) << 40, -1}); }) ==
          "reshape: shape [1099511627776,1099511627776,-1] has more elements than a tensor can hold");
    CHECK(error_of([&] { ops::reshape(x, Shape{int64_t(1) << 62, 4}); }) ==
          "reshape: shape [4611686018427387904,4] has more elements than a tensor can hold");
    CHECK(error_of([&] { ops::reshape(x, Shape{3, -1}); }) == "reshape: cannot view [4] (4 elements) as [3,-1]");
    CHECK(ops::reshape(x, Shape{2, -1}).shape() == Shape{2, 2});
}

TEST_CASE("op attrs: dtype and reduction attributes hold known values") {
    Tensor x = make_tensor(Shape{2}, {1, 2});
    OpAttrs a;
    a.dtype = static_cast<DType>(9);
    CHECK(error_of([&] { ops::call(OP_to, {&x}, a); }) == "to: unknown dtype 9");
    a.shape = Shape{2};
    CHECK(error_of([&] { op_call(OP_zeros, nullptr, 0, a); }) == "zeros: unknown dtype 9");
    OpAttrs r;
    r.reduction = static_cast<Reduction>(4);
    CHECK(error_of([&] { ops::call(OP_mse_loss, {&x, &x}, r); }) == "mse_loss: unknown reduction 4 (mean or sum)");
}
