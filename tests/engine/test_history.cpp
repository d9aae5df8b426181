// test_history.cpp: the rewind history (engine/core/history.h). It records while an observer that looks
// at values is attached: forward nodes and backward groups are events holding their values; an
// in-place write to a held storage is copied first, so the value reads as it was; the budget bounds
// the bytes held and the oldest values fall out; off lets everything go.
#include <catch2/catch.hpp>

#include "history.h"
#include "test_helpers.h"

using namespace td;
using namespace td_test;

namespace {

void looks(Node*, HookEvent, void*) {}

// An observer that looks at values (the debugger with a breakpoint, the viewer) while it lives.
struct Looking {
    int handle = engine_observe(looks, nullptr, hook_bit(HOOK_GROUP_DONE));
    Looking() {
        history_set_budget(0);   // forget what earlier tests recorded
        history_set_budget(HISTORY_DEFAULT_BUDGET);
    }
    ~Looking() {
        engine_unobserve(handle);
        history_set_budget(HISTORY_DEFAULT_BUDGET);
    }
};

const HistoryEvent* newest_event_of(int64_t node_id) {
    for (uint64_t s = history_newest_serial(); s >= history_oldest_serial() && s > 0; --s)
        if (const HistoryEvent* e = history_event(s); e && e->node_id == node_id && !e->group) return e;
    return nullptr;
}

}  // namespace

TEST_CASE("history: nothing is recorded while nobody looks at values", "[history]") {
    history_set_budget(0);
    history_set_budget(HISTORY_DEFAULT_BUDGET);
    Tensor a = make_tensor(Shape{3}, {1, 2, 3});
    Tensor b = ops::add(a, a);
    CHECK(history_events_listed() == 0);
    CHECK_FALSE(history_recording());
}

TEST_CASE("history: forward nodes and backward groups are events holding their values", "[history]") {
    Looking on;
    Tensor w = make_leaf(Shape{2}, {1, 2});
    Tensor y = ops::unary(OP_tanh, w);
    Tensor loss = ops::reduce_all(OP_sum, y);
    uint64_t forward_events = history_events_listed();
    CHECK(forward_events >= 2);
    const HistoryEvent* tanh_event = newest_event_of(y.id());
    REQUIRE(tanh_event);
    CHECK(tanh_event->inputs().size() == 1);
    CHECK(tanh_event->outputs()[0].value.storage.get() == y.value().storage.get());   // held, not copied
    backward(loss, nullptr);
    bool group_seen = false;
    for (uint64_t s = history_oldest_serial(); s <= history_newest_serial(); ++s) {
        const HistoryEvent* e = history_event(s);
        if (!e->group || e->node_id != y.id()) continue;
        group_seen = true;
        REQUIRE(e->grad_inputs().size() == 1);
        check_values(values_of(e->grad_inputs()[0].value), {1 - std::tanh(1.0) * std::tanh(1.0), 1 - std::tanh(2.0) * std::tanh(2.0)},
                     1e-12);
    }
    CHECK(group_seen);
}

TEST_CASE("history: an in-place write to a held value is copied first, so it reads as it was", "[history]") {
    Looking on;
    Tensor x = make_tensor(Shape{3}, {1, 2, 3});
    Tensor y = ops::mul_scalar(x, 2);   // event: reads x as {1, 2, 3}
    const HistoryEvent* e = newest_event_of(y.id());
    REQUIRE(e);
    uint64_t then = e->serial;
    CHECK(history_copy_bytes() == 0);
    {
        NoGradGuard no_grad;
        ops::add_(x, make_tensor(Shape{3}, {10, 10, 10}));   // x changes in place after the event
    }
    check_values(values_of(x), {11, 12, 13});
    CHECK(history_copy_bytes() > 0);
    e = history_event(then);
    REQUIRE(e);
    check_values(values_of(history_value_as_of(e->inputs()[0].value, then)), {1, 2, 3});
    // After the write, a view at the newest event sees the new bytes.
    check_values(values_of(history_value_as_of(e->inputs()[0].value, history_newest_serial())), {11, 12, 13});
}

TEST_CASE("history: the budget bounds the bytes held; the oldest values fall out; off lets go", "[history]") {
    Looking on;
    history_set_budget(4096);
    Tensor h = make_tensor(Shape{64}, std::vector<double>(64, 0.5));   // 512 bytes a value
    for (int step = 0; step < 40; ++step) {
        h = ops::unary(OP_tanh, h);
        CHECK(history_bytes_held() <= 4096);
    }
    CHECK(history_events_with_values() < history_events_listed());
    const HistoryEvent* oldest = history_event(history_oldest_serial());
    REQUIRE(oldest);
    CHECK_FALSE(oldest->values_kept);
    CHECK(oldest->inputs().empty());
    history_set_budget(0);
    CHECK(history_events_listed() == 0);
    CHECK(history_bytes_held() == 0);
}
