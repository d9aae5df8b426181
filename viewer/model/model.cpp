// model.cpp: node records from the tape, groups, and the boxes and edges the Graph window draws.
//
// [SECTION] records    copies of the live nodes, updated by merging with the tape (ids ascend)
// [SECTION] shown      the loss's picture; history starts end a walk
// [SECTION] clusters   module calls (scopes), loop iterations and same-line runs, nested
// [SECTION] view       boxes for nodes and collapsed groups, edges, ghosts, the node cap
#include "model.h"

#include <algorithm>
#include <deque>

#include "node_names.h"
#include "source_cache.h"

namespace td {

// ============================================================================================
// [SECTION] records

namespace {

// What a record copies that can change after the node was recorded: a leaf's requires_grad (set
// by requires_grad_() or the {requires_grad = true} option, which the bindings apply after the
// node is recorded, and a frame can be drawn in between). Refreshed at every records_update.
void record_refresh(NodeRecord& r, const Node* n) {
    r.requires_grad = n->outputs.size() > 0 && n->outputs[0].requires_grad;
}

NodeRecord record_make(const Node* n, const std::vector<NodeRecord>& earlier) {
    NodeRecord r;
    r.id = n->id;
    r.op = n->name();
    std::string attrs = op_describe_attrs(n->op, n->attrs());
    if (!attrs.empty()) r.op += "(" + attrs + ")";
    for (const Output& o : n->outputs) {
        if (!r.shape.empty()) r.shape += " ";
        r.shape += o.value.shape.str();
    }
    r.dtype = n->outputs.size() > 0 ? dtype_name(n->outputs[0].value.dtype) : "";
    const Value* first = n->outputs.size() > 0 ? &n->outputs[0].value : nullptr;
    if (first && first->storage && first->device() != DEVICE_CPU) r.device = device_name(first->device());
    r.phase = n->phase;
    r.group = n->group;
    r.is_leaf = n->is_leaf();
    record_refresh(r, n);
    r.is_function = n->custom() != nullptr || !n->inner_nodes().empty();
    r.history_start = n->history_start;
    r.is_inplace = (n->info().flags & OPF_INPLACE) != 0;
    r.scope = n->scope;
    r.where = n->where;
    for (const Edge& e : n->inputs) r.inputs.push_back(e.id);
    // A node recorded inside a custom function names the function node as its group, and runs
    // in the same pass as it (a backward node's group is a forward node: not "inside").
    if (n->group != 0) {
        const NodeRecord* g = record_find(earlier, n->group);
        if (g && g->is_function && g->phase == n->phase) r.inner_of = g->id;
    }
    return r;
}

}  // namespace

const NodeRecord* record_find(const std::vector<NodeRecord>& records, int64_t id) {
    auto it = std::lower_bound(records.begin(), records.end(), id,
                               [](const NodeRecord& r, int64_t value) { return r.id < value; });
    return it != records.end() && it->id == id ? &*it : nullptr;
}

bool record_is_parameter(const NodeRecord& r) {
    return r.phase == PHASE_FORWARD && r.is_leaf && r.requires_grad && r.history_start && !r.is_inplace &&
           r.inner_of == 0;
}

namespace {

// The leaves older than the window that its nodes read (a loop's parameters, its input data): the
// window shows them as boxes (copied next to each use), not as stubs. Found through the inputs'
// node pointers (kept by nodes that track gradients) and, for backward nodes (which keep ids only),
// among the tape's oldest `limit` nodes, where a script makes its parameters before its loop.
std::vector<const Node*> leaves_read_before(const std::vector<const Node*>& nodes, size_t limit) {
    std::vector<const Node*> leaves;
    if (nodes.empty()) return leaves;
    int64_t first = nodes.front()->id;
    std::unordered_set<int64_t> wanted;
    std::unordered_set<const Node*> seen;
    auto take = [&](const Node* leaf) {   // a parameter or made data, not an op on data (x:t())
        bool source = leaf->inputs.size() == 0 || leaf->history_start ||
                      (leaf->outputs.size() > 0 && leaf->outputs[0].requires_grad);
        if (leaf->is_leaf() && source && seen.insert(leaf).second) leaves.push_back(leaf);
    };
    for (const Node* n : nodes)
        for (const Edge& e : n->inputs) {
            if (e.id <= 0 || e.id >= first) continue;
            if (e.node()) take(e.node());
            else wanted.insert(e.id);
        }
    size_t walked = 0;
    for (const Node* n = tape_first(); n && n->id < first && walked < limit && !wanted.empty(); n = n->tape_next, ++walked)
        if (wanted.erase(n->id)) take(n);
    std::sort(leaves.begin(), leaves.end(), [](const Node* a, const Node* b) { return a->id < b->id; });
    return leaves;
}

}  // namespace

std::vector<const Node*> tape_window_nodes(const TapeWindow& window) {
    std::vector<const Node*> nodes;
    if (window.anchor) {
        for (const Node* n = window.anchor; n && nodes.size() < window.size; n = n->tape_next) nodes.push_back(n);
    } else {
        for (const Node* n = tape_last(); n && nodes.size() < window.size; n = n->tape_prev) nodes.push_back(n);
        std::reverse(nodes.begin(), nodes.end());
    }
    if (window.size == SIZE_MAX) return nodes;
    std::vector<const Node*> leaves = leaves_read_before(nodes, window.size);
    leaves.insert(leaves.end(), nodes.begin(), nodes.end());
    return leaves;
}

TapeWindowSpan records_update(std::vector<NodeRecord>& records, const std::unordered_set<int64_t>& running,
                              const TapeWindow& window) {
    std::vector<const Node*> nodes = tape_window_nodes(window);
    std::vector<NodeRecord> next;
    next.reserve(nodes.size());
    TapeWindowSpan span;
    span.changed = records.size() != nodes.size();
    size_t old = 0;
    for (const Node* n : nodes) {
        while (old < records.size() && records[old].id < n->id) ++old;
        if (old < records.size() && records[old].id == n->id) {
            next.push_back(std::move(records[old++]));
        } else {
            next.push_back(record_make(n, next));
            span.changed = true;
        }
        NodeRecord& r = next.back();
        bool requires_grad = r.requires_grad, executed = r.executed;
        std::string name = node_bound_name(n);
        record_refresh(r, n);
        r.executed = running.count(n->id) == 0;
        if (r.name != name || r.requires_grad != requires_grad || r.executed != executed) span.changed = true;
        r.name = std::move(name);
    }
    records.swap(next);
    span.nodes = static_cast<int64_t>(records.size());
    span.live = tape_live_count();
    span.newest = tape_last() ? tape_last()->id : 0;
    span.oldest = tape_first() ? tape_first()->id : 0;
    if (!nodes.empty()) {
        span.first = nodes[nodes.size() - std::min(nodes.size(), window.size)]->id;   // the leaves read before it aside
        span.last = records.back().id;
    }
    span.following = span.last == span.newest;
    return span;
}

std::vector<NodeRecord> records_of_nodes(const std::vector<const Node*>& nodes) {
    std::vector<NodeRecord> records;
    records.reserve(nodes.size());
    for (const Node* n : nodes) {
        records.push_back(record_make(n, records));
        records.back().name = node_bound_name(n);
    }
    return records;
}

// ============================================================================================
// [SECTION] shown     the loss's picture; history starts end a walk

LossPass loss_pass_find(const std::vector<NodeRecord>& records) {
    LossPass pass;
    size_t i = records.size();
    while (i > 0 && records[i - 1].phase != PHASE_BACKWARD) --i;   // the newest backward record
    if (i == 0) return pass;
    pass.last = records[i - 1].id;
    while (i > 0 && records[i - 1].phase == PHASE_BACKWARD) --i;   // back to the pass's first one
    pass.first = records[i].id;
    // The pass's first record is in the root's group (the seed gradient, or the root's own rule).
    pass.root = records[i].group;
    const NodeRecord* root = record_find(records, pass.root);
    if (!root || root->phase != PHASE_FORWARD) return LossPass();
    pass.update_last = pass.last;
    for (const NodeRecord* r = record_find(records, pass.last) + 1; r < records.data() + records.size(); ++r) {
        if (r->inner_of != 0) continue;
        if (!record_in_update(*r)) break;
        pass.update_last = r->id;
    }
    return pass;
}

bool record_in_update(const NodeRecord& r) {
    return r.phase == PHASE_FORWARD && r.scope == 0 && (r.history_start || r.inputs.empty());
}

namespace {

size_t record_index(const std::vector<NodeRecord>& records, const NodeRecord* r) {
    return static_cast<size_t>(r - records.data());
}

// The loss's picture: the root's graph (inputs followed back to history starts and to nodes
// without inputs: ops on data that needs no gradient, as x:t() or a batch's indexing, are part of
// it), the nodes custom functions ran inside, the pass, the update after it, and later
// computations.
void mark_loss_picture(const std::vector<NodeRecord>& records, const LossPass& pass, std::vector<char>& shown) {
    std::vector<size_t> stack{record_index(records, record_find(records, pass.root))};
    shown[stack.back()] = 1;
    while (!stack.empty()) {
        const NodeRecord& r = records[stack.back()];
        stack.pop_back();
        if (r.history_start) continue;
        for (int64_t input : r.inputs) {
            const NodeRecord* in = record_find(records, input);
            if (!in || in->phase != PHASE_FORWARD) continue;
            size_t k = record_index(records, in);
            if (!shown[k]) {
                shown[k] = 1;
                stack.push_back(k);
            }
        }
    }
    for (size_t i = 0; i < records.size(); ++i) {
        const NodeRecord& r = records[i];
        if (r.id >= pass.first && r.id <= pass.update_last) shown[i] = 1;   // the pass and the update
        else if (r.id > pass.update_last && !r.history_start) shown[i] = 1; // later computations (the prompt's)
        else if (r.inner_of) {                  // inner nodes of a shown custom function
            const NodeRecord* fn = record_find(records, r.inner_of);
            if (fn && shown[record_index(records, fn)]) shown[i] = 1;
        }
    }
}

// Every record but those used only by history starts (or by records hidden so): newest first,
// every use of a record is decided before the record itself.
void mark_all_but_other_histories(const std::vector<NodeRecord>& records, std::vector<char>& shown) {
    std::vector<char> used(records.size(), 0), needed(records.size(), 0);
    for (size_t i = records.size(); i-- > 0;) {
        const NodeRecord& r = records[i];
        bool hidden = used[i] && !needed[i] && !record_is_parameter(r) && r.phase == PHASE_FORWARD;
        shown[i] = !hidden;
        for (int64_t input : r.inputs) {
            const NodeRecord* in = record_find(records, input);
            if (!in) continue;
            size_t k = record_index(records, in);
            used[k] = 1;
            if (!hidden && !r.history_start) needed[k] = 1;
        }
    }
}

}  // namespace

std::vector<char> records_shown(const std::vector<NodeRecord>& records, const LossPass& pass) {
    std::vector<char> shown(records.size(), 0);
    if (pass.root) mark_loss_picture(records, pass, shown);
    else mark_all_but_other_histories(records, shown);
    return shown;
}

// ============================================================================================
// [SECTION] clusters

namespace {

bool is_script_file(int file) {
    std::string name = source_file_name(file);
    return name.size() > 4 && name.compare(name.size() - 4, 4, ".lua") == 0;
}

std::string shorten(const std::string& s, size_t most) {
    if (s.size() <= most) return s;
    return s.substr(0, most - 3) + "...";
}

// A loop found from source lines: runs [first_run, last_run] restart at (file, start_line), and
// the body spans lines start_line..end_line of that file.
struct LoopRuns {
    size_t first_run, last_run;
    int file, start_line, end_line;
};

void add_loop_clusters(const std::vector<const NodeRecord*>& top, std::vector<Cluster>& out) {
    // Runs: a new one starts where the line goes back (same file): the loop jumped to its top.
    std::vector<size_t> run_start{0};
    for (size_t i = 1; i < top.size(); ++i) {
        const SourceLoc& a = top[i - 1]->where;
        const SourceLoc& b = top[i]->where;
        if (a.file == b.file && is_script_file(b.file) && b.line < a.line) run_start.push_back(i);
    }
    size_t n_runs = run_start.size();
    auto run_begin = [&](size_t r) { return run_start[r]; };
    auto run_end = [&](size_t r) { return r + 1 < n_runs ? run_start[r + 1] : top.size(); };

    // Consecutive runs r+1..m that start on the same line are iterations; run r holds the first
    // iteration at its end (after the code before the loop).
    std::vector<LoopRuns> loops;
    for (size_t r = 0; r + 1 < n_runs;) {
        const SourceLoc start = top[run_begin(r + 1)]->where;
        size_t m = r + 1;
        while (m + 1 < n_runs && top[run_begin(m + 1)]->where.file == start.file &&
               top[run_begin(m + 1)]->where.line == start.line)
            ++m;
        int end_line = start.line;
        size_t from = m > r + 1 ? r + 1 : r;   // whole runs when there are middle ones
        size_t to = m > r + 1 ? m - 1 : r;
        for (size_t k = from; k <= to; ++k)
            for (size_t i = run_begin(k); i < run_end(k); ++i)
                if (top[i]->where.file == start.file && top[i]->where.line >= start.line)
                    end_line = std::max(end_line, top[i]->where.line);
        loops.push_back({r, m, start.file, start.line, end_line});
        r = m;
    }

    for (const LoopRuns& loop : loops) {
        auto in_body = [&](const NodeRecord* rec) {
            return rec->where.file == loop.file && rec->where.line >= loop.start_line &&
                   rec->where.line <= loop.end_line;
        };
        int iteration = 0;
        for (size_t k = loop.first_run; k <= loop.last_run; ++k) {
            size_t b = run_begin(k), e = run_end(k);
            if (k == loop.first_run) {   // the first iteration: from its first body node on
                while (b < e && !(top[b]->where.file == loop.file && top[b]->where.line >= loop.start_line)) ++b;
            }
            if (k == loop.last_run) {    // the last: up to its last body node (code after the loop follows)
                size_t last = b;
                bool any = false;
                for (size_t i = b; i < e; ++i)
                    if (in_body(top[i])) {
                        last = i;
                        any = true;
                    }
                e = any ? last + 1 : b;
            }
            if (e <= b) continue;
            Cluster c;
            c.kind = CLUSTER_LOOP;
            c.phase = PHASE_FORWARD;
            ++iteration;
            for (size_t i = b; i < e; ++i) c.members.push_back(top[i]->id);
            c.key = "loop:" + std::to_string(c.members.front());
            c.title = "loop lines " + std::to_string(loop.start_line) + "-" + std::to_string(loop.end_line) +
                      " #" + std::to_string(iteration);
            out.push_back(std::move(c));
        }
    }
}

void add_line_clusters(const std::vector<const NodeRecord*>& top, const std::unordered_set<int64_t>& taken,
                       std::vector<Cluster>& out) {
    size_t i = 0;
    while (i < top.size()) {
        size_t j = i + 1;
        const SourceLoc w = top[i]->where;
        while (j < top.size() && top[j]->where.file == w.file && top[j]->where.line == w.line) ++j;
        bool free = true;
        for (size_t k = i; k < j && free; ++k) free = taken.count(top[k]->id) == 0;
        if (j - i >= 2 && free && is_script_file(w.file)) {
            Cluster c;
            c.kind = CLUSTER_LINE;
            c.phase = PHASE_FORWARD;
            for (size_t k = i; k < j; ++k) c.members.push_back(top[k]->id);
            c.key = "line:" + std::to_string(c.members.front());
            std::string text = source_line_text(source_file_name(w.file), w.line);
            c.title = "line " + std::to_string(w.line) + (text.empty() ? "" : ": " + shorten(text, 28));
            out.push_back(std::move(c));
        }
        i = j;
    }
}


// "fc1:Linear" -> "fc1 (Linear)"; "Sequential" stays.
std::string module_title(const std::string& scope) {
    size_t colon = scope.rfind(':');
    if (colon == std::string::npos) return scope;
    return scope.substr(0, colon) + " (" + scope.substr(colon + 1) + ")";
}

// One cluster per module call: a run of records whose scope chains share the module's scope at the
// same depth. Two calls of one module with nothing recorded between them read as one call.
void add_module_clusters(const std::vector<const NodeRecord*>& top, std::vector<Cluster>& out) {
    std::unordered_map<int, std::vector<int>> chains;   // scope -> its scopes, outermost first
    auto chain_of = [&](int scope) -> const std::vector<int>& {
        auto it = chains.find(scope);
        if (it != chains.end()) return it->second;
        std::vector<int> chain;
        for (int at = scope; at > 0; at = scope_parent(at)) chain.push_back(at);
        std::reverse(chain.begin(), chain.end());
        return chains.emplace(scope, std::move(chain)).first->second;
    };
    std::vector<std::pair<int, size_t>> open;   // (scope, index in out), outermost first
    for (const NodeRecord* r : top) {
        const std::vector<int>& chain = chain_of(r->scope);
        size_t common = 0;
        while (common < open.size() && common < chain.size() && open[common].first == chain[common]) ++common;
        open.resize(common);
        for (size_t depth = common; depth < chain.size(); ++depth) {
            Cluster c;
            c.kind = CLUSTER_MODULE;
            c.phase = PHASE_FORWARD;
            c.name = scope_path(chain[depth]);
            c.key = "mod:" + c.name + "@" + std::to_string(r->id);
            c.title = module_title(scope_name(chain[depth]));
            out.push_back(std::move(c));
            open.push_back({chain[depth], out.size() - 1});
        }
        for (const auto& o : open) out[o.second].members.push_back(r->id);
    }
}

void add_update_cluster(const std::vector<const NodeRecord*>& top, int64_t after, std::vector<Cluster>& out) {
    Cluster c;
    c.kind = CLUSTER_UPDATE;
    c.phase = PHASE_FORWARD;
    c.key = "update";
    for (const NodeRecord* r : top) {   // the run of no_grad ops right after the pass
        if (r->id <= after) continue;
        if (!record_in_update(*r)) break;
        c.members.push_back(r->id);
    }
    c.title = "update under no_grad (optimizer step)";
    if (!c.members.empty()) out.push_back(std::move(c));
}

// Groups as spans of positions in the top-level list; nested ones are kept, straddling ones not.
struct Span {
    size_t begin, end;   // positions of the first and last member
    int cluster;         // index into the candidates
    int parent = -1;     // index into the accepted spans
};

int cluster_rank(ClusterKind kind) {   // who wins where two groups straddle or coincide
    switch (kind) {
        case CLUSTER_UPDATE: return 0;
        case CLUSTER_MODULE: return 1;
        case CLUSTER_LOOP: return 2;
        default: return 3;
    }
}

bool span_outer_first(const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
}

// Parents of nested spans (sorted outer first) by a stack; the innermost span at each position.
void spans_link(std::vector<Span>& spans, size_t positions, std::vector<int>& innermost) {
    std::sort(spans.begin(), spans.end(), span_outer_first);
    std::vector<int> stack;
    innermost.assign(positions, -1);
    for (size_t i = 0; i < spans.size(); ++i) {
        while (!stack.empty() && spans[stack.back()].end < spans[i].begin) stack.pop_back();
        spans[i].parent = stack.empty() ? -1 : stack.back();
        stack.push_back(static_cast<int>(i));
        for (size_t p = spans[i].begin; p <= spans[i].end; ++p) innermost[p] = static_cast<int>(i);
    }
}

// Whether [begin, end] nests with the accepted spans (contains or lies inside each one it
// touches) and is not one of them again.
bool span_fits(const std::vector<Span>& accepted, const std::vector<int>& innermost, size_t begin, size_t end) {
    int a = innermost[begin];
    while (a >= 0 && accepted[a].end < end) {   // spans holding `begin` but not `end`: inside ours
        if (accepted[a].begin < begin) return false;
        a = accepted[a].parent;
    }
    if (a >= 0 && accepted[a].begin == begin && accepted[a].end == end) return false;
    int b = innermost[end];
    while (b >= 0 && accepted[b].begin > begin) {
        if (accepted[b].end > end) return false;
        b = accepted[b].parent;
    }
    return true;
}

std::vector<Cluster> clusters_nest(std::vector<Cluster> candidates, const std::vector<const NodeRecord*>& top) {
    std::unordered_map<int64_t, size_t> position;
    for (size_t i = 0; i < top.size(); ++i) position[top[i]->id] = i;
    std::vector<Span> accepted;
    std::vector<int> innermost(top.size(), -1);
    for (int rank = 0; rank <= 3; ++rank) {
        std::vector<Span> mine;
        for (size_t c = 0; c < candidates.size(); ++c)
            if (cluster_rank(candidates[c].kind) == rank && !candidates[c].members.empty())
                mine.push_back({position[candidates[c].members.front()], position[candidates[c].members.back()],
                                static_cast<int>(c)});
        std::sort(mine.begin(), mine.end(), span_outer_first);
        size_t reach = 0;
        bool any = false;
        for (const Span& span : mine) {   // among themselves: a span that starts inside the previous must end there
            bool nests_with_mine = !any || span.begin > reach || span.end <= reach;
            if (nests_with_mine && span_fits(accepted, innermost, span.begin, span.end)) {
                accepted.push_back(span);
                if (!any || span.begin > reach) reach = span.end;
                any = true;
            }
        }
        spans_link(accepted, top.size(), innermost);
    }
    std::vector<Cluster> out;
    for (const Span& span : accepted) {
        Cluster c = std::move(candidates[span.cluster]);
        c.parent = span.parent;   // accepted is sorted outer first: parents come before children
        out.push_back(std::move(c));
    }
    return out;
}

}  // namespace

std::vector<Cluster> clusters_detect(const std::vector<NodeRecord>& records, bool loops, bool lines, int64_t after) {
    std::vector<const NodeRecord*> top;   // top-level forward nodes, in record order
    for (const NodeRecord& r : records)
        if (r.phase == PHASE_FORWARD && r.inner_of == 0) top.push_back(&r);
    std::vector<Cluster> out;
    if (after > 0) add_update_cluster(top, after, out);
    add_module_clusters(top, out);
    if (loops) add_loop_clusters(top, out);
    if (lines) {
        std::unordered_set<int64_t> taken;   // a node in a loop iteration stays there
        for (const Cluster& c : out)
            if (c.kind == CLUSTER_LOOP)
                for (int64_t id : c.members) taken.insert(id);
        add_line_clusters(top, taken, out);
    }
    return clusters_nest(std::move(out), top);
}

std::vector<int> clusters_named(const std::vector<Cluster>& clusters, const std::string& name) {
    std::vector<int> out;
    for (size_t i = 0; i < clusters.size(); ++i) {
        const Cluster& c = clusters[i];
        bool match = c.key == name || c.title == name;
        if (c.kind == CLUSTER_MODULE) {
            std::string last = c.name.substr(c.name.find_last_of('/') + 1);   // "fc1:Linear"
            size_t colon = last.rfind(':');
            std::string field = colon == std::string::npos ? last : last.substr(0, colon);
            std::string type = colon == std::string::npos ? last : last.substr(colon + 1);
            match = match || c.name == name || last == name || field == name || type == name;
        }
        if (match) out.push_back(static_cast<int>(i));
    }
    return out;
}

std::string cluster_state_key(const Cluster& c) {
    return c.kind == CLUSTER_MODULE ? "mod:" + c.name : c.key;
}

// ============================================================================================
// [SECTION] view

bool ViewOptions::operator==(const ViewOptions& o) const {
    return ghosts == o.ghosts && ghost_hub == o.ghost_hub && collapse_loops == o.collapse_loops &&
           collapse_lines == o.collapse_lines && collapse_backward == o.collapse_backward && node_cap == o.node_cap &&
           loss_graph == o.loss_graph;
}

void text_measure_estimate(const std::string& text, float* width, float* height) {
    *width = 7.0f * static_cast<float>(text.size());
    *height = 13.0f;
}

int GraphView::box_of(int64_t node_id) const {
    auto it = box_of_node.find(node_id);
    return it == box_of_node.end() ? -1 : it->second;
}

namespace {

constexpr float BOX_PAD_X = 8.0f;
constexpr float BOX_PAD_Y = 4.0f;

// Everything view_build works with while it builds one view.
struct Builder {
    const ViewInput& in;
    const std::vector<NodeRecord>& records;    // the records drawn
    const std::vector<NodeRecord>& all;        // every record (an input left out is "not shown", not "freed")
    GraphView view;
    std::unordered_map<int64_t, size_t> record_index;   // id -> index in records
    std::unordered_map<int64_t, int> container_of;       // node id -> loop/line cluster index
    std::unordered_map<int64_t, int> function_cluster;   // function node id -> its cluster index
    std::unordered_map<std::string, int> cluster_box;    // cluster key -> its box once made
    std::unordered_map<int64_t, std::vector<int64_t>> inner_members;   // function node -> inner ids
    std::unordered_map<int, int> mirror_of;              // forward group -> its backward mirror
    int64_t update_after = 0;    // forward records after this id: the update group (0: none)
    int64_t default_focus = 0;   // the cap's centre when nothing is stopped or selected (the loss)

