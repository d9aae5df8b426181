// test_plan.cpp: freeze at the engine layer — record a run, compile it with each pass on or off,
// replay it (fast, and through the hook when observed), guards, and plan files under mutation.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>

#include "plan.h"
#include "test_helpers.h"

using namespace td;
using namespace td_test;

namespace {

std::vector<double> ramp(int64_t n, double scale, double phase = 1) {
    std::vector<double> v;
    for (int64_t k = 0; k < n; ++k) v.push_back(scale * std::sin(static_cast<double>(k) + phase));
    return v;
}

// The lecture's RNN cell with its backward: loss = sum(tanh(W_h prev_hᵀ + W_x xᵀ)).
struct Cell {
    Tensor w_h = make_leaf(Shape{20, 20}, ramp(400, 0.1));
    Tensor w_x = make_leaf(Shape{20, 10}, ramp(200, 0.2));

    Tensor step(const Tensor& x, const Tensor& prev_h) const {
        w_h.node->outputs[0].grad = Tensor();
        w_x.node->outputs[0].grad = Tensor();
        Tensor next_h = ops::unary(OP_tanh, ops::add(ops::mm(w_h, prev_h, false, true), ops::mm(w_x, x, false, true)));
        Tensor loss = ops::reduce_all(OP_sum, next_h);
        backward(loss, nullptr);
        return loss;
    }
};

std::unique_ptr<Plan> record_cell(const Cell& cell, const Tensor& x, const Tensor& h) {
    plan_record_begin("cell", {x, h}, {"x", "prev_h"}, SourceLoc());
    // the step clears the grads itself in C++ (no Lua): tell the recorder, as the Lua binding does
    plan_record_note_grad_clear(cell.w_h, SourceLoc());
    plan_record_note_grad_clear(cell.w_x, SourceLoc());
    Tensor loss = cell.step(x, h);
    return plan_record_end({loss});
}

const std::vector<PlanPasses> pass_configs = {
    PlanPasses{},
    PlanPasses{false, true, true, true, true, true},
    PlanPasses{true, false, true, true, true, true},
    PlanPasses{true, true, false, true, true, true},
    PlanPasses{true, true, true, false, true, true},
    PlanPasses{true, true, true, true, false, true},
    PlanPasses{true, true, true, true, true, false},
    PlanPasses{false, false, false, false, false, false},
};

struct Observed {
    std::vector<std::string> ops;
    static void on(Node* node, HookEvent event, void* user) {
        if (event == HOOK_BEFORE) static_cast<Observed*>(user)->ops.push_back(node->name());
    }
};

}  // namespace

TEST_CASE("plan: a recorded RNN cell replays to the eager loss and gradients with every pass setting") {
    Cell cell;
    Tensor x = make_tensor(Shape{1, 10}, ramp(10, 1));
    Tensor h = make_tensor(Shape{1, 20}, ramp(20, 0.5));
    std::shared_ptr<Plan> recorded = record_cell(cell, x, h);
    REQUIRE(recorded->inputs.size() == 2);
    REQUIRE(recorded->captured.size() == 2);
    REQUIRE(recorded->grad_targets.size() == 2);

    Tensor x2 = make_tensor(Shape{1, 10}, ramp(10, 0.7, 3));
    Tensor h2 = make_tensor(Shape{1, 20}, ramp(20, 0.3, 2));
    Tensor eager_loss = cell.step(x2, h2);
    std::vector<double> eager_gh = values_of(grad_of(cell.w_h)), eager_gx = values_of(grad_of(cell.w_x));
    for (const PlanPasses& passes : pass_configs) {
        std::unique_ptr<Plan> plan = plan_compile(recorded, passes);
        cell.w_h.node->outputs[0].grad = make_tensor(Shape{20, 20}, ramp(400, 9));   // cleared by the plan
        PlanRunResult result = plan_run(*plan, {x2, h2});
        REQUIRE(result.completed);
        check_values(values_of(result.outputs[0]), values_of(eager_loss), 1e-12, 1e-12);
        check_values(values_of(grad_of(cell.w_h)), eager_gh, 1e-12, 1e-12);
        check_values(values_of(grad_of(cell.w_x)), eager_gx, 1e-12, 1e-12);
    }
}

