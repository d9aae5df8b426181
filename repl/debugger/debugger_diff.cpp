// debugger_diff.cpp: :diff and dbg.diff: what changed between two training steps.
//
// A step is the forward ops recorded since the previous backward pass ended, plus the backward
// pass that ends it (loss:backward()). While someone asked for it (:diff, dbg.diff, the viewer's
// diff option), an engine observer keeps a compact summary of each step: per node its key (the
// Lua file:line, the op and the occurrence of that (line, op) within the step, inside the module
// scope it ran in; a parameter by its name), its shape, a few statistics of its value and of its gradient, and a
// fixed sample of SAMPLE_SIZE values of each. Two finished steps and the one being recorded are
// kept: O(nodes of a step), whatever the run's length; the nodes themselves are not held.
// :diff compares the newest step with the one before (at a stop in the middle of a step: what
// has been recorded so far of this step with the same part of the previous one).
//
// [SECTION] summaries   what a step keeps, and when it is taken (the observer)
// [SECTION] comparison  new and missing nodes, changed shapes, values and gradients that moved
// [SECTION] text        :diff
// [SECTION] lua         dbg.diff
#include <lua.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "debugger.h"
#include "debugger_commands.h"
#include "debugger_internal.h"
#include "node_names.h"
#include "plan.h"
#include "tape.h"
#include "tapedeck_lua.h"
#include "viewer.h"
#include "lua_util.h"

using namespace td;