    Builder(const ViewInput& input, const std::vector<NodeRecord>& drawn)
        : in(input), records(drawn), all(*input.records) {}

    const NodeRecord* record(int64_t id) const {
        auto it = record_index.find(id);
        return it == record_index.end() ? nullptr : &records[it->second];
    }

    bool contains_stop(const Cluster& c) const {
        return in.stop_node != 0 && std::binary_search(c.members.begin(), c.members.end(), in.stop_node);
    }

    // A cluster's state: the user's choice, else `fallback`; a collapsed one opens while the stop
    // is inside it (and closes again when the stop moves on).
    ClusterState state_for(const Cluster& c, ClusterState fallback) const {
        ClusterState state = fallback;
        auto it = in.user_expanded.find(c.key);
        if (it == in.user_expanded.end()) it = in.user_expanded.find(cluster_state_key(c));
        if (it != in.user_expanded.end()) state = it->second ? CLUSTER_EXPANDED : CLUSTER_COLLAPSED;
        if (state == CLUSTER_COLLAPSED && contains_stop(c)) state = CLUSTER_EXPANDED;
        return state;
    }

    void size_box(ViewBox& b) const {
        float w = 0, h = 0, total = 0, line_w, line_h;
        for (const std::string* s : {&b.title, &b.detail, &b.extra}) {
            if (s->empty()) continue;
            in.measure(*s, &line_w, &line_h);
            w = std::max(w, line_w);
            total += line_h;
            h = line_h;
        }
        b.width = std::max(w + 2 * BOX_PAD_X, 3 * h);
        b.height = total + 2 * BOX_PAD_Y;
    }

