// page_html.cpp: the page (page.h): the graph rendered by Graphviz as SVG, the data as JSON
// (page_data.cpp), and the page's own stylesheet and script (page.css, page.js, embedded at build
// time), put together into one HTML text.
#include <algorithm>

#include "dot_export.h"
#include "file_whole.h"
#include "model.h"
#include "page_internal.h"

#include "page_css.h"   // generated from page.css: page_css[]
#include "page_js.h"    // generated from page.js: page_js[]

namespace td {

std::string page_html_escape(const std::string& text) {
    std::string out;
    for (char c : text) {
        if (c == '&') out += "&amp;";
        else if (c == '<') out += "&lt;";
        else if (c == '>') out += "&gt;";
        else if (c == '"') out += "&quot;";
        else out += c;
    }
    return out;
}

namespace {

// Graphviz's SVG document as an element for inline use: from <svg on (no XML prolog, no DOCTYPE,
// which names a URL), line by line without the comments, the edges' titles ("n3->n7"), the font
// attributes every label repeats (page.css sets the font) and the namespace URLs: a 2,000-node
// graph's SVG is a sixth smaller. Graphviz writes one element or comment a line here (node names are "n<id>").
std::string svg_inline(const std::string& svg) {
    const std::string font = " font-family=\"Helvetica,sans-Serif\" font-size=\"10.00\"";
    // HTML puts an inline <svg> in the SVG namespace by itself: the page names no URL at all.
    const std::string svg_namespace = " xmlns=\"http://www.w3.org/2000/svg\"";
    const std::string xlink_namespace = " xmlns:xlink=\"http://www.w3.org/1999/xlink\"";
    std::string out;
    out.reserve(svg.size());
    size_t start = svg.find("<svg");
    for (size_t at = start == std::string::npos ? svg.size() : start; at < svg.size();) {
        size_t end = svg.find('\n', at);
        end = end == std::string::npos ? svg.size() : end + 1;
        std::string line = svg.substr(at, end - at);
        at = end;
        if (line.compare(0, 4, "<!--") == 0) continue;
        if (line.compare(0, 7, "<title>") == 0 && line.find("&#45;&gt;") != std::string::npos) continue;
        for (const std::string* drop : {&font, &svg_namespace, &xlink_namespace}) {
            size_t found = line.find(*drop);
            if (found != std::string::npos) line.erase(found, drop->size());
        }
        out += line;
    }
    return out;
}

// JSON inside <script>: every '<' (only ever inside a string) as \u003c, so that neither "</script>"
// nor "<!--" in a name or a source line can end or change the element.
std::string json_for_script(const std::string& json) {
    std::string out;
    out.reserve(json.size());
    for (char c : json) {
        if (c == '<') out += "\\u003c";
        else out += c;
    }
    return out;
}

// The nodes laid out (the newest options.layout_most), with the note of what was left out.
PageData page_data_pick(const PageOptions& options) {
    PageData page;
    page.title = options.title;
    page.history = options.history;
    page.total_nodes = options.nodes.size();
    page.focus = options.focus;
    size_t most = std::max<size_t>(options.layout_most, 1);
    size_t skip = options.nodes.size() > most ? options.nodes.size() - most : 0;
    page.drawn.assign(options.nodes.begin() + static_cast<std::ptrdiff_t>(skip), options.nodes.end());
    if (skip)
        page.notes.push_back(std::to_string(skip) + " older nodes (#" + std::to_string(options.nodes.front()->id) + " to #" +
                             std::to_string(options.nodes[skip - 1]->id) + ") are left out: a page lays out at most " +
                             std::to_string(most) + " nodes (Graphviz takes seconds per thousand); export the graph of one "
                             "tensor (:export loss page.html) for a smaller picture");
    bool any_backward = std::any_of(page.drawn.begin(), page.drawn.end(), [](const Ref<Node>& n) { return n->phase == PHASE_BACKWARD; });
    if (!page.drawn.empty() && !any_backward && !engine_keeps_backward_graph_setting())
        page.notes.push_back("No backward nodes: this run does not keep them once a pass has used them (a script run without -i); "
                             "call torch.autograd.keep_backward_graph(true) before backward() to draw the backward pass");
    return page;
}

// The graph as inline SVG: each node a <g class="node"> whose <title> is "n<id>", the module calls
// framed (dot_module_clusters), the forward -> backward edges left to the page's script.
std::string page_svg(const PageData& page) {
    std::vector<const Node*> plain;
    for (const Ref<Node>& n : page.drawn) plain.push_back(n.get());
    DotOptions dot;
    dot.clusters = dot_module_clusters(records_of_nodes(plain));
    dot.cross_edges = false;
    dot.tooltips = false;
    return svg_inline(graph_render_dot(graph_to_dot(page.drawn, dot), "svg", "the page's graph"));
}

}  // namespace

std::string page_html(const PageOptions& options, PageSummary* summary) {
    PageData page = page_data_pick(options);
    std::string svg = page_svg(page);
    size_t events = 0;
    std::string json = json_for_script(page_data_json(page, &events));
    std::string title = page_html_escape(options.title);
    std::string html;
    html.reserve(svg.size() + json.size() + 32768);
    html += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            "<title>tapedeck: " + title + "</title>\n<style>\n";
    html += page_css;
    html += "</style>\n</head>\n<body>\n"
            "<header><span class=\"brand\">tapedeck</span> <span id=\"title\">" + title + "</span>"
            "<span id=\"counts\"></span><span class=\"tools\"><button id=\"fit\" title=\"fit the graph (f)\">fit</button>"
            "<button id=\"zoom-in\" title=\"zoom in (+)\">+</button><button id=\"zoom-out\" title=\"zoom out (-)\">&minus;</button>"
            "<label><input type=\"checkbox\" id=\"saved\" checked> saved values</label></span></header>\n"
            "<div id=\"notes\"></div>\n<div id=\"timeline\"></div>\n<main>\n<div id=\"graph\">\n";
    html += svg;
    html += "</div>\n<aside id=\"panel\"><p class=\"hint\">Click a node to see its op, its line, its value and its gradient.</p></aside>\n"
            "</main>\n<script type=\"application/json\" id=\"page-data\">";
    html += json;
    html += "</script>\n<script>\n";
    html += page_js;
    html += "</script>\n</body>\n</html>\n";
    if (summary) {
        summary->bytes = html.size();
        summary->nodes_drawn = page.drawn.size();
        summary->nodes_total = page.total_nodes;
        summary->events = events;
    }
    return html;
}

PageSummary page_write(const PageOptions& options, const std::string& path, const char* function) {
    PageSummary summary;
    std::string html = page_html(options, &summary);
    file_write_whole(path, html, function);
    return summary;
}

std::string page_summary_text(const std::string& path, const PageSummary& s) {
    std::string text = "wrote " + path + ": " + std::to_string(s.nodes_drawn) + " node" + (s.nodes_drawn == 1 ? "" : "s");
    if (s.nodes_drawn < s.nodes_total) text += " of " + std::to_string(s.nodes_total);
    text += ", " + std::to_string(s.events) + " history event" + (s.events == 1 ? "" : "s");
    return text;
}

}  // namespace td
