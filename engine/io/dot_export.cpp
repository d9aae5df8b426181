// dot_export.cpp: DOT text for a graph, rendered with Graphviz's libgvc (dot layout).
#include "dot_export.h"
#include "file_whole.h"
#include "node_names.h"

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>

#include <cerrno>
#include <cstring>
#include <cstdio>
#include <functional>
#include <algorithm>
#include <set>
#include <unordered_map>

namespace td {

namespace {

std::string dot_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out;
}

const char* node_fill(const Node* n) {
    if (n->phase == PHASE_BACKWARD) return "#fde2c8";               // backward: orange
    if (node_is_parameter(n)) return "#c6e2ff";                     // parameters: blue
    if (node_has_no_history(n)) return "#e8eef5";                   // other leaves: grey-blue
    return "#ffffff";                                                // forward ops
}

// "#22 parameter" for a parameter (whatever op made its values: a clone, under no_grad),
// "#5 tanh", "#7 mul_scalar(s=2)".
std::string node_title(const Node* n) {
    std::string title = "#" + std::to_string(n->id) + " " + n->shown_op();
    if (n->shown_op() != n->name()) return title;   // "parameter" stands in for the op: no attributes
    std::string attrs = op_describe_attrs(n->op, n->attrs());
    if (!attrs.empty()) title += "(" + attrs + ")";
    return title;
}

// Each cluster as a subgraph: its own members (not those of a cluster inside it) and, nested,
// the clusters inside it. A node named in a subgraph belongs to it, wherever it was declared.
void clusters_append(std::string& dot, const DotOptions& options, const std::unordered_map<int64_t, const Node*>& by_id) {
    const std::vector<DotCluster>& clusters = options.clusters;
    std::vector<std::vector<int>> children(clusters.size());
    std::unordered_map<int64_t, int> innermost;   // node id -> the last (innermost) cluster naming it
    for (size_t c = 0; c < clusters.size(); ++c) {
        if (clusters[c].parent >= 0 && clusters[c].parent < static_cast<int>(c)) children[clusters[c].parent].push_back(static_cast<int>(c));
        for (int64_t id : clusters[c].members)
            if (by_id.count(id)) innermost[id] = static_cast<int>(c);
    }
    std::vector<std::vector<int64_t>> own(clusters.size());
    for (const auto& entry : innermost) own[entry.second].push_back(entry.first);
    std::function<void(int, int)> emit = [&](int c, int depth) {
        std::string indent(2 * depth, ' ');
        const DotCluster& cluster = clusters[c];
        dot += indent + "subgraph cluster_" + std::to_string(c) + " {\n" + indent + "  label=\"" + dot_escape(cluster.title) +
               "\"; labeljust=l; fontname=\"Helvetica\"; fontsize=10; style=\"rounded,filled\"; color=\"" +
               (cluster.backward ? "#e0b48c" : "#9fb4cc") + "\"; fillcolor=\"" + (cluster.backward ? "#fff7ef" : "#f5f8fc") + "\";\n";
        std::sort(own[c].begin(), own[c].end());
        for (int64_t id : own[c]) dot += indent + "  n" + std::to_string(id) + ";\n";
        for (int child : children[c]) emit(child, depth + 1);
        dot += indent + "}\n";
    };
    for (size_t c = 0; c < clusters.size(); ++c)
        if (clusters[c].parent < 0 || clusters[c].parent >= static_cast<int>(c)) emit(static_cast<int>(c), 1);
}

}  // namespace