    int add_box(ViewBox b) {
        size_box(b);
        view.boxes.push_back(std::move(b));
        return static_cast<int>(view.boxes.size()) - 1;
    }

    // "att (#940)" for the forward node a backward node differentiates, by the script's name when it has one.
    std::string forward_label(int64_t id) const {
        const NodeRecord* forward = record_find(all, id);
        std::string hash_id = "#" + std::to_string(id);
        return forward && !forward->name.empty() ? forward->name + " (" + hash_id + ")" : hash_id;
    }

    int node_box(const NodeRecord& r, int frame) {
        ViewBox b;
        b.key = "n" + std::to_string(r.id);
        b.kind = BOX_NODE;
        b.node_id = r.id;
        b.frame = frame;
        b.phase = r.phase;
        b.is_leaf = r.is_leaf;
        b.requires_grad = r.requires_grad;
        b.executed = r.executed;
        b.is_function = r.is_function;
        b.title = "#" + std::to_string(r.id) + " " + (record_is_parameter(r) ? "parameter" : r.op);
        b.detail = r.shape + (r.dtype == "float32" || r.dtype.empty() ? "" : " " + r.dtype) +
                   (r.device.empty() ? "" : " " + r.device);
        if (r.phase == PHASE_BACKWARD && r.inner_of == 0) b.extra = "grad of " + forward_label(r.group);
        else if (!r.name.empty()) b.extra = r.name;
        return add_box(std::move(b));
    }