TEST_CASE("plan: with an observer attached, the recording replays node by node and announces its backward groups") {
    Cell cell;
    Tensor x = make_tensor(Shape{1, 10}, ramp(10, 1));
    Tensor h = make_tensor(Shape{1, 20}, ramp(20, 0.5));
    std::unique_ptr<Plan> plan = plan_compile(record_cell(cell, x, h), PlanPasses{});
    PlanRunResult fast = plan_run(*plan, {x, h});
    std::vector<double> fast_gh = values_of(grad_of(cell.w_h));
    REQUIRE(plan->stats.fused_groups >= 1);
    CHECK_FALSE(plan->debug_replay);   // compiled by the first observed call, not beside every plan
    for (const PlanStep& s : plan->steps) CHECK(s.kind != STEP_GROUP_DONE);   // only the debug replay has them

    struct Watcher {
        std::vector<std::string> ops;
        std::vector<std::string> groups;   // "op: group's forward node is this call's"
        bool gradients_seen = false;
        static void on(Node* node, HookEvent event, void* user) {
            Watcher& w = *static_cast<Watcher*>(user);
            if (event == HOOK_BEFORE) w.ops.push_back(node->name());
            if (event != HOOK_GROUP_DONE) return;
            w.groups.push_back(node->name());
            const BackwardPass* pass = engine_backward_pass();
            REQUIRE(pass);
            CHECK(pass->group.node == node);
            CHECK(plan_replay_recorded_id(node) > 0);
            CHECK(plan_replay_recorded_id(node) < node->id);   // recorded before this call
            for (const Ref<Node>& b : node->backward_nodes()) CHECK(b->group == node->id);
            w.gradients_seen = w.gradients_seen || pass->group.grad_outputs[0].defined();
        }
    } seen;
    int handle = engine_observe(Watcher::on, &seen);
    PlanRunResult observed = plan_run(*plan, {x, h});
    engine_unobserve(handle);
    REQUIRE(plan->debug_replay);
    REQUIRE(observed.completed);
    CHECK(engine_backward_pass() == nullptr);
    check_values(values_of(observed.outputs[0]), values_of(fast.outputs[0]), 0, 0);
    check_values(values_of(grad_of(cell.w_h)), fast_gh, 0, 0);
    size_t expected = 0;   // every recorded node once: no fusion, nothing dropped
    for (const PlanStep& s : plan->debug_replay->steps)
        expected += (s.kind == STEP_KERNEL || s.kind == STEP_GRAD_ACCUMULATE) ? 1 : 0;
    CHECK(seen.ops.size() == expected);
    CHECK(expected >= static_cast<size_t>(plan->stats.fused_ops));
    CHECK(std::find(seen.ops.begin(), seen.ops.end(), "tanh") != seen.ops.end());
    CHECK(std::find(seen.ops.begin(), seen.ops.end(), "tanh_backward") != seen.ops.end());
    CHECK(std::find(seen.groups.begin(), seen.groups.end(), "tanh") != seen.groups.end());
    CHECK(std::find(seen.groups.begin(), seen.groups.end(), "mm") != seen.groups.end());
    CHECK(seen.gradients_seen);
    CHECK(plan_replay_current() == nullptr);
}

// The cell fed back `steps` times, backward from the last state's sum, recorded (with the grads
// cleared first, as the Lua binding tells the recorder).
std::unique_ptr<Plan> record_unroll(const Cell& cell, const Tensor& x, const Tensor& h0, int steps) {
    plan_record_begin("unroll", {x, h0}, {"x", "h0"}, SourceLoc());
    plan_record_note_grad_clear(cell.w_h, SourceLoc());
    plan_record_note_grad_clear(cell.w_x, SourceLoc());
    cell.w_h.node->outputs[0].grad = Tensor();
    cell.w_x.node->outputs[0].grad = Tensor();
    Tensor h = h0;
    for (int t = 0; t < steps; ++t)
        h = ops::unary(OP_tanh, ops::add(ops::mm(h, cell.w_h, false, true), ops::mm(x, cell.w_x, false, true)));
    Tensor loss = ops::reduce_all(OP_sum, h);
    backward(loss, nullptr);
    return plan_record_end({loss});
}

// The same recording with its steps and groups as plain lists (nothing packed).
std::shared_ptr<Plan> unpacked_copy(const Plan& recorded) {
    auto copy = std::make_shared<Plan>(recorded);
    copy->steps = plan_unpacked_steps(recorded);
    copy->packed = PackedSteps();
    copy->groups = plan_unpacked_groups(recorded);
    copy->packed_groups = PackedSteps();
    return copy;
}

