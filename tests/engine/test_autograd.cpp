// test_autograd.cpp: gradient accumulation, no_grad, and the semantics around autograd: retained
// gradients, dtype promotion, max's indices, views, detach, separate .grad storages, in place.
//
// [SECTION] Accumulation
// [SECTION] no_grad
// [SECTION] Semantics
// [SECTION] Recording: groups, phases, source lines
#include <catch2/catch.hpp>

#include <algorithm>

#include "format.h"
#include "test_helpers.h"

using namespace td;
using namespace td_test;

namespace {

Tensor sum_all(const Tensor& x) { return ops::reduce_all(OP_sum, x); }

}  // namespace

TEST_CASE("c = a * b gives dc/da = b and dc/db = a") {
    Tensor a = make_scalar(15, DTYPE_F32, true), b = make_scalar(20, DTYPE_F32, true);
    Tensor c = ops::mul(a, b);
    backward(c, nullptr);
    CHECK(item(c) == 300);
    CHECK(item(grad_of(a)) == 20);
    CHECK(item(grad_of(b)) == 15);
    CHECK(grad_of(a).dtype() == DTYPE_F32);
}

// ============================================================================================
// [SECTION] Accumulation

TEST_CASE("accumulation: x used twice, y = x*x + x, gives dy/dx = 2x + 1") {
    std::vector<double> vx = {-1.5, 0.25, 2, 3};
    Tensor x = make_leaf(Shape{4}, vx);
    Tensor y = ops::add(ops::mul(x, x), x);
    backward(sum_all(y), nullptr);
    check_values(grad_of(x), map_values(vx, [](double v) { return 2 * v + 1; }));
}

TEST_CASE("accumulation: backward twice on the same graph (retained) doubles .grad") {
    std::vector<double> vx = {0.5, -1, 2}, vw = {3, 4, -5};
    Tensor x = make_leaf(Shape{3}, vx), w = make_leaf(Shape{3}, vw);
    Tensor loss = sum_all(ops::mul(ops::unary(OP_tanh, x), w));
    BackwardOptions retain;
    retain.retain_graph = true;
    backward(loss, nullptr, retain);
    std::vector<double> once = values_of(grad_of(x));
    std::vector<double> w_once = values_of(grad_of(w));
    check_values(once, zip_values(vx, vw, [](double a, double b) { return b * (1 - std::tanh(a) * std::tanh(a)); }));

    backward(loss, nullptr);
    check_values(grad_of(x), map_values(once, [](double g) { return 2 * g; }));
    check_values(grad_of(w), map_values(w_once, [](double g) { return 2 * g; }));
    // That pass did not retain the graph: a third one is PyTorch's error, and changes no .grad.
    CHECK_THROWS_WITH(backward(loss, nullptr), Catch::Matchers::Contains("backward through the graph a second time"));
    check_values(grad_of(x), map_values(once, [](double g) { return 2 * g; }));
}

TEST_CASE("accumulation: a leaf reached through two paths gets the sum of both gradients") {
    // L = sum(tanh(x) + 3x): one path through tanh, one through mul_scalar.
    std::vector<double> vx = {-0.7, 0.1, 1.2};
    Tensor x = make_leaf(Shape{3}, vx);
    Tensor loss = sum_all(ops::add(ops::unary(OP_tanh, x), ops::mul_scalar(x, 3)));
    backward(loss, nullptr);
    check_values(grad_of(x), map_values(vx, [](double v) { return 1 - std::tanh(v) * std::tanh(v) + 3; }), 1e-12);
}

TEST_CASE("accumulation: an intermediate used by two consumers sums their gradients before passing on") {
    // h = x * 2 feeds both a and b: dL/dx = 2 * (dL/da + dL/db) with L = sum(h*h) + sum(3h).
    std::vector<double> vx = {1, -2};
    Tensor x = make_leaf(Shape{2}, vx);
    Tensor h = ops::mul_scalar(x, 2);
    Tensor loss = ops::add(sum_all(ops::mul(h, h)), sum_all(ops::mul_scalar(h, 3)));
    backward(loss, nullptr);
    check_values(grad_of(x), map_values(vx, [](double v) { return 2 * (2 * (2 * v) + 3); }));
}