    // The box of a collapsed cluster, made when its first member is placed.
    int cluster_box_for(int cluster_index) {
        const Cluster& c = view.clusters[cluster_index];
        auto it = cluster_box.find(c.key);
        if (it != cluster_box.end()) return it->second;
        ViewBox b;
        b.key = "c:" + c.key;
        b.kind = BOX_CLUSTER;
        b.cluster = cluster_index;
        b.frame = placing_in(c.parent).frame;
        b.phase = c.phase;
        b.member_count = static_cast<int>(c.members.size());
        b.node_id = c.members.back();
        b.is_function = c.kind == CLUSTER_FUNCTION;
        b.title = c.title;
        const NodeRecord* last = record(c.members.back());
        b.detail = std::to_string(c.members.size()) + (c.members.size() == 1 ? " op" : " ops");
        if (last) b.detail += "  " + last->shape;
        for (int64_t id : c.members) {
            const NodeRecord* m = record(id);
            if (m && !m->executed) b.executed = false;
        }
        int index = add_box(std::move(b));
        cluster_box[c.key] = index;
        return index;
    }

    // "grad of <title>": the backward nodes of a forward box or group, mirrored in group `parent`.
    static Cluster backward_group(const std::string& key, const std::string& title, int parent,
                                  std::vector<int64_t> members) {
        Cluster c;
        c.kind = CLUSTER_BACKWARD;
        c.phase = PHASE_BACKWARD;
        c.key = key;
        c.title = "grad of " + title;
        c.parent = parent;
        c.members = std::move(members);
        return c;
    }

