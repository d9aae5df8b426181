// test_function.cpp: custom functions (engine/core/function.h), the `function` and `function_backward`
// ops. The op table test skips them (they run what they are given); this file is their test row.
#include <catch2/catch.hpp>

#include "function.h"
#include "test_helpers.h"

using namespace td;
using namespace td_test;

namespace {

// y = x * w (elementwise), with its backward written by hand: dx = g * w, dw = g * x.
struct Product : CustomFunction {
    Tensor x, w;
    int backward_calls = 0;
    Product() : CustomFunction("Product") {}
    std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override {
        x = inputs[0];
        w = inputs[1];
        return {ops::mul(x, w)};
    }
    std::vector<Tensor> backward(const std::vector<Tensor>& grads) override {
        ++backward_calls;
        return {ops::mul(grads[0], w), ops::mul(grads[0], x)};
    }
};

// Returns whatever gradients it was told to, to check the engine's validation.
struct Returns : CustomFunction {
    std::vector<Tensor> grads;
    Returns() : CustomFunction("Returns") {}
    std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override { return {ops::mul_scalar(inputs[0], 2)}; }
    std::vector<Tensor> backward(const std::vector<Tensor>&) override { return grads; }
};

void count_events(Node*, HookEvent event, void* user) {
    if (event == HOOK_BEFORE) ++*static_cast<int*>(user);
}

}  // namespace

TEST_CASE("function: one node named after the function; its ops recorded inside it; gradients flow") {
    Tensor x = make_leaf(Shape{3}, {1, 2, 3});
    Tensor w = make_leaf(Shape{3}, {4, 5, 6});
    auto product = std::make_shared<Product>();
    int64_t first = tape_next_id();
    Tensor y = function_apply(product, {x, w})[0];

    CHECK(std::string(y.node->name()) == "Product");
    CHECK(y.node->op == OP_function);
    CHECK(y.node->id == first);
    CHECK(y.requires_grad());
    check_values(y, {4, 10, 18});
    REQUIRE(y.node->inner_nodes().size() == 1);
    CHECK(y.node->inner_nodes()[0]->op == OP_mul);
    CHECK(y.node->inner_nodes()[0]->group == y.node->id);
    CHECK_FALSE(y.node->inner_nodes()[0]->tracks_grad);   // the inside runs with grad off

    backward(ops::reduce_all(OP_sum, y), nullptr);
    CHECK(product->backward_calls == 1);
    check_values(grad_of(x), {4, 5, 6});
    check_values(grad_of(w), {1, 2, 3});
    REQUIRE(y.node->backward_nodes().size() == 1);
    Node* backward_node = y.node->backward_nodes()[0].get();
    CHECK(std::string(backward_node->name()) == "Product.backward");
    CHECK(backward_node->phase == PHASE_BACKWARD);
    CHECK(backward_node->group == y.node->id);
    CHECK(backward_node->inner_nodes().size() == 2);   // the two products of the backward
    CHECK(backward_node->inner_nodes()[0]->group == backward_node->id);
}

TEST_CASE("function: the hook sees the function node and every op inside it") {
    Tensor x = make_leaf(Shape{2}, {1, 2});
    Tensor w = make_tensor(Shape{2}, {3, 4});
    int seen = 0;
    int64_t first = tape_next_id();
    int handle = engine_observe(count_events, &seen);
    Tensor y = function_apply(std::make_shared<Product>(), {x, w})[0];
    backward(ops::reduce_all(OP_sum, y), nullptr);
    engine_unobserve(handle);
    CHECK(seen == tape_next_id() - first);
    check_values(grad_of(x), {3, 4});
}

TEST_CASE("function: a backward with the wrong number or shapes of gradients is an error naming it") {
    Tensor x = make_leaf(Shape{2}, {1, 2});
    auto returns = std::make_shared<Returns>();
    Tensor y = function_apply(returns, {x})[0];
    Tensor loss = ops::reduce_all(OP_sum, y);
    returns->grads = {};
    CHECK_THROWS_WITH(backward(loss, nullptr), Catch::Contains("Returns: backward returned 0 gradients for 1 input"));
    returns->grads = {make_tensor(Shape{3}, {1, 1, 1})};
    CHECK_THROWS_WITH(backward(loss, nullptr),
                      Catch::Contains("Returns: backward returned a gradient of shape [3] for input 1, which has shape [2]"));
    returns->grads = {Tensor()};   // no gradient for x: allowed, x.grad stays empty
    backward(loss, nullptr);
    CHECK_FALSE(grad_of(x).defined());
    returns->grads = {make_tensor(Shape{2}, {5, 6})};
    backward(loss, nullptr);
    check_values(grad_of(x), {5, 6});
}

TEST_CASE("function: without grad the node lets go of its inputs, so no-grad loops do not chain nodes") {
    Tensor h = make_tensor(Shape{2}, {1, 1});
    int64_t live_before = tape_live_count();
    for (int step = 0; step < 100; ++step) h = function_apply(std::make_shared<Returns>(), {h})[0];
    check_values(h, {std::pow(2.0, 100), std::pow(2.0, 100)});
    CHECK(tape_live_count() - live_before < 10);
}