TEST_CASE("backward with an explicit gradient on a non-scalar root") {
    Tensor x = make_leaf(Shape{2, 2}, {1, 2, 3, 4});
    Tensor y = ops::mul_scalar(x, 5);
    Tensor g = make_tensor(Shape{2, 2}, {1, 0, -1, 0.5});
    backward(y, &g);
    check_values(grad_of(x), {5, 0, -5, 2.5});
}

TEST_CASE("backward through a chain of ops matches the chain rule") {
    // L = sum(sigmoid(exp(x) * w)): dL/dx = sigmoid' * w * exp(x)
    std::vector<double> vx = {-0.3, 0.4}, vw = {1.5, -2};
    Tensor x = make_leaf(Shape{2}, vx), w = make_tensor(Shape{2}, vw);
    Tensor loss = sum_all(ops::unary(OP_sigmoid, ops::mul(ops::unary(OP_exp, x), w)));
    backward(loss, nullptr);
    std::vector<double> expected;
    for (int k = 0; k < 2; ++k) {
        double z = std::exp(vx[k]) * vw[k], s = 1 / (1 + std::exp(-z));
        expected.push_back(s * (1 - s) * vw[k] * std::exp(vx[k]));
    }
    check_values(grad_of(x), expected, 1e-12);
    CHECK_FALSE(grad_of(w).defined());   // w does not require grad
}

// ============================================================================================
// [SECTION] no_grad

TEST_CASE("no_grad: under NoGradGuard results do not require grad and nodes do not track") {
    Tensor x = make_leaf(Shape{2}, {1, 2});
    REQUIRE(grad_enabled());
    {
        NoGradGuard no_grad;
        CHECK_FALSE(grad_enabled());
        Tensor y = ops::mul_scalar(x, 2);
        CHECK_FALSE(y.requires_grad());
        CHECK_FALSE(y.node->tracks_grad);
        CHECK_FALSE(y.node->inputs[0].node());   // an untracked node does not hold its input
        check_values(y, {2, 4});
        {
            NoGradGuard nested;
            CHECK_FALSE(grad_enabled());
        }
        CHECK_FALSE(grad_enabled());   // the inner guard restores the outer state
    }
    CHECK(grad_enabled());
    Tensor z = ops::mul_scalar(x, 2);
    CHECK(z.requires_grad());
    CHECK(z.node->tracks_grad);
    CHECK(z.node->inputs[0].node() == x.node.get());
}

TEST_CASE("no_grad: set_grad_enabled(false) stops tracking and set_grad_enabled(true) restores it") {
    Tensor x = make_leaf(Shape{1}, {3});
    set_grad_enabled(false);
    Tensor y = ops::unary(OP_exp, x);
    set_grad_enabled(true);
    Tensor z = ops::unary(OP_exp, x);
    CHECK_FALSE(y.requires_grad());
    CHECK(z.requires_grad());
    CHECK_THROWS_WITH(backward(y, nullptr), Catch::Matchers::Contains("does not require grad"));
    backward(z, nullptr);
    CHECK(item(grad_of(x)) == Approx(std::exp(3.0)));
}

TEST_CASE("no_grad: the grad mode is restored after backward, and backward's own nodes do not track") {
    Tensor x = make_leaf(Shape{2}, {1, 2});
    Tensor loss = sum_all(ops::mul(x, x));
    int64_t first_backward_id = tape_next_id();
    backward(loss, nullptr);
    CHECK(grad_enabled());
    CHECK_FALSE(grad_of(x).requires_grad());
    CHECK(grad_of(x).node->phase == PHASE_BACKWARD);
    CHECK(grad_of(x).id() >= first_backward_id);
    for (Node* n = tape_first(); n; n = n->tape_next)
        if (n->phase == PHASE_BACKWARD) CHECK_FALSE(n->tracks_grad);
}

// ============================================================================================
// [SECTION] Semantics