    int add_cluster(Cluster c, ClusterState fallback) {
        c.state = c.members.size() < 2 ? CLUSTER_PLAIN : state_for(c, fallback);   // a group of one is that node
        view.clusters.push_back(std::move(c));
        return static_cast<int>(view.clusters.size()) - 1;
    }

    void place(int64_t node_id, int box) { view.box_of_node[node_id] = box; }

    // Where a node whose innermost group is `cluster` (-1: none) goes: into the box of its
    // outermost collapsed group, else a box of its own in the frame of its innermost open group.
    struct Placing {
        int collapsed = -1, frame = -1;
    };
    Placing placing_in(int cluster) const {
        Placing p;
        for (int c = cluster; c >= 0; c = view.clusters[c].parent) {
            ClusterState state = view.clusters[c].state;
            if (state == CLUSTER_COLLAPSED) p.collapsed = c;
            if (state == CLUSTER_EXPANDED && p.frame < 0) p.frame = c;
        }
        if (p.collapsed >= 0) p.frame = -1;
        return p;
    }

    // A node in group `cluster`: its own box, or its collapsed group's.
    void place_in_cluster(const NodeRecord& r, int cluster) {
        Placing p = placing_in(cluster);
        if (p.collapsed >= 0) {
            place(r.id, cluster_box_for(p.collapsed));
            return;
        }
        int frame = p.frame;
        auto fn = function_cluster.find(r.id);   // an open function frames itself and its inner nodes
        if (r.is_function && fn != function_cluster.end() && view.clusters[fn->second].state == CLUSTER_EXPANDED)
            frame = fn->second;
        place(r.id, node_box(r, frame));
    }

    int container(int64_t id) const {
        auto it = container_of.find(id);
        return it == container_of.end() ? -1 : it->second;
    }

