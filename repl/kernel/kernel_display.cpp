// kernel_display.cpp: MIME bundles for tensors, graphs and pictures (kernel_display.h).
#include "kernel_display.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <lua.hpp>
#include <sstream>

#include "dot_export.h"
#include "format.h"
#include "heat_colour.h"
#include "model.h"
#include "page.h"
#include "tapedeck_lua.h"
#include "tensor_stats.h"
#include "value_text.h"

namespace {

constexpr int HEATMAP_MOST = 48;   // cells a side
constexpr size_t GRAPH_CROSS_EDGES_MOST = 300;   // nodes

// heat_colour's 0xAABBGGRR as "#rrggbb".
std::string css_colour(uint32_t abgr) {
    char text[8];
    snprintf(text, sizeof text, "#%02x%02x%02x", abgr & 0xFF, (abgr >> 8) & 0xFF, (abgr >> 16) & 0xFF);
    return text;
}

// A heatmap of `host` as inline SVG: rows of its last dim, sampled to HEATMAP_MOST cells a side.
std::string heatmap_svg(const td::Value& host, const td::TensorStats& stats) {
    if (host.numel() <= 1) return "";
    td::HeatGrid g = td::heat_grid_sample(host, HEATMAP_MOST);
    int64_t cell = std::clamp<int64_t>(240 / std::max(g.rows, g.cols), 4, 24);
    std::ostringstream svg;
    svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << g.cols * cell << "\" height=\"" << g.rows * cell
        << "\" shape-rendering=\"crispEdges\">";
    double lo = stats.finite ? stats.min : 0, hi = stats.finite ? stats.max : 0;
    for (int64_t r = 0; r < g.rows; ++r)
        for (int64_t c = 0; c < g.cols; ++c) {
            double x = g.values[static_cast<size_t>(r * g.cols + c)];
            svg << "<rect x=\"" << c * cell << "\" y=\"" << r * cell << "\" width=\"" << cell << "\" height=\"" << cell
                << "\" fill=\"" << css_colour(td::heat_colour(x, lo, hi)) << "\"><title>" << td::number_text(x)
                << "</title></rect>";
        }
    svg << "</svg>";
    if (g.row_step > 1 || g.col_step > 1)
        svg << "<div class=\"td-note\">every " << g.row_step << " row(s), every " << g.col_step << " column(s)</div>";
    return svg.str();
}

// One value's statistics table and heatmap.
std::string value_html(const td::Value& value, const std::string& heading) {
    if (td::value_freed(value)) return "<p><b>" + heading + "</b>: " + td::VALUE_FREED_TEXT + "</p>";
    td::Value host = td::value_to_host(value);
    td::TensorStats s = td::tensor_stats(host);
    std::ostringstream html;
    html << "<div style=\"display:inline-block;vertical-align:top;margin-right:2em\"><b>" << heading
         << "</b><table><tr><th>min</th><th>max</th><th>mean</th><th>std</th><th>NaN</th><th>Inf</th></tr><tr><td>"
         << td::number_text(s.min) << "</td><td>" << td::number_text(s.max) << "</td><td>" << td::number_text(s.mean)
         << "</td><td>" << td::number_text(s.std) << "</td><td>" << s.nan << "</td><td>" << s.inf()
         << "</td></tr></table>" << heatmap_svg(host, s) << "</div>";
    return html.str();
}

std::string base64(const std::string& bytes) {
    std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
    int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                            reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
    out.resize(static_cast<size_t>(std::max(n, 0)));
    return out;
}

// The text the terminal prints for the value at idx (tables as their contents).
std::string plain_text(lua_State* L, int idx) {
    if (lua_type(L, idx) == LUA_TTABLE) return repl_value_text(L, idx);
    size_t length;
    const char* text = luaL_tolstring(L, idx, &length);
    std::string out(text, length);
    lua_pop(L, 1);
    return out;
}

// Whether the table at idx is torch.graph's (its metatable's __name is "tapedeck.Graph").
bool is_graph_table(lua_State* L, int idx) {
    if (!lua_istable(L, idx) || !luaL_getmetafield(L, idx, "__name")) return false;
    bool graph = lua_type(L, -1) == LUA_TSTRING && strcmp(lua_tostring(L, -1), "tapedeck.Graph") == 0;
    lua_pop(L, 1);
    return graph;
}

// The nodes of torch.graph's table at idx: each record's `node` id, looked up on the tape.
td::NodeList graph_table_nodes(lua_State* L, int idx) {
    td::NodeList all = td::tape_nodes(), nodes;
    std::vector<int64_t> ids;
    for (lua_Integer i = 1; lua_rawgeti(L, idx, i) == LUA_TTABLE; ++i) {
        lua_getfield(L, -1, "id");
        ids.push_back(lua_tointeger(L, -1));
        lua_pop(L, 2);
    }
    lua_pop(L, 1);
    std::sort(ids.begin(), ids.end());
    for (const td::Ref<td::Node>& n : all)
        if (std::binary_search(ids.begin(), ids.end(), n->id)) nodes.push_back(n);
    return nodes;
}

}  // namespace

