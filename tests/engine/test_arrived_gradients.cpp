// test_arrived_gradients.cpp: the gradient that arrived at each node in the latest backward pass
// (PyTorch's grad_output of the node), which the viewer's Gradient tab shows for every node, not
// only leaves. It is kept only while an observer that looks at values is attached, with the
// backward nodes that sent it, and it goes when its node dies.
#include <catch2/catch.hpp>

#include "test_helpers.h"

using namespace td;
using namespace td_test;

namespace {

void look(Node*, HookEvent, void*) {}

// An observer that looks at values (as the viewer), for the scope of the object.
struct Looking {
    int handle = engine_observe(look, nullptr);
    ~Looking() { engine_unobserve(handle); }
};

}  // namespace

TEST_CASE("arrived gradients: without an observer that looks, backward keeps nothing more") {
    size_t before = arrived_gradients_kept();   // what earlier cases of this process still hold
    Tensor w = make_leaf(Shape{3}, {0.1, 0.2, 0.3});
    Tensor y = ops::unary(OP_tanh, ops::mul(w, make_tensor(Shape{3}, {1, 2, 3})));
    backward(ops::reduce_all(OP_sum, y), nullptr);
    CHECK(arrived_gradient(y.node.get(), 0) == nullptr);
    CHECK(arrived_gradients_kept() == before);
}

TEST_CASE("arrived gradients: a non-leaf's gradient after backward, with its senders; gone with the node") {
    size_t before = arrived_gradients_kept();
    {
        Looking viewer;
        Tensor w = make_leaf(Shape{3}, {0.1, 0.2, 0.3});
        Tensor x = make_tensor(Shape{3}, {1, 2, 3});
        Tensor y = ops::unary(OP_tanh, ops::mul(w, x));   // used twice: its gradient is a sum
        Tensor loss = ops::reduce_all(OP_sum, ops::add(y, y));
        backward(loss, nullptr);
        CHECK(engine_backward_pass() == nullptr);

        const ArrivedGradient* at_y = arrived_gradient(y.node.get(), 0);
        REQUIRE(at_y);
        CHECK(at_y->complete);
        CHECK(at_y->root_id == loss.id());
        REQUIRE(at_y->senders.size() == 2);   // add's rule sent one gradient per use
        for (const GradientSender& s : at_y->senders) CHECK(s.forward_op == std::string("add"));
        for (int64_t i = 0; i < 3; ++i) CHECK(value_get(at_y->value, i) == 2.0);   // d(2 sum y)/dy

        const ArrivedGradient* at_loss = arrived_gradient(loss.node.get(), 0);
        REQUIRE(at_loss);
        REQUIRE(at_loss->senders.size() == 1);
        CHECK(at_loss->senders[0].forward_id == 0);   // the seed of backward()
        CHECK(value_get(at_loss->value, 0) == 1.0);

        // tanh's output: d loss/d (w x) = 2 (1 - tanh^2)
        const ArrivedGradient* at_product = arrived_gradient(y.node->inputs[0].node(), 0);
        REQUIRE(at_product);
        CHECK(at_product->senders[0].forward_id == y.id());
        for (int64_t i = 0; i < 3; ++i) {
            double t = std::tanh(0.1 * (i + 1) * (i + 1));
            CHECK(value_get(at_product->value, i) == Approx(2 * (1 - t * t)));
        }

        // A second pass replaces what the first left.
        uint64_t first_pass = at_y->pass;
        backward(ops::reduce_all(OP_sum, y), nullptr);
        at_y = arrived_gradient(y.node.get(), 0);
        REQUIRE(at_y);
        CHECK(at_y->pass > first_pass);
        CHECK(at_y->senders.size() == 1);
        CHECK(value_get(at_y->value, 0) == 1.0);
        CHECK(arrived_gradients_kept() > before);
    }
    CHECK(arrived_gradients_kept() == before);   // the nodes died: what arrived at them went too
}
