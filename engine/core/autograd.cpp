// autograd.cpp: backward() and graph walks.
//
// Ids grow in record order, and a node's inputs were recorded before it, so visiting the graph
// in decreasing id order visits every node after all the nodes that consume it: no separate
// topological sort is needed. Each node's backward rule calls ops, recorded like any others with
// phase BACKWARD and group = the node, and kept alive by it (its `backward_nodes`). After a
// node's rule has run, observers get HOOK_GROUP_DONE (the debugger's per-group stop) and may
// replace the gradients before they flow on to the node's inputs.
#include <algorithm>
#include <unordered_map>

#include "function.h"
#include "tape.h"

namespace td {

namespace {

struct AutogradState {
    uint32_t walk_mark = 0;         // Node::walk_mark of the latest walk
    BackwardPass* pass = nullptr;   // the pass backward() is running
    uint64_t passes_started = 0;    // numbers the passes (BackwardPass::serial)
    LastLoss last_loss;             // engine_last_loss
};
AutogradState autograd;   // constant-initialized, so usable from any static initializer

// Every node reachable from `root` through held input edges (the autograd graph), by decreasing
// id: the order backward visits them. Sorted as (id, node) pairs, so that the sort reads no node
// (a long unroll's nodes are far out of cache by then).
void collect_graph_by_walk_and_sort(Node* root, std::vector<Node*>& out) {
    // Scratch lists kept between passes (one pass runs at a time): a pass over a tiny graph, as a
    // scalar loop makes by the million, allocates nothing for them. A big pass's are given back.
    static std::vector<std::pair<int64_t, Node*>>& found = *new std::vector<std::pair<int64_t, Node*>>;
    static std::vector<Node*>& stack = *new std::vector<Node*>;
    found.clear();
    stack.assign(1, root);
    uint32_t mark = ++autograd.walk_mark;
    root->walk_mark = mark;
    while (!stack.empty()) {
        Node* n = stack.back();
        stack.pop_back();
        found.emplace_back(n->id, n);
        for (Edge& e : n->inputs) {
            Node* in = e.node();
            if (in && in->walk_mark != mark) {
                in->walk_mark = mark;
                stack.push_back(in);
            }
        }
    }
    std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    out.reserve(found.size());
    for (const auto& f : found) out.push_back(f.second);
    constexpr size_t KEEP = 1 << 12;
    if (found.capacity() > KEEP) std::vector<std::pair<int64_t, Node*>>().swap(found);
    if (stack.capacity() > KEEP) std::vector<Node*>().swap(stack);
}

constexpr int SWEEP_AHEAD = 8;           // nodes (Node::prefetch_below)
constexpr size_t SWEEP_READS = 3 * 64;   // the sweep reads a node's first line and its input edges

// The same list, found by sweeping the tape down from `root`: a node is in the graph when a node
// of the graph above it marked it as an input. Live nodes lie on the tape in id order, and in
// memory in record order (BlockSlabs), so the sweep, asking for the nodes below ahead
// (Node::prefetch_below), streams through memory where the walk above follows one edge at a time
// to a cold node. The sweep also passes the live nodes that are not in the graph; when those
// outnumber the graph's (another graph kept alive, a model's parameters far down the tape), it
// gives up, so it never costs more than a few times the walk: false, `out` emptied.
bool collect_graph_by_tape_sweep(Node* root, std::vector<Node*>& out) {
    uint32_t mark = ++autograd.walk_mark;
    root->walk_mark = mark;
    size_t marked_below = 1;   // marked nodes the sweep has not reached yet
    size_t passed = 0;         // live nodes passed that are not in the graph
    for (Node* n = root; n && marked_below > 0; n = n->tape_prev) {
        n->prefetch_below(SWEEP_AHEAD, SWEEP_READS);
        if (n->walk_mark != mark) {
            if (++passed > 2 * out.size() + 256) break;
            continue;
        }
        --marked_below;
        out.push_back(n);
        for (Edge& e : n->inputs) {
            Node* in = e.node();
            if (in && in->walk_mark != mark) {
                in->walk_mark = mark;
                ++marked_below;
            }
        }
    }
    if (marked_below == 0) return true;
    out.clear();
    return false;
}

void collect_graph_by_id_descending(Node* root, std::vector<Node*>& out) {
    if (!collect_graph_by_tape_sweep(root, out)) collect_graph_by_walk_and_sort(root, out);
}

// A long unroll's nodes are far out of cache when backward reaches them (the visits read and write
// several of each node's cache lines): visit k asks for the node a few visits ahead.
void prefetch_visits_ahead(const std::vector<Node*>& order, size_t k) {
    constexpr size_t NODE_AHEAD = 8;   // 4 to 16 measured the same
    if (k + NODE_AHEAD < order.size()) order[k + NODE_AHEAD]->prefetch();
}

// The pass's state, restored on every exit (an error in a rule or an observer included).
struct BackwardScope {
    bool saved_grad_mode = grad_enabled();
    RecordingContext saved_context = engine_recording();
    std::vector<Node*>& order;
    BackwardPass pass;