TEST_CASE("retain_grad: a non-leaf that retains grad gets its gradient in Output.grad, others do not") {
    std::vector<double> vx = {0.2, -0.4}, vw = {2, 3};
    Tensor x = make_leaf(Shape{2}, vx), w = make_tensor(Shape{2}, vw);
    Tensor h = ops::unary(OP_tanh, x);
    Tensor kept = ops::mul(h, w);
    kept.node->retains_grad = true;
    Tensor loss = sum_all(ops::mul(kept, kept));   // dL/dkept = 2 * kept
    backward(loss, nullptr);
    REQUIRE(grad_of(kept).defined());
    check_values(grad_of(kept), map_values(values_of(kept), [](double k) { return 2 * k; }));
    CHECK_FALSE(grad_of(h).defined());   // not retained
    REQUIRE(grad_of(x).defined());      // and the gradient still flows on to the leaf
    for (int k = 0; k < 2; ++k) {
        double t = std::tanh(vx[k]);
        CHECK(values_of(grad_of(x))[k] == Approx(2 * t * vw[k] * vw[k] * (1 - t * t)).epsilon(1e-12));
    }
}

TEST_CASE("dtype promotion: int64 + float32 gives float32 and records a to node for the int64 input") {
    Tensor i = make_tensor(Shape{3}, {1, 2, 3}, DTYPE_I64);
    Tensor f = make_tensor(Shape{3}, {0.5, 0.25, -1}, DTYPE_F32, true);
    int64_t before = tape_next_id();
    Tensor c = ops::add(i, f);
    CHECK(c.dtype() == DTYPE_F32);
    check_values(c, {1.5, 2.25, 2});
    CHECK(tape_next_id() == before + 2);   // the conversion, then the add
    Node* converted = c.node->inputs[0].node();
    REQUIRE(converted != nullptr);
    CHECK(converted->op == OP_to);
    CHECK(converted->attrs().dtype == DTYPE_F32);
    CHECK(converted->inputs[0].id == i.id());
    CHECK(c.node->inputs[1].id == f.id());

    backward(sum_all(c), nullptr);
    check_values(grad_of(f), {1, 1, 1});
}

TEST_CASE("dtype promotion: float32 + float64 gives float64, the float32 leaf's gradient is float32") {
    Tensor a = make_tensor(Shape{2}, {1.5, 2}, DTYPE_F32, true);
    Tensor b = make_tensor(Shape{2}, {0.1, 0.2}, DTYPE_F64, true);
    Tensor c = ops::mul(a, b);
    CHECK(c.dtype() == DTYPE_F64);
    backward(sum_all(c), nullptr);
    CHECK(grad_of(a).dtype() == DTYPE_F32);
    CHECK(grad_of(b).dtype() == DTYPE_F64);
    check_values(grad_of(a), {0.1, 0.2}, 1e-6);
    check_values(grad_of(b), {1.5, 2});
}

TEST_CASE("dtype: a float64 leaf converted to float32 gets a float64 gradient") {
    Tensor x = make_leaf(Shape{2}, {1, 2});
    Tensor y = ops::to(x, DTYPE_F32);
    REQUIRE(y.dtype() == DTYPE_F32);
    backward(sum_all(ops::mul_scalar(y, 3)), nullptr);
    CHECK(grad_of(x).dtype() == DTYPE_F64);
    check_values(grad_of(x), {3, 3});
}

TEST_CASE("dtype: an int64 tensor times a fractional number becomes float32") {
    Tensor i = make_tensor(Shape{2}, {3, 4}, DTYPE_I64);
    Tensor half = ops::mul_scalar(i, 0.5);
    CHECK(half.dtype() == DTYPE_F32);
    check_values(half, {1.5, 2});
    Tensor doubled = ops::mul_scalar(i, 2);
    CHECK(doubled.dtype() == DTYPE_I64);
    check_values(doubled, {6, 8});
}

TEST_CASE("max over a dim: output 1 holds 1-based int64 indices and needs no grad, the gradient goes to the argmax") {
    Tensor x = make_leaf(Shape{2, 3}, {0.5, 4, -1, 7, 2, 3});
    Tensor values = ops::reduce(OP_max, x, 1, false);
    Tensor indices(values.node.get(), 1);
    CHECK(values.node->outputs.size() == 2);
    CHECK(indices.dtype() == DTYPE_I64);
    CHECK(indices.shape() == (Shape{2}));
    check_values(indices, {2, 1});
    check_values(values, {4, 7});
    CHECK(values.requires_grad());
    CHECK_FALSE(indices.requires_grad());

    backward(sum_all(values), nullptr);
    check_values(grad_of(x), {0, 1, 0, 1, 0, 0});
}

