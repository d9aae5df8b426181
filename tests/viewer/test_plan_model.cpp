// test_plan_model.cpp: the freeze compiler's per-pass log (engine/freeze/plan_log.h) and the viewer's
// pass-by-pass model made from it (viewer/model/plan_model.h), with no display: a recording where dce,
// cse, fuse, inplace and reuse each decide something; each stage marks the records the pass
// decided about, the marks carry on to later stages, and the view's boxes have room for every
// stage's note (one layout for all stages).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "model.h"
#include "plan.h"
#include "plan_log.h"
#include "plan_model.h"

using namespace td;

namespace {

Tensor leaf(const Shape& shape, bool requires_grad) {
    std::vector<double> values(static_cast<size_t>(shape.numel()));
    for (size_t k = 0; k < values.size(); ++k) values[k] = std::sin(static_cast<double>(k) + 1.0) * 0.5;
    Tensor t = ops::from_values(shape, DTYPE_F32, values.data(), DEVICE_CPU);
    t.node->outputs[0].requires_grad = requires_grad;
    return t;
}

struct Lesson {
    Tensor x = leaf(Shape{4, 3}, false);
    Tensor w = leaf(Shape{3, 3}, true);
    int64_t first_tanh = 0, second_tanh = 0, unused_sum = 0, add = 0, sigmoid = 0, mm = 0;

    std::shared_ptr<Plan> record() {
        plan_record_begin("lesson", {x}, {"x"}, SourceLoc());
        Tensor h = ops::mm(x, w);
        mm = h.node->id;
        Tensor a = ops::unary(OP_tanh, h);
        Tensor b = ops::unary(OP_tanh, h);   // the same as a: cse
        first_tanh = a.node->id;
        second_tanh = b.node->id;
        Tensor unused = ops::reduce_all(OP_sum, ops::mul_scalar(a, 3));   // read by nothing: dce
        unused_sum = unused.node->id;
        Tensor s = ops::add(a, b);
        add = s.node->id;
        Tensor y = ops::unary(OP_sigmoid, s);   // add, sigmoid: fuse
        sigmoid = y.node->id;
        Tensor loss = ops::reduce_all(OP_sum, y);
        backward(loss, nullptr);
        return plan_record_end({loss});
    }
};

const PlanLogEntry* entry_for(const PlanPassLog& log, int pass, int64_t node) {
    for (const PlanLogEntry& e : log.passes[pass])
        if (e.step.node == node) return &e;
    return nullptr;
}

}  // namespace

TEST_CASE("plan log: each pass writes down what it decided, in recorded node ids") {
    Lesson lesson;
    std::shared_ptr<Plan> recorded = lesson.record();
    PlanPassLog log;
    std::unique_ptr<Plan> plan = plan_compile(recorded, PlanPasses{}, &log);
    CHECK(log.recorded_steps == plan_step_count(*recorded));
    CHECK(log.steps == plan->steps.size());
    for (int p = 0; p < LOG_PASS_COUNT; ++p) CHECK(log.ran[p]);

    const PlanLogEntry* dead = entry_for(log, LOG_DCE, lesson.unused_sum);
    REQUIRE(dead);
    CHECK(dead->reason == LOG_DEAD_UNREAD);
    CHECK(static_cast<int>(log.passes[LOG_DCE].size()) == plan->stats.dead);

    const PlanLogEntry* merged = entry_for(log, LOG_CSE, lesson.second_tanh);
    REQUIRE(merged);
    CHECK(merged->other.node == lesson.first_tanh);
    CHECK(merged->step.op == OP_tanh);
    CHECK(static_cast<int>(log.passes[LOG_CSE].size()) == plan->stats.common);

    bool forward_group = false;
    for (const PlanLogEntry& e : log.passes[LOG_FUSE]) {
        std::vector<int64_t> nodes;
        for (const PlanLogStep& op : e.ops) nodes.push_back(op.node);
        CHECK(std::is_sorted(nodes.begin(), nodes.end()));
        forward_group = forward_group || (std::count(nodes.begin(), nodes.end(), lesson.add) &&
                                          std::count(nodes.begin(), nodes.end(), lesson.sigmoid));
    }
    CHECK(forward_group);
    CHECK(static_cast<int>(log.passes[LOG_FUSE].size()) == plan->stats.fused_groups);

    bool into_grad = false;   // backward's mm for w's gradient writes straight into w.grad
    for (const PlanLogEntry& e : log.passes[LOG_INPLACE])
        if (e.reason == LOG_INTO_GRAD) {
            CHECK(e.step.op == OP_mm);
            CHECK(e.other.kind == STEP_GRAD_ACCUMULATE);
            CHECK(plan->values[e.value].kind == VALUE_GRAD);
            into_grad = true;
        }
    CHECK(into_grad);

    size_t bytes = 0;
    for (const PlanLogEntry& e : log.passes[LOG_REUSE]) bytes += e.bytes;
    CHECK(bytes == plan->stats.buffer_bytes);
    CHECK(log.buffer_bytes == plan->stats.buffer_bytes);
    CHECK(log.unshared_bytes == plan->stats.unshared_bytes);
    CHECK(log.unshared_bytes > log.buffer_bytes);

    std::string text = plan_log_describe(*plan, log);
    CHECK(text.find("lesson: " + std::to_string(log.recorded_steps) + " steps recorded") == 0);
    CHECK(text.find("reuses #" + std::to_string(lesson.first_tanh) + " tanh's result") != std::string::npos);
    CHECK(plan_log_describe(*plan, log, LOG_CSE).find("dce") == std::string::npos);

    // Without a log the compile is the same plan.
    std::unique_ptr<Plan> plain = plan_compile(recorded, PlanPasses{});
    CHECK(plan_describe(*plain) == plan_describe(*plan));
    // A pass switched off decides nothing.
    PlanPassLog off;
    plan_compile(recorded, PlanPasses{true, false, true, true, true, true}, &off);
    CHECK(!off.ran[LOG_CSE]);
    CHECK(off.passes[LOG_CSE].empty());
    CHECK(plan_log_describe(*plan, off, LOG_CSE).find("cse      off") != std::string::npos);
}

