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
#include "heat_colour.h"

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
    REQUIRE(y.node->inner_nodes().size() == 3);

    GraphView v = build(records);
    int box = v.box_of(fn);
    REQUIRE(box >= 0);
    CHECK(v.boxes[box].member_count == 4);   // the function and its three ops
    for (const Ref<Node>& inner : y.node->inner_nodes()) CHECK(v.box_of(inner->id) == box);

    GraphView open = build(records, ViewOptions(), 0, {{"fn:" + std::to_string(fn), true}});
    int frame = open.boxes[open.box_of(fn)].frame;
    REQUIRE(frame >= 0);
    CHECK(open.clusters[frame].state == CLUSTER_EXPANDED);
    for (const Ref<Node>& inner : y.node->inner_nodes()) {
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

TEST_CASE("heat colours: NaN and infinities have colours of their own") {
    double inf = std::numeric_limits<double>::infinity();
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

// ---------------------------------------------------------------------------------------------
// History starts, the loss's picture, module groups

namespace {

// A parameter as nn.Parameter makes it: values computed under no_grad, detached, cloned, then
// marked as requiring grad. Returns the parameter; *made_by holds the nodes of its initialisation.
Tensor parameter_like_nn(const Shape& shape, std::vector<Tensor>* made_by) {
    NoGradGuard no_grad;
    Tensor values = ops::add_scalar(ops::create(OP_randn, shape, DTYPE_F32), 1.0);
    Tensor detached = ops::unary(OP_detach, values);
    Tensor p = ops::unary(OP_clone, detached);
    node_set_requires_grad(p.node.get(), 0, true);
    *made_by = {values, detached};
    return p;
}

// One training step of y = tanh(W x) under the scope "Net" (with W's product inside "fc:Linear"),
// its backward pass, and an update under no_grad. Returns the loss; the step's tensors go to keep.
Tensor train_step(const Tensor& W, const Tensor& x, std::vector<Tensor>& keep) {
    int net = scope_enter("Net");
    int fc = scope_enter("fc:Linear");
    Tensor wx = ops::mm(W, x);
    Tensor biased = ops::add_scalar(wx, 0.5);
    scope_leave(fc);
    Tensor y = ops::unary(OP_tanh, biased);
    scope_leave(net);
    Tensor loss = ops::reduce_all(OP_sum, y);
    backward(loss, nullptr);
    NoGradGuard no_grad;   // the optimizer's step
    Tensor step = ops::mul(W.node->outputs[0].grad, ops::create(OP_ones, W.shape(), DTYPE_F32));
    Tensor scaled = ops::add_scalar(step, 0.0);
    keep.insert(keep.end(), {wx, biased, y, loss, step, scaled});
    return loss;
}

const Cluster* cluster_titled(const GraphView& v, const std::string& title, ClusterKind kind) {
    for (const Cluster& c : v.clusters)
        if (c.title == title && c.kind == kind) return &c;
    return nullptr;
}

}  // namespace

TEST_CASE("history starts: no_grad and detach() start a history; ops on data with autograd on do not") {
    std::vector<Tensor> made_by;
    Tensor p = parameter_like_nn(Shape{3, 2}, &made_by);
    CHECK(p.node->history_start);              // cloned under no_grad
    CHECK(made_by[1].node->history_start);     // detach()
    Tensor data = leaf(Shape{2, 2}, false);
    Tensor on_data = ops::add_scalar(data, 1.0);   // autograd on, nothing requires grad
    CHECK_FALSE(on_data.node->history_start);
    Tensor used = ops::mm(p, on_data);
    CHECK_FALSE(used.node->history_start);
    Tensor d = ops::unary(OP_detach, used);
    Tensor after = ops::add_scalar(d, 2.0);
    // graph_collect (torch.graph, DOT) stops at the history start: d is in after's graph, what made it is not.
    NodeList graph = graph_collect(after);
    auto holds = [&](const Tensor& t) {
        return std::any_of(graph.begin(), graph.end(), [&](const Ref<Node>& n) { return n->id == t.id(); });
    };
    CHECK(holds(after));
    CHECK(holds(d));
    CHECK_FALSE(holds(used));
    CHECK_FALSE(holds(p));
    // ... and from a loss, through the parameter but not into its initialisation.
    NodeList of_used = graph_collect(used);
    CHECK(std::any_of(of_used.begin(), of_used.end(), [&](const Ref<Node>& n) { return n->id == p.id(); }));
    CHECK(std::none_of(of_used.begin(), of_used.end(), [&](const Ref<Node>& n) { return n->id == made_by[0].id(); }));
    CHECK(std::any_of(of_used.begin(), of_used.end(), [&](const Ref<Node>& n) { return n->id == data.id(); }));
}

TEST_CASE("loss's picture: the last pass's loss graph, its backward pass, the update folded; no init chain, no earlier step") {
    int64_t first = tape_next_id();
    std::vector<Tensor> init, keep;
    Tensor W = parameter_like_nn(Shape{2, 3}, &init);
    Tensor x = leaf(Shape{3, 4}, false);
    Tensor loss1 = train_step(W, x, keep);
    size_t first_step = keep.size();
    Tensor loss2 = train_step(W, x, keep);
    std::vector<NodeRecord> records = records_since(first);

    LossPass pass = loss_pass_find(records);
    CHECK(pass.root == loss2.id());
    CHECK(pass.first > loss2.id());
    CHECK(pass.update_last == keep.back().id());   // the no_grad step after the pass

    GraphView v = build(records);
    CHECK(v.loss_node == loss2.id());
    CHECK(v.box_of(loss2.id()) >= 0);
    CHECK(v.box_of(loss1.id()) < 0);                      // an earlier step
    CHECK(v.box_of(keep[0].id()) < 0);
    for (const Tensor& t : init) CHECK(v.box_of(t.id()) < 0);   // the initialisation chain
    // W is used only inside fc's call: it is drawn in fc's collapsed box, and opened, fc frames
    // W's own box, titled "parameter".
    REQUIRE(v.box_of(W.id()) >= 0);
    CHECK(v.box_of(W.id()) == v.box_of(keep[first_step].id()));
    const Cluster* fc = cluster_titled(v, "fc (Linear)", CLUSTER_MODULE);
    REQUIRE(fc);
    GraphView open = build(records, ViewOptions(), 0, {{cluster_state_key(*fc), true}});
    REQUIRE(open.box_of(W.id()) >= 0);
    const ViewBox& w = open.boxes[open.box_of(W.id())];
    CHECK(w.kind == BOX_NODE);
    CHECK(w.title == "#" + std::to_string(W.id()) + " parameter");
    CHECK(w.detail == "[2,3]");
    REQUIRE(w.frame >= 0);
    CHECK(open.clusters[w.frame].title == "fc (Linear)");
    // No stub for what made the parameter: the edges into W's box come from nowhere.
    for (const ViewEdge& e : open.edges) CHECK(open.boxes[e.to].key != w.key);
    for (const ViewBox& b : open.boxes)
        for (const Tensor& t : init) CHECK(b.node_id != t.id());

    const Cluster* update = cluster_titled(v, "update under no_grad (optimizer step)", CLUSTER_UPDATE);
    REQUIRE(update);
    CHECK(update->state == CLUSTER_COLLAPSED);
    CHECK(v.boxes[v.box_of(keep.back().id())].kind == BOX_CLUSTER);
    CHECK(v.box_of(keep[first_step + 4].id()) == v.box_of(keep.back().id()));   // one box for both

    // Off (Options): the whole tape, still without the init chain (used only by history starts).
    ViewOptions whole;
    whole.loss_graph = false;
    GraphView all = build(records, whole);
    CHECK(all.loss_node == 0);
    CHECK(all.box_of(loss1.id()) >= 0);
    CHECK(all.box_of(init[0].id()) < 0);
    CHECK(all.box_of(W.id()) >= 0);
    // Stopped at a node outside the picture (the first step): the whole tape, so that it shows.
    GraphView stopped = build(records, ViewOptions(), loss1.id());
    CHECK(stopped.box_of(loss1.id()) >= 0);
}

TEST_CASE("module groups: nested from scopes, open or collapsed by name, their backward nodes mirrored") {
    int64_t first = tape_next_id();
    std::vector<Tensor> init, keep;
    Tensor W = parameter_like_nn(Shape{2, 3}, &init);
    Tensor x = leaf(Shape{3, 4}, true);   // fc's backward: a gradient for W and one for x
    Tensor loss = train_step(W, x, keep);
    std::vector<NodeRecord> records = records_since(first);

    GraphView v = build(records);
    const Cluster* net = cluster_titled(v, "Net", CLUSTER_MODULE);
    const Cluster* fc = cluster_titled(v, "fc (Linear)", CLUSTER_MODULE);
    REQUIRE(net);
    REQUIRE(fc);
    CHECK(fc->name == "Net/fc:Linear");
    CHECK(net->state == CLUSTER_EXPANDED);   // the model's call: open
    CHECK(fc->state == CLUSTER_COLLAPSED);   // a module inside it: one box
    CHECK(fc->parent >= 0);
    CHECK(&v.clusters[fc->parent] == net);
    CHECK(fc->members == std::vector<int64_t>{keep[0].id(), keep[1].id()});
    int fc_box = v.box_of(keep[0].id());
    REQUIRE(fc_box >= 0);
    CHECK(v.boxes[fc_box].kind == BOX_CLUSTER);
    CHECK(v.box_of(keep[1].id()) == fc_box);
    CHECK(v.boxes[fc_box].frame == fc->parent);                  // drawn inside Net's frame
    CHECK(v.boxes[v.box_of(keep[2].id())].frame == fc->parent);  // tanh too

    // The backward nodes of fc's ops: one collapsed box inside Net's backward frame.
    const Cluster* fc_grad = cluster_titled(v, "grad of fc (Linear)", CLUSTER_BACKWARD);
    REQUIRE(fc_grad);
    CHECK(fc_grad->key == "bwd:c:" + fc->key);
    CHECK(fc_grad->state == CLUSTER_COLLAPSED);
    REQUIRE(fc_grad->parent >= 0);
    CHECK(v.clusters[fc_grad->parent].title == "grad of Net");
    CHECK(v.clusters[fc_grad->parent].state == CLUSTER_EXPANDED);

    // Names: field, class, path, title; each names fc (the class names every Linear).
    for (const char* name : {"fc", "Linear", "Net/fc:Linear", "fc:Linear", "fc (Linear)"}) {
        std::vector<int> found = clusters_named(v.clusters, name);
        REQUIRE(found.size() == 1);
        CHECK(v.clusters[found[0]].key == fc->key);
    }
    CHECK(clusters_named(v.clusters, "nosuch").empty());

    // Opened by its module path (what :view expand fc stores): its ops in its own frame, inside
    // Net's, and the layout nests the two frames.
    GraphView open = build(records, ViewOptions(), 0, {{cluster_state_key(*fc), true}});
    const Cluster* fc_open = cluster_titled(open, "fc (Linear)", CLUSTER_MODULE);
    REQUIRE(fc_open);
    CHECK(fc_open->state == CLUSTER_EXPANDED);
    int mm_box = open.box_of(keep[0].id());
    REQUIRE(mm_box >= 0);
    CHECK(open.boxes[mm_box].kind == BOX_NODE);
    CHECK(open.clusters[open.boxes[mm_box].frame].key == fc_open->key);
    CHECK(cluster_titled(open, "grad of fc (Linear)", CLUSTER_BACKWARD)->state == CLUSTER_EXPANDED);
    LayoutInput layout = layout_input_from_view(open, true);
    const LayoutInput::Box& mm = layout.boxes[mm_box];
    REQUIRE(mm.frame >= 0);
    CHECK(layout.frames[mm.frame].key == fc_open->key);
    REQUIRE(layout.frames[mm.frame].parent >= 0);
    CHECK(layout.frames[layout.frames[mm.frame].parent].title == "Net");
    LayoutResult placed = layout_compute(layout);
    REQUIRE(placed.ok);
    const LayoutRect& inner = placed.frames[fc_open->key];
    const LayoutRect& outer = placed.frames[open.clusters[fc_open->parent].key];
    CHECK(inner.x0 >= outer.x0);   // the Linear's frame lies inside Net's
    CHECK(inner.x1 <= outer.x1);
    CHECK(inner.y0 >= outer.y0);
    CHECK(inner.y1 <= outer.y1);
}

// The first picture after a training step: the parameters in their module calls' boxes, the
// model's scope (what the camera fits) without the data preparation or the optimizer's step,
// laid out with the backward pass right beside it.
TEST_CASE("model's scope: parameters in their module call, the scope without data preparation, the backward pass beside it") {
    int64_t first = tape_next_id();
    std::vector<Tensor> init, keep, shared_init;
    Tensor W = parameter_like_nn(Shape{2, 3}, &init);
    Tensor shared = parameter_like_nn(Shape{2, 4}, &shared_init);   // used inside fc and outside it
    Tensor raw = leaf(Shape{3, 4}, false);
    Tensor x = ops::mul_scalar(ops::add_scalar(raw, 1.0), 0.5);     // data preparation
    Tensor loss = train_step(W, x, keep);
    Tensor loss_shared = ops::reduce_all(OP_sum, ops::mul(keep[2], shared));
    int64_t released = 0;   // this pass goes again through train_step's graph, which its pass released
    BackwardOptions again;
    again.released_rerun = &released;
    backward(loss_shared, nullptr, again);
    std::vector<NodeRecord> records = records_since(first);

    std::vector<Cluster> clusters = clusters_detect(records, true, false);
    std::unordered_map<int64_t, int> group_of;
    for (size_t c = 0; c < clusters.size(); ++c)
        for (int64_t id : clusters[c].members) group_of[id] = static_cast<int>(c);
    std::unordered_map<int64_t, int> owned = parameters_owned(records, clusters, group_of);
    REQUIRE(owned.count(W.id()) == 1);
    CHECK(clusters[owned[W.id()]].title == "fc (Linear)");
    CHECK(owned.count(shared.id()) == 0);   // its one use is outside every module call

    GraphView v = build(records);
    REQUIRE(v.loss_node == loss_shared.id());
    REQUIRE(v.in_scope.size() == v.boxes.size());
    auto scoped = [&](int64_t id) {
        int b = v.box_of(id);
        return b >= 0 && v.in_scope[b] != 0;
    };
    CHECK(scoped(loss_shared.id()));
    CHECK(scoped(keep[0].id()));      // fc's box (and W in it)
    CHECK(scoped(W.id()));
    CHECK(scoped(shared.id()));
    CHECK_FALSE(scoped(x.id()));       // data preparation: nothing there needs a gradient
    CHECK_FALSE(scoped(raw.id()));
    int backward_boxes = 0;
    for (size_t i = 0; i < v.boxes.size(); ++i)
        if (v.boxes[i].phase == PHASE_BACKWARD && v.boxes[i].kind != BOX_STUB) {
            const NodeRecord* r = record_find(records, v.boxes[i].node_id);
            if (r && r->id > loss_shared.id()) {   // the newest pass
                CHECK(v.in_scope[i]);
                ++backward_boxes;
            }
        }
    CHECK(backward_boxes >= 2);

    // Laid out: the scope's forward part, the backward pass right after it, nothing between.
    LayoutInput in = layout_input_from_view(v, true);
    LayoutResult placed = layout_compute(in);
    REQUIRE(placed.ok);
    float forward_right = -1e9f, backward_left = 1e9f;
    for (size_t i = 0; i < v.boxes.size(); ++i) {
        const LayoutRect& r = placed.boxes[v.boxes[i].key];
        if (v.boxes[i].phase == PHASE_BACKWARD) backward_left = std::min(backward_left, r.x0);
        else if (v.in_scope[i]) forward_right = std::max(forward_right, r.x1);
    }
    CHECK(backward_left > forward_right);
    CHECK(backward_left - forward_right < 200.0f);
}

TEST_CASE("module groups: a loop that straddles a module call is dropped, one inside it nests") {
    FakeSource source;
    int64_t first = tape_next_id();
    std::vector<Tensor> keep;
    g_line = 14;
    Tensor h = leaf(Shape{1, 4}, true);
    int rnn = scope_enter("rnn:RNN");
    for (int t = 0; t < 3; ++t) {   // a loop of lines 16-17 inside the module call
        g_line = 16;
        h = ops::unary(OP_tanh, h);
        g_line = 17;
        h = ops::add_scalar(h, 1.0);
        keep.push_back(h);
    }
    scope_leave(rnn);
    g_line = 18;
    keep.push_back(ops::reduce_all(OP_sum, h));
    std::vector<NodeRecord> records = records_since(first);
    std::vector<Cluster> clusters = clusters_detect(records, true, false);
    int modules = 0, loops = 0;
    for (const Cluster& c : clusters) {
        if (c.kind == CLUSTER_MODULE) ++modules;
        if (c.kind != CLUSTER_LOOP) continue;
        ++loops;
        REQUIRE(c.parent >= 0);
        CHECK(clusters[c.parent].kind == CLUSTER_MODULE);   // iterations nest inside the call
    }
    CHECK(modules == 1);
    CHECK(loops == 3);
    // Inside a module the iterations are collapsed (one box per step once the RNN is opened).
    GraphView v = build(records, ViewOptions(), 0, {{"mod:rnn:RNN", true}});
    int boxes = 0;
    for (const ViewBox& b : v.boxes) boxes += b.kind == BOX_CLUSTER && v.clusters[b.cluster].kind == CLUSTER_LOOP;
    CHECK(boxes == 3);
}

TEST_CASE("node cap: the loss's picture of a 2,000-step RNN (about 40,000 records) is cut to the cap") {
    Rnn rnn(2000);
    std::vector<NodeRecord> records = records_since(rnn.first_id);
    REQUIRE(records.size() > 30000);
    GraphView v = build(records);
    CHECK(v.loss_node == rnn.loss.id());
    CHECK(static_cast<int>(v.boxes.size()) <= ViewOptions().node_cap);
    CHECK(v.box_of(rnn.loss.id()) >= 0);   // the cut is centred on the loss
    CHECK(v.cap_focus != 0);
}

TEST_CASE("the tape window: a long tape's model holds the window's nodes, not the tape's") {
    // The RNN unrolled 400 steps, forward and backward: about 6,000 live nodes.
    Rnn rnn(400);
    int64_t live = tape_live_count();
    REQUIRE(live > 5000);
    std::vector<NodeRecord> records;

    // The newest 500 nodes: the backward pass's end.
    TapeWindow newest;
    newest.size = 500;
    TapeWindowSpan span = records_update(records, {}, newest);
    // ... and before them the leaves they read: the parameters W_h and W_x (drawn as boxes).
    size_t leaves = 0;
    for (const NodeRecord& r : records)
        if (r.id < span.first) {
            CHECK(r.is_leaf);
            ++leaves;
        }
    CHECK(record_find(records, rnn.W_h.id()));
    CHECK(leaves >= 1);
    CHECK(leaves <= 3);
    CHECK(records.size() == 500 + leaves);
    CHECK(span.nodes == static_cast<int64_t>(records.size()));
    CHECK(span.live == live);
    CHECK(span.following);
    CHECK(span.last == tape_last()->id);
    CHECK(span.first == records[leaves].id);
    CHECK(records.back().phase == PHASE_BACKWARD);
    CHECK(std::is_sorted(records.begin(), records.end(),
                         [](const NodeRecord& a, const NodeRecord& b) { return a.id < b.id; }));
    CHECK(span.covers(tape_last()->id));
    CHECK(!span.covers(rnn.W_h.id()));

    // One more node: the window slides, still 500 records, the new one among them.
    Tensor extra = ops::unary(OP_tanh, rnn.W_h);
    span = records_update(records, {}, newest);
    CHECK(records.size() <= 500 + leaves);
    CHECK(records.back().id == extra.id());
    CHECK(span.changed);
    span = records_update(records, {}, newest);
    CHECK(!span.changed);   // nothing came, went or changed

    // From a node on: the first steps of the forward pass.
    TapeWindow early;
    early.size = 300;
    early.anchor = rnn.W_h.node.get();
    span = records_update(records, {}, early);
    CHECK(records.size() == 300);
    CHECK(records.front().id == rnn.W_h.id());
    CHECK(!span.following);
    CHECK(span.covers(rnn.W_x.id()));
    CHECK(!span.covers(extra.id()));
    for (const NodeRecord& r : records) CHECK(r.phase == PHASE_FORWARD);

    // The view of a window: its inputs older than the window are stubs "before the window", and
    // it has no more boxes than the window has records plus those stubs and ghosts.
    span = records_update(records, {}, newest);
    ViewInput in;
    in.records = &records;
    in.window_first = span.first;
    GraphView view = view_build(in);
    CHECK(view.total_nodes == static_cast<int>(records.size()));
    int before_window = 0, nodes = 0;
    for (const ViewBox& b : view.boxes) {
        if (b.kind == BOX_STUB) {
            CHECK(b.node_id < span.first);
            before_window += b.detail == "before the window";
        }
        nodes += b.kind == BOX_NODE;
    }
    CHECK(before_window > 0);   // the gradients' forward nodes, earlier in the tape
    CHECK(nodes <= static_cast<int>(records.size()));

    // The whole tape (the default) copies every live node.
    records_update(records, {});
    CHECK(static_cast<int64_t>(records.size()) == tape_live_count());
}
