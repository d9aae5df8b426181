// test_hook.cpp: the one hook (rule 4 of docs/design.md). Every node runs through exec_node, which calls the
// observers before and after its kernel, in the forward and the backward pass alike.
#include <catch2/catch.hpp>

#include "test_helpers.h"

using namespace td;
using namespace td_test;

namespace {

struct HookEventRecord {
    int64_t id;
    HookEvent event;
    Phase phase;
    OpId op;
};

void record_event(Node* node, HookEvent event, void* user) {
    if (event == HOOK_GROUP_DONE) return;   // per backward group, not per node: test_hook_group.cpp
    static_cast<std::vector<HookEventRecord>*>(user)->push_back({node->id, event, node->phase, node->op});
}

std::vector<double> ramp(int64_t n, double scale) {
    std::vector<double> v;
    for (int64_t k = 0; k < n; ++k) v.push_back(scale * std::sin(static_cast<double>(k) + 1));
    return v;
}

// The RNN cell of the lecture: next_h = tanh(W_h prev_hᵀ + W_x xᵀ), loss = sum(next_h).
struct RnnCell {
    Tensor w_h = make_leaf(Shape{20, 20}, ramp(400, 0.1));
    Tensor w_x = make_leaf(Shape{20, 10}, ramp(200, 0.2));
    Tensor x = make_tensor(Shape{1, 10}, ramp(10, 1));
    Tensor prev_h = make_tensor(Shape{1, 20}, ramp(20, 0.5));

    Tensor forward() const {
        Tensor next_h = ops::unary(OP_tanh, ops::add(ops::mm(w_h, prev_h, false, true), ops::mm(w_x, x, false, true)));
        return ops::reduce_all(OP_sum, next_h);
    }
};

}  // namespace

TEST_CASE("hook: every node of an RNN cell's forward and backward is seen once before and once after it runs") {
    RnnCell cell;
    std::vector<HookEventRecord> events;
    int64_t first_id = tape_next_id();
    int handle = engine_observe(record_event, &events);
    Tensor loss = cell.forward();
    backward(loss, nullptr);
    engine_unobserve(handle);
    int64_t end_id = tape_next_id();

    REQUIRE(end_id > first_id);
    REQUIRE(events.size() == static_cast<size_t>(2 * (end_id - first_id)));
    bool forward_seen = false, backward_seen = false, tanh_backward_seen = false;
    for (size_t k = 0; k + 1 < events.size(); k += 2) {
        INFO("event " << k << ": node #" << events[k].id);
        const HookEventRecord &before = events[k], &after = events[k + 1];
        CHECK(before.event == HOOK_BEFORE);
        CHECK(after.event == HOOK_AFTER);
        CHECK(after.id == before.id);   // BEFORE immediately followed by its own AFTER
        CHECK(before.id == first_id + static_cast<int64_t>(k / 2));   // every id, in increasing order
        forward_seen = forward_seen || before.phase == PHASE_FORWARD;
        backward_seen = backward_seen || before.phase == PHASE_BACKWARD;
        tanh_backward_seen = tanh_backward_seen || before.op == OP_tanh_backward;
    }
    CHECK(forward_seen);
    CHECK(backward_seen);
    CHECK(tanh_backward_seen);
    REQUIRE(grad_of(cell.w_h).defined());
    CHECK(grad_of(cell.w_h).shape() == (Shape{20, 20}));

    // Unsubscribed: nothing more is recorded.
    size_t count = events.size();
    Tensor again = cell.forward();
    backward(again, nullptr);
    CHECK(events.size() == count);
}

namespace {

struct ValueProbe {
    int64_t tanh_id = 0;
    double input_at_before = 0;
    double output_at_after = 0;
};

void probe_tanh(Node* node, HookEvent event, void* user) {
    ValueProbe* probe = static_cast<ValueProbe*>(user);
    if (node->op != OP_tanh) return;
    probe->tanh_id = node->id;
    if (event == HOOK_BEFORE) probe->input_at_before = value_get(node->inputs[0].value(), 0);
    else probe->output_at_after = value_get(node->outputs[0].value, 0);
}

}  // namespace

TEST_CASE("hook: at BEFORE the inputs are ready, at AFTER the output holds the kernel's result") {
    Tensor x = make_tensor(Shape{1}, {0.75});
    ValueProbe probe;
    int handle = engine_observe(probe_tanh, &probe);
    Tensor y = ops::unary(OP_tanh, x);
    engine_unobserve(handle);
    CHECK(probe.tanh_id == y.id());
    CHECK(probe.input_at_before == 0.75);
    CHECK(probe.output_at_after == Approx(std::tanh(0.75)).epsilon(1e-12));
}

