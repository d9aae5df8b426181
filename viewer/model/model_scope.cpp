// model_scope.cpp: what keeps the first picture after a training step small and on the model.
//   - The module call that owns a parameter: a parameter every use of which lies inside one
//     module call is drawn in that call's box (the LSTM's four weights in "lstm (LSTM)"), and its
//     gradient's nodes in the call's backward group; opened, the call shows it inside its frame.
//   - The model's scope of the loss's picture, what the first picture fits: the forward boxes a
//     gradient flows through (the loss, the model's module calls, its parameters) and the
//     backward pass. Data preparation (building the dataset tensors, indexing a batch: nothing
//     there requires a gradient) and the optimizer's step stay in the layout, off that frame.
#include <unordered_map>
#include <unordered_set>

#include "model.h"

namespace td {

namespace {

// Ids of the forward records of the root's graph that require a gradient: inputs followed back
// from the root through records that require one, a history start (a parameter) ending the walk.
std::unordered_set<int64_t> gradient_graph_of(const std::vector<NodeRecord>& records, int64_t root) {
    std::unordered_set<int64_t> reached;
    const NodeRecord* start = record_find(records, root);
    if (!start) return reached;
    std::vector<const NodeRecord*> stack{start};
    reached.insert(root);
    while (!stack.empty()) {
        const NodeRecord* r = stack.back();
        stack.pop_back();
        if (r->history_start) continue;
        for (int64_t input : r->inputs) {
            const NodeRecord* in = record_find(records, input);
            if (!in || in->phase != PHASE_FORWARD || !in->requires_grad || !reached.insert(input).second) continue;
            stack.push_back(in);
        }
    }
    return reached;
}

// The innermost group holding both a and b (-1: none).
int common_group(const std::vector<Cluster>& clusters, int a, int b) {
    std::unordered_set<int> around_a;
    for (int c = a; c >= 0; c = clusters[c].parent) around_a.insert(c);
    for (int c = b; c >= 0; c = clusters[c].parent)
        if (around_a.count(c)) return c;
    return -1;
}

bool inside(const std::vector<Cluster>& clusters, int group, ClusterKind kind) {
    for (int c = group; c >= 0; c = clusters[c].parent)
        if (clusters[c].kind == kind) return true;
    return false;
}

}  // namespace

std::unordered_map<int64_t, int> parameters_owned(const std::vector<NodeRecord>& records, const std::vector<Cluster>& clusters,
                                                  const std::unordered_map<int64_t, int>& group_of) {
    auto group = [&](int64_t id) {
        auto it = group_of.find(id);
        return it == group_of.end() ? -1 : it->second;
    };
    std::unordered_map<int64_t, int> owner;   // parameter -> the group of its uses so far (-1: none fits)
    for (const NodeRecord& r : records)
        if (record_is_parameter(r) && !inside(clusters, group(r.id), CLUSTER_MODULE)) owner[r.id] = -2;   // -2: no use yet
    for (const NodeRecord& r : records) {
        if (r.phase != PHASE_FORWARD) continue;
        int g = r.inner_of ? -1 : group(r.id);
        if (inside(clusters, g, CLUSTER_UPDATE)) continue;   // the optimizer's step reads every parameter
        for (int64_t input : r.inputs) {
            auto it = owner.find(input);
            if (it == owner.end() || it->second == -1) continue;
            it->second = it->second == -2 ? g : g < 0 ? -1 : common_group(clusters, it->second, g);
        }
    }
    std::unordered_map<int64_t, int> owned;
    for (const auto& entry : owner)
        if (entry.second >= 0 && clusters[entry.second].kind == CLUSTER_MODULE) owned.emplace(entry.first, entry.second);
    return owned;
}

void view_mark_scope(GraphView& view, const std::vector<NodeRecord>& records, const LossPass& pass) {
    view.in_scope.assign(view.boxes.size(), 0);
    if (!pass.root) return;
    std::unordered_set<int64_t> forward = gradient_graph_of(records, pass.root);
    for (const NodeRecord& r : records) {
        bool in_pass = r.phase == PHASE_BACKWARD && r.id >= pass.first && r.id <= pass.last;
        if (!in_pass && !forward.count(r.id)) continue;
        int box = view.box_of(r.id);
        if (box >= 0) view.in_scope[box] = 1;
    }
    for (const ViewEdge& e : view.edges) {   // a copy of a shared parameter next to a use in the scope
        const ViewBox& from = view.boxes[e.from];
        if (from.kind == BOX_GHOST && from.ghost_of >= 0 && view.in_scope[from.ghost_of] && view.in_scope[e.to])
            view.in_scope[e.from] = 1;
    }
}

}  // namespace td