TEST_CASE("max of every element shares the gradient evenly among ties") {
    Tensor x = make_leaf(Shape{4}, {1, 3, 3, 2});
    Tensor m = ops::reduce_all(OP_max, x);
    CHECK(m.node->outputs.size() == 1);
    CHECK(item(m) == 3);
    backward(m, nullptr);
    check_values(grad_of(x), {0, 0.5, 0.5, 0});
}

TEST_CASE("reshape is a view: it shares its input's storage and sees in-place changes") {
    Tensor x = make_tensor(Shape{2, 3}, {1, 2, 3, 4, 5, 6});
    Tensor y = ops::reshape(x, Shape{3, 2});
    CHECK(y.value().storage.get() == x.value().storage.get());
    CHECK(y.shape() == (Shape{3, 2}));
    ops::fill_(x, 9);
    check_values(y, {9, 9, 9, 9, 9, 9});
    Tensor u = ops::unsqueeze(x, 0), s = ops::squeeze(u, 0);
    CHECK(u.value().storage.get() == x.value().storage.get());
    CHECK(s.value().storage.get() == x.value().storage.get());
}

TEST_CASE("detach: shares the values, does not require grad, and cuts the graph") {
    std::vector<double> vx = {1.5, -2};
    Tensor x = make_leaf(Shape{2}, vx);
    Tensor d = ops::unary(OP_detach, x);
    CHECK_FALSE(d.requires_grad());
    CHECK_FALSE(d.node->tracks_grad);
    CHECK(d.value().storage.get() == x.value().storage.get());
    check_values(d, vx);
    // L = sum(detach(x) * x): only the second factor passes a gradient, so dL/dx = x (not 2x).
    backward(sum_all(ops::mul(d, x)), nullptr);
    check_values(grad_of(x), vx);
}

TEST_CASE("the two .grad tensors of c = a + b do not share storage") {
    Tensor a = make_leaf(Shape{3}, {1, 2, 3}), b = make_leaf(Shape{3}, {4, 5, 6});
    backward(sum_all(ops::add(a, b)), nullptr);
    Tensor ga = grad_of(a), gb = grad_of(b);
    REQUIRE(ga.defined());
    REQUIRE(gb.defined());
    CHECK(ga.value().storage.get() != gb.value().storage.get());
    ops::fill_(ga, 100);   // as zero_grad would
    check_values(grad_of(a), {100, 100, 100});
    check_values(grad_of(b), {1, 1, 1});
}

TEST_CASE("a leaf's .grad does not share storage with a retained non-leaf's .grad") {
    // y = x + 0 hands the same gradient tensor to y's retained grad and on to x.
    Tensor x = make_leaf(Shape{2}, {1, 2});
    Tensor y = ops::add_scalar(x, 0);
    y.node->retains_grad = true;
    backward(sum_all(y), nullptr);
    REQUIRE(grad_of(y).defined());
    REQUIRE(grad_of(x).defined());
    CHECK(grad_of(y).value().storage.get() != grad_of(x).value().storage.get());
}

TEST_CASE("in place on a non-leaf under grad: the tensor is rebased onto the in-place node and gradients flow") {
    Tensor x = make_leaf(Shape{2}, {1, 2}), z = make_leaf(Shape{2}, {10, 20});
    Tensor y = ops::mul_scalar(x, 2);
    Node* before = y.node.get();
    ops::add_(y, z, 3);   // y += 3z
    CHECK(y.node.get() != before);
    CHECK(y.node->op == OP_add_);
    check_values(y, {32, 64});
    backward(sum_all(y), nullptr);
    check_values(grad_of(x), {2, 2});
    check_values(grad_of(z), {3, 3});
}

TEST_CASE("in place: adding a tensor that requires grad into a plain tensor makes it part of the graph") {
    Tensor acc = make_tensor(Shape{2}, {0, 0});
    Tensor w = make_leaf(Shape{2}, {1.5, -1});
    ops::add_(acc, ops::mul(w, w));
    CHECK(acc.requires_grad());
    backward(sum_all(acc), nullptr);
    check_values(grad_of(w), {3, -2});
}