TEST_CASE("plan model: the recorded graph as records, marked stage by stage from the log") {
    Lesson lesson;
    std::shared_ptr<Plan> recorded = lesson.record();
    PlanPassLog log;
    std::unique_ptr<Plan> plan = plan_compile(recorded, PlanPasses{}, &log);
    std::shared_ptr<PlanModel> model = plan_model_build(*plan, log);
    const std::vector<NodeRecord>& records = model->records;
    REQUIRE(std::is_sorted(records.begin(), records.end(), [](const NodeRecord& a, const NodeRecord& b) { return a.id < b.id; }));
    // one record per recorded step, and one per tensor from outside (x, w)
    CHECK(records.size() == log.recorded_steps + 2);
    const NodeRecord* mm = record_find(records, lesson.mm);
    REQUIRE(mm);
    CHECK(mm->op.rfind("mm", 0) == 0);
    CHECK(mm->inputs.size() == 2);
    for (int64_t input : mm->inputs) {
        const NodeRecord* r = record_find(records, input);
        REQUIRE(r);
        CHECK(r->is_leaf);
    }
    CHECK(plan_stage_find("recorded") == 0);
    CHECK(plan_stage_find("reuse") == 6);
    CHECK(plan_stage_find("fusion") == -1);

    auto mark = [&](const char* stage, int64_t id) {
        const PlanBoxMark* m = plan_mark_of(*model, plan_stage_find(stage), id);
        REQUIRE(m);
        return *m;
    };
    CHECK(mark("recorded", lesson.unused_sum).state == PLAN_KEPT);
    CHECK(mark("dce", lesson.unused_sum).state == PLAN_DROPPED);
    CHECK(mark("reuse", lesson.unused_sum).state == PLAN_DROPPED);   // marks carry on
    CHECK(mark("dce", lesson.second_tanh).state == PLAN_KEPT);
    CHECK(mark("cse", lesson.second_tanh).state == PLAN_MERGED);
    CHECK(mark("cse", lesson.second_tanh).merged_into == lesson.first_tanh);
    CHECK(mark("cse", lesson.first_tanh).state == PLAN_KEPT);
    CHECK(mark("inplace", lesson.add).fused == mark("fuse", lesson.add).fused);   // carries on
    CHECK(mark("fold", lesson.add).fused == -1);
    CHECK(mark("fuse", lesson.add).fused >= 0);
    CHECK(mark("fuse", lesson.add).fused == mark("fuse", lesson.sigmoid).fused);
    CHECK(model->fused.size() == log.passes[LOG_FUSE].size());
    CHECK(mark("fuse", lesson.add).note.rfind("fused loop ", 0) == 0);
    int coloured = 0;
    for (const PlanLogEntry& e : log.passes[LOG_REUSE])
        for (int v : e.values) {
            const PlanBoxMark* m = plan_mark_of(*model, 6, plan->values[v].recorded_id);
            REQUIRE(m);
            CHECK(m->buffer == e.buffer);
            CHECK(plan_mark_of(*model, 5, plan->values[v].recorded_id)->buffer == -1);
            ++coloured;
        }
    CHECK(coloured >= 2);
    CHECK(plan_buffer_colour(0) != plan_buffer_colour(1));
    CHECK(model->summary[1] == "dce: " + plan_log_heading(log, LOG_DCE));
    CHECK(plan_mark_of(*model, 7, lesson.mm) == nullptr);
    CHECK(plan_mark_of(*model, 0, 1234567) == nullptr);

    // The view: every record a box; after decoration each node box has room for a note line and
    // for the widest note of any stage, and records with no node of their own are titled by op.
    ViewInput in;
    in.records = &records;
    in.options.loss_graph = false;
    GraphView plain = view_build(in);
    GraphView view = view_build(in);
    plan_view_decorate(view, *model, in.measure);
    REQUIRE(view.boxes.size() == plain.boxes.size());
    int synthetic = 0;
    for (size_t i = 0; i < view.boxes.size(); ++i) {
        const ViewBox& b = view.boxes[i];
        if (b.kind != BOX_NODE || !record_find(records, b.node_id)) continue;
        CHECK(b.height > plain.boxes[i].height);
        for (int stage = 0; stage < PLAN_STAGES; ++stage) {
            float w, h;
            in.measure(plan_mark_of(*model, stage, b.node_id)->note, &w, &h);
            CHECK(b.width >= w);
        }
        if (b.node_id >= PLAN_SYNTHETIC_ID) {
            ++synthetic;
            CHECK(b.title == record_find(records, b.node_id)->op);
            CHECK(b.title.find(".grad +=") != std::string::npos);
        }
    }
    CHECK(synthetic == 1);   // w.grad's accumulation
}
