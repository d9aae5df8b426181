// test_hook_group.cpp: the hook events the debugger stands on. In backward, HOOK_GROUP_DONE comes
// once per forward node, after its rule's nodes ran and before its gradients flow on; an observer
// can read and replace those gradients there. The pass is visible while it runs
// (engine_backward_pass), a second pass cannot start inside it, and the interrupt flag is a flag.
#include <catch2/catch.hpp>

#include <cmath>

#include "format.h"
#include "test_helpers.h"

using namespace td;
using namespace td_test;

namespace {

struct Event {
    int64_t id;
    HookEvent event;
    int64_t group;   // for nodes: their group; for GROUP_DONE: the group node's id
};

struct GroupLog {
    std::vector<Event> events;
    std::vector<std::string> shapes;   // at each GROUP_DONE: "arriving -> leaving,leaving"
    std::vector<size_t> positions;     // pass->position at each GROUP_DONE
};

void log_events(Node* node, HookEvent event, void* user) {
    GroupLog* log = static_cast<GroupLog*>(user);
    log->events.push_back({node->id, event, event == HOOK_GROUP_DONE ? node->id : node->group});
    if (event != HOOK_GROUP_DONE) return;
    const BackwardPass* pass = engine_backward_pass();
    REQUIRE(pass);
    REQUIRE(pass->group.node == node);
    REQUIRE((*pass->order)[pass->position] == node);
    std::string s = pass->group.grad_outputs[0].defined() ? pass->group.grad_outputs[0].shape().str() : "-";
    s += " ->";
    for (int i = 0; i < node->inputs.size(); ++i)
        s += " " + (pass->group.grad_inputs[i].defined() ? pass->group.grad_inputs[i].shape().str() : std::string("-"));
    log->shapes.push_back(s);
    log->positions.push_back(pass->position);
}

}  // namespace

TEST_CASE("hook group: one GROUP_DONE per differentiated node, after its backward nodes, in decreasing id order") {
    // y = tanh(w * x), loss = sum(y): groups of sum, tanh, mul (the leaves have none).
    Tensor w = make_leaf(Shape{3}, {0.1, 0.2, 0.3});
    Tensor x = make_tensor(Shape{3}, {1, 2, 3});
    Tensor y = ops::unary(OP_tanh, ops::mul(w, x));
    Tensor loss = ops::reduce_all(OP_sum, y);
    GroupLog log;
    int handle = engine_observe(log_events, &log);
    backward(loss, nullptr);
    engine_unobserve(handle);
    CHECK(engine_backward_pass() == nullptr);

    std::vector<int64_t> group_ids;
    for (size_t k = 0; k < log.events.size(); ++k) {
        const Event& e = log.events[k];
        if (e.event != HOOK_GROUP_DONE) continue;
        group_ids.push_back(e.id);
        // Every backward node of this group ran before its GROUP_DONE, none of a later group did.
        for (size_t j = 0; j < log.events.size(); ++j) {
            const Event& other = log.events[j];
            if (other.event == HOOK_GROUP_DONE || other.group != e.id) continue;
            if (other.id == e.id) continue;
            INFO("node #" << other.id << " of group #" << e.id);
            CHECK(j < k);
        }
    }
    REQUIRE(group_ids == std::vector<int64_t>{loss.id(), y.id(), y.node->inputs[0].id});
    CHECK(log.shapes == std::vector<std::string>{"[] -> [3]", "[3] -> [3]", "[3] -> [3] -"});
    CHECK(log.positions == std::vector<size_t>{0, 1, 2});
}

namespace {

// Doubles the gradient the mul group sends to its first input (w).
void double_mul_grad(Node* node, HookEvent event, void*) {
    if (event != HOOK_GROUP_DONE || node->op != OP_mul) return;
    Tensor* grads = engine_backward_pass()->group.grad_inputs;
    grads[0] = ops::mul_scalar(grads[0], 2);
    node->edited |= EDITED_GRAD;
}

}  // namespace

TEST_CASE("hook group: a gradient replaced at GROUP_DONE is what flows on (the leaf's .grad changes)") {
    Tensor w = make_leaf(Shape{2}, {1.5, -2});
    Tensor x = make_tensor(Shape{2}, {3, 4});
    Tensor prod = ops::mul(w, x);
    Tensor loss = ops::reduce_all(OP_sum, prod);
    int handle = engine_observe(double_mul_grad, nullptr);
    backward(loss, nullptr);
    engine_unobserve(handle);
    check_values(grad_of(w), {6, 8});   // 2 * x instead of x
    CHECK((prod.node->edited & EDITED_GRAD));
    std::string table = graph_format_table({prod.node.get()}, {prod.id()});
    CHECK(table.find("(grad edited)") != std::string::npos);
    CHECK(table.find("=> " + std::to_string(prod.id())) != std::string::npos);
}

namespace {

struct NestedAttempt {
    Tensor root;
    std::string message;
};

void backward_inside_backward(Node*, HookEvent event, void* user) {
    NestedAttempt* attempt = static_cast<NestedAttempt*>(user);
    if (event != HOOK_GROUP_DONE || !attempt->message.empty()) return;
    try {
        backward(attempt->root, nullptr);
        attempt->message = "no error";
    } catch (const EngineError& e) {
        attempt->message = e.what();
    }
}

}  // namespace

