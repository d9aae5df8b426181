// dot_export.h: a set of nodes as a Graphviz DOT graph, and rendering it through libgvc.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "tape.h"

namespace td {

// DOT text: each node shows id, op, output shape(s) and file:line; leaves, forward ops and
// backward ops are coloured apart; an input that is not in `nodes` is drawn as a small "#id".
std::string graph_to_dot(const NodeList& nodes);

// Write the graph to `path`: DOT text for .dot/.gv, otherwise rendered by Graphviz in the format
// the extension names (svg, png, pdf, ...). Raises EngineError naming the path on failure.
void graph_write(const NodeList& nodes, const std::string& path);

// Graphviz is not thread-safe: hold this lock around every libgvc/cgraph call (the viewer lays
// graphs out on a worker thread while the REPL may render one).
std::mutex& graphviz_mutex();

}  // namespace td