TEST_CASE("in place: changing a leaf that requires grad is allowed under no_grad (an optimizer step)") {
    Tensor w = make_leaf(Shape{2}, {1, 2});
    backward(sum_all(ops::mul(w, w)), nullptr);
    {
        NoGradGuard no_grad;
        Tensor step = ops::mul_scalar(grad_of(w), 0.1);
        ops::sub_(w, step);
        Tensor g = grad_of(w);
        ops::zero_(g);
    }
    check_values(w, {0.8, 1.6});
    check_values(grad_of(w), {0, 0});
    CHECK(w.requires_grad());
    CHECK(w.node->is_leaf());
    // A second backward accumulates into the zeroed .grad.
    backward(sum_all(ops::mul(w, w)), nullptr);
    check_values(grad_of(w), {1.6, 3.2});
}

TEST_CASE("in place on a non-leaf: the gradient reaches both the in-place op and the earlier consumers") {
    // y = 2x; z = 3y (recorded before y changes); y += 1; L = sum(z) + sum(y): dL/dx = 2 * (3 + 1)
    Tensor x = make_leaf(Shape{2}, {1, 2});
    Tensor y = ops::mul_scalar(x, 2);
    Tensor z = ops::mul_scalar(y, 3);
    ops::add_(y, make_tensor(Shape{2}, {1, 1}));
    check_values(z, {6, 12});
    check_values(y, {3, 5});
    backward(ops::add(sum_all(z), sum_all(y)), nullptr);
    check_values(grad_of(x), {8, 8});
}

// ============================================================================================
// [SECTION] Recording: groups, phases, source lines

namespace {

SourceLoc fixed_location(void* user) {
    SourceLoc loc;
    loc.file = source_file_intern("rnn_cell.lua");
    loc.line = *static_cast<int*>(user);
    return loc;
}

}  // namespace

TEST_CASE("recording: backward nodes carry the group and the source line of the forward node they differentiate") {
    int line = 12;
    engine_set_locator(fixed_location, &line);
    Tensor x = make_leaf(Shape{2}, {0.5, -0.5});
    Tensor y = ops::unary(OP_tanh, x);
    line = 13;
    Tensor loss = sum_all(y);
    engine_set_locator(nullptr, nullptr);

    CHECK(source_loc_str(y.node->where) == "rnn_cell.lua:12");
    CHECK(source_loc_str(loss.node->where) == "rnn_cell.lua:13");
    CHECK(y.node->phase == PHASE_FORWARD);
    CHECK(y.node->group == 0);
    backward(loss, nullptr);
    REQUIRE(y.node->backward_nodes().size() >= 1);
    bool tanh_backward_found = false;
    for (const Ref<Node>& b : y.node->backward_nodes()) {
        CHECK(b->phase == PHASE_BACKWARD);
        CHECK(b->group == y.id());
        CHECK(source_loc_str(b->where) == "rnn_cell.lua:12");
        tanh_backward_found = tanh_backward_found || b->op == OP_tanh_backward;
    }
    CHECK(tanh_backward_found);
    for (const Ref<Node>& b : loss.node->backward_nodes()) {
        CHECK(b->group == loss.id());
        CHECK(source_loc_str(b->where) == "rnn_cell.lua:13");
    }
    CHECK_THAT(node_describe(y.node.get()),
               Catch::Matchers::Equals("#" + std::to_string(y.id()) + " tanh [2] <- #" + std::to_string(x.id()) +
                                       "  rnn_cell.lua:12"));
}

TEST_CASE("recording: ids start at 1, grow by one per node and are never reused") {
    int64_t next = tape_next_id();
    CHECK(next >= 1);
    Tensor a = make_tensor(Shape{1}, {1});
    CHECK(a.id() == next);
    { Tensor dropped = ops::neg(a); }
    Tensor b = ops::neg(a);
    CHECK(b.id() == next + 2);   // the dropped node's id is not handed out again
    CHECK(tape_find(next + 1) == nullptr);
    CHECK(tape_find(b.id()) == b.node.get());
}

TEST_CASE("recording: tape_version changes when a node is recorded and when one dies") {
    uint64_t v0 = tape_version();
    Tensor a = make_tensor(Shape{1}, {1});
    uint64_t v1 = tape_version();
    CHECK(v1 != v0);
    a = Tensor();
    CHECK(tape_version() != v1);
}

