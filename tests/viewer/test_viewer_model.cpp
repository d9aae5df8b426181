// test_viewer_model.cpp: the viewer's model and layout, with no display: every node gets a box,
// each use of a shared parameter gets its own ghost, edges joining the forward and the backward
// pass never reach dot, groups collapse and open, the node cap keeps the focus's neighbourhood,
// tensor statistics count NaN and Inf apart, and the source cache notices an edited script.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/stat.h>

#include <cstdio>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "function.h"
#include "layout.h"
#include "model.h"
#include "source_cache.h"
#include "tensor_stats.h"

using namespace td;

namespace {

// Nodes recorded from C++ have no Lua line: this locator says they come from `rnn.lua`, at the
// line the test sets, so that source-line groups (loop iterations) can be tested.
int g_file = -1;
int g_line = 0;
SourceLoc test_locator(void*) { return SourceLoc{g_file, g_line}; }

struct FakeSource {
    FakeSource() {
        g_file = source_file_intern("rnn.lua");
        engine_set_locator(test_locator, nullptr);
    }
    ~FakeSource() { engine_set_locator(nullptr, nullptr); }
};

Tensor leaf(const Shape& shape, bool requires_grad) {
    Tensor t = ops::create(OP_randn, shape, DTYPE_F32);
    t.node->outputs[0].requires_grad = requires_grad;
    return t;
}

// The lecture's RNN cell unrolled over a loop whose body is lines 16-19 (scripts/rnn_unrolled.lua),
// forward and backward. Holds every tensor it made, so the whole graph stays on the tape.
struct Rnn {
    Tensor W_h, W_x, xs, loss;
    std::vector<Tensor> keep;
    int64_t first_id = 0;

    explicit Rnn(int steps) {
        FakeSource source;
        first_id = tape_next_id();
        g_line = 10;
        W_h = leaf(Shape{20, 20}, true);
        g_line = 11;
        W_x = leaf(Shape{20, 10}, true);
        g_line = 12;
        xs = leaf(Shape{steps, 10}, false);
        g_line = 13;
        Tensor h = ops::create(OP_zeros, Shape{1, 20}, DTYPE_F32);
        for (int t = 0; t < steps; ++t) {
            g_line = 16;
            Tensor x = ops::narrow(xs, 0, t, 1);
            g_line = 17;
            Tensor h2h = ops::mm(W_h, ops::transpose(h, 0, 1));
            g_line = 18;
            Tensor i2h = ops::mm(W_x, ops::transpose(x, 0, 1));
            g_line = 19;
            h = ops::transpose(ops::unary(OP_tanh, ops::add(h2h, i2h)), 0, 1);
            keep.push_back(x);
        }
        g_line = 21;
        loss = ops::reduce_all(OP_sum, h);
        g_line = 22;
        backward(loss, nullptr);
    }
};

// Records of the nodes made since `first_id` (earlier tests may have left nodes alive).
std::vector<NodeRecord> records_since(int64_t first_id) {
    std::vector<NodeRecord> all, mine;
    records_update(all, {});
    for (NodeRecord& r : all)
        if (r.id >= first_id) mine.push_back(r);
    return mine;
}

GraphView build(const std::vector<NodeRecord>& records, const ViewOptions& options = ViewOptions(), int64_t stop = 0,
                const std::unordered_map<std::string, bool>& expanded = {}) {
    ViewInput in;
    in.records = &records;
    in.options = options;
    in.stop_node = stop;
    in.user_expanded = expanded;
    return view_build(in);
}

// The boxes that show node `id` (its own box and its ghosts).
std::vector<int> boxes_showing(const GraphView& v, int64_t id) {
    std::vector<int> out;
    for (size_t i = 0; i < v.boxes.size(); ++i)
        if (v.boxes[i].node_id == id && (v.boxes[i].kind == BOX_NODE || v.boxes[i].kind == BOX_GHOST))
            out.push_back(static_cast<int>(i));
    return out;
}

// How many forward nodes take `id` as an input (the backward pass reads it too: drawn apart).
int uses_of(const std::vector<NodeRecord>& records, int64_t id) {
    int n = 0;
    for (const NodeRecord& r : records)
        for (int64_t input : r.inputs) n += input == id && r.phase == PHASE_FORWARD;
    return n;
}

}  // namespace