    BackwardScope(std::vector<Node*>& o, Node* root, bool create_graph) : order(o) {
        set_grad_enabled(create_graph);
        engine_recording().phase = PHASE_BACKWARD;
        pass.serial = ++autograd.passes_started;
        pass.root = root;
        pass.order = &order;
        autograd.pass = &pass;
    }
    ~BackwardScope() {
        autograd.pass = nullptr;
        for (Node* n : order)
            for (Output& out : n->outputs) out.pending = Tensor();
        set_grad_enabled(saved_grad_mode);
        engine_recording() = saved_context;
    }
};

void fail_if_saved_changed(Node* n) {
    static const uint32_t SAVES_INPUT[] = {OPF_SAVES_IN0, OPF_SAVES_IN1, OPF_SAVES_IN2, OPF_SAVES_IN3};
    static const char* const INPUT_NAMES[] = {"its first input", "its second input", "its third input", "its fourth input"};
    static const uint32_t SAVES_OUTPUT[] = {OPF_SAVES_OUT0, OPF_SAVES_OUT1};
    static const char* const OUTPUT_NAMES[] = {"its output", "its second output"};
    uint32_t flags = n->info().flags;
    const char* what = nullptr;
    uint32_t then = 0, now = 0;
    for (int i = 0; i < 4 && i < n->inputs.size(); ++i) {
        const Edge& e = n->inputs[i];
        if ((flags & SAVES_INPUT[i]) && e.value().storage->version != e.version) {
            what = INPUT_NAMES[i];
            then = e.version;
            now = e.value().storage->version;
        }
    }
    for (int i = 0; i < 2 && i < n->outputs.size(); ++i) {
        const Output& out = n->outputs[i];
        if ((flags & SAVES_OUTPUT[i]) && out.value.storage->version != out.version) {
            what = OUTPUT_NAMES[i];
            then = out.version;
            now = out.value.storage->version;
        }
    }
    if (what)
        engine_fail("backward: %s #%lld (%s) needs %s, which an in-place op changed after it was saved "
                    "(version %u, now %u)",
                    n->name(), static_cast<long long>(n->id), source_loc_str(n->where).c_str(), what, then, now);
}

// Store gradient g into out.grad (a leaf's, or a retained one). The first time, the gradient's
// storage is taken over if this pass made it and nobody else took it; otherwise it is copied, so
// that two .grad tensors never share memory. Later passes add into it in place.
void accumulate_grad(Output& out, const Tensor& g, uint64_t first_serial) {
    if (out.grad.defined()) {
        ops::add_(out.grad, g);
        return;
    }
    // Taken over only when it is all of its storage in row-major order: a view (an expand of a sum's
    // gradient, a narrow of cat's) is copied, so .grad is contiguous and owns its bytes, as PyTorch's.
    const Value& v = g.value();
    Storage* s = v.storage.get();
    size_t bytes = static_cast<size_t>(v.numel()) * dtype_size(v.dtype);
    bool whole = !v.strided() && v.offset == 0 && s->bytes == storage_rounded_bytes(bytes, s->device);
    bool fresh = whole && s->serial >= first_serial && !s->grad_owned && g.dtype() == out.value.dtype;
    if (fresh) {
        out.grad = g;
    } else {
        Tensor copy = ops::unary(OP_clone, g);
        out.grad = copy.dtype() == out.value.dtype ? copy : ops::to(copy, out.value.dtype);
    }
    out.grad.value().storage->grad_owned = true;
}

// ---------------------------------------------------------------------------------------------
// Freeing gradients once used (rules 11 and 13 of docs/design.md)
//
// Where a pass keeps its backward nodes on record (its forward node's backward_nodes:
// engine_backward_graph_kept), without this each one's bytes would live as long as the forward graph: a loop that slices a sequence per step
// (select's gradient is padded to the whole input) would keep O(T^2) bytes after backward. So a
// pass frees a gradient once it has used it, as PyTorch does, when all of these hold:
//  - the pass records no graph (create_graph: the gradients are forward values of a new graph)
//    and no observer looks at values (a debugger with a breakpoint or stepping, the viewer open:
//    they keep every value inspectable; freeze's recorder notes the ops as they run and needs
//    no value afterwards);
//  - the node was recorded by this pass, tracks no gradient, and is held by its record (a node
//    that is not dies by itself once nothing reaches it);
//  - nothing but its record reaches it: node refcount 1, so no Tensor handle (a pending
//    gradient, a rule's result, a .grad, an autograd.grad result, a value a hook kept or Lua holds).
// Freeing drops the storage of the node's outputs (value_freed(); shape and dtype stay). Once it
// has run, a backward node's input edges are read by nobody (it has no backward rule to run), so
// their storage is dropped at the same check whether or not its outputs can go; the bytes
// themselves go when the last value sharing the storage (a view of it, an in-place write into it)
// is dropped. The pass checks a node when it can have become unreachable: each node of a group
// once the group's rule has run and its gradients have flowed on, and each gradient handle the
// pass lets go of. Each check is O(1): the pass stays O(nodes).
struct GradientFreeing {
    bool create_graph = false;
    int64_t first_id = 0;   // nodes with ids from here on were recorded by this pass

