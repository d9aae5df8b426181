// test_op_attrs.cpp: the shape rules check every attribute their op's kernel reads, for every
// caller (op_call here; plan files in test_plan_file.cpp): a dim out of range, window arithmetic
// with huge padding, sizes that add or multiply past 64 bits, dtypes and reductions that are not
// one. Each is an error naming the op, never a kernel reading out of bounds.
#include <catch2/catch.hpp>

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

TEST_CASE("op attrs: conv2d's window arithmetic does not overflow with huge padding") {
    Tensor x = ops::create(OP_zeros, Shape{1, 1, 3, 3}, DTYPE_F32);
    Tensor w = ops::create(OP_zeros, Shape{1, 1, 2, 2}, DTYPE_F32);
    // 3 + 2 * 2^30 used to overflow int: now the output is [1,1,2^31+2,2^31+2], too large to make
    Window2d huge;
    huge.padding_h = huge.padding_w = 1 << 30;
    std::string error = error_of([&] { ops::conv2d(x, w, Tensor(), huge); });
    CHECK(error.rfind("conv2d", 0) == 0);
    huge.padding_h = huge.padding_w = std::numeric_limits<int>::max();
    error = error_of([&] { ops::conv2d(x, w, Tensor(), huge); });
    CHECK(error.rfind("conv2d", 0) == 0);
    Window2d dilated;   // (2 - 1) * INT_MAX + 1 does not fit an int: the extent is computed in int64
    dilated.dilation_h = dilated.dilation_w = std::numeric_limits<int>::max();
    CHECK(error_of([&] { ops::conv2d(x, w, Tensor(), dilated); }).rfind("conv2d: the kernel 2x2 (dilation 2147483647) is larger", 0) == 0);
    Window2d pool;
    pool.kernel_h = pool.kernel_w = 46341;
    CHECK(error_of([&] { ops::max_pool2d(x, pool); }).rfind("max_pool2d: the kernel 46341x46341 has more than 2147483647 elements", 0) == 0);
    pool.kernel_h = pool.kernel_w = 2;
    pool.dilation_h = std::numeric_limits<int>::max();
    CHECK(error_of([&] { ops::max_pool2d(x, pool); }).rfind("max_pool2d: the kernel 2x2 (dilation (2147483647, 1)) is larger", 0) == 0);
}

TEST_CASE("op attrs: sizes that add or multiply past 64 bits are errors (cat, reshape)") {
    Tensor wide = ops::create(OP_zeros, Shape{0, int64_t(1) << 62}, DTYPE_F32);
    CHECK(error_of([&] { ops::cat({wide, wide}, 1); }) == "cat: the sizes along dim 2 add up to more than a tensor can hold");
    Tensor x = ops::create(OP_zeros, Shape{4}, DTYPE_F32);
    CHECK(error_of([&] { ops::reshape(x, Shape{int64_t(1) << 40, int64_t(1) << 40, -1}); }) ==
          "reshape: cannot view [4] (4 elements) as [1099511627776,1099511627776,-1]");
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

TEST_CASE("op attrs: nodes of one op with equal attributes in a row share one block, which outlives the first") {
    Tensor x = make_tensor(Shape{2, 3}, {1, 2, 3, 4, 5, 6});
    Tensor a = ops::transpose(x, 0, 1), b = ops::transpose(x, 0, 1);
    REQUIRE(a.node->own_attrs != nullptr);
    CHECK(a.node->own_attrs == b.node->own_attrs);
    Tensor n1 = ops::narrow(x, 1, 0, 2), n2 = ops::narrow(x, 1, 1, 2);   // a moving start: a block each
    CHECK(n1.node->own_attrs != n2.node->own_attrs);
    CHECK(n1.node->attrs().start == 0);
    CHECK(n2.node->attrs().start == 1);
    Tensor c = ops::transpose(x, 0, 1);   // after narrows: transpose's last block is still there
    CHECK(c.node->own_attrs == b.node->own_attrs);
    a = Tensor();
    b = Tensor();
    CHECK(c.node->attrs().dim == 0);
    CHECK(c.node->attrs().dim2 == 1);
    CHECK(values_of(c) == std::vector<double>{1, 4, 2, 5, 3, 6});
    Tensor mm = ops::mm(x, c);   // the defaults: no block
    CHECK(mm.node->own_attrs == nullptr);
}