TEST_CASE("plan: a long loop's recording packs its steps and groups, and compiles, replays and saves as unpacked") {
    Cell cell;
    Tensor x = make_tensor(Shape{1, 10}, ramp(10, 1));
    Tensor h = make_tensor(Shape{1, 20}, ramp(20, 0.5));
    std::shared_ptr<Plan> recorded = record_unroll(cell, x, h, 1000);
    std::vector<double> eager_gh = values_of(grad_of(cell.w_h));
    // Packed as it was recorded: the last few thousand steps are left as PlanSteps.
    REQUIRE(plan_step_count(*recorded) > 10000);
    CHECK(recorded->packed.count > 0);
    CHECK(recorded->steps.size() < 10000);
    CHECK(recorded->packed.bytes.size() < 24 * recorded->packed.count);   // a PlanStep is 80 bytes
    CHECK(recorded->groups.empty());
    REQUIRE(recorded->packed_groups.count >= 3000);   // per step: tanh, add, two mm
    std::shared_ptr<Plan> plain = unpacked_copy(*recorded);
    REQUIRE(plain->steps.size() == plan_step_count(*recorded));
    CHECK(plan_last_group_end(*plain) == plan_last_group_end(*recorded));

    // Packing loses nothing: the same plan, file and answers.
    std::unique_ptr<Plan> from_packed = plan_compile(recorded, PlanPasses{});
    std::unique_ptr<Plan> from_plain = plan_compile(plain, PlanPasses{});
    CHECK(plan_describe(*from_packed) == plan_describe(*from_plain));
    CHECK(plan_save_bytes(*recorded, PlanPasses{}) == plan_save_bytes(*plain, PlanPasses{}));
    PlanRunResult fast = plan_run(*from_packed, {x, h});
    REQUIRE(fast.completed);
    check_values(values_of(grad_of(cell.w_h)), eager_gh, 1e-9, 1e-9);
    PlanRunResult plain_run = plan_run(*from_plain, {x, h});
    check_values(values_of(plain_run.outputs[0]), values_of(fast.outputs[0]), 0, 0);

    // Observed: the debug replay, compiled from the packed recording, announces every group.
    struct Counter {
        size_t groups = 0;
        static void on(Node*, HookEvent event, void* user) {
            if (event == HOOK_GROUP_DONE) ++static_cast<Counter*>(user)->groups;
        }
    } counter;
    int handle = engine_observe(Counter::on, &counter, hook_bit(HOOK_GROUP_DONE));
    PlanRunResult observed = plan_run(*from_packed, {x, h});
    engine_unobserve(handle);
    REQUIRE(observed.completed);
    check_values(values_of(observed.outputs[0]), values_of(fast.outputs[0]), 0, 0);
    CHECK(counter.groups == recorded->packed_groups.count);
}

TEST_CASE("plan: packed steps and groups unpack to every field as it was, ids far apart and missing ones too") {
    Plan plan;
    for (int k = 0; k < 40; ++k) {
        PlanStep s;
        s.kind = k % 5 == 0 ? STEP_GRAD_ACCUMULATE : STEP_KERNEL;
        s.phase = k % 2 ? PHASE_BACKWARD : PHASE_FORWARD;
        s.op = static_cast<OpId>(k % 7);
        s.attrs = k * 1000;
        s.target = k % 5 == 0 ? k : -1;
        s.into_grad = k % 3 == 0 ? k / 3 : -1;
        for (int i = 0; i < k % 6; ++i) s.inputs.push_back((k * 7919 + i * 1000003) % 2000000000);   // far apart; 5 on the heap
        s.outputs.push_back(k);
        s.where = SourceLoc{k % 3 - 1, 1000 - k * 37};
        s.recorded_id = (k % 4 == 0) ? int64_t(1) << 40 : 5 + k;
        s.recorded_group = s.phase == PHASE_BACKWARD ? 3 - k : 0;
        plan.steps.push_back(s);
        PlanGroup g;
        g.recorded_id = s.recorded_id;
        g.where = s.where;
        g.before_step = 40 - k;
        g.root_value = k % 4 ? k : -1;
        g.grad_outputs = {k % 2 ? -1 : k * 100000};
        g.grad_inputs = {-1, k, 1999999999};
        plan_add_group(plan, g);
        plan.groups.push_back(g);   // the expected ones, unpacked
    }
    BigVector<PlanStep> expected = plan.steps;
    BigVector<PlanGroup> expected_groups;
    expected_groups.swap(plan.groups);
    plan_pack_steps(plan, 7);   // in two parts: the bases carry over
    plan_pack_steps(plan, 2);
    REQUIRE(plan.steps.size() == 2);
    REQUIRE(plan_step_count(plan) == expected.size());
    BigVector<PlanStep> steps = plan_unpacked_steps(plan);
    BigVector<PlanGroup> groups = plan_unpacked_groups(plan);
    REQUIRE(steps.size() == expected.size());
    REQUIRE(groups.size() == expected_groups.size());
    CHECK(plan_last_group_end(plan) == expected_groups.back().before_step);
    for (size_t k = 0; k < steps.size(); ++k) {
        const PlanStep &a = steps[k], &b = expected[k];
        CHECK((a.kind == b.kind && a.phase == b.phase && a.op == b.op && a.attrs == b.attrs && a.target == b.target &&
               a.into_grad == b.into_grad && a.inputs == b.inputs && a.outputs == b.outputs && a.where.file == b.where.file &&
               a.where.line == b.where.line && a.recorded_id == b.recorded_id && a.recorded_group == b.recorded_group));
        const PlanGroup &g = groups[k], &h = expected_groups[k];
        CHECK((g.recorded_id == h.recorded_id && g.where.file == h.where.file && g.where.line == h.where.line &&
               g.before_step == h.before_step && g.root_value == h.root_value && g.grad_outputs == h.grad_outputs &&
               g.grad_inputs == h.grad_inputs));
    }
}

