// test_broadcast.cpp: NumPy broadcasting in the binary ops, forward values and gradients summed
// back to each input's own shape.
#include <catch2/catch.hpp>

#include "test_helpers.h"

using namespace td;
using namespace td_test;

namespace {

// Weights for backward(out, r): distinct so that a gradient summed over the wrong dim shows.
std::vector<double> weights(int64_t n) {
    std::vector<double> r;
    for (int64_t k = 0; k < n; ++k) r.push_back(0.5 + 0.25 * static_cast<double>(k) * (k % 2 ? -1 : 1));
    return r;
}

std::vector<double> negated(std::vector<double> v) {
    for (double& x : v) x = -x;
    return v;
}

}  // namespace

TEST_CASE("broadcast: [3,1] + [1,4] gives [3,4], each gradient is summed back to its input's shape") {
    std::vector<double> va = {1, 2, 3}, vb = {10, 20, 30, 40};
    Tensor a = make_leaf(Shape{3, 1}, va), b = make_leaf(Shape{1, 4}, vb);
    Tensor c = ops::add(a, b);
    REQUIRE(c.shape() == (Shape{3, 4}));
    check_values(c, {11, 21, 31, 41, 12, 22, 32, 42, 13, 23, 33, 43});

    std::vector<double> r = weights(12);
    Tensor rt = make_tensor(c.shape(), r);
    backward(c, &rt);
    REQUIRE(grad_of(a).shape() == (Shape{3, 1}));
    REQUIRE(grad_of(b).shape() == (Shape{1, 4}));
    check_values(grad_of(a), sum_to_ref(Shape{3, 4}, r, Shape{3, 1}));
    check_values(grad_of(b), sum_to_ref(Shape{3, 4}, r, Shape{1, 4}));
}

TEST_CASE("broadcast: [2,3] + [3] adds the row to each row, the row's gradient sums over rows") {
    std::vector<double> va = {1, 2, 3, 4, 5, 6}, vb = {0.5, -1, 2};
    Tensor a = make_leaf(Shape{2, 3}, va), b = make_leaf(Shape{3}, vb);
    Tensor c = ops::add(a, b);
    REQUIRE(c.shape() == (Shape{2, 3}));
    check_values(c, {1.5, 1, 5, 4.5, 4, 8});

    std::vector<double> r = weights(6);
    Tensor rt = make_tensor(c.shape(), r);
    backward(c, &rt);
    check_values(grad_of(a), r);
    REQUIRE(grad_of(b).shape() == (Shape{3}));
    check_values(grad_of(b), {r[0] + r[3], r[1] + r[4], r[2] + r[5]});
}

TEST_CASE("broadcast: [2,3] * a 0-d tensor scales every element, the scalar's gradient is sum(r * x)") {
    std::vector<double> vx = {1, -2, 3, 0.5, 4, -1};
    Tensor x = make_leaf(Shape{2, 3}, vx), s = make_scalar(2.5, DTYPE_F64, true);
    Tensor y = ops::mul(x, s);
    REQUIRE(y.shape() == (Shape{2, 3}));
    check_values(y, map_values(vx, [](double v) { return 2.5 * v; }));

    std::vector<double> r = weights(6);
    Tensor rt = make_tensor(y.shape(), r);
    backward(y, &rt);
    check_values(grad_of(x), map_values(r, [](double w) { return 2.5 * w; }));
    REQUIRE(grad_of(s).shape() == Shape{});
    double expected = 0;
    for (size_t k = 0; k < r.size(); ++k) expected += r[k] * vx[k];
    CHECK(item(grad_of(s)) == Approx(expected).epsilon(1e-12));
}

TEST_CASE("broadcast: [4,1,3] - [2,1] gives [4,2,3], the gradients sum back, negated for the right side") {
    std::vector<double> va, vb = {100, 200};
    for (int k = 0; k < 12; ++k) va.push_back(k);
    Tensor a = make_leaf(Shape{4, 1, 3}, va), b = make_leaf(Shape{2, 1}, vb);
    Tensor c = ops::sub(a, b);
    REQUIRE(c.shape() == (Shape{4, 2, 3}));
    check_values(c, broadcast_ref(Shape{4, 1, 3}, va, Shape{2, 1}, vb, [](double x, double y) { return x - y; }));
    CHECK(values_of(c)[3] == -200);   // c[1][2][1] = a[1][1][1] - b[2][1]

    std::vector<double> r = weights(24);
    Tensor rt = make_tensor(c.shape(), r);
    backward(c, &rt);
    REQUIRE(grad_of(a).shape() == (Shape{4, 1, 3}));
    REQUIRE(grad_of(b).shape() == (Shape{2, 1}));
    check_values(grad_of(a), sum_to_ref(Shape{4, 2, 3}, r, Shape{4, 1, 3}));
    check_values(grad_of(b), negated(sum_to_ref(Shape{4, 2, 3}, r, Shape{2, 1})));
}

TEST_CASE("broadcast: incompatible shapes are an error naming the op and both shapes") {
    Tensor a = make_tensor(Shape{2, 3}, {1, 2, 3, 4, 5, 6}), b = make_tensor(Shape{4}, {1, 2, 3, 4});
    CHECK_THROWS_WITH(ops::add(a, b), "add: shapes [2,3] and [4] cannot be broadcast together");
    CHECK_THROWS_WITH(ops::mul(b, a), "mul: shapes [4] and [2,3] cannot be broadcast together");
    CHECK_THROWS_AS(ops::sub(a, make_tensor(Shape{3, 1}, {1, 2, 3})), EngineError);
}
