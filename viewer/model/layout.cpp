// layout.cpp: Graphviz dot through libgvc, on a worker thread, from plain copies of the boxes.
//
// [SECTION] input     a view as sizes and edges, and its signature
// [SECTION] dot       one graph (forward or backward) laid out by dot
// [SECTION] compute   both graphs, placed side by side
// [SECTION] worker    the thread
#include "layout.h"

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>

#include "dot_export.h"

namespace td {

// ============================================================================================
// [SECTION] input

namespace {

uint64_t hash_bytes(uint64_t h, const void* data, size_t size) {
    const unsigned char* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < size; ++i) h = (h ^ p[i]) * 1099511628211ull;   // FNV-1a
    return h;
}

uint64_t hash_string(uint64_t h, const std::string& s) { return hash_bytes(h, s.data(), s.size() + 1); }

template <class T>
uint64_t hash_value(uint64_t h, T value) {
    return hash_bytes(h, &value, sizeof value);
}

}  // namespace

std::string layout_edge_key(const std::string& from, const std::string& to) { return from + ">" + to; }

LayoutInput layout_input_from_view(const GraphView& view, bool backward_up) {
    LayoutInput in;
    in.backward_up = backward_up;
    std::unordered_map<int, int> frame_index;   // cluster index -> frame index
    // The frame of an open cluster, made with the frames of the open clusters around it.
    std::function<int(int)> frame_of = [&](int cluster) -> int {
        auto it = frame_index.find(cluster);
        if (it != frame_index.end()) return it->second;
        const Cluster& c = view.clusters[cluster];
        int parent = -1;
        for (int p = c.parent; p >= 0 && parent < 0; p = view.clusters[p].parent)
            if (view.clusters[p].state == CLUSTER_EXPANDED) parent = frame_of(p);
        in.frames.push_back({c.key, c.title, parent});
        int index = static_cast<int>(in.frames.size()) - 1;
        frame_index[cluster] = index;
        return index;
    };
    for (const ViewBox& b : view.boxes) {
        LayoutInput::Box box;
        box.key = b.key;
        box.width = b.width;
        box.height = b.height;
        box.phase = b.phase;
        if (b.frame >= 0) box.frame = frame_of(b.frame);
        size_t index = in.boxes.size();
        box.in_scope = index < view.in_scope.size() && view.in_scope[index];
        in.boxes.push_back(std::move(box));
    }
    for (const ViewEdge& e : view.edges)
        if (!e.cross) in.edges.push_back({e.from, e.to});

    uint64_t h = 1469598103934665603ull;
    h = hash_value(h, backward_up);
    for (const LayoutInput::Box& b : in.boxes) {
        h = hash_string(h, b.key);
        h = hash_value(h, static_cast<int>(std::lround(b.width)));
        h = hash_value(h, static_cast<int>(std::lround(b.height)));
        h = hash_value(h, b.frame);
        h = hash_value(h, b.in_scope);
    }
    for (const LayoutInput::Edge& e : in.edges) {
        h = hash_value(h, e.from);
        h = hash_value(h, e.to);
    }
    for (const LayoutInput::Frame& f : in.frames) {
        h = hash_string(h, f.title);
        h = hash_value(h, f.parent);
    }
    in.signature = h;
    return in;
}

// ============================================================================================
// [SECTION] dot