TEST_CASE("plan: liveness reuses buffers, gradients are written in place, and outputs are new each call") {
    Cell cell;
    Tensor x = make_tensor(Shape{1, 10}, ramp(10, 1));
    Tensor h = make_tensor(Shape{1, 20}, ramp(20, 0.5));
    std::shared_ptr<Plan> recorded = record_cell(cell, x, h);
    std::unique_ptr<Plan> reused = plan_compile(recorded, PlanPasses{});
    std::unique_ptr<Plan> unshared = plan_compile(recorded, PlanPasses{true, true, true, true, false, false});
    CHECK(reused->stats.buffer_bytes < unshared->stats.buffer_bytes);
    CHECK(reused->stats.grads_in_place == 2);   // both gradients come straight out of an mm
    PlanRunResult a = plan_run(*reused, {x, h});
    PlanRunResult b = plan_run(*reused, {x, h});
    CHECK(a.outputs[0].value().storage.get() != b.outputs[0].value().storage.get());
}

TEST_CASE("plan: an mm whose result backward adds into a sum of its own adds into the sum's buffer (an RNN's weight)") {
    // W used at 6 steps: backward sums W's 6 gradients, from the third on in place into a sum it
    // made; each of those products then adds straight into the sum (Y += A B), no buffer of its own.
    Tensor w = make_leaf(Shape{8, 8}, ramp(64, 0.2));
    Tensor h0 = make_tensor(Shape{8, 1}, ramp(8, 0.5));
    auto unrolled = [&](const Tensor& h_in) {
        w.node->outputs[0].grad = Tensor();
        Tensor h = h_in;
        for (int t = 0; t < 6; ++t) h = ops::unary(OP_tanh, ops::mm(w, h));
        Tensor loss = ops::reduce_all(OP_sum, h);
        backward(loss, nullptr);
        return loss;
    };
    unrolled(h0);
    std::vector<double> eager_grad = values_of(grad_of(w));
    plan_record_begin("unrolled", {h0}, {"h0"}, SourceLoc());
    plan_record_note_grad_clear(w, SourceLoc());
    Tensor loss = unrolled(h0);
    std::shared_ptr<Plan> recorded = plan_record_end({loss});
    std::unique_ptr<Plan> plan = plan_compile(recorded, PlanPasses{});
    int accumulating = 0;
    for (const PlanStep& s : plan->steps) accumulating += s.kind == STEP_KERNEL && s.op == OP_mm && plan_step_attrs(*plan, s).accumulate;
    CHECK(accumulating == 4);   // W's third to sixth gradients
    for (const PlanPasses& passes : pass_configs) {
        std::unique_ptr<Plan> p = plan_compile(recorded, passes);
        for (int call = 0; call < 2; ++call) {   // the sum's buffer is written afresh each call
            PlanRunResult r = plan_run(*p, {h0});
            REQUIRE(r.completed);
            check_values(values_of(grad_of(w)), eager_grad, 1e-12, 1e-12);
        }
    }
}