TEST_CASE("view: every node of the 50-step RNN has a box, each use of a shared parameter has its own ghost") {
    Rnn rnn(50);
    std::vector<NodeRecord> records = records_since(rnn.first_id);
    GraphView v = build(records);
    REQUIRE(v.cap_focus == 0);   // under the cap: everything shown
    for (const NodeRecord& r : records) {
        INFO("#" << r.id << " " << r.op);
        CHECK(v.box_of(r.id) >= 0);
        CHECK(v.boxes[v.box_of(r.id)].kind == BOX_NODE);   // nothing grouped by default
    }
    for (const Tensor* shared : {&rnn.W_h, &rnn.W_x, &rnn.xs}) {
        int64_t id = shared->id();
        int uses = uses_of(records, id);
        INFO("#" << id << " used " << uses << " times");
        CHECK(uses == 50);
        std::vector<int> copies = boxes_showing(v, id);
        CHECK(static_cast<int>(copies.size()) == uses);   // the node and a ghost per further use
        int ghosts = 0;
        for (int b : copies) {
            ghosts += v.boxes[b].kind == BOX_GHOST;
            int out_edges = 0;
            for (const ViewEdge& e : v.edges) out_edges += e.from == b && !e.cross;
            CHECK(out_edges == 1);   // each copy feeds one use
        }
        CHECK(ghosts == uses - 1);
    }
}

TEST_CASE("layout: edges joining forward and backward nodes stay out of dot, which lays out each pass apart") {
    Rnn rnn(50);
    std::vector<NodeRecord> records = records_since(rnn.first_id);
    GraphView v = build(records);
    int cross = 0;
    for (const ViewEdge& e : v.edges) {
        bool joins = v.boxes[e.from].phase != v.boxes[e.to].phase;
        CHECK(e.cross == joins);
        cross += e.cross;
    }
    CHECK(cross > 100);   // every backward step reads saved forward values

    LayoutInput in = layout_input_from_view(v, true);
    for (const LayoutInput::Edge& e : in.edges) CHECK(in.boxes[e.from].phase == in.boxes[e.to].phase);
    CHECK(static_cast<int>(in.edges.size()) == static_cast<int>(v.edges.size()) - cross);

    LayoutResult result = layout_compute(in);
    REQUIRE(result.ok);
    float forward_right = -1e30f, backward_left = 1e30f;
    for (const ViewBox& b : v.boxes) {
        auto it = result.boxes.find(b.key);
        REQUIRE(it != result.boxes.end());
        if (b.phase == PHASE_FORWARD) forward_right = std::max(forward_right, it->second.x1);
        else backward_left = std::min(backward_left, it->second.x0);
    }
    CHECK(forward_right < backward_left);   // side by side, the backward pass on the right
    CHECK(static_cast<int>(result.edges.size()) == static_cast<int>(in.edges.size()));
}