namespace {

// Graphviz takes `char*` for names and values it does not change.
char* gv(const char* s) { return const_cast<char*>(s); }

// The boxes of the longest chain of edges in one phase. Given to dot as one `group`, they are
// drawn in a straight column: an unrolled loop reads top to bottom instead of drifting sideways
// as each step's side inputs push it over.
std::vector<bool> longest_path(const LayoutInput& in, Phase phase) {
    size_t n = in.boxes.size();
    std::vector<std::vector<int>> out(n);
    std::vector<int> in_degree(n, 0);
    for (const LayoutInput::Edge& e : in.edges) {
        if (in.boxes[e.from].phase != phase || in.boxes[e.to].phase != phase) continue;
        out[e.from].push_back(e.to);
        ++in_degree[e.to];
    }
    std::vector<int> depth(n, 0), previous(n, -1), ready;
    for (size_t i = 0; i < n; ++i)
        if (in.boxes[i].phase == phase && in_degree[i] == 0) ready.push_back(static_cast<int>(i));
    int deepest = -1;
    while (!ready.empty()) {   // Kahn's order: every box after all its inputs
        int b = ready.back();
        ready.pop_back();
        if (deepest < 0 || depth[b] > depth[deepest]) deepest = b;
        for (int next : out[b]) {
            if (depth[b] + 1 > depth[next]) {
                depth[next] = depth[b] + 1;
                previous[next] = b;
            }
            if (--in_degree[next] == 0) ready.push_back(next);
        }
    }
    std::vector<bool> on_path(n, false);
    for (int b = deepest; b >= 0 && depth[deepest] > 0; b = previous[b]) on_path[b] = true;
    return on_path;
}

// One phase's graph for dot: its dot graph, the node attributes set per box, and which dot node
// and cluster each box and frame became.
struct DotGraph {
    Agraph_t* g = nullptr;
    Agsym_t* width_sym = nullptr;
    Agsym_t* height_sym = nullptr;
    Agsym_t* group_sym = nullptr;
    std::unordered_map<int, Agraph_t*> frames;   // frame index -> dot cluster
    std::unordered_map<int, Agnode_t*> nodes;     // box index -> dot node
    std::vector<std::pair<Agedge_t*, int>> edges;   // dot edge, index into in.edges
};

// A dot graph with the viewer's attributes: top to bottom (bottom to top when `upward`), tight
// spacing, fixed-size boxes, frame titles at the top.
void dot_graph_open(DotGraph& d, bool upward) {
    Agraph_t* g = d.g = agopen(gv("tapedeck"), Agdirected, nullptr);
    agattr(g, AGRAPH, gv("rankdir"), gv(upward ? "BT" : "TB"));
    agattr(g, AGRAPH, gv("nodesep"), gv("0.22"));
    agattr(g, AGRAPH, gv("ranksep"), gv("0.32"));
    // Network-simplex and crossing-minimisation limits: near-linear time on unrolled loops.
    agattr(g, AGRAPH, gv("nslimit"), gv("1"));
    agattr(g, AGRAPH, gv("nslimit1"), gv("1"));
    agattr(g, AGRAPH, gv("mclimit"), gv("0.1"));
    agattr(g, AGRAPH, gv("label"), gv(""));
    agattr(g, AGRAPH, gv("fontsize"), gv("10"));
    agattr(g, AGRAPH, gv("labeljust"), gv("l"));
    // The window draws a frame's title at its top: dot keeps the room there ("b" with rankdir BT,
    // where dot's sides are turned over; by default a nested frame's title would overlap its parent's).
    agattr(g, AGRAPH, gv("labelloc"), gv(upward ? "b" : "t"));
    agattr(g, AGNODE, gv("shape"), gv("box"));
    agattr(g, AGNODE, gv("fixedsize"), gv("true"));
    agattr(g, AGNODE, gv("label"), gv(""));
    d.width_sym = agattr(g, AGNODE, gv("width"), gv("0.75"));
    d.height_sym = agattr(g, AGNODE, gv("height"), gv("0.5"));
    agattr(g, AGEDGE, gv("arrowsize"), gv("0.6"));
    d.group_sym = agattr(g, AGNODE, gv("group"), gv(""));
}

// The dot cluster of a frame, inside its parent frame's cluster (made on first use).
Agraph_t* dot_cluster_of(DotGraph& d, const LayoutInput& in, int frame) {
    auto it = d.frames.find(frame);
    if (it != d.frames.end()) return it->second;
    const LayoutInput::Frame& f = in.frames[frame];
    Agraph_t* parent = f.parent >= 0 ? dot_cluster_of(d, in, f.parent) : d.g;
    char cluster_name[32];
    snprintf(cluster_name, sizeof cluster_name, "cluster_%d", frame);
    Agraph_t* sub = agsubg(parent, cluster_name, 1);
    agset(sub, gv("label"), gv(f.title.c_str()));
    d.frames.emplace(frame, sub);
    return sub;
}

// The boxes (in their frames' clusters, sized, the longest path grouped as a spine) and the edges
// between them.
void dot_graph_fill(DotGraph& d, const LayoutInput& in, Phase phase, const std::vector<int>& boxes) {
    std::vector<bool> spine = longest_path(in, phase);
    char name[32], value[32];
    for (int b : boxes) {
        const LayoutInput::Box& box = in.boxes[b];
        Agraph_t* parent = box.frame >= 0 ? dot_cluster_of(d, in, box.frame) : d.g;
        snprintf(name, sizeof name, "b%d", b);
        Agnode_t* n = agnode(parent, name, 1);
        snprintf(value, sizeof value, "%.4f", box.width / 72.0);
        agxset(n, d.width_sym, value);
        snprintf(value, sizeof value, "%.4f", box.height / 72.0);
        agxset(n, d.height_sym, value);
        if (spine[b]) agxset(n, d.group_sym, gv("spine"));
        d.nodes[b] = n;
    }
    for (size_t i = 0; i < in.edges.size(); ++i) {
        auto tail = d.nodes.find(in.edges[i].from), head = d.nodes.find(in.edges[i].to);
        if (tail == d.nodes.end() || head == d.nodes.end()) continue;
        d.edges.push_back({agedge(d.g, tail->second, head->second, nullptr, 1), static_cast<int>(i)});
    }
}

// What dot made of the graph, in this graph's own coordinates (origin top-left, y down): box
// rectangles, edge curves with their bounds, frame rectangles.
void dot_graph_read(const DotGraph& d, const LayoutInput& in, LayoutResult& out, LayoutRect& bounds) {
    boxf bb = GD_bb(d.g);
    auto to_view = [&](pointf p) { return LayoutPoint{static_cast<float>(p.x - bb.LL.x), static_cast<float>(bb.UR.y - p.y)}; };
    bounds = {0, 0, static_cast<float>(bb.UR.x - bb.LL.x), static_cast<float>(bb.UR.y - bb.LL.y)};
    for (const auto& entry : d.nodes) {
        Agnode_t* n = entry.second;
        LayoutPoint c = to_view(ND_coord(n));
        float w = static_cast<float>(ND_width(n) * 72.0) * 0.5f, h = static_cast<float>(ND_height(n) * 72.0) * 0.5f;
        out.boxes[in.boxes[entry.first].key] = {c.x - w, c.y - h, c.x + w, c.y + h};
    }
    for (const auto& entry : d.edges) {
        splines* spl = ED_spl(entry.first);
        if (!spl || spl->size < 1 || spl->list[0].size < 4) continue;
        const bezier& bz = spl->list[0];
        LayoutEdgePath path;
        for (int i = 0; i < bz.size; ++i) path.bezier.push_back(to_view(bz.list[i]));
        path.tip = bz.eflag ? to_view(bz.ep) : path.bezier.back();
        LayoutRect r{path.tip.x, path.tip.y, path.tip.x, path.tip.y};
        for (const LayoutPoint& p : path.bezier) {
            r.x0 = std::min(r.x0, p.x);
            r.y0 = std::min(r.y0, p.y);
            r.x1 = std::max(r.x1, p.x);
            r.y1 = std::max(r.y1, p.y);
        }
        path.bounds = r;
        const LayoutInput::Edge& e = in.edges[entry.second];
        out.edges[layout_edge_key(in.boxes[e.from].key, in.boxes[e.to].key)] = std::move(path);
    }
    for (const auto& entry : d.frames) {
        boxf fb = GD_bb(entry.second);
        LayoutPoint a = to_view(fb.LL), b = to_view(fb.UR);
        out.frames[in.frames[entry.first].key] = {std::min(a.x, b.x), std::min(a.y, b.y), std::max(a.x, b.x),
                                                  std::max(a.y, b.y)};
    }
}

// Boxes of one phase (indices) laid out by dot; rectangles and curves in this graph's own
// coordinates (origin top-left, y down). False with `error` set when dot fails.
bool layout_part(const LayoutInput& in, Phase phase, const std::vector<int>& boxes, LayoutResult& out, LayoutRect& bounds,
                 std::string& error) {
    bounds = LayoutRect{};
    if (boxes.empty()) return true;
    DotGraph d;
    dot_graph_open(d, phase == PHASE_BACKWARD && in.backward_up);
    dot_graph_fill(d, in, phase, boxes);
    if (gvLayout(graphviz_context(), d.g, "dot") != 0) {
        error = "Graphviz dot failed to lay out the graph";
        agclose(d.g);
        return false;
    }
    dot_graph_read(d, in, out, bounds);
    gvFreeLayout(graphviz_context(), d.g);
    agclose(d.g);
    return true;
}

// The layout's parts (layout_compute): the forward boxes of the model's scope with the small
// islands of data around it (the batch and its indexing, the labels, a loop's x_t: at most
// SMALL_ISLAND boxes joined by edges outside the scope) and the boxes drawn in a frame with one
// (a module call's ops that need no gradient); the backward boxes; the other forward boxes (a
// dataset built op by op, the optimizer's step, an evaluation). Frames (and frames nested in one
// another) are never split between parts.
constexpr size_t SMALL_ISLAND = 12;

struct LayoutParts {
    std::vector<int> scope_forward, backward, other_forward;
};

struct UnionFind {
    std::vector<size_t> root, size;
    explicit UnionFind(size_t n) : root(n), size(n, 1) {
        for (size_t i = 0; i < n; ++i) root[i] = i;
    }
    size_t find(size_t i) {
        while (root[i] != i) i = root[i] = root[root[i]];
        return i;
    }
    void join(size_t a, size_t b) {
        a = find(a);
        b = find(b);
        if (a == b) return;
        root[a] = b;
        size[b] += size[a];
    }
};

LayoutParts layout_parts(const LayoutInput& in) {
    size_t n = in.boxes.size();
    auto scoped = [&](int b) { return in.boxes[b].in_scope && in.boxes[b].phase == PHASE_FORWARD; };
    UnionFind islands(n);   // forward boxes outside the scope, joined by their edges
    for (const LayoutInput::Edge& e : in.edges)
        if (!scoped(e.from) && !scoped(e.to)) islands.join(e.from, e.to);
    auto small = [&](int b) { return !scoped(b) && islands.size[islands.find(b)] <= SMALL_ISLAND; };
    UnionFind parts_of(n + in.frames.size());   // boxes, then frames
    for (const LayoutInput::Edge& e : in.edges)
        if ((scoped(e.from) || small(e.from)) && (scoped(e.to) || small(e.to))) parts_of.join(e.from, e.to);
    for (size_t i = 0; i < n; ++i)
        if (in.boxes[i].frame >= 0) parts_of.join(i, n + static_cast<size_t>(in.boxes[i].frame));
    for (size_t f = 0; f < in.frames.size(); ++f)
        if (in.frames[f].parent >= 0) parts_of.join(n + f, n + static_cast<size_t>(in.frames[f].parent));
    std::vector<char> joined(parts_of.root.size(), 0);
    bool any_scope = false;
    for (size_t i = 0; i < n; ++i)
        if (scoped(static_cast<int>(i))) joined[parts_of.find(i)] = any_scope = true;
    LayoutParts parts;
    for (size_t i = 0; i < n; ++i) {
        int b = static_cast<int>(i);
        if (in.boxes[i].phase == PHASE_BACKWARD) parts.backward.push_back(b);
        else if (!any_scope || joined[parts_of.find(i)]) parts.scope_forward.push_back(b);
        else parts.other_forward.push_back(b);
    }
    return parts;
}

void shift_rect(LayoutRect& r, float dx, float dy) {
    r.x0 += dx;
    r.x1 += dx;
    r.y0 += dy;
    r.y1 += dy;
}

}  // namespace