    bool applies_to(const Node* b) const {
        return !create_graph && b->id >= first_id && b->phase == PHASE_BACKWARD && !b->tracks_grad &&
               b->held_by_record && !engine_values_watched();
    }
    // `holders_besides_record`: references to b the caller still holds (they go right after).
    void check(Node* b, int holders_besides_record = 0) const {
        if (!applies_to(b)) return;
        for (Edge& e : b->inputs) e.free_own_storage();
        if (b->refcount > 1 + holders_besides_record) return;
        for (Output& out : b->outputs) out.value.storage = Ref<Storage>();
        for (const Ref<Node>& inner : b->inner_nodes()) check(inner.get());   // a custom backward's own ops
    }
    // The pass lets go of gradient t: t is empty afterwards.
    void let_go(Tensor& t) const {
        Ref<Node> held = std::move(t.node);
        t = Tensor();
        if (held) check(held.get(), 1);
    }
};

// ---------------------------------------------------------------------------------------------
// Gradients of slices (BackwardCall::grad_input_slice)
//
// x[t] in a loop over a sequence's steps gives x a gradient per step that is zero outside step
// t's slice. Padded to x's shape and summed, T steps cost T whole-size buffers and additions
// (O(T^2) for the sequence); added into the one buffer that holds x's gradient, slice by slice,
// they cost what the slices do. The pass takes slices only where nobody can look at a rule's
// gradients before they are summed (no observer that looks at values: engine_values_watched; a
// freeze recording records the in-place additions, and its plan replays them) and no graph of them
// is made (create_graph).

// Whether a gradient may be added into `pending` in place: add_to_pending made it in this pass
// (Node::pass_made_sum, an id from this pass on) and its target has not been visited yet, so
// nothing but this pending reaches it. At the visit the flag is cleared: from then on the rule
// has it as its incoming gradient and may pass it on unchanged, or a view of it, to several inputs
// (add's rule gives it to both), where adding into it for one would add into the others too.
bool pass_holds_alone(const Tensor& pending, const Tensor& g, int64_t first_id) {
    const Node* p = pending.node.get();
    const Value& v = pending.value();
    return p->pass_made_sum && p->id >= first_id && p->outputs.size() == 1 && !v.strided() && v.offset == 0 &&
           v.dtype == g.dtype();
}

// target.pending += g, g being the whole gradient or (slice.set) its values in one slice. With
// `in_place` (nobody looks at the sums and no graph of them is made), a sum the pass holds alone
// takes g in place: summing a weight's T gradients costs T additions and no new buffers.
void add_to_pending(Output& target, const Tensor& g, const GradSlice& slice, const Shape& full, bool in_place,
                    int64_t first_id, const GradientFreeing& freeing) {
    if (!target.pending.defined() && !slice.set) {
        target.pending = g;
        return;
    }
    if (in_place && target.pending.defined() && pass_holds_alone(target.pending, g, first_id)) {
        Tensor region = slice.set ? ops::narrow(target.pending, slice.dim, slice.start, g.shape()[slice.dim]) : target.pending;
        ops::add_(region, g);
        return;
    }
    Tensor whole = slice.set ? ops::narrow_backward(g, slice.dim, slice.start, full) : g;
    Tensor before = std::move(target.pending);
    target.pending = before.defined() ? ops::add(before, whole) : whole;
    target.pending.node->pass_made_sum = true;
    freeing.let_go(before);
}

// The shape a gradient given for an input of shape `full` must have: full, or full with the
// slice's length along its dim (within the input).
bool gradient_fits(const Tensor& g, const GradSlice& slice, const Shape& full) {
    if (!slice.set) return g.shape() == full;
    const Shape& s = g.shape();
    if (s.ndim != full.ndim || slice.dim < 0 || slice.dim >= full.ndim) return false;
    for (int d = 0; d < s.ndim; ++d)
        if (d != slice.dim && s.dims[d] != full.dims[d]) return false;
    return slice.start >= 0 && s.dims[slice.dim] <= full.dims[slice.dim] - slice.start;
}

// Tensor hooks, by node. Immortal, as the engine's other singletons.
struct HookEntry {
    int64_t handle;
    int output;
    GradHook hook;
};
struct HookTable {
    std::unordered_map<const Node*, std::vector<HookEntry>> by_node;
    std::unordered_map<int64_t, Node*> node_of_handle;
    int64_t next_handle = 1;
};
HookTable& hook_table() {
    static HookTable* table = new HookTable();
    return *table;
}

// Replace each pending gradient of n's outputs by what its hooks make of it. The hooks are copied
// first: one may add or remove hooks, or drop the last handle of a tensor.
void run_grad_hooks(Node* n, const GradientFreeing& freeing) {
    auto found = hook_table().by_node.find(n);
    if (found == hook_table().by_node.end()) return;
    std::vector<HookEntry> hooks = found->second;
    for (const HookEntry& h : hooks) {
        Output& out = n->outputs[h.output];
        if (!out.pending.defined()) continue;
        Tensor replaced = h.hook(out.pending);
        if (!replaced.defined()) continue;
        if (replaced.shape() != out.pending.shape() || replaced.dtype() != out.pending.dtype())
            engine_fail("register_hook: the hook on tensor #%lld returned a %s %s gradient for a %s %s one (a hook "
                        "returns a gradient of the same shape and dtype, or nil)",
                        static_cast<long long>(n->id), replaced.shape().str().c_str(), dtype_name(replaced.dtype()),
                        out.pending.shape().str().c_str(), dtype_name(out.pending.dtype()));
        Tensor before = std::move(out.pending);
        out.pending = replaced;
        freeing.let_go(before);
    }
}

}  // namespace

void BackwardCall::grad_input_slice(int i, const Tensor& g, int dim, int64_t start) {
    if (slices) {
        grad_input[i] = g;
        slices[i] = GradSlice{true, dim, start};
    } else {
        grad_input[i] = ops::narrow_backward(g, dim, start, input_shape(i));
    }
}

int64_t grad_hook_add(const Tensor& t, GradHook hook) {
    if (!t.defined()) engine_fail("register_hook: not a tensor");
    HookTable& table = hook_table();
    int64_t handle = table.next_handle++;
    table.by_node[t.node.get()].push_back(HookEntry{handle, t.output, std::move(hook)});
    table.node_of_handle[handle] = t.node.get();
    t.node->has_grad_hooks = true;
    return handle;
}

bool grad_hook_remove(int64_t handle) {
    HookTable& table = hook_table();
    auto owner = table.node_of_handle.find(handle);
    if (owner == table.node_of_handle.end()) return false;
    Node* node = owner->second;
    table.node_of_handle.erase(owner);
    std::vector<HookEntry>& hooks = table.by_node[node];
    auto at = std::find_if(hooks.begin(), hooks.end(), [&](const HookEntry& h) { return h.handle == handle; });
    GradHook removed = std::move(at->hook);   // destroyed last, with the table consistent
    hooks.erase(at);
    if (hooks.empty()) {
        table.by_node.erase(node);
        node->has_grad_hooks = false;
    }
    return true;
}

void grad_hooks_drop(Node* node) {
    HookTable& table = hook_table();
    auto found = table.by_node.find(node);
    if (found == table.by_node.end()) return;
    std::vector<HookEntry> hooks = std::move(found->second);   // destroyed last, with the table consistent
    table.by_node.erase(found);
    for (const HookEntry& h : hooks) table.node_of_handle.erase(h.handle);
    node->has_grad_hooks = false;
}

const BackwardPass* engine_backward_pass() { return autograd.pass; }

void engine_backward_pass_replay(BackwardPass* pass) {
    if (pass && autograd.pass) engine_fail("backward: a replayed group inside a running backward pass");
    autograd.pass = pass;
}

Node* backward_pass_find(int64_t id) {
    if (!autograd.pass || !autograd.pass->order) return nullptr;
    const std::vector<Node*>& order = *autograd.pass->order;   // ids decreasing
    auto at = std::lower_bound(order.begin(), order.end(), id, [](const Node* n, int64_t want) { return n->id > want; });
    return at != order.end() && (*at)->id == id ? *at : nullptr;
}

const LastLoss& engine_last_loss() { return autograd.last_loss; }

namespace {

// backward()'s errors for what it was called with (before anything runs).
void check_backward_call(const Tensor& root, const Tensor* grad) {
    if (!root.defined()) engine_fail("backward: not a tensor");
    if (const BackwardPass* running = autograd.pass)   // pending gradients live on the nodes: two passes would mix them
        engine_fail("backward: the backward pass from #%lld has not finished (it is paused at #%lld); a second "
                    "pass can start when it ends",
                    static_cast<long long>(running->root->id),
                    static_cast<long long>(running->group.node ? running->group.node->id : running->root->id));
    if (!root.requires_grad())
        engine_fail("backward: tensor #%lld does not require grad (nothing that made it has requires_grad=true)",
                    static_cast<long long>(root.id()));
    bool has_grad = grad && grad->defined();
    if (has_grad && grad->shape() != root.shape())
        engine_fail("backward: the gradient has shape %s but the tensor has shape %s", grad->shape().str().c_str(),
                    root.shape().str().c_str());
    if (!has_grad && root.numel() != 1)
        engine_fail("backward: tensor #%lld has shape %s; backward() without a gradient needs a single element "
                    "(pass a gradient of the same shape)",
                    static_cast<long long>(root.id()), root.shape().str().c_str());
}

// Whether n's rule reads values saved in the forward: an op flagged OPF_SAVES_*, or a
// torch.Function whose forward called save_for_backward.
bool rule_reads_saved(const Node* n) {
    constexpr uint32_t SAVES = OPF_SAVES_IN0 | OPF_SAVES_IN1 | OPF_SAVES_IN2 | OPF_SAVES_IN3 | OPF_SAVES_OUT0 | OPF_SAVES_OUT1;
    if (n->info().flags & SAVES) return true;
    return n->op == OP_function && n->custom() && n->custom()->saves_tensors();
}

// PyTorch's error for a second pass through a graph whose saved values an earlier pass released
// (backward() without retain_graph): checked for every node of the pass before any gradient
// moves, so a refused pass changes no .grad. With released_rerun, no error: the first such node's
// id goes there (0: none).
void fail_if_released(const std::vector<Node*>& order, int64_t* released_rerun) {
    if (released_rerun) *released_rerun = 0;
    for (const Node* n : order) {
        if (!n->saved_released || !n->tracks_grad) continue;
        if (released_rerun) {
            *released_rerun = n->id;
            return;
        }
        engine_fail("backward: trying to backward through the graph a second time: #%lld %s (%s) saved values for its "
                    "rule, and an earlier backward() through it released them (as PyTorch frees saved tensors). Pass "
                    "{retain_graph = true} to the earlier backward() to go through the graph again, or compute the "
                    "forward again",
                    static_cast<long long>(n->id), n->name(), source_loc_str(n->where).c_str());
    }
}

// A loss (backward() without a gradient): the training log reads it at the optimizer's step.
void note_last_loss(const Tensor& root) {
    const Value& v = root.value();
    bool on_cpu = !value_freed(v) && v.device() == DEVICE_CPU;
    autograd.last_loss.value = on_cpu ? value_get(v, 0) : 0;
    autograd.last_loss.node_id = on_cpu ? 0 : root.id();
    autograd.last_loss.output = root.output;
    ++autograd.last_loss.count;
}

// At n's visit its outputs' gradients are complete: they go to its hooks, to the viewer's record
// of what arrived, to a capture (torch.autograd.grad) or else to .grad (a leaf's, or a retained
// one; observers of HOOK_GRAD_STORED hear of each).
void hand_over_complete_gradients(Node* n, BackwardPass& pass, const BackwardOptions& options,
                                  uint64_t first_serial, const GradientFreeing& freeing) {
    for (Output& out : n->outputs)   // the visit hands its sums to hooks, .grad and the rule
        if (out.pending.defined()) out.pending.node->pass_made_sum = false;
    if (n->has_grad_hooks) run_grad_hooks(n, freeing);
    for (int i = 0; i < n->outputs.size(); ++i) arrived_gradient_complete(n, i, n->outputs[i].pending);

    if (options.capture) {   // torch.autograd.grad: the wanted gradients are complete at their node's visit
        for (size_t c = 0; c < options.capture->size(); ++c) {
            const Tensor& want = (*options.capture)[c];
            if (want.node.get() == n) (*options.captured)[c] = n->outputs[want.output].pending;
        }
        return;
    }
    for (int i = 0; i < n->outputs.size(); ++i) {
        Output& out = n->outputs[i];
        if (!out.pending.defined() || !out.requires_grad || !(n->is_leaf() || n->retains_grad)) continue;
        int64_t first_id = tape_next_id();
        accumulate_grad(out, out.pending, first_serial);
        pass.stored = GradStored{i, &out.pending, first_id, tape_next_id()};
        engine_notify(n, HOOK_GRAD_STORED);
        pass.stored = GradStored();
    }
}

// The lists a node's rule fills, kept between visits (no allocation per node).
struct RuleCall {
    std::vector<Tensor> grad_outputs, grad_inputs;
    std::vector<GradSlice> slices;
};

// Run n's backward rule on the gradients that arrived at its outputs (taken from them), then
// HOOK_GROUP_DONE, where observers see (and may replace) grad_inputs before they flow on. Slices
// are taken only where nobody can look at the gradients (sums_in_place).
BackwardCall run_backward_rule(Node* n, BackwardPass& pass, RuleCall& r, bool sums_in_place) {
    fail_if_saved_changed(n);
    r.grad_outputs.assign(n->outputs.size(), Tensor());
    for (int i = 0; i < n->outputs.size(); ++i) r.grad_outputs[i] = n->outputs[i].pending;
    r.grad_inputs.assign(n->inputs.size(), Tensor());
    r.slices.assign(n->inputs.size(), GradSlice());
    BackwardCall call{n, r.grad_outputs.data(), r.grad_inputs.data(), sums_in_place ? r.slices.data() : nullptr};
    pass.group = BackwardGroup{n, r.grad_outputs.data(), r.grad_inputs.data()};
    n->info().backward_rule(call);
    for (Output& out : n->outputs) out.pending = Tensor();
    for (int i = 0; i < n->inputs.size(); ++i) {   // an observer attached during the rule sees whole gradients
        if (!r.slices[i].set || !engine_values_watched() || !r.grad_inputs[i].defined()) continue;
        r.grad_inputs[i] = ops::narrow_backward(r.grad_inputs[i], r.slices[i].dim, r.slices[i].start, call.input_shape(i));
        r.slices[i] = GradSlice();
    }
    engine_notify(n, HOOK_GROUP_DONE);   // observers see (and may replace) grad_inputs before it flows
    pass.group = BackwardGroup();
    return call;
}

// n's rule's gradients flow on: each is added to the pending gradient of the input it is for
// (a tensor used twice: its gradients add up, recorded in its own group).
void send_gradients(Node* n, const BackwardCall& call, RuleCall& r, bool sums_in_place, const GradientFreeing& freeing) {
    for (int i = 0; i < n->inputs.size(); ++i) {
        if (!r.grad_inputs[i].defined() || !call.needs_grad(i)) continue;
        Edge& e = n->inputs[i];
        if (!gradient_fits(r.grad_inputs[i], r.slices[i], e.value().shape))
            engine_fail("backward: the rule of %s gave a gradient of shape %s for an input of shape %s",
                        n->name(), r.grad_inputs[i].shape().str().c_str(), e.value().shape.str().c_str());
        engine_recording().group_node = e.node();
        arrived_gradient_sent(e.node(), e.output, r.grad_inputs[i], n);
        add_to_pending(e.node()->outputs[e.output], r.grad_inputs[i], r.slices[i], e.value().shape, sums_in_place,
                       freeing.first_id, freeing);
        engine_recording().group_node = n;
    }
}

}  // namespace

void backward(const Tensor& root, const Tensor* grad, const BackwardOptions& options) {
    check_backward_call(root, grad);
    bool has_grad = grad && grad->defined();

    std::vector<Node*> order;
    collect_graph_by_id_descending(root.node.get(), order);
    fail_if_released(order, options.released_rerun);
    if (!has_grad) {
        note_last_loss(root);
        engine_notify(root.node.get(), HOOK_LOSS);
    }
    bool release = !options.retain_graph && !options.create_graph;
    BackwardScope scope(order, root.node.get(), options.create_graph);
    if (options.captured) options.captured->assign(options.capture->size(), Tensor());
    BackwardPass& pass = scope.pass;
    for (Node* n : order)
        if (n->group_records) n->group_records->backward_nodes.clear();
    uint64_t first_serial = storage_next_serial();
    GradientFreeing freeing;
    freeing.create_graph = options.create_graph;
    freeing.first_id = tape_next_id();

    engine_recording().group_node = root.node.get();
    Tensor seed = has_grad ? *grad : ops::create(OP_ones, root.shape(), root.dtype(), 1, root.value().device());
    root.node->outputs[root.output].pending = seed;
    arrived_gradient_sent(root.node.get(), root.output, seed, nullptr);

    RuleCall rule;
    for (size_t k = 0; k < order.size(); ++k) {
        Node* n = order[k];
        pass.position = k;
        prefetch_visits_ahead(order, k);
        bool any = false;
        for (const Output& out : n->outputs) any = any || out.pending.defined();
        if (!any) continue;
        engine_recording().group_node = n;
        hand_over_complete_gradients(n, pass, options, first_serial, freeing);
        if (!n->tracks_grad) {   // a leaf: its gradient has reached .grad (or a capture)
            for (Output& out : n->outputs) freeing.let_go(out.pending);
            continue;
        }
        bool sums_in_place = !options.create_graph && !engine_values_watched();   // and slices are taken
        BackwardCall call = run_backward_rule(n, pass, rule, sums_in_place);
        if (release && rule_reads_saved(n)) n->saved_released = true;
        send_gradients(n, call, rule, sums_in_place, freeing);
        for (Tensor& g : rule.grad_outputs) freeing.let_go(g);   // n's rule has used them
        for (Tensor& g : rule.grad_inputs) freeing.let_go(g);    // each is a pending gradient now, or added into one
        for (const Ref<Node>& b : n->backward_nodes()) freeing.check(b.get());   // the rule's intermediates
    }
    pass.position = order.size();
    engine_notify(root.node.get(), HOOK_PASS_DONE);   // a step's end, for its summary (repl/debugger/debugger_diff.cpp)
}

// The autograd graph of t, plus ancestors it does not hold but that are still alive (inputs that
// need no gradient, like data), plus every recorded backward node of those, plus the ops that
// custom functions among them ran inside (their inner nodes). The walk stops at a history start
// (Node::history_start: a parameter made under no_grad, detach()'s output): the node is part of
// the graph, what made it is not.
NodeList graph_collect(const Tensor& t) {
    std::vector<Node*> all;
    if (!t.defined()) return NodeList();
    std::unordered_map<int64_t, Node*> live;
    for (Node* n = tape_first(); n; n = n->tape_next) live[n->id] = n;
    uint32_t mark = ++autograd.walk_mark;
    std::vector<Node*> stack{t.node.get()};
    t.node->walk_mark = mark;
    while (!stack.empty()) {
        Node* n = stack.back();
        stack.pop_back();
        all.push_back(n);
        for (const Ref<Node>& inner : n->inner_nodes()) all.push_back(inner.get());
        for (const Ref<Node>& b : n->backward_nodes()) {
            all.push_back(b.get());
            for (const Ref<Node>& inner : b->inner_nodes()) all.push_back(inner.get());
        }
        if (n->phase == PHASE_BACKWARD || n->history_start) continue;
        for (Edge& e : n->inputs) {
            Node* in = e.node();
            if (!in) {
                auto found = live.find(e.id);
                in = found == live.end() ? nullptr : found->second;
            }
            if (in && in->walk_mark != mark) {
                in->walk_mark = mark;
                stack.push_back(in);
            }
        }
    }
    std::sort(all.begin(), all.end(), [](const Node* a, const Node* b) { return a->id < b->id; });
    all.erase(std::unique(all.begin(), all.end()), all.end());
    return NodeList(all.begin(), all.end());
}

}  // namespace td