TEST_CASE("hook group: backward() while a pass is paused in an observer is an error, and the pass goes on") {
    Tensor w = make_leaf(Shape{2}, {1, 2});
    Tensor loss = ops::reduce_all(OP_sum, ops::mul(w, w));
    NestedAttempt attempt{loss, ""};
    int handle = engine_observe(backward_inside_backward, &attempt);
    backward(loss, nullptr);
    engine_unobserve(handle);
    CHECK(attempt.message.find("has not finished") != std::string::npos);
    check_values(grad_of(w), {2, 4});
}

namespace {

void count_calls(Node*, HookEvent, void* user) { ++*static_cast<int*>(user); }

}  // namespace

TEST_CASE("hook group: more observers than fit inline are all called") {
    int counts[10] = {};
    int handles[10];
    for (int i = 0; i < 10; ++i) handles[i] = engine_observe(count_calls, &counts[i]);
    Tensor a = make_tensor(Shape{2}, {1, 2});
    for (int i = 0; i < 10; ++i) engine_unobserve(handles[i]);
    for (int i = 0; i < 10; ++i) CHECK(counts[i] == 2);   // the leaf, before and after
    (void)a;
}

TEST_CASE("hook group: the interrupt flag is set, read and cleared (nothing else)") {
    CHECK_FALSE(engine_interrupt_pending());
    engine_interrupt_request();
    CHECK(engine_interrupt_pending());
    Tensor a = make_tensor(Shape{1}, {1});   // the engine runs on; an observer decides what to do
    CHECK(engine_interrupt_pending());
    engine_interrupt_clear();
    CHECK_FALSE(engine_interrupt_pending());
}

namespace {

struct EventCounts {
    int before = 0, after = 0, group = 0;
};

void count_by_event(Node*, HookEvent event, void* user) {
    EventCounts* c = static_cast<EventCounts*>(user);
    if (event == HOOK_BEFORE) ++c->before;
    else if (event == HOOK_AFTER) ++c->after;
    else ++c->group;
}

}  // namespace

TEST_CASE("hook group: an observer gets only the events it asked for, and every HOOK_AFTER while an interrupt is pending") {
    Tensor w = make_leaf(Shape{2}, {1, 2});
    EventCounts counts;
    int handle = engine_observe(count_by_event, &counts, hook_bit(HOOK_GROUP_DONE));
    Tensor loss = ops::reduce_all(OP_sum, ops::mul(w, w));   // two nodes, not seen
    backward(loss, nullptr);                                // two groups (sum, mul)
    CHECK(counts.before == 0);
    CHECK(counts.after == 0);
    CHECK(counts.group == 2);

    engine_observe_events(handle, 0);   // subscribed to nothing: nothing arrives ...
    Tensor a = ops::mul_scalar(w, 2);
    CHECK(counts.after == 0);
    engine_interrupt_request();          // ... except HOOK_AFTER while an interrupt is pending
    Tensor b = ops::mul_scalar(w, 3);
    engine_interrupt_clear();
    Tensor c = ops::mul_scalar(w, 4);
    engine_unobserve(handle);
    CHECK(counts.before == 0);
    CHECK(counts.after == 1);
    CHECK(counts.group == 2);
}

namespace {

struct GroupOrder {
    std::vector<std::string> ops;   // the group nodes' ops, in the order backward finished them
};

void log_group_ops(Node* node, HookEvent event, void* user) {
    if (event == HOOK_GROUP_DONE) static_cast<GroupOrder*>(user)->ops.push_back(node->name());
}

// loss = sum(a + tanh(a)) with a = w * x (a diamond: a's gradient adds up from two consumers),
// with `unrelated` live nodes recorded between every two ops of the graph.
std::pair<GroupOrder, std::vector<double>> diamond_backward(int unrelated) {
    std::vector<Tensor> kept;
    Tensor x = make_tensor(Shape{3}, {1, 2, 3});
    auto interleave = [&] {
        for (int i = 0; i < unrelated; ++i) kept.push_back(ops::mul(x, x));
    };
    Tensor w = make_leaf(Shape{3}, {0.1, 0.2, 0.3});
    interleave();
    Tensor a = ops::mul(w, x);
    interleave();
    Tensor b = ops::unary(OP_tanh, a);
    interleave();
    Tensor c = ops::add(a, b);
    interleave();
    Tensor loss = ops::reduce_all(OP_sum, c);
    GroupOrder order;
    int handle = engine_observe(log_group_ops, &order, hook_bit(HOOK_GROUP_DONE));
    backward(loss, nullptr);
    engine_unobserve(handle);
    return {order, values_of(grad_of(w))};
}

}  // namespace

TEST_CASE("hook group: backward visits the same order whether it sweeps the tape or walks the graph") {
    // Backward finds its graph by sweeping the tape down from the loss; past more unrelated live
    // nodes than it has found graph nodes, it gives up and walks the graph's edges instead.
    auto plain = diamond_backward(0);
    auto few_between = diamond_backward(3);       // swept, passing 12 unrelated nodes
    auto many_between = diamond_backward(2000);   // past the sweep's budget: walked and sorted
    CHECK(plain.first.ops == std::vector<std::string>{"sum", "add", "tanh", "mul"});
    CHECK(few_between.first.ops == plain.first.ops);
    CHECK(many_between.first.ops == plain.first.ops);
    CHECK(few_between.second == plain.second);
    CHECK(many_between.second == plain.second);
    const double x[] = {1, 2, 3}, w[] = {0.1, 0.2, 0.3};
    for (int i = 0; i < 3; ++i) {   // d/dw sum(w x + tanh(w x)) = x (2 - tanh(w x)^2)
        double t = std::tanh(w[i] * x[i]);
        CHECK(plain.second[i] == Approx(x[i] * (2 - t * t)).epsilon(1e-6));
    }
}