TEST_CASE("graph_collect: the autograd ancestry, live data inputs and the recorded backward nodes, by id") {
    Tensor data = make_tensor(Shape{2}, {1, 2});   // needs no grad: not held by the graph, but alive
    Tensor w = make_leaf(Shape{2}, {3, 4});
    Tensor y = ops::mul(data, w);
    Tensor loss = sum_all(y);
    backward(loss, nullptr);
    NodeList nodes = graph_collect(loss);
    std::vector<int64_t> ids;
    for (const Ref<Node>& n : nodes) ids.push_back(n->id);
    CHECK(std::is_sorted(ids.begin(), ids.end()));
    CHECK(std::adjacent_find(ids.begin(), ids.end()) == ids.end());
    for (const Tensor* t : {&data, &w, &y, &loss}) {
        INFO("node #" << t->id());
        CHECK(std::find(ids.begin(), ids.end(), t->id()) != ids.end());
    }
    int backward_nodes = 0;
    for (const Ref<Node>& n : nodes) backward_nodes += n->phase == PHASE_BACKWARD;
    CHECK(backward_nodes >= 2);   // at least the seed and w's gradient
    CHECK(std::find(ids.begin(), ids.end(), grad_of(w).id()) != ids.end());
}

// ============================================================================================
// [SECTION] Freeing gradients once used

namespace {

void ignore_events(Node*, HookEvent, void*) {}

// Backward through a leaf sliced twice; how many of the pass's backward records have a freed value.
int freed_backward_values(bool observed, Tensor* leaf_grad, std::string* freed_text) {
    Tensor x = make_leaf({3, 2}, {1, 2, 3, 4, 5, 6});
    Tensor total = ops::add(sum_all(ops::select(x, 0, 0)), ops::mul_scalar(sum_all(ops::select(x, 0, 2)), 3));
    int handle = observed ? engine_observe(ignore_events, nullptr) : 0;
    backward(total, nullptr);
    if (observed) engine_unobserve(handle);
    *leaf_grad = grad_of(x);
    int freed = 0, records = 0;
    for (const Ref<Node>& n : graph_collect(total)) {
        if (n->phase != PHASE_BACKWARD) continue;
        ++records;
        REQUIRE(n->outputs.size() > 0);
        if (!value_freed(n->outputs[0].value)) continue;
        ++freed;
        *freed_text = value_format(n->outputs[0].value, 0);
    }
    REQUIRE(records > 4);   // the records stay either way
    return freed;
}

}  // namespace

TEST_CASE("autograd: a pass frees the gradients it used, keeps .grad and the records, and frees nothing while observed") {
    Tensor grad;
    std::string text;
    CHECK(freed_backward_values(false, &grad, &text) > 0);
    check_values(grad, {1, 1, 0, 0, 3, 3});
    CHECK(text.find("freed after the backward pass used it") != std::string::npos);
    CHECK(freed_backward_values(true, &grad, &text) == 0);
    check_values(grad, {1, 1, 0, 0, 3, 3});
}

namespace {

// The backward records the same pass keeps on x's graph, and x's gradient, with the setting as given
// and, when `watched`, an observer that looks at values attached.
int kept_backward_records(bool keep_setting, bool watched, Tensor* leaf_grad) {
    bool saved = engine_keeps_backward_graph_setting();
    engine_keep_backward_graph(keep_setting);
    Tensor x = make_leaf({2, 2}, {1, 2, 3, 4});
    Tensor y = x;
    for (int i = 0; i < 20; ++i) y = ops::unary(OP_tanh, ops::mm(x, y));
    Tensor loss = sum_all(y);
    int handle = watched ? engine_observe(ignore_events, nullptr) : 0;
    int64_t live_before = tape_live_count();
    backward(loss, nullptr);
    if (watched) engine_unobserve(handle);
    if (!keep_setting && !watched) CHECK(tape_live_count() - live_before <= 1);   // x.grad, nothing else
    engine_keep_backward_graph(saved);
    *leaf_grad = grad_of(x);
    int records = 0;
    for (const Ref<Node>& n : graph_collect(loss)) records += n->phase == PHASE_BACKWARD;
    return records;
}

}  // namespace

TEST_CASE("autograd: with the backward graph not kept (a script), no backward node outlives the pass, unless "
          "an observer looks at values; the gradient is the same") {
    Tensor kept, dropped, watched;
    CHECK(kept_backward_records(true, false, &kept) > 40);
    CHECK(kept_backward_records(false, false, &dropped) == 0);
    CHECK(kept_backward_records(false, true, &watched) > 40);
    std::vector<double> want = values_of(kept);
    check_values(dropped, want);
    check_values(watched, want);
}
