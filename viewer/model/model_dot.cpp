// model_dot.cpp: the module boxes of a Graphviz DOT picture (`:dot`, the exported page), found
// with the Graph window's grouping (clusters_detect, parameters_owned), so that every picture of
// a graph frames the same nn.Module calls.
#include <unordered_map>

#include "dot_export.h"
#include "model.h"

namespace td {

namespace {

// Each record's innermost group (the last cluster naming it: parents come before children).
std::unordered_map<int64_t, int> innermost_groups(const std::vector<Cluster>& clusters) {
    std::unordered_map<int64_t, int> group_of;
    for (size_t c = 0; c < clusters.size(); ++c)
        for (int64_t id : clusters[c].members) group_of[id] = static_cast<int>(c);
    return group_of;
}

// The backward box of forward cluster `c` (made on first use, with those of the clusters around
// it, so that the backward boxes nest as the modules do).
int mirror_of(std::vector<DotCluster>& out, std::vector<int>& mirrors, const std::vector<Cluster>& clusters, int c) {
    if (mirrors[c] >= 0) return mirrors[c];
    int parent = clusters[c].parent >= 0 ? mirror_of(out, mirrors, clusters, clusters[c].parent) : -1;
    DotCluster m;
    m.title = "grad of " + clusters[c].title;
    m.parent = parent;
    m.backward = true;
    out.push_back(std::move(m));
    mirrors[c] = static_cast<int>(out.size()) - 1;
    return mirrors[c];
}

}  // namespace

std::vector<DotCluster> dot_module_clusters(const std::vector<NodeRecord>& records) {
    std::vector<Cluster> clusters = clusters_detect(records, false, false);
    std::unordered_map<int64_t, int> group_of = innermost_groups(clusters);
    for (const auto& owned : parameters_owned(records, clusters, group_of))
        for (int c = owned.second; c >= 0; c = clusters[c].parent) clusters[c].members.push_back(owned.first);
    group_of = innermost_groups(clusters);

    std::vector<DotCluster> out;
    std::vector<int> forward_index(clusters.size());
    for (size_t c = 0; c < clusters.size(); ++c) {
        DotCluster d;
        d.title = clusters[c].title;
        d.parent = clusters[c].parent >= 0 ? forward_index[clusters[c].parent] : -1;
        d.members = clusters[c].members;
        forward_index[c] = static_cast<int>(out.size());
        out.push_back(std::move(d));
    }
    // A backward record goes into the backward box of its forward node's module call.
    std::vector<int> mirrors(clusters.size(), -1);
    for (const NodeRecord& r : records) {
        if (r.phase != PHASE_BACKWARD) continue;
        auto it = group_of.find(r.group);
        if (it == group_of.end()) continue;
        for (int m = mirror_of(out, mirrors, clusters, it->second); m >= 0; m = out[m].parent) out[m].members.push_back(r.id);
    }
    return out;
}

}  // namespace td