namespace {

// ============================================================================================
// [SECTION] summaries

constexpr int SAMPLE_SIZE = 32;   // values kept per tensor: all of a small one, else evenly spaced
constexpr int TOP_SUMMARY = 5;    // rows per list in :diff
constexpr int TOP_FULL = 10;      // rows in :diff values / :diff grads and in dbg.diff()
constexpr int GROUPS_SUMMARY = 8; // line groups per list in :diff (:diff nodes shows them all)
// Most nodes a step's summary holds (about half a kilobyte each): a loop that records forward ops
// with autograd on and never calls backward() would otherwise grow one step without end.
constexpr size_t STEP_NODES_MOST = 200000;

struct ValueSummary {
    bool present = false;
    int64_t count = 0;
    double norm = 0, mean = 0, absmax = 0;
    std::vector<float> sample;   // elements at i * numel / SAMPLE_SIZE (all when numel <= SAMPLE_SIZE)
};

struct NodeSummary {
    std::string key;         // what matches it across steps
    int64_t id = 0;
    std::string op;          // Node::shown_op()
    SourceLoc where;
    int scope = 0;
    int occurrence = 1;      // of (scope, where, op) within the step, from 1
    bool parameter = false;
    std::string name;        // the script's name, when it had one at the end of the step
    std::string shape;       // "[4,8]"
    ValueSummary value, grad;
};

struct StepSummary {
    uint64_t pass = 0;       // BackwardPass::serial of the pass that ends it; 0 while in forward
    int64_t root_id = 0;
    bool complete = false;   // its pass has finished
    bool overflowed = false; // it recorded more than STEP_NODES_MOST nodes: dropped, not compared
    bool started_late = false;   // summaries were turned on in the middle of it: not kept
    std::vector<NodeSummary> nodes;   // in record order (leaves the pass reached at the end)
    std::unordered_map<int64_t, size_t> index_of_id;
    std::unordered_map<std::string, int> occurrences;   // (scope, line, op) -> how many so far
};

struct DiffState {
    bool on = false;
    int observer = 0;
    StepSummary current;              // being recorded
    std::vector<StepSummary> done;    // the newest finished steps, oldest first, at most 2
    int steps_seen = 0;               // finished since summaries were turned on
    uint64_t version = 1;             // bumped when `done` changes (the viewer asks for marks again)
};

DiffState& state() {
    static DiffState* s = new DiffState;   // immortal, as the debugger's state
    return *s;
}

// One pass over the elements (contiguous, on the host): norm, mean and absmax over the finite
// ones (as tensor_stats, whose histogram and std this does not need), and the sample.
template <class T>
void summarize_elements(const T* p, int64_t n, ValueSummary& s) {
    // Lanes in the element type (GCC's and Clang's vector extension: vector adds whatever
    // the target flags), added into doubles every CHUNK elements. A NaN or infinity makes the
    // sums non-finite, and then a second pass leaves such elements out.
    constexpr int LANES = 16 / sizeof(T) * 2;   // two SSE registers' worth
    typedef T Lanes __attribute__((vector_size(LANES * sizeof(T))));
    constexpr int64_t CHUNK = 1024;
    double sum[4] = {0, 0, 0, 0}, sumsq[4] = {0, 0, 0, 0}, absmax[4] = {0, 0, 0, 0};
    int64_t i = 0;
    while (i + LANES <= n) {
        Lanes lane_sum = {}, lane_squares = {}, lane_max = {};
        int64_t end = std::min(n - (n - i) % LANES, i + CHUNK);
        for (; i < end; i += LANES) {
            Lanes x;
            memcpy(&x, p + i, sizeof x);
            Lanes a = x < 0 ? -x : x;
            lane_sum += x;
            lane_squares += x * x;
            lane_max = lane_max < a ? a : lane_max;
        }
        T out_sum[LANES], out_squares[LANES], out_max[LANES];   // copied out: a lane read in
        memcpy(out_sum, &lane_sum, sizeof out_sum);             // place keeps the vectors in memory
        memcpy(out_squares, &lane_squares, sizeof out_squares);
        memcpy(out_max, &lane_max, sizeof out_max);
        for (int j = 0; j < LANES; ++j) {
            sum[j % 4] += static_cast<double>(out_sum[j]);
            sumsq[j % 4] += static_cast<double>(out_squares[j]);
            absmax[j % 4] = std::max(absmax[j % 4], static_cast<double>(out_max[j]));
        }
    }
    for (; i < n; ++i) {
        double x = static_cast<double>(p[i]);
        sum[0] += x;
        sumsq[0] += x * x;
        absmax[0] = std::max(absmax[0], std::fabs(x));
    }
    double total = sum[0] + sum[1] + sum[2] + sum[3], squares = sumsq[0] + sumsq[1] + sumsq[2] + sumsq[3];
    double largest = std::max(std::max(absmax[0], absmax[1]), std::max(absmax[2], absmax[3]));
    int64_t finite = n;
    if (!std::isfinite(total) || !std::isfinite(squares)) {
        total = squares = largest = 0;
        finite = 0;
        for (i = 0; i < n; ++i) {
            double x = static_cast<double>(p[i]);
            if (!std::isfinite(x)) continue;
            ++finite;
            total += x;
            squares += x * x;
            largest = std::max(largest, std::fabs(x));
        }
    }
    s.count = n;
    s.norm = std::sqrt(squares);
    s.mean = finite ? total / static_cast<double>(finite) : 0;
    s.absmax = largest;
    int64_t k = std::min<int64_t>(n, SAMPLE_SIZE);
    s.sample.resize(static_cast<size_t>(k));
    for (int64_t e = 0; e < k; ++e) s.sample[static_cast<size_t>(e)] = static_cast<float>(p[e * n / k]);
}

// O(elements) of v, once per node and step; nothing for a value whose bytes were freed.
ValueSummary summarize_value(const Value& v) {
    ValueSummary s;
    if (value_freed(v) || v.numel() == 0) return s;
    Value host = value_contiguous(value_to_host(v));
    s.present = true;
    switch (host.dtype) {
    case DTYPE_F32: summarize_elements(host.data<float>(), host.numel(), s); break;
    case DTYPE_F64: summarize_elements(host.data<double>(), host.numel(), s); break;
    case DTYPE_I64: summarize_elements(host.data<int64_t>(), host.numel(), s); break;
    }
    return s;
}

std::string line_key(int scope, SourceLoc where, const std::string& op) {
    return std::to_string(scope) + "|" + std::to_string(where.file) + "|" + std::to_string(where.line) + "|" + op;
}

// A view (reshape, transpose, expand, ...: OPF_VIEW) shows its input's elements, which have their
// own summary: its shape is compared, its values and gradient are not read again.
bool summary_skips_values(const Node* node) { return (node->info().flags & OPF_VIEW) != 0; }

// Adds `node` to `step` (once): its key, shape and value statistics.
NodeSummary* summary_add(StepSummary& step, Node* node) {
    auto found = step.index_of_id.find(node->id);
    if (found != step.index_of_id.end()) return &step.nodes[found->second];
    if (step.overflowed || step.nodes.size() >= STEP_NODES_MOST) {   // dropped; null from now on
        step.overflowed = true;
        std::vector<NodeSummary>().swap(step.nodes);
        std::unordered_map<int64_t, size_t>().swap(step.index_of_id);
        std::unordered_map<std::string, int>().swap(step.occurrences);
        return nullptr;
    }
    NodeSummary s;
    s.id = node->id;
    s.op = node->shown_op();
    s.where = node->where;
    s.scope = node->scope;
    s.parameter = node_is_parameter(node);
    s.name = node_bound_name(node);
    if (s.parameter && !s.name.empty()) {
        s.key = "parameter " + s.name;
    } else {
        std::string line = line_key(node->scope, node->where, s.op);
        s.occurrence = ++step.occurrences[line];
        s.key = line + "|" + std::to_string(s.occurrence);
    }
    if (node->outputs.size() > 0) {
        s.shape = node->outputs[0].value.shape.str();
        if (!summary_skips_values(node)) s.value = summarize_value(node->outputs[0].value);
    }
    step.index_of_id[node->id] = step.nodes.size();
    step.nodes.push_back(std::move(s));
    return &step.nodes.back();
}

// The first event of a pass: the step's forward part is complete. Names the nodes (one walk of
// the script's variables per step) and adds the leaves the pass will reach (parameters, data).
void pass_begin(StepSummary& step, const BackwardPass& pass) {
    if (step.pass == pass.serial) return;
    if (step.pass != 0) {   // the pass it began never finished (an error, :abort): its nodes mix two steps
        step = StepSummary();
        step.started_late = true;
    }
    step.pass = pass.serial;
    step.root_id = pass.root ? pass.root->id : 0;
    if (dbg::g.L) tapedeck_name_tensors(dbg::g.L);
    if (!pass.order) return;
    for (Node* n : *pass.order) {
        auto found = step.index_of_id.find(n->id);
        if (found == step.index_of_id.end()) continue;
        NodeSummary& entry = step.nodes[found->second];
        if (entry.name.empty()) {
            std::string label = node_label(n);   // a name, or an expression of its inputs' names
            if (label[0] != '#') entry.name = label;
        }
        // A leaf made in this step is recorded before {requires_grad = true} applies: a parameter now.
        if (!n->tracks_grad && !entry.parameter && node_is_parameter(n)) {
            entry.parameter = true;
            std::string bound = node_bound_name(n);
            if (!bound.empty()) entry.key = "parameter " + bound;
        }
    }
    for (auto it = pass.order->rbegin(); it != pass.order->rend(); ++it)   // record order
        if (!(*it)->tracks_grad) summary_add(step, *it);
}

// The pass has finished: the leaves' .grad, then this step becomes the newest finished one.
void pass_end(DiffState& s, const BackwardPass& pass) {
    pass_begin(s.current, pass);   // a pass from a leaf has no group
    if (pass.order) {
        for (Node* n : *pass.order) {
            if (n->tracks_grad || n->outputs.size() == 0 || !n->outputs[0].grad.defined()) continue;
            auto found = s.current.index_of_id.find(n->id);
            if (found != s.current.index_of_id.end() && !summary_skips_values(n))
                s.current.nodes[found->second].grad = summarize_value(n->outputs[0].grad.value());
        }
    }
    s.current.complete = true;
    if (s.current.started_late) {   // only its end was seen: comparing it would find nodes missing
        s.current = StepSummary();
        return;
    }
    s.done.push_back(std::move(s.current));
    if (s.done.size() > 2) s.done.erase(s.done.begin());
    s.current = StepSummary();
    ++s.steps_seen;
    ++s.version;
}

// The one observer: forward nodes as they run (not those typed at a stop, not history starts:
// no_grad work such as an optimizer's update), each forward node's gradient as its backward group
// finishes, the pass's end. Frozen calls' replays (plan_replay_current, pass serial 0) are not steps.
void diff_observer(Node* node, HookEvent event, void*) {
    DiffState& s = state();
    if (event == HOOK_AFTER) {
        if (node->phase != PHASE_FORWARD || node->history_start || debugger_stop() || engine_backward_pass() ||
            plan_replay_current())
            return;
        summary_add(s.current, node);
        return;
    }
    const BackwardPass* pass = engine_backward_pass();
    if (!pass || pass->serial == 0 || debugger_stop()) return;
    if (event == HOOK_GROUP_DONE) {
        pass_begin(s.current, *pass);
        const BackwardGroup& group = pass->group;
        if (group.node != node || !group.grad_outputs || !group.grad_outputs[0].defined()) return;
        NodeSummary* entry = summary_add(s.current, node);
        if (entry && !summary_skips_values(node)) entry->grad = summarize_value(group.grad_outputs[0].value());
    } else if (event == HOOK_PASS_DONE) {
        pass_end(s, *pass);
    }
}

void summaries_on() {
    DiffState& s = state();
    if (s.on) return;
    s.on = true;
    s.current = StepSummary();
    s.current.started_late = debugger_stop() != nullptr || engine_backward_pass() != nullptr;
    s.observer = engine_observe(diff_observer, nullptr,
                                hook_bit(HOOK_AFTER) | hook_bit(HOOK_GROUP_DONE) | hook_bit(HOOK_PASS_DONE),
                                OBSERVER_RECORDS);
}

void summaries_off() {
    DiffState& s = state();
    if (!s.on) return;
    engine_unobserve(s.observer);
    s.observer = 0;
    s.on = false;
    s.current = StepSummary();
    s.done.clear();
    s.steps_seen = 0;
    ++s.version;
}

// ============================================================================================
// [SECTION] comparison

struct LineGroup {           // nodes of one (scope, line, op) new in a step, or missing from it
    int scope = 0;
    SourceLoc where;
    std::string op;
    int count = 0;
    std::vector<int64_t> ids;
};

struct ShapeChange {
    int scope = 0;
    SourceLoc where;
    std::string op, before, after;
    int count = 0;
    std::vector<int64_t> ids;   // this step's
};

struct Moved {
    const NodeSummary* now = nullptr;
    const NodeSummary* before = nullptr;
    double change = 0;          // ‖now − before‖ / ‖before‖ over the samples (exact up to SAMPLE_SIZE elements)
};

struct Report {
    const StepSummary* now = nullptr;
    const StepSummary* before = nullptr;
    bool partial = false;       // `now` is the step in progress (a stop)
    size_t now_count = 0, before_count = 0;   // nodes compared
    std::vector<LineGroup> added, missing;
    std::vector<ShapeChange> shapes;
    std::vector<Moved> values, grads;   // sorted, largest change first
};

double relative_change(const ValueSummary& now, const ValueSummary& before) {
    double diff = 0, base = 0;
    for (size_t i = 0; i < now.sample.size() && i < before.sample.size(); ++i) {
        double d = static_cast<double>(now.sample[i]) - before.sample[i];
        diff += d * d;
        base += static_cast<double>(before.sample[i]) * before.sample[i];
    }
    if (std::isnan(diff)) return INFINITY;   // a NaN appeared: first in the list
    if (base == 0) return diff == 0 ? 0 : INFINITY;
    return std::sqrt(diff / base);
}

// Groups in the order their first node came, found through `index` (their key): O(1) a node.
void group_add(std::vector<LineGroup>& groups, std::unordered_map<std::string, size_t>& index, const NodeSummary& n) {
    auto found = index.emplace(line_key(n.scope, n.where, n.op), groups.size());
    if (!found.second) {
        LineGroup& g = groups[found.first->second];
        ++g.count;
        g.ids.push_back(n.id);
        return;
    }
    groups.push_back({n.scope, n.where, n.op, 1, {n.id}});
}

bool by_change(const Moved& a, const Moved& b) {
    if (a.change != b.change) return a.change > b.change;
    return a.now->id < b.now->id;
}

// Compares `now` with `before`. When `now` is partial and its pass has not begun (a stop in the
// forward part), `before` is cut to the same part: its nodes up to the last one `now` matched,
// and as many after it as `now` has after its own last match (the other side of a branch).
Report report_make(const StepSummary& now, const StepSummary& before, bool partial) {
    Report r;
    r.now = &now;
    r.before = &before;
    r.partial = partial;
    std::unordered_map<std::string, size_t> before_index;
    for (size_t i = 0; i < before.nodes.size(); ++i) before_index[before.nodes[i].key] = i;
    std::unordered_map<int64_t, size_t> before_ids;   // a node in both steps (a leaf that lives on) is itself
    for (size_t i = 0; i < before.nodes.size(); ++i) before_ids[before.nodes[i].id] = i;
    std::unordered_map<std::string, size_t> added_groups, missing_groups, shape_groups;
    std::vector<char> matched(before.nodes.size(), 0);
    size_t last_matched = 0, after_last_match = 0;
    bool any_matched = false;
    for (const NodeSummary& n : now.nodes) {
        auto found = before_index.find(n.key);
        if (found == before_index.end()) {   // the same node under another key (a parameter named since)
            auto same = before_ids.find(n.id);
            if (same != before_ids.end()) found = before_index.find(before.nodes[same->second].key);
        }
        if (found == before_index.end()) {
            group_add(r.added, added_groups, n);
            ++after_last_match;
            continue;
        }
        after_last_match = 0;
        const NodeSummary& b = before.nodes[found->second];
        matched[found->second] = 1;
        last_matched = std::max(last_matched, found->second);
        any_matched = true;
        if (n.shape != b.shape) {
            auto group = shape_groups.emplace(line_key(n.scope, n.where, n.op) + "|" + b.shape + "|" + n.shape, r.shapes.size());
            if (group.second) {
                r.shapes.push_back({n.scope, n.where, n.op, b.shape, n.shape, 1, {n.id}});
            } else {
                ShapeChange& c = r.shapes[group.first->second];
                ++c.count;
                c.ids.push_back(n.id);
            }
            continue;
        }
        if (n.value.present && b.value.present) {
            double c = relative_change(n.value, b.value);
            if (c > 0) r.values.push_back({&n, &b, c});
        }
        if (n.grad.present && b.grad.present) {
            double c = relative_change(n.grad, b.grad);
            if (c > 0) r.grads.push_back({&n, &b, c});
        }
    }
    bool cut = partial && now.pass == 0;
    size_t before_end = before.nodes.size();
    if (cut) before_end = std::min(before_end, (any_matched ? last_matched + 1 : 0) + after_last_match);
    for (size_t i = 0; i < before_end; ++i)
        if (!matched[i]) group_add(r.missing, missing_groups, before.nodes[i]);
    r.now_count = now.nodes.size();
    r.before_count = before_end;
    std::sort(r.values.begin(), r.values.end(), by_change);
    std::sort(r.grads.begin(), r.grads.end(), by_change);
    return r;
}

// At a stop the debugger's observer has the event before this one: the node a forward stop is
// at has run, the group a backward stop is at has its gradients; they are this step's too.
void catch_up_with_stop(StepSummary& step, const DebugStop& stop) {
    Node* node = stop.node.get();
    if (!node) return;
    if (stop.kind == STOP_NODE && node->phase == PHASE_FORWARD && !stop.pass && !node->history_start) {
        summary_add(step, node);
    } else if (stop.kind == STOP_GROUP && stop.pass && stop.pass->serial != 0) {
        pass_begin(step, *stop.pass);
        const BackwardGroup& group = stop.pass->group;
        if (group.node == node && group.grad_outputs && group.grad_outputs[0].defined() && !summary_skips_values(node))
            if (NodeSummary* entry = summary_add(step, node)) entry->grad = summarize_value(group.grad_outputs[0].value());
    }
}

// The report :diff and dbg.diff show now, or false with why not (summaries are on).
bool report_now(Report& r, std::string& why) {
    DiffState& s = state();
    bool stopped = debugger_stop() != nullptr;
    if (stopped) catch_up_with_stop(s.current, *debugger_stop());
    for (const StepSummary* step : {&s.current, s.done.empty() ? nullptr : &s.done.back(),
                                    s.done.size() < 2 ? nullptr : &s.done.front()}) {
        if (!step || !step->overflowed || (step == &s.current && !stopped)) continue;
        why = std::string(step == &s.current ? "this step" : "a step compared") + " recorded more than " +
              std::to_string(STEP_NODES_MOST) + " nodes: too many to summarize (a step ends with backward())";
        return false;
    }
    if (stopped && !s.current.nodes.empty() && !s.done.empty()) {
        r = report_make(s.current, s.done.back(), true);
        return true;
    }
    if (s.done.size() >= 2) {
        r = report_make(s.done[1], s.done[0], false);
        return true;
    }
    if (s.done.empty())
        why = "no step recorded yet: a step ends with a backward pass (loss:backward()); run two";
    else
        why = "one step recorded so far (backward pass " + std::to_string(s.done[0].pass) +
              "): run another to compare";
    return false;
}

// ============================================================================================
// [SECTION] text

std::string node_text(const NodeSummary& n) {
    std::string who = n.name.empty() ? "#" + std::to_string(n.id) : n.name + " (#" + std::to_string(n.id) + ")";
    return who + " " + n.op;
}

std::string where_text(int scope, SourceLoc where) {
    std::string s = source_loc_str(where);
    std::string path = scope_path(scope);
    if (!path.empty()) s += " in " + path;
    return s;
}

std::string source_text(SourceLoc where) {
    if (where.file < 0) return "";
    std::string text = dbg::source_line_text(source_file_name(where.file), where.line);
    size_t a = text.find_first_not_of(" \t");
    if (a == std::string::npos) return "";
    text = text.substr(a);
    if (text.size() > 50) text = text.substr(0, 47) + "...";
    return "  `" + text + "`";
}

std::string ids_text(const std::vector<int64_t>& ids, size_t most) {
    std::string s;
    for (size_t i = 0; i < ids.size() && i < most; ++i) s += (i ? " #" : "#") + std::to_string(ids[i]);
    if (ids.size() > most) s += " ...";
    return s;
}

std::string number(double x) {
    char buf[32];
    if (std::isinf(x)) return "from 0";   // relative_change: before was all zeros
    snprintf(buf, sizeof buf, "%.4g", x);
    return buf;
}

void print_groups(const char* title, const std::vector<LineGroup>& groups, bool full, const char* step_word) {
    int total = 0;
    for (const LineGroup& g : groups) total += g.count;
    printf("%s (%d node%s):\n", title, total, total == 1 ? "" : "s");
    size_t most = full ? groups.size() : std::min<size_t>(groups.size(), GROUPS_SUMMARY);
    for (size_t i = 0; i < most; ++i) {
        const LineGroup& g = groups[i];
        printf("  %s: %d × %s%s  (%s%s)\n", where_text(g.scope, g.where).c_str(), g.count, g.op.c_str(),
               source_text(g.where).c_str(), ids_text(g.ids, full ? 20 : 4).c_str(), step_word);
    }
    if (most < groups.size()) printf("  ... %zu more lines (:diff nodes)\n", groups.size() - most);
}

void print_moved(const char* title, const std::vector<Moved>& moved, bool grads, int most, const char* none) {
    if (moved.empty()) {
        printf("%s: %s\n", title, none);
        return;
    }
    printf("%s (‖now − before‖ / ‖before‖):\n", title);
    for (int i = 0; i < most && i < static_cast<int>(moved.size()); ++i) {
        const Moved& m = moved[static_cast<size_t>(i)];
        const ValueSummary& a = grads ? m.now->grad : m.now->value;
        const ValueSummary& b = grads ? m.before->grad : m.before->value;
        std::string what = node_text(*m.now) + (m.now->parameter ? " (parameter)" : "");
        bool finite = true;
        for (float x : a.sample) finite = finite && std::isfinite(x);
        printf("  %9s  %-34s %s  norm %s -> %s\n", finite ? number(m.change).c_str() : "nan/inf", what.c_str(),
               where_text(m.now->scope, m.now->where).c_str(), number(b.norm).c_str(), number(a.norm).c_str());
    }
    if (most < static_cast<int>(moved.size())) printf("  ... %zu more moved\n", moved.size() - static_cast<size_t>(most));
}

void print_report(const Report& r, const std::string& part) {
    const char* before_word = r.partial ? " in the last step" : " in the step before";
    if (r.partial)
        printf("this step so far (%s, %zu nodes) vs the same part of the last step (backward pass %llu, %zu nodes)\n",
               r.now->pass ? "in its backward pass" : "forward", r.now_count,
               static_cast<unsigned long long>(r.before->pass), r.before_count);
    else
        printf("this step (backward pass %llu, loss #%lld, %zu nodes) vs the step before (backward pass %llu, loss #%lld, %zu nodes)\n",
               static_cast<unsigned long long>(r.now->pass), static_cast<long long>(r.now->root_id), r.now_count,
               static_cast<unsigned long long>(r.before->pass), static_cast<long long>(r.before->root_id),
               r.before_count);
    bool all = part.empty();
    if (all || part == "nodes") {
        bool full = part == "nodes";
        if (r.added.empty() && r.missing.empty() && r.shapes.empty()) {
            printf("same nodes: none new, none missing, no shape changed\n");
        } else {
            if (!r.added.empty()) print_groups("new in this step", r.added, full, "");
            if (!r.missing.empty()) print_groups("missing from this step", r.missing, full, before_word);
            if (!r.shapes.empty()) {
                int total = 0;
                for (const ShapeChange& c : r.shapes) total += c.count;
                printf("shapes changed (%d node%s):\n", total, total == 1 ? "" : "s");
                size_t most = full ? r.shapes.size() : std::min<size_t>(r.shapes.size(), GROUPS_SUMMARY);
                for (size_t i = 0; i < most; ++i) {
                    const ShapeChange& c = r.shapes[i];
                    printf("  %s: %d × %s %s -> %s  (%s)\n", where_text(c.scope, c.where).c_str(), c.count, c.op.c_str(),
                           c.before.c_str(), c.after.c_str(), ids_text(c.ids, full ? 20 : 4).c_str());
                }
                if (most < r.shapes.size()) printf("  ... %zu more (:diff nodes)\n", r.shapes.size() - most);
            }
        }
    }
    int most = all ? TOP_SUMMARY : TOP_FULL;
    if (all || part == "values") print_moved("values moved most", r.values, false, most, "no value moved");
    if (all || part == "grads")
        print_moved("gradients moved most", r.grads, true, most,
                    r.partial && r.now->pass == 0 ? "none yet (this step's backward pass has not begun)"
                                                  : "no gradient moved");
}

// The viewer's diff option (viewer_set_diff_source): per node of the newest step, whether it is
// new, the shape it had before, how much its value moved. Turns summaries on at its first call.
bool diff_viewer_source(uint64_t* version, std::vector<ViewerDiffMark>* marks) {
    DiffState& s = state();
    summaries_on();
    if (*version == s.version) return false;
    *version = s.version;
    marks->clear();
    if (s.done.size() < 2) return true;
    Report r = report_make(s.done[1], s.done[0], false);
    std::unordered_map<int64_t, size_t> index;
    auto mark = [&](int64_t id) -> ViewerDiffMark& {
        auto found = index.find(id);
        if (found != index.end()) return (*marks)[found->second];
        index[id] = marks->size();
        marks->push_back(ViewerDiffMark());
        marks->back().node_id = id;
        return marks->back();
    };
    for (const LineGroup& g : r.added)
        for (int64_t id : g.ids) mark(id).is_new = true;
    for (const ShapeChange& c : r.shapes)
        for (int64_t id : c.ids) mark(id).shape_before = c.before;
    for (const Moved& m : r.values) mark(m.now->id).value_change = std::isinf(m.change) ? 1e30 : m.change;
    return true;
}

const bool g_diff_connected = (viewer_set_diff_source(diff_viewer_source), true);   // at start-up

}  // namespace

