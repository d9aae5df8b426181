// model.cpp: node records from the tape, groups, and the boxes and edges the Graph window draws.
//
// [SECTION] records    copies of the live nodes, updated by merging with the tape (ids ascend)
// [SECTION] clusters   loop iterations and same-line runs found from source lines
// [SECTION] view       boxes for nodes and collapsed groups, edges, ghosts, the node cap
#include "model.h"

#include <algorithm>
#include <deque>

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
    std::string attrs = op_describe_attrs(n->op, n->attrs);
    if (!attrs.empty()) r.op += "(" + attrs + ")";
    for (const Output& o : n->outputs) {
        if (!r.shape.empty()) r.shape += " ";
        r.shape += o.value.shape.str();
    }
    r.dtype = n->outputs.size() > 0 ? dtype_name(n->outputs[0].value.dtype) : "";
    r.phase = n->phase;
    r.group = n->group;
    r.is_leaf = n->is_leaf();
    record_refresh(r, n);
    r.is_function = n->custom != nullptr || !n->inner_nodes.empty();
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

void records_update(std::vector<NodeRecord>& records, const std::unordered_set<int64_t>& running) {
    std::vector<NodeRecord> next;
    next.reserve(static_cast<size_t>(tape_live_count()));
    size_t old = 0;
    for (Node* n = tape_first(); n; n = n->tape_next) {
        while (old < records.size() && records[old].id < n->id) ++old;
        if (old < records.size() && records[old].id == n->id) {
            next.push_back(std::move(records[old++]));
            record_refresh(next.back(), n);
        } else {
            next.push_back(record_make(n, next));
        }
        next.back().executed = running.count(n->id) == 0;
    }
    records.swap(next);
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

}  // namespace

std::vector<Cluster> clusters_detect(const std::vector<NodeRecord>& records, bool loops, bool lines) {
    std::vector<const NodeRecord*> top;   // top-level forward nodes, in record order
    for (const NodeRecord& r : records)
        if (r.phase == PHASE_FORWARD && r.inner_of == 0) top.push_back(&r);
    std::vector<Cluster> out;
    if (loops) add_loop_clusters(top, out);
    if (lines) {
        std::unordered_set<int64_t> taken;   // a node in a loop iteration stays there
        for (const Cluster& c : out)
            for (int64_t id : c.members) taken.insert(id);
        add_line_clusters(top, taken, out);
    }
    return out;
}

// ============================================================================================
// [SECTION] view

