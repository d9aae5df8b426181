// kernel_display.h: what a notebook shows of tapedeck's values: MIME bundles (the "data" of
// execute_result and display_data messages) for a tensor, a graph, a picture file.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "page.h"
#include "tape.h"

struct lua_State;

// The bundle of the values on the stack from `first` to the top, as a cell's result: text/plain as
// the terminal prints them (tab-separated); one tensor also as text/html (kernel_display_tensor_html);
// a graph (torch.graph's table) also as image/svg+xml.
nlohmann::json kernel_display_values(lua_State* L, int first);

// A tensor as an HTML block: shape, dtype, device, requires_grad, statistics, a heatmap of its
// values (1-D and 2-D; larger tensors as rows of their last dim, sampled to 48x48 cells), the
// values as PyTorch prints them, and the same for its gradient when it has one.
std::string kernel_display_tensor_html(const td::Tensor& t);

// The graph of `nodes` drawn by Graphviz as SVG (image/svg+xml), the `marked` nodes outlined in
// red, with a text/plain line saying how many nodes. Graphviz's failure is a text/plain note.
nlohmann::json kernel_display_graph(const td::NodeList& nodes, const std::vector<int64_t>& marked);

// The graph as the exported page shows it (viewer/page: click a node for its values, a slider
// through the rewind history), inline in a sandboxed iframe: :view in a notebook.
nlohmann::json kernel_display_page(const td::PageOptions& options);

// A picture's bytes as a bundle: `mime` ("image/png", "image/gif") base64-encoded, and `text`.
nlohmann::json kernel_display_image(const std::string& bytes, const std::string& mime, const std::string& text);

// An SVG file's text as a notebook shows it: from "<svg" on, at most the cell's width.
std::string kernel_svg_inline(const std::string& svg);

// A whole file's bytes; empty when it cannot be read.
std::string kernel_read_file(const std::string& path);