bool debugger_cmd_diff(lua_State*, const std::string& args) {
    DiffState& s = state();
    if (args == "off") {
        bool was = s.on;
        summaries_off();
        printf(was ? "step summaries off (dropped)\n" : "step summaries were off\n");
        return true;
    }
    if (!args.empty() && args != "on" && args != "nodes" && args != "values" && args != "grads") {
        fflush(stdout);
        fprintf(stderr, ":diff: unknown option '%s' (expected nothing, nodes, values, grads, on or off)\n", args.c_str());
        return true;
    }
    if (!s.on) {
        summaries_on();
        printf("no previous step recorded yet: keeping step summaries from now on (:diff off stops)\n");
        return true;
    }
    if (args == "on") {
        printf("step summaries are on (%d step%s recorded)\n", s.steps_seen, s.steps_seen == 1 ? "" : "s");
        return true;
    }
    Report r;
    std::string why;
    if (!report_now(r, why)) {
        printf(":diff: %s\n", why.c_str());
        return true;
    }
    print_report(r, args);
    return true;
}

// ============================================================================================
// [SECTION] lua

namespace {

using tdlua::set_integer;
using tdlua::set_number;
using tdlua::set_string;


void push_ids(lua_State* L, const std::vector<int64_t>& ids) {
    lua_createtable(L, static_cast<int>(ids.size()), 0);
    for (size_t i = 0; i < ids.size(); ++i) {
        lua_pushinteger(L, ids[i]);
        lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
}

void push_groups(lua_State* L, const std::vector<LineGroup>& groups) {
    lua_createtable(L, static_cast<int>(groups.size()), 0);
    for (size_t i = 0; i < groups.size(); ++i) {
        const LineGroup& g = groups[i];
        lua_createtable(L, 0, 6);
        set_string(L, "line", source_loc_str(g.where));
        set_string(L, "scope", scope_path(g.scope));
        set_string(L, "op", g.op);
        set_integer(L, "count", g.count);
        push_ids(L, g.ids);
        lua_setfield(L, -2, "ids");
        lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
}

void push_moved(lua_State* L, const std::vector<Moved>& moved, bool grads) {
    size_t n = std::min<size_t>(moved.size(), TOP_FULL);
    lua_createtable(L, static_cast<int>(n), 0);
    for (size_t i = 0; i < n; ++i) {
        const Moved& m = moved[i];
        const ValueSummary& a = grads ? m.now->grad : m.now->value;
        const ValueSummary& b = grads ? m.before->grad : m.before->value;
        lua_createtable(L, 0, 10);
        set_integer(L, "id", m.now->id);
        set_integer(L, "before_id", m.before->id);
        set_string(L, "name", m.now->name);
        set_string(L, "op", m.now->op);
        set_string(L, "line", source_loc_str(m.now->where));
        lua_pushboolean(L, m.now->parameter);
        lua_setfield(L, -2, "parameter");
        set_number(L, "change", m.change);
        set_number(L, "norm", a.norm);
        set_number(L, "norm_before", b.norm);
        set_number(L, "mean", a.mean);
        set_number(L, "mean_before", b.mean);
        lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
}

}  // namespace

// dbg.diff() -> {new, missing, shapes, values, grads, step, previous, partial}, or nil and why;
// dbg.diff("on") / dbg.diff("off") turn step summaries on or off (returns whether they were on).
int debugger_diff_lua(lua_State* L) {
    DiffState& s = state();
    if (!lua_isnoneornil(L, 1)) {
        std::string what = luaL_checkstring(L, 1);
        bool was = s.on;
        if (what == "on") summaries_on();
        else if (what == "off") summaries_off();
        else return luaL_error(L, "dbg.diff: unknown option '%s' (expected nothing, \"on\" or \"off\")", what.c_str());
        lua_pushboolean(L, was);
        return 1;
    }
    if (!s.on) {
        summaries_on();
        lua_pushnil(L);
        lua_pushstring(L, "no previous step recorded yet: keeping step summaries from now on");
        return 2;
    }
    Report r;
    std::string why;
    if (!report_now(r, why)) {
        lua_pushnil(L);
        lua_pushstring(L, why.c_str());
        return 2;
    }
    lua_createtable(L, 0, 8);
    set_integer(L, "step", static_cast<int64_t>(r.now->pass));
    set_integer(L, "previous", static_cast<int64_t>(r.before->pass));
    lua_pushboolean(L, r.partial);
    lua_setfield(L, -2, "partial");
    push_groups(L, r.added);
    lua_setfield(L, -2, "new");
    push_groups(L, r.missing);
    lua_setfield(L, -2, "missing");
    lua_createtable(L, static_cast<int>(r.shapes.size()), 0);
    for (size_t i = 0; i < r.shapes.size(); ++i) {
        const ShapeChange& c = r.shapes[i];
        lua_createtable(L, 0, 7);
        set_string(L, "line", source_loc_str(c.where));
        set_string(L, "scope", scope_path(c.scope));
        set_string(L, "op", c.op);
        set_string(L, "before", c.before);
        set_string(L, "after", c.after);
        set_integer(L, "count", c.count);
        push_ids(L, c.ids);
        lua_setfield(L, -2, "ids");
        lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
    lua_setfield(L, -2, "shapes");
    push_moved(L, r.values, false);
    lua_setfield(L, -2, "values");
    push_moved(L, r.grads, true);
    lua_setfield(L, -2, "grads");
    return 1;
}