// ============================================================================================
// [SECTION] compute

namespace {

// Shift one part's boxes, curves and frames by (dx, dy) into `result`.
void layout_merge(LayoutResult& result, LayoutResult& part, float dx, float dy) {
    for (auto& entry : part.boxes) {
        shift_rect(entry.second, dx, dy);
        result.boxes.emplace(entry.first, entry.second);
    }
    for (auto& entry : part.edges) {
        for (LayoutPoint& p : entry.second.bezier) {
            p.x += dx;
            p.y += dy;
        }
        entry.second.tip.x += dx;
        entry.second.tip.y += dy;
        shift_rect(entry.second.bounds, dx, dy);
        result.edges.emplace(entry.first, std::move(entry.second));
    }
    for (auto& entry : part.frames) {
        shift_rect(entry.second, dx, dy);
        result.frames.emplace(entry.first, entry.second);
    }
}

}  // namespace

LayoutResult layout_compute(const LayoutInput& in) {
    auto start = std::chrono::steady_clock::now();
    LayoutParts parts = layout_parts(in);
    const Phase phases[3] = {PHASE_FORWARD, PHASE_FORWARD, PHASE_BACKWARD};
    const std::vector<int>* boxes[3] = {&parts.other_forward, &parts.scope_forward, &parts.backward};
    LayoutResult laid[3];
    LayoutRect bounds[3];
    std::string error;
    bool ok = true;
    {
        std::lock_guard<std::mutex> lock(graphviz_mutex());
        agerrlevel_t saved = agseterr(AGMAX);   // no warnings on the REPL's terminal
        for (int k = 0; k < 3 && ok; ++k) ok = layout_part(in, phases[k], *boxes[k], laid[k], bounds[k], error);
        agseterr(saved);
    }
    LayoutResult result;
    result.signature = in.signature;
    result.ok = ok;
    result.error = error;
    result.box_count = static_cast<int>(in.boxes.size());
    result.edge_count = static_cast<int>(in.edges.size());
    if (ok) {
        // Side by side: the rest of the forward graph (data preparation, the optimizer's step,
        // tops aligned), the forward part with the model's scope, and the backward graph right of
        // it, bottoms aligned when it flows upwards (the seed of the gradient next to the loss),
        // tops aligned otherwise.
        const float gap = 60.0f;
        float height = std::max({bounds[0].y1, bounds[1].y1, bounds[2].y1});
        float x = 0;
        for (int k = 0; k < 3; ++k) {
            if (boxes[k]->empty()) continue;
            bool bottom = in.backward_up && k > 0;
            layout_merge(result, laid[k], x, bottom ? height - bounds[k].y1 : 0);
            x += bounds[k].x1 + gap;
        }
        result.bounds = {0, 0, std::max(0.0f, x - gap), height};
    }
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
}

// ============================================================================================
// [SECTION] worker

LayoutWorker::~LayoutWorker() { stop(); }

void LayoutWorker::request(LayoutInput input) {
    std::lock_guard<std::mutex> lock(mutex_);
    request_ = std::move(input);
    has_request_ = true;
    if (!thread_.joinable()) {
        stopping_ = false;
        thread_ = std::thread(&LayoutWorker::run, this);
    }
    wake_.notify_one();
}

bool LayoutWorker::take_result(LayoutResult* out) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!has_result_) return false;
    *out = std::move(result_);
    has_result_ = false;
    return true;
}

bool LayoutWorker::busy() {
    std::lock_guard<std::mutex> lock(mutex_);
    return has_request_ || running_;
}

void LayoutWorker::stop() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
        has_request_ = false;
        wake_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
    has_result_ = false;
}

void LayoutWorker::run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
        wake_.wait(lock, [this] { return has_request_ || stopping_; });
        if (stopping_) return;
        LayoutInput input = std::move(request_);
        has_request_ = false;
        running_ = true;
        lock.unlock();
        LayoutResult result = layout_compute(input);
        lock.lock();
        running_ = false;
        result_ = std::move(result);
        has_result_ = true;
    }
}

}  // namespace td
