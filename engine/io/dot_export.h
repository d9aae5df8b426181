// dot_export.h: a set of nodes as a Graphviz DOT graph, and rendering it through libgvc.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "tape.h"

struct GVC_s;   // Graphviz's context (GVC_t in <graphviz/gvc.h>)

namespace td {

// DOT text: each node shows id, op, output shape(s) and file:line; leaves, forward ops and
// backward ops are coloured apart; an input that is not in `nodes` is drawn as a small "#id".
std::string graph_to_dot(const NodeList& nodes);

// Write the graph to `path`: DOT text for .dot/.gv, otherwise rendered by Graphviz in the format
// the extension names (svg, png, pdf, ...). Raises EngineError naming the path on failure.
void graph_write(const NodeList& nodes, const std::string& path);

// The graph rendered by Graphviz in `format` ("svg", "png"), in memory: the Jupyter kernel's inline
// pictures. The nodes whose ids are in `marked` are drawn with a thick red border (a debugger
// stop's node). Raises EngineError when Graphviz cannot lay it out.
std::string graph_render(const NodeList& nodes, const std::string& format, const std::vector<int64_t>& marked = {});

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