TEST_CASE("plan: a guard on a value read while recording stops a run whose data differ, before any effect") {
    Tensor w = make_leaf(Shape{2}, {1, 2});
    Tensor x = make_tensor(Shape{2}, {3, 4});
    plan_record_begin("guarded", {x}, {"x"}, SourceLoc());
    Tensor s = ops::reduce_all(OP_sum, x);
    plan_record_note_values(s, SourceLoc(), "item()");
    Tensor loss = ops::reduce_all(OP_sum, ops::mul(w, x));
    backward(loss, nullptr);
    std::unique_ptr<Plan> plan = plan_compile(plan_record_end({loss}), PlanPasses{});
    REQUIRE(plan->guards.size() == 1);
    std::vector<double> grad_before = values_of(grad_of(w));
    PlanRunResult same = plan_run(*plan, {make_tensor(Shape{2}, {4, 3})});   // the sum is 7 again
    CHECK(same.completed);
    check_values(values_of(grad_of(w)), {grad_before[0] + 4, grad_before[1] + 3});
    std::vector<double> grad_now = values_of(grad_of(w));
    PlanRunResult other = plan_run(*plan, {make_tensor(Shape{2}, {1, 1})});
    CHECK_FALSE(other.completed);
    CHECK(other.failed_guard == 0);
    CHECK(other.reason.find("item() read 7") != std::string::npos);
    check_values(values_of(grad_of(w)), grad_now);   // nothing was accumulated
    CHECK(plan_check_inputs(*plan, {make_tensor(Shape{3}, {1, 2, 3})}) == "input 1 (x) has shape [3]; the plan expects [2]");
}

TEST_CASE("plan: files round-trip, and mutated files (checksum fixed up) load or fail cleanly, never crash") {
    Cell cell;
    Tensor x = make_tensor(Shape{1, 10}, ramp(10, 1));
    Tensor h = make_tensor(Shape{1, 20}, ramp(20, 0.5));
    std::shared_ptr<Plan> recorded = record_cell(cell, x, h);
    std::string path = "test_plan_fuzz.tdp";
    plan_save(*recorded, PlanPasses{}, path);
    PlanPasses passes;
    std::unique_ptr<Plan> loaded = plan_load(path, &passes);
    std::unique_ptr<Plan> plan = plan_compile(std::move(loaded), passes);
    PlanRunResult run = plan_run(*plan, {x, h});
    std::unique_ptr<Plan> original = plan_compile(recorded, PlanPasses{});
    PlanRunResult reference = plan_run(*original, {x, h});
    check_values(values_of(run.outputs[0]), values_of(reference.outputs[0]), 0, 0);

    std::ifstream in(path, std::ios::binary);
    std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    auto fnv = [](const std::string& s, size_t from) {
        uint64_t hash = 1469598103934665603ull;
        for (size_t i = from; i < s.size(); ++i) {
            hash ^= static_cast<unsigned char>(s[i]);
            hash *= 1099511628211ull;
        }
        return hash;
    };
    std::mt19937 rng(1234);
    int loaded_ok = 0, refused = 0;
    for (int trial = 0; trial < 3000; ++trial) {
        std::string bytes = good;
        int changes = 1 + static_cast<int>(rng() % 3);
        for (int c = 0; c < changes; ++c) {
            size_t at = 32 + rng() % (bytes.size() - 32);
            bytes[at] = static_cast<char>(rng() % 4 == 0 ? (bytes[at] ^ (1 << (rng() % 8))) : static_cast<char>(rng()));
        }
        uint64_t sum = fnv(bytes, 32);
        std::memcpy(&bytes[24], &sum, 8);
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        out.close();
        try {
            PlanPasses p;
            std::unique_ptr<Plan> l = plan_load(path, &p);
            std::unique_ptr<Plan> c = plan_compile(std::move(l), p);
            try {
                plan_run(*c, {x, h});
            } catch (const EngineError&) {
            }
            ++loaded_ok;
        } catch (const EngineError&) {
            ++refused;
        }
    }
    std::remove(path.c_str());
    CHECK(refused > 0);
    CHECK(loaded_ok + refused == 3000);
}

TEST_CASE("plan: a step's value ids keep up to 3 in the step and grow onto the heap past that, as a vector would") {
    ValueIds ids{4, 5};
    CHECK(ids.size() == 2);
    for (int v = 6; v < 40; ++v) ids.push_back(v);   // past the 3 kept inline: on the heap, grown
    REQUIRE(ids.size() == 36);
    for (size_t i = 0; i < ids.size(); ++i) CHECK(ids[i] == static_cast<int>(i) + 4);
    ValueIds copy = ids;
    CHECK(copy == ids);
    copy[0] = -1;
    CHECK(copy != ids);   // a copy has ids of its own
    ValueIds moved = std::move(copy);
    CHECK(moved.size() == 36);
    CHECK(moved[0] == -1);
    ValueIds small = std::vector<int>{7};
    small = moved;        // inline to heap
    CHECK(small == moved);
    moved = ValueIds{1, 2, 3};
    CHECK(moved == ValueIds{1, 2, 3});
    CHECK(std::vector<int>(moved.begin(), moved.end()) == std::vector<int>{1, 2, 3});
    moved.clear();
    CHECK(moved.empty());
}
