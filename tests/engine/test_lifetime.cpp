// test_lifetime.cpp: memory is bounded (rule 11 of docs/design.md). A node and its buffers live only while
// something reaches them; the tape itself keeps nothing alive.
#include <catch2/catch.hpp>

#include <set>

#include "test_helpers.h"

using namespace td;
using namespace td_test;

namespace {

Tensor sum_all(const Tensor& x) { return ops::reduce_all(OP_sum, x); }

std::vector<double> wave(int64_t n, double scale) {
    std::vector<double> v;
    for (int64_t k = 0; k < n; ++k) v.push_back(scale * std::cos(0.7 * static_cast<double>(k)));
    return v;
}

// One forward and backward pass of a two-layer net; every handle dies at the end.
void two_layer_step() {
    Tensor w1 = make_leaf(Shape{8, 4}, wave(32, 0.3)), w2 = make_leaf(Shape{1, 8}, wave(8, 0.5));
    Tensor x = make_tensor(Shape{4, 5}, wave(20, 1));
    Tensor h = ops::unary(OP_relu, ops::mm(w1, x));
    Tensor out = ops::unary(OP_sigmoid, ops::mm(w2, h));
    Tensor loss = ops::reduce_all(OP_mean, ops::mul(out, out));
    backward(loss, nullptr);
    CHECK(grad_of(w1).defined());
    CHECK(grad_of(w2).defined());
}

}  // namespace

TEST_CASE("lifetime: live nodes and storage bytes return to their baseline after forward + backward") {
    int64_t nodes = tape_live_count();
    size_t bytes = storage_bytes_live();
    two_layer_step();
    CHECK(tape_live_count() == nodes);
    CHECK(storage_bytes_live() == bytes);
    two_layer_step();   // and again: nothing accumulates from one pass to the next
    CHECK(tape_live_count() == nodes);
    CHECK(storage_bytes_live() == bytes);
}

TEST_CASE("lifetime: leaves' .grad does not keep the forward graph alive") {
    int64_t baseline = tape_live_count();
    Tensor w_h = make_leaf(Shape{20, 20}, wave(400, 0.1)), w_x = make_leaf(Shape{20, 10}, wave(200, 0.2));
    Tensor x = make_tensor(Shape{1, 10}, wave(10, 1)), prev_h = make_tensor(Shape{1, 20}, wave(20, 0.5));
    int64_t first_op = tape_next_id();
    std::vector<int64_t> forward_ids;
    {
        Tensor a = ops::mm(w_h, prev_h, false, true), b = ops::mm(w_x, x, false, true);
        Tensor next_h = ops::unary(OP_tanh, ops::add(a, b));
        Tensor loss = sum_all(next_h);
        for (Node* n = tape_first(); n; n = n->tape_next)
            if (n->id >= first_op) forward_ids.push_back(n->id);
        backward(loss, nullptr);
    }
    REQUIRE(forward_ids.size() == 5);   // mm, mm, add, tanh, sum
    for (int64_t id : forward_ids) {
        INFO("forward node #" << id);
        CHECK(tape_find(id) == nullptr);
    }
    // What remains: the four leaves and, for the two that require grad, the nodes their .grad
    // tensors point at (plus anything a leaf holds for its own backward group).
    std::set<Node*> expected = {w_h.node.get(), w_x.node.get(), x.node.get(), prev_h.node.get()};
    for (const Tensor* leaf : {&w_h, &w_x}) {
        expected.insert(grad_of(*leaf).node.get());
        for (const Ref<Node>& b : leaf->node->backward_nodes()) expected.insert(b.get());
    }
    std::set<Node*> live;
    for (Node* n = tape_first(); n; n = n->tape_next)
        if (n->id >= w_h.id()) live.insert(n);
    CHECK(live == expected);
    CHECK(tape_live_count() == baseline + static_cast<int64_t>(expected.size()));
}

TEST_CASE("lifetime: a chain of 200,000 nodes is destroyed without overflowing the stack") {
    int64_t baseline = tape_live_count();
    size_t bytes = storage_bytes_live();
    {
        Tensor x = make_leaf(Shape{1}, {0});
        Tensor y = x;
        for (int k = 0; k < 200000; ++k) y = ops::add_scalar(y, 1);   // each node holds the one before
        CHECK(tape_live_count() == baseline + 200001);
        CHECK(item(y) == 200000);
    }
    CHECK(tape_live_count() == baseline);
    CHECK(storage_bytes_live() == bytes);
}

TEST_CASE("lifetime: backward through a chain of 100,000 nodes, then the chain is freed") {
    int64_t baseline = tape_live_count();
    {
        Tensor x = make_leaf(Shape{1}, {0.5});
        Tensor y = x;
        for (int k = 0; k < 100000; ++k) y = ops::mul_scalar(y, 1.0);
        backward(y, nullptr);
        CHECK(item(grad_of(x)) == 1);
    }
    CHECK(tape_live_count() == baseline);
}

TEST_CASE("lifetime: a no-grad loop of 10,000 steps (x = x + 1) keeps the live node count bounded") {
    int64_t baseline = tape_live_count();
    size_t bytes = storage_bytes_live();
    int64_t most_nodes = 0;
    size_t most_bytes = 0;
    {
        NoGradGuard no_grad;
        Tensor one = make_tensor(Shape{16}, std::vector<double>(16, 1));
        Tensor x = ops::create(OP_zeros, Shape{16}, DTYPE_F64);
        for (int k = 0; k < 10000; ++k) {
            x = ops::add(x, one);
            most_nodes = std::max(most_nodes, tape_live_count() - baseline);
            most_bytes = std::max(most_bytes, storage_bytes_live() - bytes);
        }
        CHECK(values_of(x)[0] == 10000);
    }
    CHECK(most_nodes <= 3);           // `one` and x; the step before x is gone
    CHECK(most_bytes <= 4 * 16 * 8 + 4 * 64);
    CHECK(tape_live_count() == baseline);
}

TEST_CASE("lifetime: a training loop (forward, backward, optimizer step, zero_grad) does not grow") {
    Tensor w = make_leaf(Shape{4, 3}, wave(12, 0.4));
    Tensor x = make_tensor(Shape{3, 2}, wave(6, 1));
    Tensor target = make_tensor(Shape{4, 2}, wave(8, 0.2));
    auto step = [&] {
        Tensor diff = ops::sub(ops::mm(w, x), target);
        Tensor loss = ops::reduce_all(OP_mean, ops::mul(diff, diff));
        backward(loss, nullptr);
        NoGradGuard no_grad;
        Tensor g = grad_of(w);
        ops::sub_(w, g, 0.1);
        ops::zero_(g);
        return item(loss);
    };
    double first_loss = step();
    for (int k = 0; k < 10; ++k) step();
    int64_t nodes = tape_live_count();
    size_t bytes = storage_bytes_live();
    double loss = 0;
    for (int k = 0; k < 1000; ++k) loss = step();
    CHECK(tape_live_count() == nodes);
    CHECK(storage_bytes_live() == bytes);
    CHECK(loss < first_loss);
}
