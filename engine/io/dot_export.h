// dot_export.h: a set of nodes as a Graphviz DOT graph, and rendering it through libgvc.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "tape.h"

struct GVC_s;   // Graphviz's context (GVC_t in <graphviz/gvc.h>)

namespace td {

// A box drawn around some nodes (a DOT cluster with a title): an nn.Module call, or the backward
// nodes of one. The grouping is the caller's (the viewer's model finds module calls, model.h).
struct DotCluster {
    std::string title;              // "fc1 (Linear)"
    int parent = -1;                // the cluster it lies in (index, before this one), or -1
    bool backward = false;          // drawn in the backward pass's colours
    std::vector<int64_t> members;   // node ids, nested clusters' members included
};

struct DotOptions {
    std::vector<DotCluster> clusters;
    // Edges from a forward node to a backward one (a saved value the gradient rule reads): drawn
    // dashed and left out of the ranking. Off: not in the graph at all; they cost Graphviz most of
    // its time on a large graph (a 472-node GPT step: 1.8 s with them, 0.2 s without).
    bool cross_edges = true;
    // Each node's file:line as its tooltip (an SVG shows it on hover). Off: none (the exported
    // page shows the line in its panel, and saves ~100 bytes a node).
    bool tooltips = true;
};

// DOT text: each node (named "n<id>") shows id, op, output shape(s) and file:line; leaves,
// forward ops and backward ops are coloured apart; an input that is not in `nodes` is drawn as a
// small "#id"; each cluster is a framed subgraph holding its members.
std::string graph_to_dot(const NodeList& nodes, const DotOptions& options = DotOptions());

// Lay out DOT text with Graphviz's dot and render it in `format` ("svg", "png", "pdf"), holding
// graphviz_mutex(). Raises EngineError "<who>: could not render ..." when Graphviz fails.
std::string graph_render_dot(const std::string& dot, const std::string& format, const std::string& who);

// Write the graph to `path`: DOT text for .dot/.gv, otherwise rendered by Graphviz in the format
// the extension names (svg, png, pdf, ...). Raises EngineError naming the path on failure.
void graph_write(const NodeList& nodes, const std::string& path, const DotOptions& options = DotOptions());

// The graph rendered by Graphviz in `format` ("svg", "png"), in memory: the Jupyter kernel's inline
// pictures. The nodes whose ids are in `marked` are drawn with a thick red border (a debugger
// stop's node). Raises EngineError when Graphviz cannot lay it out.
std::string graph_render(const NodeList& nodes, const std::string& format, const std::vector<int64_t>& marked = {},
                         const DotOptions& options = DotOptions());

// Graphviz is not thread-safe: hold this lock around every libgvc/cgraph call (the viewer lays
// graphs out on a worker thread while the REPL may render one).
std::mutex& graphviz_mutex();

// The one Graphviz context of the process, for every layout and render (graph_write here, the
// viewer's layout worker): made on first use, never freed. Call with graphviz_mutex() held.
// Why one: Graphviz 2.42's pango plugin keeps a static pointer to a font name owned by the
// context's font dictionary; after gvFreeContext, the next context's first text layout compares
// against freed memory (seen under ASan). The context stays reachable, so leak checkers do not
// count it, and it is not freed at shutdown either: nothing would be gained, and a later layout in
// the same process (a test binary) would read the stale pointer again.
GVC_s* graphviz_context();

}  // namespace td
