// page.h: the graph as one self-contained HTML page (`:export page.html`, viewer.export_page): the
// picture laid out by Graphviz (inline SVG, module calls framed), a side panel that shows the
// clicked node (op, name, file:line and source line, statistics and a heatmap of its value and of
// its gradient), and, when the rewind history holds events (history.h), a slider through them.
// Everything is in the file: no server, no network, no external script, stylesheet, font or image.
// The data is one JSON blob; values are summarised (statistics and a sampled grid), never whole.
// Headless (no GL): built in every tapedeck. docs/page.md says what the page shows.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "tape.h"

struct lua_State;

namespace td {

constexpr size_t PAGE_LAYOUT_MOST = 2000;     // nodes laid out (Graphviz: ~4 s for 2,000 here)
constexpr size_t PAGE_EVENTS_MOST = 5000;     // history events given to the slider (the newest)
constexpr size_t PAGE_GRID_CELLS = 60000;     // heatmap cells in the whole page (each value's grid
                                              // shrinks from 48x48 as the values grow in number)
constexpr int PAGE_GRID_SIDE_MOST = 48;
constexpr int PAGE_GRID_SIDE_LEAST = 6;

struct PageOptions {
    NodeList nodes;          // the graph, ascending ids (tape_nodes(), or graph_collect(t))
    std::string title;       // "the tape", "the graph of loss"
    int64_t focus = 0;       // the node the first view is centred on (the tensor asked for); 0: the newest
    bool history = true;     // the history's events about these nodes go to the slider
    size_t layout_most = PAGE_LAYOUT_MOST;   // more nodes: the newest ones are drawn, the page says so
};

// What a page holds, for the messages.
struct PageSummary {
    size_t bytes = 0;
    size_t nodes_drawn = 0, nodes_total = 0;
    size_t events = 0;   // history events on the slider
};

// `text` with & < > " escaped, for HTML text and attribute values.
std::string page_html_escape(const std::string& text);

// The page, as HTML text (UTF-8). Call on the Lua thread, after tapedeck_name_tensors (the names
// come from node_names.h). Raises EngineError when Graphviz fails.
std::string page_html(const PageOptions& options, PageSummary* summary = nullptr);

// page_html(options) written to `path` through file_write_whole (whole or not at all); an error
// names `function` (":export", "viewer.export_page") and the path.
PageSummary page_write(const PageOptions& options, const std::string& path, const char* function);
// "wrote page.html: 40 nodes, 12 history events" (the size is in PageSummary::bytes).
std::string page_summary_text(const std::string& path, const PageSummary& summary);

// The page of the graph of the tensor at stack index `index` of L (0, nil or none: the whole tape),
// with the script's names (tapedeck_name_tensors). Raises std::runtime_error when the value there
// is not a tensor, naming `function`.
PageOptions page_options_from_lua(lua_State* L, int index, const char* function);

// Adds viewer.export_page(path [, tensor]) to the `viewer` table on top of the stack
// (viewer_lua.cpp and viewer_off.cpp both call it).
void page_open_lua(lua_State* L);

// The :export command: `[EXPR] FILE.html`. Prints what it wrote, or a one-line error naming :export.
void page_command(lua_State* L, const std::string& args);

}  // namespace td