namespace {

struct SelfRemoving {
    int handle = 0;
    int calls = 0;
};

void remove_self(Node*, HookEvent, void* user) {
    SelfRemoving* s = static_cast<SelfRemoving*>(user);
    ++s->calls;
    engine_unobserve(s->handle);
}

}  // namespace

TEST_CASE("hook: two observers both see every event, an observer may unsubscribe itself while called") {
    std::vector<HookEventRecord> first, second;
    int h1 = engine_observe(record_event, &first);
    SelfRemoving once;
    once.handle = engine_observe(remove_self, &once);
    int h2 = engine_observe(record_event, &second);
    Tensor a = make_tensor(Shape{2}, {1, 2});
    Tensor b = ops::mul_scalar(a, 3);
    engine_unobserve(h1);
    engine_unobserve(h2);
    CHECK(once.calls == 1);
    CHECK(first.size() == 4);   // two nodes (the leaf and mul_scalar), BEFORE and AFTER each
    REQUIRE(second.size() == first.size());
    for (size_t k = 0; k < first.size(); ++k) CHECK(first[k].id == second[k].id);
    check_values(b, {3, 6});
}

namespace {

// What one observer heard, in order: the events with the node's id (0: none), and for
// HOOK_BEFORE_WRITE the storage, for HOOK_GRAD_STORED the output.
struct Heard {
    const char* name = "";
    std::vector<std::string>* log = nullptr;
    std::vector<Storage*> written;
    std::vector<int> stored_outputs;
};

void note_heard(Node* node, HookEvent event, void* user) {
    Heard& h = *static_cast<Heard*>(user);
    if (h.log) h.log->push_back(std::string(h.name) + " " + std::to_string(static_cast<int>(event)));
    if (event == HOOK_BEFORE_WRITE) h.written.push_back(engine_storage_to_write());
    if (event == HOOK_GRAD_STORED) {
        REQUIRE(engine_backward_pass());
        const GradStored& stored = engine_backward_pass()->stored;
        REQUIRE(stored.grad);
        CHECK(node->outputs[stored.output].grad.defined());
        CHECK(stored.end_id >= stored.first_id);
        h.stored_outputs.push_back(stored.output);
    }
}

}  // namespace

TEST_CASE("hook: HOOK_BEFORE_WRITE names each storage before it is written, HOOK_GRAD_STORED each .grad stored") {
    Heard heard;
    int handle = engine_observe(note_heard, &heard, hook_bit(HOOK_BEFORE_WRITE) | hook_bit(HOOK_GRAD_STORED),
                                OBSERVER_RECORDS);
    CHECK_FALSE(engine_observed());   // not node events: a frozen plan keeps its fast loop
    Tensor w = make_leaf(Shape{2}, {1, 2});
    Tensor y = ops::mul_scalar(w, 3);
    Storage* y_storage = y.value().storage.get();
    Tensor view = ops::reshape(y, Shape{2, 1});   // a view writes nothing
    Tensor written = y;
    {
        NoGradGuard no_grad;
        ops::add_(written, y, 1);
    }
    CHECK(std::count(heard.written.begin(), heard.written.end(), y_storage) == 2);   // made, then added into
    backward(ops::reduce_all(OP_sum, ops::mul_scalar(w, 2)), nullptr);
    engine_unobserve(handle);
    CHECK(heard.stored_outputs == std::vector<int>{0});
    CHECK(engine_storage_to_write() == nullptr);
}

TEST_CASE("hook: an OBSERVER_FIRST observer is called before those subscribed earlier") {
    std::vector<std::string> log;
    Heard early, first;
    early.name = "early";
    early.log = &log;
    first.name = "first";
    first.log = &log;
    int h1 = engine_observe(note_heard, &early, hook_bit(HOOK_AFTER));
    int h2 = engine_observe(note_heard, &first, hook_bit(HOOK_AFTER), OBSERVER_LOOKS, OBSERVER_FIRST);
    make_tensor(Shape{1}, {1});
    engine_unobserve(h1);
    engine_unobserve(h2);
    std::string after = std::to_string(static_cast<int>(HOOK_AFTER));
    REQUIRE(log.size() >= 2);   // per node: the OBSERVER_FIRST one, then the other
    for (size_t k = 0; k + 1 < log.size(); k += 2) {
        CHECK(log[k] == "first " + after);
        CHECK(log[k + 1] == "early " + after);
    }
}