std::string kernel_display_tensor_html(const td::Tensor& t) {
    const td::Value& v = t.value();
    std::ostringstream html;
    html << "<div class=\"tapedeck-tensor\"><table><tr><th>shape</th><th>dtype</th><th>device</th><th>requires_grad</th>"
         << "<th>node</th></tr><tr><td>" << v.shape.str() << "</td><td>" << td::dtype_name(v.dtype) << "</td><td>"
         << td::device_name(v.device()) << "</td><td>" << (t.requires_grad() ? "true" : "false") << "</td><td>#"
         << t.node->id << "</td></tr></table>";
    html << value_html(v, "value");
    const td::Tensor& grad = t.node->outputs[t.output].grad;
    if (grad.defined()) html << value_html(grad.value(), "grad");
    html << "<pre>" << td::page_html_escape(td::tensor_format(t)) << "</pre></div>";
    return html.str();
}

nlohmann::json kernel_display_graph(const td::NodeList& nodes, const std::vector<int64_t>& marked) {
    nlohmann::json data;
    std::string summary = "graph: " + std::to_string(nodes.size()) + " node" + (nodes.size() == 1 ? "" : "s");
    if (nodes.empty()) {
        data["text/plain"] = "graph: no nodes";
        return data;
    }
    try {
        std::vector<const td::Node*> plain;
        for (const td::Ref<td::Node>& n : nodes) plain.push_back(n.get());
        td::DotOptions options;
        options.clusters = td::dot_module_clusters(td::records_of_nodes(plain));   // the nn.Module calls, framed
        // Forward -> backward edges (a saved value read by a gradient rule) cost Graphviz most of
        // its time on a large graph: drawn only on a small one.
        options.cross_edges = nodes.size() <= GRAPH_CROSS_EDGES_MOST;
        data["image/svg+xml"] = kernel_svg_inline(td::graph_render(nodes, "svg", marked, options));
    } catch (const std::exception& e) {
        summary += " (" + std::string(e.what()) + ")";
    }
    data["text/plain"] = summary;
    return data;
}

nlohmann::json kernel_display_image(const std::string& bytes, const std::string& mime, const std::string& text) {
    nlohmann::json data;
    data[mime] = base64(bytes);
    data["text/plain"] = text;
    return data;
}

std::string kernel_read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    return in ? bytes.str() : std::string();
}

nlohmann::json kernel_display_values(lua_State* L, int first) {
    nlohmann::json data;
    int top = lua_gettop(L);
    std::string text;
    for (int i = first; i <= top; ++i) text += (i > first ? "\t" : "") + plain_text(L, i);
    data["text/plain"] = text;
    if (top != first) return data;
    if (td::Tensor* t = tapedeck_test_tensor(L, first)) {
        data["text/html"] = kernel_display_tensor_html(*t);
    } else if (is_graph_table(L, first)) {
        nlohmann::json graph = kernel_display_graph(graph_table_nodes(L, first), {});
        if (graph.contains("image/svg+xml")) data["image/svg+xml"] = graph["image/svg+xml"];
    }
    return data;
}

nlohmann::json kernel_display_page(const td::PageOptions& options) {
    td::PageSummary summary;
    std::string page = td::page_html(options, &summary);
    nlohmann::json data;
    // In an iframe of its own: the page styles its whole document and listens for keys on it.
    data["text/html"] = "<iframe sandbox=\"allow-scripts\" style=\"width:100%;height:640px;border:0\" srcdoc=\"" +
                        td::page_html_escape(page) + "\"></iframe>";
    data["text/plain"] = options.title + ": " + std::to_string(summary.nodes_drawn) + " nodes drawn of " +
                         std::to_string(summary.nodes_total) + ", " + std::to_string(summary.events) + " history events";
    return data;
}

// Graphviz's SVG as a notebook shows it: from "<svg" on (an XML declaration and DOCTYPE before it
// break nbconvert, and IPython sends none either), scaled down to the cell's width when wider.
std::string kernel_svg_inline(const std::string& svg) {
    size_t start = svg.find("<svg");
    if (start == std::string::npos) return svg;
    return "<svg style=\"max-width:100%;height:auto\"" + svg.substr(start + 4);
}