TEST_CASE("groups: loop iterations collapse into one box each, their gradients with them, the stop opens its own") {
    Rnn rnn(12);
    std::vector<NodeRecord> records = records_since(rnn.first_id);
    ViewOptions options;
    options.collapse_loops = true;
    GraphView v = build(records, options);
    std::vector<const Cluster*> loops, mirrors;
    for (const Cluster& c : v.clusters) {
        if (c.kind == CLUSTER_LOOP) loops.push_back(&c);
        if (c.kind == CLUSTER_BACKWARD && c.key.find("loop:") != std::string::npos) mirrors.push_back(&c);
    }
    REQUIRE(loops.size() == 12);
    for (const Cluster* c : loops) {
        CHECK(c->members.size() == 8);   // narrow, transpose, mm, transpose, mm, add, tanh, transpose
        CHECK(c->state == CLUSTER_COLLAPSED);
    }
    CHECK(mirrors.size() == 12);
    for (const Cluster* c : mirrors) CHECK(c->state == CLUSTER_COLLAPSED);
    for (const NodeRecord& r : records) CHECK(v.box_of(r.id) >= 0);   // every node still has a (group) box

    // Stopped inside iteration 7: that iteration opens (a frame), the others stay one box each.
    int64_t inside = loops[6]->members[3];
    GraphView stopped = build(records, options, inside);
    for (const Cluster& c : stopped.clusters)
        if (c.kind == CLUSTER_LOOP) CHECK((c.state == CLUSTER_EXPANDED) == (c.key == loops[6]->key));
    CHECK(stopped.boxes[stopped.box_of(inside)].kind == BOX_NODE);
    CHECK(stopped.boxes[stopped.box_of(inside)].frame >= 0);

    // Opened by the user (double-click): the same.
    GraphView opened = build(records, options, 0, {{loops[0]->key, true}});
    CHECK(opened.boxes[opened.box_of(loops[0]->members[0])].kind == BOX_NODE);
    CHECK(opened.boxes[opened.box_of(loops[1]->members[0])].kind == BOX_CLUSTER);
}

namespace {

struct Double : CustomFunction {
    Double() : CustomFunction("Double") {}
    std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override {
        return {ops::add(ops::mul_scalar(inputs[0], 1.5), ops::mul_scalar(inputs[0], 0.5))};
    }
    std::vector<Tensor> backward(const std::vector<Tensor>& grads) override { return {ops::mul_scalar(grads[0], 2)}; }
};

}  // namespace

TEST_CASE("groups: a custom function is one box until opened, then its inner ops sit in its frame") {
    int64_t first = tape_next_id();
    Tensor x = leaf(Shape{3}, true);
    Tensor y = function_apply(std::make_shared<Double>(), {x})[0];
    Tensor loss = ops::reduce_all(OP_sum, y);
    backward(loss, nullptr);
    std::vector<NodeRecord> records = records_since(first);
    int64_t fn = y.id();
    REQUIRE(y.node->inner_nodes.size() == 3);

    GraphView v = build(records);
    int box = v.box_of(fn);
    REQUIRE(box >= 0);
    CHECK(v.boxes[box].member_count == 4);   // the function and its three ops
    for (const Ref<Node>& inner : y.node->inner_nodes) CHECK(v.box_of(inner->id) == box);

    GraphView open = build(records, ViewOptions(), 0, {{"fn:" + std::to_string(fn), true}});
    int frame = open.boxes[open.box_of(fn)].frame;
    REQUIRE(frame >= 0);
    CHECK(open.clusters[frame].state == CLUSTER_EXPANDED);
    for (const Ref<Node>& inner : y.node->inner_nodes) {
        int b = open.box_of(inner->id);
        CHECK(b != open.box_of(fn));
        CHECK(open.boxes[b].frame == frame);
    }
    LayoutResult result = layout_compute(layout_input_from_view(open, true));
    REQUIRE(result.ok);
    CHECK(result.frames.count(open.clusters[frame].key) == 1);
}

TEST_CASE("node cap: past the cap, the view is the neighbourhood of the focus") {
    Rnn rnn(50);
    std::vector<NodeRecord> records = records_since(rnn.first_id);
    ViewOptions options;
    options.node_cap = 100;
    int64_t focus = rnn.keep[25].id();   // a narrow in the middle of the loop
    ViewInput in;
    in.records = &records;
    in.options = options;
    in.focus_node = focus;
    GraphView v = view_build(in);
    CHECK(static_cast<int>(v.boxes.size()) == 100);
    CHECK(v.total_nodes > 800);
    CHECK(v.cap_focus == focus);
    REQUIRE(v.box_of(focus) >= 0);
    for (const ViewEdge& e : v.edges) {   // edges only between shown boxes
        CHECK(e.from < static_cast<int>(v.boxes.size()));
        CHECK(e.to < static_cast<int>(v.boxes.size()));
    }
    int shown = 0;
    for (const NodeRecord& r : records) shown += v.box_of(r.id) >= 0;
    CHECK(shown < static_cast<int>(records.size()));
    CHECK(v.box_of(rnn.keep[0].id()) < 0);   // far from the focus: not shown
}

