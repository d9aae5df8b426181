// test_gradcheck.cpp: the numbers behind torch.autograd.gradcheck and :gradcheck (gradcheck.h):
// the sample of elements, the comparison and its worst element, 1-based indices, the central
// difference (which puts the element back exactly), and an op evaluated with no node.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>

#include "gradcheck.h"
#include "test_helpers.h"

using namespace td;
using td_test::make_tensor;

TEST_CASE("gradcheck: the sample is every element when it fits, else a fixed one with both ends") {
    std::vector<int64_t> all = gradcheck_sample(5, 10);
    CHECK(all == std::vector<int64_t>{0, 1, 2, 3, 4});
    std::vector<int64_t> some = gradcheck_sample(100000, 50);
    REQUIRE(some.size() == 50);
    CHECK(some.front() == 0);
    CHECK(some.back() == 99999);
    CHECK(std::set<int64_t>(some.begin(), some.end()).size() == 50);
    CHECK(std::is_sorted(some.begin(), some.end()));
    CHECK(gradcheck_sample(100000, 50) == some);   // the same every time
    CHECK(gradcheck_sample(0, 10).empty());
}

TEST_CASE("gradcheck: PyTorch's test |a - n| <= atol + rtol |n|, the worst element, NaN") {
    GradcheckTolerance tol;   // atol 1e-5, rtol 1e-3
    GradcheckComparison c;
    c.add(0, 1.0005, 1.0, tol);   // 5e-4 <= 1e-5 + 1e-3: ok, half its tolerance
    c.add(1, 0.0, 2e-5, tol);     // 2e-5 > 1e-5 + 2e-8: past it
    c.add(2, 3.0, 3.0, tol);
    CHECK(c.checked == 3);
    CHECK(c.mismatched == 1);
    CHECK(c.worst == 1);
    CHECK(c.worst_numeric == 2e-5);
    CHECK(c.max_abs_diff == Approx(5e-4));
    CHECK_FALSE(c.ok());
    GradcheckComparison with_nan;
    with_nan.add(0, 1.0, 1.0, tol);
    with_nan.add(7, NAN, 1.0, tol);
    CHECK(with_nan.mismatched == 1);
    CHECK(with_nan.worst == 7);
    CHECK(std::isnan(with_nan.max_abs_diff));
}

TEST_CASE("gradcheck: element indices are 1-based per dim") {
    CHECK(gradcheck_index_text(Shape{20, 1}, 12) == "[13,1]");
    CHECK(gradcheck_index_text(Shape{2, 3, 4}, 23) == "[2,3,4]");
    CHECK(gradcheck_index_text(Shape{}, 0) == "[]");
}

TEST_CASE("gradcheck: the central difference of tanh, and the element put back exactly") {
    Tensor x = make_tensor(Shape{3}, {0.3, -1.2, 2.0});
    Value v = x.value();
    double before = value_get(v, 1);
    GradcheckEvaluate tanh_of_x = [&]() { return op_evaluate_untracked(OP_tanh, OpAttrs(), {v}); };
    std::vector<double> column = gradcheck_numeric_column(tanh_of_x, v, 1, 1e-6);
    REQUIRE(column.size() == 3);
    CHECK(column[0] == 0);
    CHECK(column[1] == Approx(1 - std::tanh(-1.2) * std::tanh(-1.2)).epsilon(1e-8));
    CHECK(column[2] == 0);
    CHECK(value_get(v, 1) == before);
}

TEST_CASE("gradcheck: an op evaluated with no node gives op_call's values and records nothing") {
    Tensor a = make_tensor(Shape{2, 3}, {1, 2, 3, 4, 5, 6});
    Tensor b = make_tensor(Shape{3, 2}, {0.5, -1, 2, 0, 1, 3});
    int64_t next_id = tape_next_id();
    int64_t live = tape_live_count();
    std::vector<Value> product = op_evaluate_untracked(OP_mm, OpAttrs(), {a.value(), b.value()});
    OpAttrs swap;
    swap.dim = 0;
    swap.dim2 = 1;
    std::vector<Value> transposed = op_evaluate_untracked(OP_transpose, swap, {a.value()});   // a view
    OpAttrs along_rows;
    along_rows.dim = 1;
    std::vector<Value> largest = op_evaluate_untracked(OP_max, along_rows, {a.value()});      // two outputs
    CHECK(tape_next_id() == next_id);
    CHECK(tape_live_count() == live);
    Tensor expected = ops::mm(a, b);
    REQUIRE(product.size() == 1);
    for (int64_t i = 0; i < 4; ++i) CHECK(value_get(product[0], i) == value_get(expected.value(), i));
    REQUIRE(transposed[0].shape == Shape({3, 2}));
    CHECK(value_get(transposed[0], 1) == 4);   // [1,2] of the transpose is a's [2,1]
    REQUIRE(largest.size() == 2);
    CHECK(value_get(largest[0], 0) == 3);
    CHECK(value_get(largest[0], 1) == 6);
    CHECK_THROWS_AS(op_evaluate_untracked(OP_add_, OpAttrs(), {a.value(), b.value()}), EngineError);
}