std::string graph_to_dot(const NodeList& nodes, const DotOptions& options) {
    std::unordered_map<int64_t, const Node*> by_id;
    for (const Ref<Node>& n : nodes) by_id[n->id] = n.get();

    std::string dot =
        "digraph tapedeck {\n"
        "  rankdir=TB; nslimit=1; nslimit1=1; mclimit=0.1;\n"
        "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n"
        "  edge [arrowsize=0.6];\n";
    std::set<int64_t> missing;
    for (const Ref<Node>& ref : nodes) {
        const Node* n = ref.get();
        // Label lines are escaped one by one and joined with DOT's own "\n".
        std::string label = dot_escape(node_title(n));
        std::string name = node_label(n);
        if (name[0] != '#') label += "\\n" + dot_escape(name);
        if (n->phase == PHASE_BACKWARD) label += "\\ngrad of #" + std::to_string(n->group);
        for (const Output& o : n->outputs) {
            bool on_gpu = o.value.storage && o.value.device() != DEVICE_CPU;
            label += "\\n" + dot_escape(o.value.shape.str() + " " + dtype_name(o.value.dtype) +
                                        (on_gpu ? std::string(" ") + device_name(o.value.device()) : ""));
        }
        std::string file = source_file_name(n->where.file);
        std::string where = file.substr(file.find_last_of('/') + 1) + ":" + std::to_string(n->where.line);
        label += "\\n" + dot_escape(n->where.file < 0 ? "?" : where);
        std::string tooltip = options.tooltips ? ", tooltip=\"" + dot_escape(source_loc_str(n->where)) + "\"" : "";
        dot += "  n" + std::to_string(n->id) + " [label=\"" + label + "\"" + tooltip + ", fillcolor=\"" + node_fill(n) + "\"];\n";
        if (n->history_start) continue;   // what made it is another history: no edges, no stubs
        for (const Edge& e : n->inputs) {
            auto found = by_id.find(e.id);
            const Node* from = found == by_id.end() ? nullptr : found->second;
            bool crosses = from && from->phase != n->phase;   // a saved forward value read by backward
            if (crosses && !options.cross_edges) continue;
            if (!from) missing.insert(e.id);
            dot += "  n" + std::to_string(e.id) + " -> n" + std::to_string(n->id);
            if (crosses) dot += " [style=dashed, color=\"#999999\", constraint=false]";
            dot += ";\n";
        }
    }
    for (int64_t id : missing)
        dot += "  n" + std::to_string(id) + " [label=\"#" + std::to_string(id) +
               "\", shape=plaintext, style=\"\", fontcolor=\"#777777\"];\n";
    clusters_append(dot, options, by_id);
    dot += "}\n";
    return dot;
}

std::mutex& graphviz_mutex() {
    static std::mutex* mutex = new std::mutex;   // immortal: the viewer's worker may hold it at exit
    return *mutex;
}

GVC_t* graphviz_context() {
    static GVC_t* context = gvContext();
    return context;
}

std::string graph_render_dot(const std::string& dot, const std::string& format, const std::string& who) {
    std::string rendered;
    bool failed = false;
    {
        std::lock_guard<std::mutex> lock(graphviz_mutex());
        GVC_t* gvc = graphviz_context();
        Agraph_t* g = agmemread(dot.c_str());
        char* data = nullptr;
        unsigned int length = 0;
        failed = !g || gvLayout(gvc, g, "dot") != 0 || gvRenderData(gvc, g, format.c_str(), &data, &length) != 0;
        if (data) {
            rendered.assign(data, length);
            gvFreeRenderData(data);
        }
        if (g) {
            gvFreeLayout(gvc, g);
            agclose(g);
        }
    }
    if (failed) engine_fail("%s: could not render the graph as %s", who.c_str(), format.c_str());
    return rendered;
}

std::string graph_render(const NodeList& nodes, const std::string& format, const std::vector<int64_t>& marked,
                         const DotOptions& options) {
    std::string dot = graph_to_dot(nodes, options);
    if (!marked.empty()) {   // DOT lets a node be declared again: the later attributes win
        dot.resize(dot.size() - 2);   // "}\n"
        for (int64_t id : marked)
            dot += "  n" + std::to_string(id) + " [penwidth=3, color=\"#d62728\", fillcolor=\"#ffd8d0\"];\n";
        dot += "}\n";
    }
    return graph_render_dot(dot, format, "graphviz (" + std::to_string(nodes.size()) + " nodes)");
}

// Writes the graph to `path`, as DOT text (.dot, .gv) or rendered by Graphviz (.svg, .png, .pdf),
// whole or not at all (file_whole.h): Graphviz renders into memory first, so a failed render leaves
// no file, and an unwritable path is an error naming it and the reason.
void graph_write(const NodeList& nodes, const std::string& path, const DotOptions& options) {
    size_t dot_at = path.rfind('.');
    std::string format = dot_at == std::string::npos ? "" : path.substr(dot_at + 1);
    bool is_text = format == "dot" || format == "gv";
    if (!is_text && format != "svg" && format != "png" && format != "pdf")
        engine_fail("graphviz: '%s' needs one of the extensions .dot, .gv, .svg, .png or .pdf", path.c_str());

    std::string dot = graph_to_dot(nodes, options);
    if (is_text) {
        file_write_whole(path, dot, "graphviz");
        return;
    }
    std::string rendered = graph_render_dot(dot, format, "graphviz: '" + path + "'");
    file_write_whole(path, rendered, "graphviz");
}

}  // namespace td