bool ViewOptions::operator==(const ViewOptions& o) const {
    return ghosts == o.ghosts && ghost_hub == o.ghost_hub && collapse_loops == o.collapse_loops &&
           collapse_lines == o.collapse_lines && collapse_backward == o.collapse_backward && node_cap == o.node_cap;
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
        b.title = "#" + std::to_string(r.id) + " " + r.op;
        b.detail = r.shape + (r.dtype == "float32" || r.dtype.empty() ? "" : " " + r.dtype);
        if (r.phase == PHASE_BACKWARD && r.inner_of == 0) b.extra = "grad of #" + std::to_string(r.group);
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

    int add_cluster(Cluster c, ClusterState fallback) {
        c.state = c.members.size() < 2 ? CLUSTER_PLAIN : state_for(c, fallback);   // a group of one is that node
        view.clusters.push_back(std::move(c));
        return static_cast<int>(view.clusters.size()) - 1;
    }

    void place(int64_t node_id, int box) { view.box_of_node[node_id] = box; }

    // A custom function node and the ops it ran inside; collapsed unless opened.
    void add_function_cluster(const NodeRecord& r) {
        Cluster c;
        c.kind = CLUSTER_FUNCTION;
        c.phase = r.phase;
        c.key = "fn:" + std::to_string(r.id);
        c.title = r.op + " #" + std::to_string(r.id);
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

// Forward nodes: loop/line groups and custom functions first, then a box per node or per group.
void Builder::build_forward() {
    for (Cluster& c : clusters_detect(records, in.options.collapse_loops, in.options.collapse_lines)) {
        int index = add_cluster(std::move(c), CLUSTER_COLLAPSED);
        for (int64_t id : view.clusters[index].members) container_of[id] = index;
    }
    for (const NodeRecord& r : records)
        if (r.is_function && r.phase == PHASE_FORWARD) add_function_cluster(r);

    for (const NodeRecord& r : records) {
        if (r.phase != PHASE_FORWARD) continue;
        if (r.inner_of != 0) {
            place_inner(r);
            continue;
        }
        auto container = container_of.find(r.id);
        int frame = -1;
        if (container != container_of.end()) {
            if (view.clusters[container->second].state == CLUSTER_COLLAPSED) {
                place(r.id, cluster_box_for(container->second));
                continue;
            }
            if (view.clusters[container->second].state == CLUSTER_EXPANDED) frame = container->second;
        }
        if (r.is_function && view.clusters[function_cluster[r.id]].state == CLUSTER_EXPANDED)
            frame = function_cluster[r.id];   // an open function frames itself and its inner nodes
        place(r.id, node_box(r, frame));
    }
    label_collapsed_functions(PHASE_FORWARD);
}

// Backward nodes: grouped by the forward box they differentiate. That group is one box when the
// forward box is a collapsed group (it mirrors it) or when collapse_backward is on.
void Builder::build_backward() {
    std::unordered_map<int, std::vector<int64_t>> members;   // forward box -> backward nodes, ascending
    std::vector<int> order;                                   // forward boxes, in first-use order
    for (const NodeRecord& r : records) {
        if (r.phase != PHASE_BACKWARD || r.inner_of != 0) continue;
        int forward_box = view.box_of(r.group);
        if (forward_box < 0) continue;
        std::vector<int64_t>& list = members[forward_box];
        if (list.empty()) order.push_back(forward_box);
        list.push_back(r.id);
    }
    std::unordered_map<int, int> backward_cluster;   // forward box -> its backward cluster
    for (int forward_box : order) {
        const ViewBox& fb = view.boxes[forward_box];
        Cluster c;
        c.kind = CLUSTER_BACKWARD;
        c.phase = PHASE_BACKWARD;
        c.key = "bwd:" + fb.key;
        c.title = "grad of " + fb.title;
        c.members = std::move(members[forward_box]);
        bool collapse = fb.kind == BOX_CLUSTER || in.options.collapse_backward;
        backward_cluster[forward_box] = add_cluster(std::move(c), collapse ? CLUSTER_COLLAPSED : CLUSTER_PLAIN);
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
        auto bc = forward_box < 0 ? backward_cluster.end() : backward_cluster.find(forward_box);
        int frame = -1;
        if (bc != backward_cluster.end()) {
            ClusterState state = view.clusters[bc->second].state;
            if (state == CLUSTER_COLLAPSED) {
                place(r.id, cluster_box_for(bc->second));
                continue;
            }
            if (state == CLUSTER_EXPANDED) frame = bc->second;
        }
        if (r.is_function && view.clusters[function_cluster[r.id]].state == CLUSTER_EXPANDED)
            frame = function_cluster[r.id];
        place(r.id, node_box(r, frame));
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
                    b.detail = record_find(all, input) ? "not shown" : "freed";
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
// of seconds (../shared/anchors.md); 50 copies keep the graph a chain.
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

    int64_t focus_node = in.stop_node ? in.stop_node : in.focus_node;
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

std::vector<NodeRecord> records_near(const std::vector<NodeRecord>& records, int64_t focus, size_t limit) {
    // Neighbours as flat arrays (a tape can hold tens of thousands of nodes): for each link a->b
    // (and b->a unless a is a hub), counted first, then filled.
    int n = static_cast<int>(records.size());
    auto index_of = [&](int64_t id) {
        const NodeRecord* r = record_find(records, id);
        return r ? static_cast<int>(r - records.data()) : -1;
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

GraphView view_build(const ViewInput& input) {
    size_t cap = static_cast<size_t>(std::max(1, input.options.node_cap));
    std::vector<NodeRecord> near;
    int64_t focus = input.stop_node ? input.stop_node : input.focus_node;
    bool cut = input.records->size() > 2 * cap && !input.records->empty();
    if (cut) {
        if (!focus || !record_find(*input.records, focus)) focus = input.records->back().id;
        near = records_near(*input.records, focus, cap);
    }
    Builder b(input, cut ? near : *input.records);
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
    b.view.total_nodes = static_cast<int>(input.records->size());
    if (cut && !b.view.cap_focus) b.view.cap_focus = focus;
    return std::move(b.view);
}

}  // namespace td
