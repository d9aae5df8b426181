// page_internal.h: what page_html.cpp (the picture, the HTML around it) hands to page_data.cpp
// (the JSON the page's script reads).
#pragma once

#include <string>
#include <vector>

#include "page.h"

namespace td {

struct PageData {
    NodeList drawn;                   // the nodes laid out, ascending ids
    std::string title;
    std::vector<std::string> notes;   // what was left out, in sentences
    size_t total_nodes = 0;           // of the graph asked for
    int64_t focus = 0;                // PageOptions::focus
    bool history = true;
};

// The JSON text: {title, notes, total_nodes, focus, grid_side, palette, nodes, events, history_note,
// strings, values}; *events (when given): the events on the slider. docs/page.md describes its fields. Values are summaries: statistics and a grid of at
// most grid_side x grid_side cells, numbers to 4 significant digits.
std::string page_data_json(const PageData& page, size_t* events = nullptr);

}  // namespace td