    // A forward group's default: the update and nested modules collapsed, the outermost module
    // call open (the model's parts show), loop iterations collapsed inside a module or when asked.
    ClusterState default_state(const Cluster& c) const {
        bool in_module = false;
        for (int p = c.parent; p >= 0; p = view.clusters[p].parent) in_module = in_module || view.clusters[p].kind == CLUSTER_MODULE;
        switch (c.kind) {
            case CLUSTER_MODULE: return in_module ? CLUSTER_COLLAPSED : CLUSTER_EXPANDED;
            case CLUSTER_LOOP: return in.options.collapse_loops || in_module ? CLUSTER_COLLAPSED : CLUSTER_PLAIN;
            default: return CLUSTER_COLLAPSED;
        }
    }

    // A custom function node and the ops it ran inside; collapsed unless opened.
    void add_function_cluster(const NodeRecord& r) {
        Cluster c;
        c.kind = CLUSTER_FUNCTION;
        c.phase = r.phase;
        c.key = "fn:" + std::to_string(r.id);
        c.title = r.op + " #" + std::to_string(r.id);
        c.parent = r.phase == PHASE_FORWARD ? container(r.id) : -1;
        c.members.push_back(r.id);
        auto inner = inner_members.find(r.id);
        if (inner != inner_members.end()) c.members.insert(c.members.end(), inner->second.begin(), inner->second.end());
        function_cluster[r.id] = add_cluster(std::move(c), CLUSTER_COLLAPSED);
    }

    // A node recorded inside a custom function: its own box in the function's frame when the
    // function is open, else the function's box (which counts it).
    void place_inner(const NodeRecord& r) {
        auto fn = function_cluster.find(r.inner_of);
        int fn_box = view.box_of(r.inner_of);
        bool open = fn != function_cluster.end() && view.clusters[fn->second].state == CLUSTER_EXPANDED;
        if (open && fn_box >= 0 && view.boxes[fn_box].kind == BOX_NODE) {
            place(r.id, node_box(r, fn->second));
        } else if (fn_box >= 0) {
            place(r.id, fn_box);
            if (view.boxes[fn_box].kind == BOX_NODE) view.boxes[fn_box].member_count++;
        } else {
            place(r.id, node_box(r, -1));
        }
    }

    // A collapsed function's box says how much it hides.
    void label_collapsed_functions(Phase phase) {
        for (ViewBox& b : view.boxes)
            if (b.kind == BOX_NODE && b.is_function && b.phase == phase && b.member_count > 1)
                b.extra = "+" + std::to_string(b.member_count - 1) + " ops inside";
    }