TEST_CASE("records: one per live node, with its op, shape and phase, gone when the node dies") {
    int64_t first = tape_next_id();
    std::vector<NodeRecord> records;
    {
        Tensor a = leaf(Shape{2, 3}, true);
        Tensor b = ops::unary(OP_tanh, a);
        Tensor s = ops::reduce_all(OP_sum, b);
        backward(s, nullptr);
        records = records_since(first);
        const NodeRecord* tanh = record_find(records, b.id());
        REQUIRE(tanh);
        CHECK(tanh->op == "tanh");
        CHECK(tanh->shape == "[2,3]");
        CHECK(tanh->phase == PHASE_FORWARD);
        CHECK(tanh->inputs == std::vector<int64_t>{a.id()});
        int backward_nodes = 0;
        for (const NodeRecord& r : records) backward_nodes += r.phase == PHASE_BACKWARD;
        CHECK(backward_nodes >= 2);
    }
    records_update(records, {});
    CHECK(record_find(records, first) == nullptr);
}

TEST_CASE("tensor stats: NaN and infinities are counted apart, min, max, mean and std use the finite values") {
    double inf = std::numeric_limits<double>::infinity();
    double values[] = {1, std::nan(""), inf, -inf, 3, 0};
    Tensor t = ops::from_values(Shape{2, 3}, DTYPE_F64, values);
    TensorStats s = tensor_stats_compute(t.value(), 4);
    CHECK(s.count == 6);
    CHECK(s.nan == 1);
    CHECK(s.pos_inf == 1);
    CHECK(s.neg_inf == 1);
    CHECK(s.finite == 3);
    CHECK(s.zeros == 1);
    CHECK(s.min == 0);
    CHECK(s.max == 3);
    CHECK(s.mean == Approx(4.0 / 3.0));
    float total = 0;
    for (float c : s.histogram) total += c;
    CHECK(total == 3);
    CHECK(heat_colour(std::nan(""), 0, 1) == HEAT_NAN);
    CHECK(heat_colour(inf, 0, 1) == HEAT_POS_INF);
    CHECK(heat_colour(-inf, 0, 1) == HEAT_NEG_INF);
}

namespace {

void write_text(const std::string& path, const char* text) {
    FILE* f = fopen(path.c_str(), "wb");
    REQUIRE(f);
    fputs(text, f);
    fclose(f);
}

// Give the file this modification time (seconds and nanoseconds).
void set_mtime(const std::string& path, time_t seconds, long nanoseconds) {
    struct timespec times[2] = {{seconds, nanoseconds}, {seconds, nanoseconds}};
    REQUIRE(utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}

}  // namespace

TEST_CASE("source cache: an edited script is read again, when its size or only its mtime changed") {
    std::string path = "source_cache_test_tmp.lua";
    write_text(path, "local a = 1\nreturn a\n");
    set_mtime(path, 1700000000, 0);
    REQUIRE(source_lines(path));
    CHECK(source_line_text(path, 1) == "local a = 1");

    write_text(path, "local a = 100\nreturn a\n");   // longer, same mtime (an edit within a second)
    set_mtime(path, 1700000000, 0);
    CHECK(source_line_text(path, 1) == "local a = 100");

    write_text(path, "local a = 200\nreturn a\n");   // same size, mtime later by a nanosecond
    set_mtime(path, 1700000000, 1);
    CHECK(source_line_text(path, 1) == "local a = 200");

    write_text(path, "local a = 300\nreturn a\n");   // same size and mtime: the cached text stays
    set_mtime(path, 1700000000, 1);
    CHECK(source_line_text(path, 1) == "local a = 200");

    remove(path.c_str());
    CHECK(source_lines(path) == nullptr);   // gone: no lines
}
