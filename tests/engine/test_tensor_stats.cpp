// test_tensor_stats.cpp: the one statistics routine (tensor_stats.h) that :inspect, dbg.inspect,
// breakpoint conditions and the viewer's Tensor window share. PyTorch is the oracle:
// torch.tensor([1., 2., 3.]).std() == 1, torch.tensor([5.]).std() is nan.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "tensor_stats.h"
#include "test_helpers.h"

using namespace td;

TEST_CASE("tensor stats: std is PyTorch's unbiased one ([1, 2, 3] gives 1)") {
    double values[] = {1, 2, 3};
    TensorStats s = tensor_stats(ops::from_values(Shape{3}, DTYPE_F32, values).value());
    CHECK(s.count == 3);
    CHECK(s.finite == 3);
    CHECK(s.mean == 2);
    CHECK(s.std == 1);
    CHECK(s.sum == 6);
    CHECK(s.norm == Approx(std::sqrt(14.0)));
    CHECK(s.absmax == 3);
}

TEST_CASE("tensor stats: one element has std NaN, as torch.std") {
    double values[] = {5};
    TensorStats s = tensor_stats(ops::from_values(Shape{1}, DTYPE_F64, values).value());
    CHECK(s.count == 1);
    CHECK(s.mean == 5);
    CHECK(std::isnan(s.std));
}

TEST_CASE("tensor stats: NaN and infinities are counted apart, the numbers use the finite values") {
    double inf = std::numeric_limits<double>::infinity();
    double values[] = {1, std::nan(""), inf, -inf, 3, 0};
    TensorStats s = tensor_stats(ops::from_values(Shape{2, 3}, DTYPE_F64, values).value(), 4);
    CHECK(s.count == 6);
    CHECK(s.nan == 1);
    CHECK(s.pos_inf == 1);
    CHECK(s.neg_inf == 1);
    CHECK(s.inf() == 2);
    CHECK(s.finite == 3);
    CHECK(s.zeros == 1);
    CHECK(s.min == 0);
    CHECK(s.max == 3);
    CHECK(s.mean == Approx(4.0 / 3.0));
    CHECK(s.std == Approx(std::sqrt((1.0 / 9 + 25.0 / 9 + 16.0 / 9) / 2)));
    int64_t total = 0;
    for (int64_t c : s.histogram) total += c;
    CHECK(total == 3);
    CHECK(s.histogram[0] == 1);   // 0
    CHECK(s.histogram[3] == 1);   // 3, the top of the last bin
}

TEST_CASE("tensor stats: no finite element gives zeros and std NaN, no histogram") {
    double values[] = {std::nan(""), std::nan("")};
    TensorStats s = tensor_stats(ops::from_values(Shape{2}, DTYPE_F32, values).value(), 8);
    CHECK(s.count == 2);
    CHECK(s.nan == 2);
    CHECK(s.finite == 0);
    CHECK(s.mean == 0);
    CHECK(std::isnan(s.std));
    CHECK(s.histogram.empty());
}