    void build_forward();
    void build_backward();
    void build_edges();
    void add_ghosts();
    void apply_cap();
};

// Forward nodes: the update, module, loop and line groups and custom functions first, then a box
// per node or per collapsed group.
void Builder::build_forward() {
    int base = static_cast<int>(view.clusters.size());
    for (Cluster& c : clusters_detect(records, true, in.options.collapse_lines, update_after)) {
        if (c.parent >= 0) c.parent += base;
        ClusterState fallback = default_state(c);
        int index = add_cluster(std::move(c), fallback);
        for (int64_t id : view.clusters[index].members) container_of[id] = index;   // the innermost wins
    }
    for (const auto& owned : parameters_owned(records, view.clusters, container_of)) container_of[owned.first] = owned.second;
    for (const NodeRecord& r : records)
        if (r.is_function && r.phase == PHASE_FORWARD) add_function_cluster(r);

    for (const NodeRecord& r : records) {
        if (r.phase != PHASE_FORWARD) continue;
        if (r.inner_of != 0) place_inner(r);
        else place_in_cluster(r, container(r.id));
    }
    label_collapsed_functions(PHASE_FORWARD);
}

// Backward nodes are grouped as the forward nodes they differentiate: each forward group (a module
// call, a loop iteration) has a backward mirror, nested the same way, collapsed or open with it;
// inside it, the backward nodes of one forward box form a group of their own (one box when
// collapse_backward is on).
void Builder::build_backward() {
    size_t forward_clusters = view.clusters.size();
    std::unordered_map<int, std::vector<int64_t>> mirror_members;   // forward group -> backward nodes
    std::unordered_map<int, std::vector<int64_t>> members;          // forward node box -> backward nodes
    std::vector<int> order;                                         // forward node boxes, in first-use order
    for (const NodeRecord& r : records) {
        if (r.phase != PHASE_BACKWARD || r.inner_of != 0) continue;
        for (int f = container(r.group); f >= 0; f = view.clusters[f].parent) mirror_members[f].push_back(r.id);
        int forward_box = view.box_of(r.group);
        if (forward_box < 0 || view.boxes[forward_box].kind == BOX_CLUSTER) continue;
        std::vector<int64_t>& list = members[forward_box];
        if (list.empty()) order.push_back(forward_box);
        list.push_back(r.id);
    }
    for (size_t f = 0; f < forward_clusters; ++f) {   // parents before children, as the forward groups
        auto m = mirror_members.find(static_cast<int>(f));
        if (m == mirror_members.end()) continue;
        const Cluster& fc = view.clusters[f];
        Cluster c = backward_group("bwd:c:" + fc.key, fc.title, fc.parent >= 0 ? mirror_of[fc.parent] : -1,
                                   std::move(m->second));
        c.name = fc.name;
        mirror_of[static_cast<int>(f)] = add_cluster(std::move(c), fc.state);   // collapsed or open with it
    }
    std::unordered_map<int, int> backward_cluster;   // forward node box -> its backward group
    for (int forward_box : order) {
        const ViewBox& fb = view.boxes[forward_box];
        int f = container(fb.node_id);
        Cluster c = backward_group("bwd:" + fb.key, fb.title, f >= 0 && mirror_of.count(f) ? mirror_of[f] : -1,
                                   std::move(members[forward_box]));
        ClusterState fallback = in.options.collapse_backward ? CLUSTER_COLLAPSED : CLUSTER_PLAIN;
        backward_cluster[forward_box] = add_cluster(std::move(c), fallback);
    }
    for (const NodeRecord& r : records)
        if (r.phase == PHASE_BACKWARD && r.is_function) add_function_cluster(r);
    for (const NodeRecord& r : records) {
        if (r.phase != PHASE_BACKWARD) continue;
        if (r.inner_of != 0) {
            place_inner(r);
            continue;
        }
        int forward_box = view.box_of(r.group);
        auto own = forward_box < 0 ? backward_cluster.end() : backward_cluster.find(forward_box);
        int f = container(r.group);
        int cluster = own != backward_cluster.end() ? own->second : f >= 0 && mirror_of.count(f) ? mirror_of[f] : -1;
        place_in_cluster(r, cluster);
    }
    label_collapsed_functions(PHASE_BACKWARD);
}

// One edge per (producer box, consumer box); inputs whose node is gone get a stub box.
void Builder::build_edges() {
    std::unordered_set<uint64_t> seen;
    std::unordered_map<std::string, int> stubs;
    for (const NodeRecord& r : records) {
        int to = view.box_of(r.id);
        if (to < 0) continue;
        for (int64_t input : r.inputs) {
            int from = view.box_of(input);
            // No stub for what made a history start (another history), for what a collapsed group
            // reads from outside the picture, nor for what made a leaf the tape window brought in
            // from before it (a loop's W_h: its randn is not part of the loop).
            bool leaf_before_window = r.id < in.window_first;
            if (from < 0 && (r.history_start || leaf_before_window || view.boxes[to].kind == BOX_CLUSTER)) continue;
            if (from < 0) {
                std::string key = "s" + std::to_string(input) + (r.phase == PHASE_BACKWARD ? "b" : "f");
                auto it = stubs.find(key);
                if (it == stubs.end()) {
                    ViewBox b;
                    b.key = key;
                    b.kind = BOX_STUB;
                    b.node_id = input;
                    b.phase = r.phase;
                    b.is_leaf = true;
                    b.title = "#" + std::to_string(input);
                    b.detail = record_find(all, input)                                   ? "not shown"
                               : input < in.window_first                                  ? "before the window"
                                                                                           : "freed";
                    it = stubs.emplace(key, add_box(std::move(b))).first;
                }
                from = it->second;
            }
            if (from == to) continue;
            uint64_t pair = (static_cast<uint64_t>(from) << 32) | static_cast<uint32_t>(to);
            if (!seen.insert(pair).second) continue;
            ViewEdge e;
            e.from = from;
            e.to = to;
            e.cross = view.boxes[from].phase != view.boxes[to].phase;
            view.edges.push_back(e);
        }
    }
}

// A leaf used by several boxes (a parameter read at every step of a loop), or any box used by
// many, gets a copy next to each use after the first: one node with 50 users makes dot take tens
// of seconds (docs/performance.md); 50 copies keep the graph a chain.
void Builder::add_ghosts() {
    if (!in.options.ghosts) return;
    std::vector<std::vector<int>> uses(view.boxes.size());   // box -> its out-edges (laid out)
    for (size_t i = 0; i < view.edges.size(); ++i)
        if (!view.edges[i].cross) uses[view.edges[i].from].push_back(static_cast<int>(i));
    size_t original_count = view.boxes.size();
    for (size_t p = 0; p < original_count; ++p) {
        std::vector<int>& out = uses[p];
        if (out.size() < 2) continue;
        const ViewBox& primary = view.boxes[p];
        bool shared_leaf = primary.phase == PHASE_FORWARD && (primary.is_leaf || primary.kind == BOX_STUB);
        if (!shared_leaf && static_cast<int>(out.size()) < in.options.ghost_hub) continue;
        std::sort(out.begin(), out.end(), [&](int a, int b) {
            return view.boxes[view.edges[a].to].node_id < view.boxes[view.edges[b].to].node_id;
        });
        for (size_t k = 1; k < out.size(); ++k) {
            ViewEdge& e = view.edges[out[k]];
            ViewBox g = view.boxes[p];
            g.kind = BOX_GHOST;
            g.ghost_of = static_cast<int>(p);
            g.key = "g:" + view.boxes[p].key + ">" + view.boxes[e.to].key;
            g.frame = view.boxes[e.to].frame;
            g.cluster = -1;
            view.boxes.push_back(std::move(g));
            e.from = static_cast<int>(view.boxes.size()) - 1;
        }
    }
}

// Past node_cap boxes, keep the cap's worth nearest the focus (breadth first along the edges and
// from each backward node to the forward node it differentiates) and drop the rest. Hubs are
// not followed: a ghost stands for its original only at its one use, and a leaf's reads by the
// backward pass (a parameter read at every step) would make every step a neighbour.
void Builder::apply_cap() {
    view.total_boxes = static_cast<int>(view.boxes.size());
    int cap = std::max(1, in.options.node_cap);
    if (static_cast<int>(view.boxes.size()) <= cap) return;

    int64_t focus_node = in.stop_node ? in.stop_node : in.focus_node ? in.focus_node : default_focus;
    int focus = focus_node ? view.box_of(focus_node) : -1;
    if (focus < 0) {   // the newest node
        int64_t newest = 0;
        for (const auto& entry : view.box_of_node)
            if (entry.first > newest) {
                newest = entry.first;
                focus = entry.second;
            }
    }
    if (focus < 0) focus = 0;
    view.cap_focus = view.boxes[focus].node_id;

    size_t n = view.boxes.size();
    std::vector<std::vector<int>> adjacent(n);
    auto link = [&](int a, int b) {
        if (a < 0 || b < 0) return;
        adjacent[a].push_back(b);
        adjacent[b].push_back(a);
    };
    for (const ViewEdge& e : view.edges) {
        const ViewBox& from = view.boxes[e.from];
        if (e.cross && (from.is_leaf || from.kind == BOX_STUB)) continue;
        link(e.from, e.to);
    }
    for (size_t i = 0; i < n; ++i) {
        const ViewBox& b = view.boxes[i];
        if (b.phase == PHASE_BACKWARD && b.kind == BOX_NODE) {
            const NodeRecord* r = record(b.node_id);
            if (r) link(static_cast<int>(i), view.box_of(r->group));
        }
    }
    std::vector<int> keep_index(n, -1);
    std::deque<int> queue{focus};
    std::vector<bool> visited(n, false);
    visited[focus] = true;
    std::vector<int> kept;
    while (!queue.empty() && static_cast<int>(kept.size()) < cap) {
        int b = queue.front();
        queue.pop_front();
        kept.push_back(b);
        for (int a : adjacent[b])
            if (!visited[a]) {
                visited[a] = true;
                queue.push_back(a);
            }
    }
    std::sort(kept.begin(), kept.end());   // keep forward-before-backward order
    std::vector<ViewBox> boxes;
    for (int b : kept) {
        keep_index[b] = static_cast<int>(boxes.size());
        boxes.push_back(std::move(view.boxes[b]));
    }
    for (ViewBox& b : boxes)
        if (b.ghost_of >= 0) b.ghost_of = keep_index[b.ghost_of];
    std::vector<ViewEdge> edges;
    for (ViewEdge e : view.edges) {
        if (keep_index[e.from] < 0 || keep_index[e.to] < 0) continue;
        e.from = keep_index[e.from];
        e.to = keep_index[e.to];
        edges.push_back(e);
    }
    for (auto it = view.box_of_node.begin(); it != view.box_of_node.end();) {
        if (keep_index[it->second] < 0) {
            it = view.box_of_node.erase(it);
        } else {
            it->second = keep_index[it->second];
            ++it;
        }
    }
    view.boxes = std::move(boxes);
    view.edges = std::move(edges);
}

}  // namespace

std::vector<NodeRecord> records_near(const std::vector<NodeRecord>& records, int64_t focus, size_t limit,
                                     const std::vector<char>* shown) {
    // Neighbours as flat arrays (a tape can hold tens of thousands of nodes): for each link a->b
    // (and b->a unless a is a hub), counted first, then filled.
    int n = static_cast<int>(records.size());
    auto index_of = [&](int64_t id) {
        const NodeRecord* r = record_find(records, id);
        int i = r ? static_cast<int>(r - records.data()) : -1;
        return i >= 0 && shown && !(*shown)[i] ? -1 : i;
    };
    std::vector<std::pair<int, int>> links;   // (record, its input or group), by index
    std::vector<int> uses(n, 0);
    for (int i = 0; i < n; ++i) {
        for (int64_t input : records[i].inputs) {
            int j = index_of(input);
            if (j < 0) continue;
            links.push_back({i, j});
            ++uses[j];
        }
        int g = records[i].group ? index_of(records[i].group) : -1;
        if (g >= 0) links.push_back({i, -2 - g});   // a group link: always both ways
    }
    std::vector<int> start(n + 1, 0), next;
    auto each_direction = [&](auto visit) {
        for (const auto& link : links) {
            int a = link.first, b = link.second >= 0 ? link.second : -2 - link.second;
            bool both = link.second < 0 || uses[b] <= 3;   // from a hub to its uses: not followed
            visit(a, b);
            if (both) visit(b, a);
        }
    };
    each_direction([&](int a, int) { ++start[a + 1]; });
    for (int i = 0; i < n; ++i) start[i + 1] += start[i];
    next.resize(start[n]);
    std::vector<int> fill(start.begin(), start.end() - 1);
    each_direction([&](int a, int b) { next[fill[a]++] = b; });

    int first = index_of(focus);
    if (first < 0) first = n - 1;
    std::vector<bool> taken(n, false);
    std::deque<int> queue{first};
    taken[first] = true;
    std::vector<int> kept;
    while (!queue.empty() && kept.size() < limit) {
        int r = queue.front();
        queue.pop_front();
        kept.push_back(r);
        for (int k = start[r]; k < start[r + 1]; ++k)
            if (!taken[next[k]]) {
                taken[next[k]] = true;
                queue.push_back(next[k]);
            }
    }
    std::sort(kept.begin(), kept.end());
    std::vector<NodeRecord> out;
    out.reserve(kept.size());
    for (int r : kept) out.push_back(records[r]);
    return out;
}

namespace {

// Records drawn whole, whatever the cap: a model's picture (an LSTM's 32 steps, their backward
// pass and the optimizer's step: about 3,500 records) collapses into few boxes by module call, and
// a cut through it would leave parts of groups. Past this many, and past twice the cap, the cap's
// worth nearest the focus are drawn (a 50,000-step loop costs what the cap costs).
constexpr size_t RECORDS_DRAWN_WHOLE = 8000;

size_t records_cut_above(size_t cap) { return std::max(2 * cap, RECORDS_DRAWN_WHOLE); }

// The records view_build draws: the shown ones (records_shown), or the cap's worth nearest the
// focus when there are more than records_cut_above(cap).
std::vector<NodeRecord> records_drawn(const std::vector<NodeRecord>& all, const std::vector<char>& shown,
                                      int64_t focus, size_t cap, bool* cut) {
    size_t count = static_cast<size_t>(std::count(shown.begin(), shown.end(), 1));
    *cut = count > records_cut_above(cap);
    if (*cut) return records_near(all, focus, cap, &shown);
    std::vector<NodeRecord> out;
    out.reserve(count);
    for (size_t i = 0; i < all.size(); ++i)
        if (shown[i]) out.push_back(all[i]);
    return out;
}

}  // namespace

GraphView view_build(const ViewInput& input) {
    const std::vector<NodeRecord>& all = *input.records;
    size_t cap = static_cast<size_t>(std::max(1, input.options.node_cap));
    LossPass pass = input.options.loss_graph ? loss_pass_find(all) : LossPass();
    std::vector<char> shown = records_shown(all, pass);
    // Stopped at, or asked to show (:view expr), a node outside the loss's picture: the whole tape.
    for (int64_t wanted : {input.stop_node, input.focus_node}) {
        const NodeRecord* r = wanted ? record_find(all, wanted) : nullptr;
        if (pass.root && r && !shown[r - all.data()]) {
            pass = LossPass();
            shown = records_shown(all, pass);
        }
    }
    int64_t focus = input.stop_node ? input.stop_node : input.focus_node;
    if (!focus || !record_find(all, focus)) focus = pass.root;
    if (!focus && !all.empty()) focus = all.back().id;

    bool cut = false;
    std::vector<NodeRecord> drawn;
    bool every_record = std::count(shown.begin(), shown.end(), 1) == static_cast<long>(all.size());
    if (!every_record || all.size() > records_cut_above(cap)) drawn = records_drawn(all, shown, focus, cap, &cut);
    Builder b(input, every_record && !cut ? all : drawn);
    b.update_after = pass.root ? pass.last : 0;
    b.default_focus = pass.root;
    for (size_t i = 0; i < b.records.size(); ++i) {
        const NodeRecord& r = b.records[i];
        b.record_index[r.id] = i;
        if (r.inner_of) b.inner_members[r.inner_of].push_back(r.id);
    }
    b.build_forward();
    b.build_backward();
    b.build_edges();
    b.add_ghosts();
    b.apply_cap();
    for (size_t i = 0; i < b.view.boxes.size(); ++i) b.view.box_by_key[b.view.boxes[i].key] = static_cast<int>(i);
    b.view.total_nodes = static_cast<int>(all.size());
    b.view.loss_node = pass.root;
    view_mark_scope(b.view, b.records, pass);
    b.view.hidden_records = static_cast<int>(all.size() - std::count(shown.begin(), shown.end(), 1));
    if (cut && !b.view.cap_focus) b.view.cap_focus = focus;
    return std::move(b.view);
}

}  // namespace td
