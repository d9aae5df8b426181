// window_graph.cpp: the Graph window. The laid-out boxes and edges drawn with ImDrawList (the model
// is Dear ImGui's "Custom Rendering" canvas): pan (drag), zoom (wheel), fit (F), hover tooltip,
// click to select, double-click to open or close a group, right-click for breakpoints.
//
// Level of detail keeps a frame cheap at a thousand boxes on a software renderer: boxes and edges
// off the canvas are skipped, labels are drawn only where they are legible, curves become straight
// lines and lose anti-aliasing when the graph is small on screen.
//
// [SECTION] camera     layout <-> screen, fit, scroll into view
// [SECTION] shapes     box colours, dashed outlines, arrows
// [SECTION] menu       the right-click menu and the tooltip
// [SECTION] window     the toolbar and the legend
// [SECTION] frame      draw_graph_window: canvas, camera input, marks, frames, edges, boxes, labels, clicks
#include <GLFW/glfw3.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <deque>

#include "source_cache.h"
#include "viewer_internal.h"

namespace td {

namespace {

// ============================================================================================
// [SECTION] camera

struct Camera {
    ImVec2 origin;   // canvas top-left on screen
    ImVec2 pan;      // layout point at the canvas top-left
    float zoom;

    ImVec2 to_screen(float x, float y) const {
        return ImVec2(origin.x + (x - pan.x) * zoom, origin.y + (y - pan.y) * zoom);
    }
    ImVec2 to_layout(ImVec2 p) const { return ImVec2(pan.x + (p.x - origin.x) / zoom, pan.y + (p.y - origin.y) / zoom); }
};

constexpr float MIN_ZOOM = 0.02f, MAX_ZOOM = 4.0f;

constexpr float LEGEND_HEIGHT = 20.0f;   // the legend strip along the canvas top

// Fit rectangle b (layout units) to the canvas, at most `most` (150%: a small graph is drawn big).
void camera_fit_rect(ViewerState& s, const LayoutRect& b, ImVec2 canvas, float most = 1.5f) {
    float w = b.x1 - b.x0 + 40, h = b.y1 - b.y0 + 40;
    if (w <= 40 && h <= 40) return;
    float top = LEGEND_HEIGHT;   // keep the graph clear of the legend
    s.graph.zoom = std::clamp(std::min(canvas.x / w, (canvas.y - top) / h), MIN_ZOOM, most);
    s.graph.pan = ImVec2((b.x0 + b.x1) * 0.5f - canvas.x * 0.5f / s.graph.zoom,
                   (b.y0 + b.y1) * 0.5f - (canvas.y + top) * 0.5f / s.graph.zoom);
}

void camera_fit(ViewerState& s, ImVec2 canvas) { camera_fit_rect(s, s.layout.placement.bounds, canvas); }

// The bounds of the model's scope (GraphView::in_scope: the loss's forward pass through the model
// and its backward pass), false when the view has none.
bool scope_bounds(const ViewerState& s, LayoutRect* out) {
    const GraphView& v = s.model.view;
    const Placement& p = s.layout.placement;
    bool any = false;
    LayoutRect b{FLT_MAX, FLT_MAX, -FLT_MAX, -FLT_MAX};
    for (size_t i = 0; i < v.in_scope.size() && i < p.rects.size(); ++i) {
        if (!v.in_scope[i]) continue;
        const LayoutRect& r = p.rects[i];
        b = LayoutRect{std::min(b.x0, r.x0), std::min(b.y0, r.y0), std::max(b.x1, r.x1), std::max(b.y1, r.y1)};
        any = true;
    }
    if (any) *out = b;
    return any;
}

// Keep the camera over the graph: no more empty canvas than needed on any side.
void camera_clamp(ViewerState& s, ImVec2 canvas) {
    const LayoutRect& b = s.layout.placement.bounds;
    float margin = 20.0f / s.graph.zoom, top = LEGEND_HEIGHT / s.graph.zoom;
    float view_w = canvas.x / s.graph.zoom, view_h = canvas.y / s.graph.zoom;
    if (b.x1 - b.x0 + 2 * margin <= view_w) s.graph.pan.x = (b.x0 + b.x1 - view_w) * 0.5f;
    else s.graph.pan.x = std::clamp(s.graph.pan.x, b.x0 - margin, b.x1 + margin - view_w);
    if (b.y1 - b.y0 + 2 * margin + top <= view_h) s.graph.pan.y = (b.y0 + b.y1 - view_h - top) * 0.5f;
    else s.graph.pan.y = std::clamp(s.graph.pan.y, b.y0 - margin - top, b.y1 + margin - view_h);
}

// The model's scope on the canvas, legible: all of it; else its bottom (the loss, and the seed of
// its gradient: the backward pass flows upwards from beside it) on the canvas's bottom edge, its
// whole width when that fits at a legible size, else from its left edge (the forward pass, then
// the backward pass next to it).
void camera_fit_scope(ViewerState& s, const LayoutRect& scope, ImVec2 canvas) {
    camera_fit_rect(s, scope, canvas, 1.0f);   // a part of the graph: no bigger than its own size
    if (s.graph.zoom * GRAPH_FONT_SIZE >= LEGIBLE_LABEL_PX) return;
    float width = scope.x1 - scope.x0 + 40;
    float zoom = std::clamp(canvas.x / width, (LEGIBLE_LABEL_PX + 0.01f) / GRAPH_FONT_SIZE, 1.0f);
    float left = zoom * width <= canvas.x ? (scope.x0 + scope.x1) * 0.5f - canvas.x * 0.5f / zoom : scope.x0 - 20;
    s.graph.zoom = zoom;
    s.graph.pan = ImVec2(left, scope.y1 + 20 - canvas.y / zoom);
}

// After a new layout, unless the user moved the camera: the whole graph when its labels stay
// legible (LEGIBLE_LABEL_PX); else, for the loss's picture with nothing stopped or selected, the
// model's scope (forward and backward, not the data preparation: camera_fit_scope); else labels at
// their own size centred on the node of interest (the stop, the selection, the loss of the loss's
// picture, or the newest node: where the graph grows).
void camera_follow(ViewerState& s, ImVec2 canvas) {
    camera_fit(s, canvas);
    if (s.graph.zoom * GRAPH_FONT_SIZE >= LEGIBLE_LABEL_PX) return;
    LayoutRect scope;
    if (!s.stop.node && !s.selection.node && scope_bounds(s, &scope)) {
        camera_fit_scope(s, scope, canvas);
        return;
    }
    const GraphView& v = s.model.view;
    int focus = s.stop.node ? v.box_of(s.stop.node) : s.selection.node ? v.box_of(s.selection.node) : -1;
    if (focus < 0 && v.loss_node) focus = v.box_of(v.loss_node);
    int64_t newest = 0;
    if (focus < 0)
        for (const auto& entry : v.box_of_node)
            if (entry.first > newest) {
                newest = entry.first;
                focus = entry.second;
            }
    if (focus < 0 || static_cast<size_t>(focus) >= s.layout.placement.rects.size()) return;
    const LayoutRect& r = s.layout.placement.rects[focus];
    s.graph.zoom = 1.0f;
    s.graph.pan = ImVec2((r.x0 + r.x1) * 0.5f - canvas.x * 0.5f / s.graph.zoom, (r.y0 + r.y1) * 0.5f - canvas.y * 0.5f / s.graph.zoom);
    camera_clamp(s, canvas);
}

// Pan (and zoom in to a legible size if needed) so that r is on the canvas; nothing when it is.
void camera_show(ViewerState& s, const LayoutRect& r, ImVec2 canvas) {
    bool legible = s.graph.zoom * GRAPH_FONT_SIZE >= 7.0f;
    float margin = 16.0f / s.graph.zoom;
    bool inside = r.x0 >= s.graph.pan.x + margin && r.y0 >= s.graph.pan.y + margin && r.x1 <= s.graph.pan.x + canvas.x / s.graph.zoom - margin &&
                  r.y1 <= s.graph.pan.y + canvas.y / s.graph.zoom - margin;
    if (inside && legible) return;
    if (!legible) s.graph.zoom = 1.0f;
    s.graph.pan = ImVec2((r.x0 + r.x1) * 0.5f - canvas.x * 0.5f / s.graph.zoom, (r.y0 + r.y1) * 0.5f - canvas.y * 0.5f / s.graph.zoom);
    s.graph.camera = CAMERA_MANUAL;
}

// ============================================================================================
// [SECTION] shapes

ImU32 box_fill(const ViewBox& b) {
    if (b.kind == BOX_STUB) return IM_COL32(0, 0, 0, 0);
    if (b.kind == BOX_CLUSTER && !b.is_function) return b.phase == PHASE_BACKWARD ? COLOUR_GROUP_BACKWARD : COLOUR_GROUP;
    if (b.phase == PHASE_BACKWARD) return COLOUR_BACKWARD;
    if (b.is_leaf) return b.requires_grad ? COLOUR_PARAM : COLOUR_DATA;
    return COLOUR_OP;
}

ImU32 fade(ImU32 colour, float alpha) {
    unsigned a = (colour >> IM_COL32_A_SHIFT) & 0xFF;
    a = static_cast<unsigned>(static_cast<float>(a) * alpha);
    return (colour & ~IM_COL32_A_MASK) | (a << IM_COL32_A_SHIFT);
}

void dashed_line(ImDrawList* dl, ImVec2 a, ImVec2 b, ImU32 colour, float thickness) {
    float dx = b.x - a.x, dy = b.y - a.y;
    float length = std::sqrt(dx * dx + dy * dy);
    if (length < 1) return;
    const float dash = 5.0f, gap = 3.5f;
    for (float t = 0; t < length; t += dash + gap) {
        float e = std::min(t + dash, length);
        dl->AddLine(ImVec2(a.x + dx * t / length, a.y + dy * t / length), ImVec2(a.x + dx * e / length, a.y + dy * e / length),
                    colour, thickness);
    }
}

void dashed_rect(ImDrawList* dl, ImVec2 p0, ImVec2 p1, ImU32 colour, float thickness) {
    dashed_line(dl, p0, ImVec2(p1.x, p0.y), colour, thickness);
    dashed_line(dl, ImVec2(p1.x, p0.y), p1, colour, thickness);
    dashed_line(dl, p1, ImVec2(p0.x, p1.y), colour, thickness);
    dashed_line(dl, ImVec2(p0.x, p1.y), p0, colour, thickness);
}

void arrow_head(ImDrawList* dl, ImVec2 from, ImVec2 tip, float size, ImU32 colour) {
    float dx = tip.x - from.x, dy = tip.y - from.y;
    float length = std::sqrt(dx * dx + dy * dy);
    if (length < 0.01f) return;
    dx /= length;
    dy /= length;
    ImVec2 base(tip.x - dx * size, tip.y - dy * size);
    ImVec2 side(-dy * size * 0.45f, dx * size * 0.45f);
    dl->AddTriangleFilled(tip, ImVec2(base.x + side.x, base.y + side.y), ImVec2(base.x - side.x, base.y - side.y), colour);
}

// Where the segment from the centre of r towards `toward` leaves r (layout units).
LayoutPoint border_point(const LayoutRect& r, LayoutPoint toward) {
    float cx = (r.x0 + r.x1) * 0.5f, cy = (r.y0 + r.y1) * 0.5f;
    float dx = toward.x - cx, dy = toward.y - cy;
    float hw = (r.x1 - r.x0) * 0.5f, hh = (r.y1 - r.y0) * 0.5f;
    if (std::fabs(dx) < 1e-3f && std::fabs(dy) < 1e-3f) return {cx, cy};
    float t = std::min(std::fabs(dx) > 1e-3f ? hw / std::fabs(dx) : 1e9f, std::fabs(dy) > 1e-3f ? hh / std::fabs(dy) : 1e9f);
    return {cx + dx * t, cy + dy * t};
}

bool intersects(const LayoutRect& r, const LayoutRect& view) {
    return r.x1 >= view.x0 && r.x0 <= view.x1 && r.y1 >= view.y0 && r.y0 <= view.y1;
}

// ============================================================================================
// [SECTION] menu

// Text of one line of a node list: "#5 mm".
std::string node_label(const ViewerState& s, int64_t id) {
    const NodeRecord* r = record_find(s.model.records, id);
    return "#" + std::to_string(id) + (r ? " " + r->op : std::string(" (freed)"));
}

void draw_tooltip(ViewerState& s, const ViewBox& b) {
    ImGui::BeginTooltip();
    const NodeRecord* r = record_find(s.model.records, b.node_id);
    if (b.kind == BOX_CLUSTER && b.cluster >= 0) {
        const Cluster& c = s.model.view.clusters[b.cluster];
        ImGui::TextUnformatted(c.title.c_str());
        ImGui::TextDisabled("%d ops, collapsed (double-click to open)", static_cast<int>(c.members.size()));
        for (size_t i = 0; i < c.members.size() && i < 10; ++i) ImGui::Text("  %s", node_label(s, c.members[i]).c_str());
        if (c.members.size() > 10) ImGui::TextDisabled("  ... %d more", static_cast<int>(c.members.size() - 10));
    } else if (b.kind == BOX_STUB) {
        ImGui::Text("#%lld: freed (no tensor reaches it any more)", static_cast<long long>(b.node_id));
    } else if (r) {
        ImGui::Text("#%lld %s   %s %s", static_cast<long long>(r->id), r->op.c_str(), r->shape.c_str(), r->dtype.c_str());
        if (!r->name.empty()) ImGui::Text("global: %s", r->name.c_str());
        if (r->phase == PHASE_BACKWARD) ImGui::Text("backward: part of the gradient of %s", node_label(s, r->group).c_str());
        else ImGui::TextUnformatted(r->is_leaf ? (r->requires_grad ? "leaf, requires grad" : "leaf") : "forward op");
        std::string where = source_loc_str(r->where);
        std::string text = source_line_text(source_file_name(r->where.file), r->where.line);
        ImGui::Text("%s", where.c_str());
        if (!text.empty()) ImGui::TextDisabled("  %s", text.c_str());
        if (b.kind == BOX_GHOST) ImGui::TextDisabled("a copy of #%lld drawn next to this use", static_cast<long long>(r->id));
        if (!r->executed) ImGui::TextColored(ImVec4(0.9f, 0.5f, 0.1f, 1), "not run yet");
        if (b.is_function && b.member_count > 1) ImGui::TextDisabled("double-click to show the ops inside");
    }
    ImGui::EndTooltip();
}

// The menu of a right-clicked box: breakpoints (through the debugger's callbacks), going between
// a node and its gradient, opening and closing groups.
void draw_box_menu(ViewerState& s, const std::string& key) {
    auto found = s.model.view.box_by_key.find(key);
    if (found == s.model.view.box_by_key.end()) {
        ImGui::CloseCurrentPopup();
        return;
    }
    const ViewBox& b = s.model.view.boxes[found->second];
    const NodeRecord* r = record_find(s.model.records, b.node_id);
    ImGui::TextUnformatted(b.title.c_str());
    ImGui::Separator();
    if (ImGui::MenuItem("Select")) viewer_select(b.node_id, false);
    if (r && b.kind != BOX_CLUSTER) {
        ViewerControls c = s.stop.controls;
        int64_t id = r->id;
        // An op breakpoint names a forward op: in the backward pass it stops at that op's gradient
        // group, so a backward node offers its forward node's op.
        const NodeRecord* forward = r->phase == PHASE_BACKWARD ? record_find(s.model.records, r->group) : r;
        std::string op = forward ? forward->op.substr(0, forward->op.find('(')) : "";
        bool on_node = false;
        for (const ViewerBreakpoint& bp : s.stop.breakpoints) on_node = on_node || bp.node_id == id;
        std::string label = "Break at #" + std::to_string(id);
        if (ImGui::MenuItem(label.c_str(), nullptr, on_node, c.toggle_node_breakpoint != nullptr))
            viewer_defer([c, id] { c.toggle_node_breakpoint(id, c.user); });
        viewer_note_item(label);
        for (int phase = PHASE_FORWARD; phase <= PHASE_BACKWARD && !op.empty(); ++phase) {
            if (phase == PHASE_FORWARD && r->phase == PHASE_BACKWARD) continue;
            bool on_op = false;
            for (const ViewerBreakpoint& bp : s.stop.breakpoints) on_op = on_op || (bp.op == op && bp.phase == phase);
            label = "Break at every " + op + (phase == PHASE_BACKWARD ? " (its backward)" : " (forward)");
            if (ImGui::MenuItem(label.c_str(), nullptr, on_op, c.toggle_op_breakpoint != nullptr))
                viewer_defer([c, op, phase] { c.toggle_op_breakpoint(op.c_str(), phase, c.user); });
            viewer_note_item(label);
        }
        if (!c.toggle_node_breakpoint && !c.toggle_op_breakpoint) ImGui::TextDisabled("(no debugger attached)");
        ImGui::Separator();
        if (r->phase == PHASE_FORWARD) {
            int64_t first = 0;
            for (const NodeRecord& m : s.model.records)
                if (m.phase == PHASE_BACKWARD && m.group == id && m.inner_of == 0) {
                    first = m.id;
                    break;
                }
            if (first && ImGui::MenuItem(("Go to its gradient " + node_label(s, first)).c_str())) viewer_select(first, true);
        } else if (r->inner_of == 0 && ImGui::MenuItem(("Go to the forward node " + node_label(s, r->group)).c_str())) {
            viewer_select(r->group, true);
        }
        if (b.kind == BOX_GHOST && ImGui::MenuItem("Go to the original")) viewer_select(id, true);
    }
    if (b.kind == BOX_CLUSTER && b.cluster >= 0 && ImGui::MenuItem("Open this group"))
        viewer_set_expanded(cluster_state_key(s.model.view.clusters[b.cluster]), true);
    if (b.kind == BOX_NODE && b.is_function && b.member_count > 1 && ImGui::MenuItem("Show the ops inside"))
        viewer_set_expanded("fn:" + std::to_string(b.node_id), true);
    if (b.frame >= 0 && b.frame < static_cast<int>(s.model.view.clusters.size())) {
        const Cluster& c = s.model.view.clusters[b.frame];
        if (ImGui::MenuItem(("Close group: " + c.title).c_str())) viewer_set_expanded(cluster_state_key(c), false);
    }
}

// Find a node by "#12", "12" or an op name (the next match after the selection).
void find_node(ViewerState& s, const char* text) {
    while (*text == ' ' || *text == '#') ++text;
    if (!*text) return;
    char* end = nullptr;
    long long id = strtoll(text, &end, 10);
    if (end && *end == '\0' && id > 0) {
        viewer_select(id, true);
        return;
    }
    int64_t first = 0, next = 0;
    for (const NodeRecord& r : s.model.records) {
        if (r.op.find(text) == std::string::npos && r.name != text) continue;
        if (!first) first = r.id;
        if (!next && r.id > s.selection.node) next = r.id;
    }
    if (next || first) viewer_select(next ? next : first, true);
}

// ============================================================================================
// [SECTION] window

void draw_toolbar(ViewerState& s) {
    if (ImGui::Button("Fit")) {
        s.graph.fit_request = true;
        s.graph.camera = CAMERA_FIT;
    }
    ImGui::SameLine();
    ImGui::Text("%3.0f%%", s.graph.zoom * 100.0f);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(150);
    if (ImGui::InputTextWithHint("##find", "find: #id, op, name", s.graph.find_text, sizeof s.graph.find_text,
                                 ImGuiInputTextFlags_EnterReturnsTrue))
        find_node(s, s.graph.find_text);
    ImGui::SameLine();
    ImGui::Checkbox("legend", &s.graph.show_legend);
    ImGui::SameLine();
    int nodes = static_cast<int>(s.model.records.size());
    ImGui::TextDisabled("%d node%s, %d box%s", nodes, nodes == 1 ? "" : "s", static_cast<int>(s.model.view.boxes.size()),
                        s.model.view.boxes.size() == 1 ? "" : "es");
    if (!side_panes_shown(s)) {
        ImGui::SameLine();
        ImGui::TextDisabled(" click a node: its tensor and source open at the right ");
    }
    ImGui::SameLine();
    if (s.layout.requested && s.layout.worker.busy())
        ImGui::TextColored(ImVec4(0.95f, 0.75f, 0.3f, 1), "laying out... %.1f s",
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - s.layout.started).count());
    else if (s.layout.result.ok)
        ImGui::TextDisabled("layout %.0f ms", s.layout.result.seconds * 1000.0);
    if (!s.layout.result.error.empty()) {
        ImGui::SameLine();
        ImGui::TextColored(ImVec4(1, 0.4f, 0.4f, 1), "%s", s.layout.result.error.c_str());
    }
    if (s.plan.model) draw_plan_toolbar(s);
    if (s.model.view.cap_focus != 0) {
        // A plan's record that stands for no node (a .grad accumulation) has a synthetic id.
        std::string focus = s.model.view.cap_focus < PLAN_SYNTHETIC_ID ? "#" + std::to_string(s.model.view.cap_focus) : "the plan's last step";
        ImGui::TextColored(ImVec4(1, 0.85f, 0.3f, 1), "Showing %d boxes of %d nodes: the neighbourhood of %s (the node cap is in Options)",
                           static_cast<int>(s.model.view.boxes.size()), s.model.view.total_nodes, focus.c_str());
    }
}

// The colours, in a strip along the top of the canvas.
void draw_legend(ImDrawList* dl, ImVec2 origin, float width, bool diff) {
    struct Item {
        const char* text;
        ImU32 fill;
        bool dashed;
    };
    const Item items[] = {{"parameter", COLOUR_PARAM, false}, {"data", COLOUR_DATA, false},
                          {"op", COLOUR_OP, false},           {"backward", COLOUR_BACKWARD, false},
                          {"group", COLOUR_GROUP, false},     {"copy of a shared leaf", COLOUR_PARAM, true},
                          {"stopped", COLOUR_HIGHLIGHT, false}};
    dl->AddRectFilled(origin, ImVec2(origin.x + width, origin.y + LEGEND_HEIGHT), IM_COL32(255, 255, 255, 200));
    float x = origin.x + 6, y = origin.y + 3;
    for (const Item& item : items) {
        ImVec2 a(x, y + 2), b(x + 18, y + 13);
        dl->AddRectFilled(a, b, item.fill, 2);
        if (item.dashed) dashed_rect(dl, a, b, COLOUR_BORDER, 1);
        else dl->AddRect(a, b, COLOUR_BORDER, 2);
        dl->AddText(ImVec2(x + 23, y - 1), COLOUR_TEXT_DIM, item.text);
        x += 30 + ImGui::CalcTextSize(item.text).x;
    }
    if (!diff) return;
    const Item diff_items[] = {{"new this step", COLOUR_DIFF_NEW, false}, {"shape changed", COLOUR_DIFF_SHAPE, false},
                               {"value moved", IM_COL32(255, 190, 110, 255), false}};
    for (const Item& item : diff_items) {   // the diff option's marks
        ImVec2 a(x, y + 2), b(x + 18, y + 13);
        dl->AddRectFilled(a, b, item.fill, 2);
        dl->AddText(ImVec2(x + 23, y - 1), COLOUR_TEXT_DIM, item.text);
        x += 30 + ImGui::CalcTextSize(item.text).x;
    }
}

}  // namespace

// The diff option: a box's value moved by `change` (relative) since the step before: a warm tint,
// stronger as it moves more (full at a change of 1, the size of the value itself).
static ImU32 diff_tint(double change) {
    float t = static_cast<float>(std::min(change, 1.0));
    return IM_COL32(255, 140, 0, static_cast<int>(30 + 110 * t));
}

// A badge over a box's top-right corner: "new" (green) for a node the step before did not have,
// "shape" (orange) for one whose shape changed (the box is outlined in that colour too).
static void draw_diff_badge(ImDrawList* dl, const ViewerDiffMark& m, ImVec2 a, ImVec2 c, float label_px) {
    const char* text = m.is_new ? "new" : !m.shape_before.empty() ? "shape" : nullptr;
    if (!text) return;
    ImU32 colour = m.is_new ? COLOUR_DIFF_NEW : COLOUR_DIFF_SHAPE;
    float px = std::max(label_px * 0.8f, 9.0f);
    ImVec2 size = ImGui::GetFont()->CalcTextSizeA(px, FLT_MAX, 0, text);
    ImVec2 p0(c.x - size.x - 6, a.y - size.y * 0.6f), p1(c.x + 2, a.y - size.y * 0.6f + size.y + 2);
    dl->AddRectFilled(p0, p1, colour, 3);
    dl->AddText(ImGui::GetFont(), px, ImVec2(p0.x + 3, p0.y + 1), IM_COL32(255, 255, 255, 255), text);
}

// ============================================================================================
// [SECTION] frame

namespace {

// One frame of the Graph window: the canvas, the camera, the level of detail, what the timeline
// and the stop mark, and the labels gathered while the boxes are drawn (drawn last, in one pass
// with the labels' font texture).
struct GraphFrame {
    ImVec2 origin{0, 0}, size{0, 0};   // the canvas on screen
    bool hovered = false, active = false, dragging = false;
    Camera cam{};
    LayoutRect visible{};              // the canvas in layout units
    float z = 1, label_px = 0;
    bool labels = false, details = false, curves = false;
    int highlighted = -1;              // the box of the stop (or of the timeline's event)
    int64_t stop_group = 0;            // stopped in the backward pass: the forward node it is at
    std::vector<char> later;           // boxes of nodes recorded after the event shown
    int hovered_box = -1, selected_box = -1;
    struct Text {
        ImVec2 pos;
        ImU32 colour;
        const std::string* text;
        ImVec4 clip;
    };
    std::vector<Text> texts;
    std::deque<std::string> frame_titles;   // stable addresses for `texts`
};

// The canvas: an invisible button over what the toolbar leaves, with the toolbar's background
// drawn behind it (channel 0; the window itself has none).
GraphFrame graph_canvas(ViewerState& s, const Tile& tile, ImDrawList* window_dl) {
    GraphFrame f;
    f.origin = ImGui::GetCursorScreenPos();
    window_dl->ChannelsSetCurrent(0);
    window_dl->AddRectFilled(ImGui::GetWindowPos(), ImVec2(tile.pos.x + tile.size.x, f.origin.y), ImGui::GetColorU32(ImGuiCol_WindowBg));
    window_dl->ChannelsSetCurrent(1);
    f.size = ImGui::GetContentRegionAvail();
    f.size.x = std::max(f.size.x, 50.0f);
    f.size.y = std::max(f.size.y, 50.0f);
    s.graph.canvas_size = f.size;
    s.graph.canvas_origin = f.origin;
    ImGui::InvisibleButton("canvas", f.size,
                           ImGuiButtonFlags_MouseButtonLeft | ImGuiButtonFlags_MouseButtonRight |
                               ImGuiButtonFlags_MouseButtonMiddle);
    f.hovered = ImGui::IsItemHovered();
    f.active = ImGui::IsItemActive();
    return f;
}

// Camera: fit, the stop or selection into view, wheel zoom about the mouse, drag to pan.
void graph_camera_mouse(ViewerState& s, GraphFrame& f) {
    ImGuiIO& io = ImGui::GetIO();
    const GraphView& v = s.model.view;
    const Placement& p = s.layout.placement;
    GraphWindowState& g = s.graph;
    if ((g.fit_request || g.follow_request) && !v.boxes.empty() && p.rects.size() == v.boxes.size()) {
        if (g.fit_request) camera_fit(s, f.size);
        else camera_follow(s, f.size);
        g.fit_request = g.follow_request = false;
    }
    auto show_node = [&](int64_t id) {
        int b = v.box_of(id);
        if (b < 0 || b >= static_cast<int>(p.rects.size())) return false;
        if (p.provisional[b] && s.layout.requested && s.layout.worker.busy()) return false;   // wait for its place
        camera_show(s, p.rects[b], f.size);
        return true;
    };
    if (s.stop.scroll_to && s.stop.node && show_node(s.stop.node)) s.stop.scroll_to = false;
    if (s.selection.scroll_to && s.selection.node && show_node(s.selection.node)) s.selection.scroll_to = false;
    Camera cam{f.origin, g.pan, g.zoom};
    if (f.hovered && io.MouseWheel != 0 && io.KeyShift) {   // Shift+wheel scrolls up and down
        g.pan.y -= io.MouseWheel * 60.0f / g.zoom;
        g.camera = CAMERA_MANUAL;
    } else if (f.hovered && io.MouseWheel != 0) {
        ImVec2 anchor = cam.to_layout(io.MousePos);
        g.zoom = std::clamp(g.zoom * std::pow(1.15f, io.MouseWheel), MIN_ZOOM, MAX_ZOOM);
        g.pan = ImVec2(anchor.x - (io.MousePos.x - f.origin.x) / g.zoom, anchor.y - (io.MousePos.y - f.origin.y) / g.zoom);
        g.camera = CAMERA_MANUAL;
    }
    f.dragging = f.active && (ImGui::IsMouseDragging(ImGuiMouseButton_Left) || ImGui::IsMouseDragging(ImGuiMouseButton_Right) ||
                              ImGui::IsMouseDragging(ImGuiMouseButton_Middle));
    if (f.dragging) {
        g.pan = ImVec2(g.pan.x - io.MouseDelta.x / g.zoom, g.pan.y - io.MouseDelta.y / g.zoom);
        g.camera = CAMERA_MANUAL;
    }
}

// Camera keys (when the window has the focus): F fits, +/- zoom, arrows and page keys pan, Escape
// drops the selection.
void graph_camera_keys(ViewerState& s) {
    ImGuiIO& io = ImGui::GetIO();
    GraphWindowState& g = s.graph;
    if (!ImGui::IsWindowFocused() || io.WantTextInput) return;
    if (ImGui::IsKeyPressed(GLFW_KEY_F, false)) {
        g.fit_request = true;
        g.camera = CAMERA_FIT;
    }
    if (ImGui::IsKeyPressed(GLFW_KEY_EQUAL) || ImGui::IsKeyPressed(GLFW_KEY_KP_ADD))
        g.zoom = std::min(g.zoom * 1.2f, MAX_ZOOM);
    if (ImGui::IsKeyPressed(GLFW_KEY_MINUS) || ImGui::IsKeyPressed(GLFW_KEY_KP_SUBTRACT))
        g.zoom = std::max(g.zoom / 1.2f, MIN_ZOOM);
    if (ImGui::IsKeyPressed(GLFW_KEY_ESCAPE, false)) viewer_select(0, false);
    float step = 80.0f / g.zoom;
    if (ImGui::IsKeyPressed(GLFW_KEY_UP) || ImGui::IsKeyPressed(GLFW_KEY_PAGE_UP)) g.pan.y -= step * (ImGui::IsKeyPressed(GLFW_KEY_PAGE_UP) ? 5 : 1);
    if (ImGui::IsKeyPressed(GLFW_KEY_DOWN) || ImGui::IsKeyPressed(GLFW_KEY_PAGE_DOWN)) g.pan.y += step * (ImGui::IsKeyPressed(GLFW_KEY_PAGE_DOWN) ? 5 : 1);
    if (ImGui::IsKeyPressed(GLFW_KEY_LEFT)) g.pan.x -= step;
    if (ImGui::IsKeyPressed(GLFW_KEY_RIGHT)) g.pan.x += step;
}

// The camera as the input left it: what is visible, and the level of detail at this zoom.
void graph_frame_view(const ViewerState& s, GraphFrame& f) {
    const GraphWindowState& g = s.graph;
    f.cam = Camera{f.origin, g.pan, g.zoom};
    f.visible = LayoutRect{g.pan.x, g.pan.y, g.pan.x + f.size.x / g.zoom, g.pan.y + f.size.y / g.zoom};
    f.z = g.zoom;
    f.label_px = GRAPH_FONT_SIZE * f.z;
    f.labels = f.label_px >= 6.5f;
    f.details = f.label_px >= 9.0f;
    f.curves = f.z >= 0.3f;
}

// The marks of this frame. The timeline (window_timeline.cpp): the graph as it stood at an event:
// later nodes hidden, the event's node highlighted; the layout stays. Then the hovered box (the
// last drawn, topmost, under the mouse) and the selected one.
void graph_frame_marks(const ViewerState& s, GraphFrame& f) {
    const GraphView& v = s.model.view;
    const Placement& p = s.layout.placement;
    int64_t shown_stop = s.timeline.serial ? s.timeline.node : s.stop.node;
    bool shown_backward = s.timeline.serial ? s.timeline.backward : s.stop.backward;
    f.highlighted = shown_stop ? v.box_of(shown_stop) : -1;
    if (shown_stop && shown_backward) {
        const NodeRecord* stop = record_find(s.model.records, shown_stop);
        if (stop) f.stop_group = stop->phase == PHASE_BACKWARD ? stop->group : stop->id;
    }
    f.later.assign(v.boxes.size(), 0);
    if (s.timeline.serial)
        for (size_t i = 0; i < v.boxes.size(); ++i) f.later[i] = v.boxes[i].node_id != 0 && viewer_timeline_hides(s, v.boxes[i].node_id);
    if (f.hovered && !f.dragging && p.rects.size() == v.boxes.size()) {
        ImVec2 m = f.cam.to_layout(ImGui::GetIO().MousePos);
        for (int i = static_cast<int>(v.boxes.size()) - 1; i >= 0; --i) {
            const LayoutRect& r = p.rects[i];
            if (m.x >= r.x0 && m.x <= r.x1 && m.y >= r.y0 && m.y <= r.y1) {
                f.hovered_box = i;
                break;
            }
        }
    }
    f.selected_box = s.selection.node ? v.box_of(s.selection.node) : -1;
}

// Frames of open groups (only once the layout has placed them), with a title that closes them.
void draw_group_frames(ViewerState& s, GraphFrame& f, ImDrawList* dl) {
    const GraphView& v = s.model.view;
    ImGuiIO& io = ImGui::GetIO();
    float z = f.z;
    for (size_t c = 0; c < v.clusters.size(); ++c) {
        const Cluster& cluster = v.clusters[c];
        if (cluster.state != CLUSTER_EXPANDED) continue;
        auto it = s.layout.result.frames.find(cluster.key);
        if (it == s.layout.result.frames.end() || !intersects(it->second, f.visible)) continue;
        ImVec2 a = f.cam.to_screen(it->second.x0, it->second.y0), b = f.cam.to_screen(it->second.x1, it->second.y1);
        dl->AddRectFilled(a, b, IM_COL32(120, 140, 170, 28), 6 * z);
        dl->AddRect(a, b, COLOUR_FRAME, 6 * z, 0, 1.5f);
        if (f.labels) {
            f.frame_titles.push_back(cluster.title + "  [close]");
            const std::string& title = f.frame_titles.back();
            f.texts.push_back({ImVec2(a.x + 5 * z, a.y + 2 * z), COLOUR_FRAME, &title, ImVec4(a.x, a.y, b.x, b.y)});
            ImVec2 title_end(a.x + 5 * z + s.app.graph_font->CalcTextSizeA(f.label_px, FLT_MAX, 0, title.c_str()).x, a.y + f.label_px + 4 * z);
            if (f.hovered && ImGui::IsMouseClicked(ImGuiMouseButton_Left) && io.MousePos.x >= a.x &&
                io.MousePos.x <= title_end.x && io.MousePos.y >= a.y && io.MousePos.y <= title_end.y)
                viewer_set_expanded(cluster_state_key(cluster), false);
        }
    }
}

// One edge laid out by dot: its curve (a straight line when small on screen) and its arrow.
void draw_edge_path(const GraphFrame& f, ImDrawList* dl, const LayoutEdgePath& path, float edge_w, float arrow) {
    const Camera& cam = f.cam;
    const std::vector<LayoutPoint>& bz = path.bezier;
    ImVec2 last = cam.to_screen(bz.back().x, bz.back().y);
    ImVec2 tip = cam.to_screen(path.tip.x, path.tip.y);
    if (!f.curves) {
        dl->AddLine(cam.to_screen(bz[0].x, bz[0].y), tip, COLOUR_EDGE, 1.0f);
    } else {
        for (size_t k = 0; k + 3 < bz.size(); k += 3) {
            ImVec2 a = cam.to_screen(bz[k].x, bz[k].y), b = cam.to_screen(bz[k + 3].x, bz[k + 3].y);
            float length = std::fabs(b.x - a.x) + std::fabs(b.y - a.y);
            int segments = std::clamp(static_cast<int>(length / 14.0f), 2, 14);
            dl->AddBezierCubic(a, cam.to_screen(bz[k + 1].x, bz[k + 1].y), cam.to_screen(bz[k + 2].x, bz[k + 2].y),
                               b, COLOUR_EDGE, edge_w, segments);
        }
        if (std::fabs(tip.x - last.x) + std::fabs(tip.y - last.y) > 0.5f)
            dl->AddLine(last, tip, COLOUR_EDGE, edge_w);
    }
    ImVec2 from = std::fabs(tip.x - last.x) + std::fabs(tip.y - last.y) > 0.5f
                      ? last
                      : cam.to_screen(bz[bz.size() - 2].x, bz[bz.size() - 2].y);
    arrow_head(dl, from, tip, arrow, COLOUR_EDGE);
}

// Edges laid out by dot: their curves; edges to boxes not laid out yet: straight.
void draw_edges(const ViewerState& s, const GraphFrame& f, ImDrawList* dl) {
    const GraphView& v = s.model.view;
    const Placement& p = s.layout.placement;
    float edge_w = std::clamp(1.2f * f.z, 1.0f, 2.0f);
    float arrow = std::clamp(7.0f * f.z, 3.0f, 10.0f);
    for (size_t i = 0; i < v.edges.size(); ++i) {
        const ViewEdge& e = v.edges[i];
        if (e.cross || f.later[e.from] || f.later[e.to]) continue;
        const LayoutEdgePath* path = p.paths[i];
        if (path) {
            if (!intersects(path->bounds, f.visible)) continue;
            draw_edge_path(f, dl, *path, edge_w, arrow);
        } else {
            const LayoutRect& a = p.rects[e.from];
            const LayoutRect& b = p.rects[e.to];
            LayoutRect span{std::min(a.x0, b.x0), std::min(a.y0, b.y0), std::max(a.x1, b.x1), std::max(a.y1, b.y1)};
            if (!intersects(span, f.visible)) continue;
            LayoutPoint ca{(a.x0 + a.x1) * 0.5f, (a.y0 + a.y1) * 0.5f}, cb{(b.x0 + b.x1) * 0.5f, (b.y0 + b.y1) * 0.5f};
            LayoutPoint pa = border_point(a, cb), pb = border_point(b, ca);
            ImVec2 sa = f.cam.to_screen(pa.x, pa.y), sb = f.cam.to_screen(pb.x, pb.y);
            dl->AddLine(sa, sb, fade(COLOUR_EDGE, 0.6f), edge_w);
            arrow_head(dl, sa, sb, arrow, fade(COLOUR_EDGE, 0.6f));
        }
    }
}

// Forward value -> backward node (saved tensors): never given to dot, drawn over it. All of them
// while they stay few enough to read (CROSS_EDGES_AUTO), else those touching the hovered, selected
// or stopped box.
void draw_cross_edges(const ViewerState& s, const GraphFrame& f, ImDrawList* dl) {
    const GraphView& v = s.model.view;
    const Placement& p = s.layout.placement;
    CrossEdgeMode cross_mode = s.graph.cross_edges;
    if (cross_mode == CROSS_EDGES_AUTO) {
        int count = 0;
        for (const ViewEdge& e : v.edges) count += e.cross;
        cross_mode = count <= 30 ? CROSS_EDGES_ALL : CROSS_EDGES_SELECTION;
    }
    if (cross_mode == CROSS_EDGES_NONE) return;
    float arrow = std::clamp(7.0f * f.z, 3.0f, 10.0f);
    for (const ViewEdge& e : v.edges) {
        if (!e.cross || f.later[e.from] || f.later[e.to]) continue;
        bool touches = e.from == f.hovered_box || e.to == f.hovered_box || e.from == f.selected_box ||
                       e.to == f.selected_box || (f.highlighted >= 0 && (e.from == f.highlighted || e.to == f.highlighted));
        if (cross_mode == CROSS_EDGES_SELECTION && !touches) continue;
        const LayoutRect& a = p.rects[e.from];
        const LayoutRect& b = p.rects[e.to];
        LayoutRect span{std::min(a.x0, b.x0), std::min(a.y0, b.y0), std::max(a.x1, b.x1), std::max(a.y1, b.y1)};
        if (!intersects(span, f.visible)) continue;
        bool left_to_right = a.x1 <= b.x0;
        ImVec2 sa = f.cam.to_screen(left_to_right ? a.x1 : a.x0, (a.y0 + a.y1) * 0.5f);
        ImVec2 sb = f.cam.to_screen(left_to_right ? b.x0 : b.x1, (b.y0 + b.y1) * 0.5f);
        float bend = std::max(std::fabs(sb.x - sa.x) * 0.35f, 20.0f) * (left_to_right ? 1.0f : -1.0f);
        ImU32 colour = touches ? IM_COL32(130, 60, 200, 220) : COLOUR_CROSS_EDGE;
        float w = touches ? 2.0f : 1.0f;
        if (f.curves)
            dl->AddBezierCubic(sa, ImVec2(sa.x + bend, sa.y), ImVec2(sb.x - bend, sb.y), sb, colour, w, 12);
        else
            dl->AddLine(sa, sb, colour, w);
        arrow_head(dl, ImVec2(sb.x - bend, sb.y), sb, arrow * 0.8f, colour);
    }
}

// What the window draws for box i this frame, as tests read it (s.graph.drawn).
DrawnBox drawn_box_make(const ViewerState& s, const GraphFrame& f, size_t i) {
    const ViewBox& b = s.model.view.boxes[i];
    const LayoutRect& r = s.layout.placement.rects[i];
    DrawnBox d;
    d.box = static_cast<int>(i);
    d.key = b.key;
    d.node_id = b.node_id;
    d.kind = b.kind;
    ImVec2 a = f.cam.to_screen(r.x0, r.y0), c = f.cam.to_screen(r.x1, r.y1);
    d.x0 = a.x;
    d.y0 = a.y;
    d.x1 = c.x;
    d.y1 = c.y;
    d.highlighted = static_cast<int>(i) == f.highlighted;
    d.selected = s.selection.node != 0 && b.node_id == s.selection.node && b.kind != BOX_STUB;
    d.visible = intersects(r, f.visible);
    if (!s.model.diff_marks.empty() && (b.kind == BOX_NODE || b.kind == BOX_GHOST)) {
        auto found = s.model.diff_marks.find(b.node_id);
        if (found != s.model.diff_marks.end()) {
            d.has_diff = true;
            d.diff = found->second;
        }
    }
    d.later = f.later[i] != 0;
    return d;
}

// How one box looks this frame: its fill and opacity, the plan's mark on it, whether it stands
// for several nodes (drawn stacked).
struct BoxLook {
    ImU32 fill = COLOUR_OP;
    float alpha = 1;
    const PlanBoxMark* plan_mark = nullptr;
    bool stacked = false;
};

BoxLook box_look(const ViewerState& s, size_t i, const DrawnBox& d) {
    const ViewBox& b = s.model.view.boxes[i];
    BoxLook look;
    look.alpha = s.layout.placement.provisional[i] ? 0.55f : (b.kind == BOX_GHOST ? 0.8f : 1.0f);
    look.fill = d.highlighted ? COLOUR_HIGHLIGHT : box_fill(b);
    if (!b.executed && !d.highlighted) look.fill = COLOUR_OP;
    look.plan_mark = s.plan.model && b.kind == BOX_NODE ? plan_mark_of(*s.plan.model, s.plan.stage, b.node_id) : nullptr;
    if (look.plan_mark) plan_box_fill(s, b, *look.plan_mark, &look.fill, &look.alpha);
    look.stacked = b.kind == BOX_CLUSTER || (b.is_function && b.member_count > 1);
    return look;
}

// A box too small for a label: square rectangles, the outline as an underlay.
void draw_box_small(ImDrawList* dl, const ViewBox& b, const DrawnBox& d, const BoxLook& look, ImVec2 a, ImVec2 c) {
    float edge = d.highlighted ? 2.5f : d.selected ? 2.0f : 1.0f;
    ImU32 outline = d.highlighted  ? COLOUR_HIGHLIGHT_BORDER
                    : d.selected   ? COLOUR_SELECTED
                    : b.kind == BOX_GHOST || b.kind == BOX_STUB ? fade(COLOUR_BORDER, 0.45f)
                                   : fade(COLOUR_BORDER, look.alpha);
    if (look.stacked) dl->AddRectFilled(ImVec2(a.x + 2, a.y + 2), ImVec2(c.x + 3, c.y + 3), outline);
    dl->AddRectFilled(ImVec2(a.x - edge, a.y - edge), ImVec2(c.x + edge, c.y + edge), outline);
    if (b.kind != BOX_STUB) dl->AddRectFilled(a, c, fade(look.fill, look.alpha));
}

// A box big enough for its label: rounded, stacked when it stands for several nodes, its fill, the
// diff option's tint, its border (dashed for ghosts, stubs and nodes not run), the plan's marks,
// and the outlines of the shape change, the selection and the hover.
void draw_box_shape(const GraphFrame& f, ImDrawList* dl, size_t i, const ViewBox& b, const DrawnBox& d,
                    const BoxLook& look, ImVec2 a, ImVec2 c) {
    float z = f.z, alpha = look.alpha;
    float round = std::min(4.0f * z, 6.0f);
    if (look.stacked) {
        float off = std::clamp(3.0f * z, 2.0f, 4.0f);
        dl->AddRectFilled(ImVec2(a.x + 2 * off, a.y + 2 * off), ImVec2(c.x + 2 * off, c.y + 2 * off), fade(look.fill, alpha * 0.6f), round);
        dl->AddRect(ImVec2(a.x + 2 * off, a.y + 2 * off), ImVec2(c.x + 2 * off, c.y + 2 * off), fade(COLOUR_BORDER, alpha * 0.6f), round);
        dl->AddRectFilled(ImVec2(a.x + off, a.y + off), ImVec2(c.x + off, c.y + off), fade(look.fill, alpha), round);
        dl->AddRect(ImVec2(a.x + off, a.y + off), ImVec2(c.x + off, c.y + off), fade(COLOUR_BORDER, alpha), round);
    }
    if (b.kind != BOX_STUB) dl->AddRectFilled(a, c, fade(look.fill, alpha), round);
    if (d.has_diff && d.diff.value_change > 0)   // the diff option: tinted by how much its value moved
        dl->AddRectFilled(a, c, diff_tint(d.diff.value_change), round);
    float border_w = std::clamp(z, 1.0f, 1.5f);
    if (d.highlighted) {
        dl->AddRect(ImVec2(a.x - 2, a.y - 2), ImVec2(c.x + 2, c.y + 2), COLOUR_HIGHLIGHT_BORDER, round + 2, 0, 3.0f);
    } else if (b.kind == BOX_GHOST || b.kind == BOX_STUB) {
        dashed_rect(dl, a, c, fade(COLOUR_BORDER, alpha), border_w);
    } else if (!b.executed) {
        dashed_rect(dl, a, c, IM_COL32(220, 120, 30, 255), 1.5f);
    } else {
        dl->AddRect(a, c, fade(COLOUR_BORDER, alpha), round, 0, border_w);
    }
    if (look.plan_mark) draw_plan_box_marks(dl, *look.plan_mark, a, c, z);
    if (d.has_diff && !d.diff.shape_before.empty() && !d.highlighted)
        dl->AddRect(ImVec2(a.x - 2, a.y - 2), ImVec2(c.x + 2, c.y + 2), COLOUR_DIFF_SHAPE, round + 2, 0, 2.5f);
    if (d.selected && !d.highlighted)
        dl->AddRect(ImVec2(a.x - 2, a.y - 2), ImVec2(c.x + 2, c.y + 2), COLOUR_SELECTED, round + 2, 0, 2.5f);
    if (static_cast<int>(i) == f.hovered_box && !d.highlighted)
        dl->AddRect(ImVec2(a.x - 1, a.y - 1), ImVec2(c.x + 1, c.y + 1), IM_COL32(30, 100, 255, 140), round + 1, 0, 1.5f);
}

// A box's dots: a breakpoint on its node; while stopped in the backward pass, whether a forward
// node's gradient is done, being computed, or still to come.
void draw_box_dots(const ViewerState& s, const GraphFrame& f, ImDrawList* dl, const ViewBox& b, ImVec2 a, ImVec2 c) {
    float mark = std::clamp(3.5f * f.z, 2.5f, 5.0f);
    const NodeRecord* rec = b.kind == BOX_NODE || b.kind == BOX_GHOST ? record_find(s.model.records, b.node_id) : nullptr;
    if (rec && b.kind == BOX_NODE && viewer_breakpoint_on_node(s, *rec))
        dl->AddCircleFilled(ImVec2(a.x + mark + 1, a.y + mark + 1), mark, COLOUR_BREAKPOINT);
    if (f.stop_group && b.phase == PHASE_FORWARD && b.requires_grad && b.kind != BOX_GHOST) {
        ImVec2 at(c.x - mark - 2, a.y + mark + 2);
        if (b.node_id > f.stop_group) dl->AddCircleFilled(at, mark, COLOUR_GRAD_DONE);
        else if (b.node_id == f.stop_group) dl->AddCircleFilled(at, mark, COLOUR_HIGHLIGHT_BORDER);
        else dl->AddCircle(at, mark, COLOUR_GRAD_PENDING, 0, 1.5f);
    }
}

// A box's label lines (title; when big enough, its detail, extra line and the pass's note), kept
// for the one pass of labels at the end.
void box_labels_add(GraphFrame& f, const ViewBox& b, const BoxLook& look, ImVec2 a, ImVec2 c) {
    float z = f.z;
    ImVec4 clip(a.x + 1, a.y + 1, c.x - 1, c.y - 1);
    float line = f.label_px + z;
    float y = a.y + 4 * z;
    float x = a.x + 8 * z;
    ImU32 text = b.kind == BOX_STUB ? COLOUR_TEXT_DIM : fade(COLOUR_TEXT, std::max(look.alpha, 0.8f));
    f.texts.push_back({ImVec2(x, y), text, &b.title, clip});
    if (!f.details) return;
    if (!b.detail.empty()) {
        y += line;
        f.texts.push_back({ImVec2(x, y), COLOUR_TEXT_DIM, &b.detail, clip});
    }
    if (!b.extra.empty()) {
        y += line;
        f.texts.push_back({ImVec2(x, y), COLOUR_TEXT_DIM, &b.extra, clip});
    }
    if (look.plan_mark && !look.plan_mark->note.empty()) {   // the pass's word on it
        y += line;
        f.texts.push_back({ImVec2(x, y), COLOUR_FRAME, &look.plan_mark->note, clip});
    }
}

// Boxes, with their labels, marks and outlines; the drawn model for tests on the side. The level
// of detail goes by the box's height on screen: a dot of colour, a plain rectangle, a labelled box.
void draw_boxes(ViewerState& s, GraphFrame& f, ImDrawList* dl) {
    const GraphView& v = s.model.view;
    s.graph.drawn.clear();
    s.graph.drawn.reserve(v.boxes.size());
    for (size_t i = 0; i < v.boxes.size(); ++i) {
        const ViewBox& b = v.boxes[i];
        s.graph.drawn.push_back(drawn_box_make(s, f, i));
        const DrawnBox& d = s.graph.drawn.back();
        if (d.later) continue;
        if (!d.visible) continue;
        ImVec2 a(d.x0, d.y0), c(d.x1, d.y1);
        BoxLook look = box_look(s, i, d);
        float height = c.y - a.y;
        if (height < 5.0f) {   // far away: a dot of colour
            dl->AddRectFilled(a, ImVec2(std::max(c.x, a.x + 1), std::max(c.y, a.y + 1)),
                              fade(look.fill == COLOUR_OP ? COLOUR_BORDER : look.fill, look.alpha));
            continue;
        }
        if (!f.labels || height < f.label_px + 6.0f) {
            draw_box_small(dl, b, d, look, a, c);
            continue;
        }
        draw_box_shape(f, dl, i, b, d, look, a, c);
        draw_box_dots(s, f, dl, b, a, c);
        if (d.has_diff && f.labels) draw_diff_badge(dl, d.diff, a, c, f.label_px);
        if (f.labels) box_labels_add(f, b, look, a, c);
    }
}

// Clicks: select, open/close groups, the menu.
void graph_clicks(ViewerState& s, const GraphFrame& f) {
    const GraphView& v = s.model.view;
    bool click_left = f.hovered && ImGui::IsMouseReleased(ImGuiMouseButton_Left) &&
                      ImGui::GetMouseDragDelta(ImGuiMouseButton_Left, 0.0f).x == 0 &&
                      ImGui::GetMouseDragDelta(ImGuiMouseButton_Left, 0.0f).y == 0;
    float right_drag = std::fabs(ImGui::GetMouseDragDelta(ImGuiMouseButton_Right, 0.0f).x) +
                       std::fabs(ImGui::GetMouseDragDelta(ImGuiMouseButton_Right, 0.0f).y);
    if (f.hovered_box < 0) {
        if (click_left) viewer_select(0, false);
        return;
    }
    const ViewBox& b = v.boxes[f.hovered_box];
    bool opens_on_click = b.kind == BOX_CLUSTER && b.cluster >= 0 &&
                          (v.clusters[b.cluster].kind == CLUSTER_MODULE || v.clusters[b.cluster].kind == CLUSTER_UPDATE ||
                           !v.clusters[b.cluster].name.empty());   // a module call (or its gradient) opens on a click
    if (ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) {
        if (b.kind == BOX_CLUSTER && b.cluster >= 0) viewer_set_expanded(cluster_state_key(v.clusters[b.cluster]), true);
        else if (b.is_function && b.member_count > 1) viewer_set_expanded("fn:" + std::to_string(b.node_id), true);
        else if (b.kind == BOX_GHOST) viewer_select(b.node_id, true);
    } else if (click_left && b.kind != BOX_STUB) {
        viewer_select(b.node_id, false);
        if (opens_on_click) viewer_set_expanded(cluster_state_key(v.clusters[b.cluster]), true);
    }
    if (f.hovered && ImGui::IsMouseReleased(ImGuiMouseButton_Right) && right_drag < 3.0f) {
        s.graph.menu_key = b.key;
        ImGui::OpenPopup("box_menu");
    }
    if (!ImGui::IsPopupOpen("box_menu")) draw_tooltip(s, b);
}

}  // namespace

void draw_graph_window(ViewerState& s, const Tile& tile) {
    ImGui::SetNextWindowPos(tile.pos);
    ImGui::SetNextWindowSize(tile.size);
    ImGuiWindowFlags flags = ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse |
                             ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse |
                             ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_NoBackground;
    // No window background under the canvas: on a software renderer a 1280x800 frame is fill-rate
    // bound (llvmpipe), so no pixel is drawn twice that need not be. The toolbar gets its own.
    ImGui::Begin("Graph", nullptr, flags);
    viewer_diff_refresh(s);
    ImDrawList* window_dl = ImGui::GetWindowDrawList();
    window_dl->ChannelsSplit(2);
    window_dl->ChannelsSetCurrent(1);
    draw_toolbar(s);
    GraphFrame f = graph_canvas(s, tile, window_dl);
    graph_camera_mouse(s, f);
    graph_camera_keys(s);
    graph_frame_view(s, f);

    const GraphView& v = s.model.view;
    ImDrawList* dl = ImGui::GetWindowDrawList();
    ImVec2 corner(f.origin.x + f.size.x, f.origin.y + f.size.y);
    dl->PushClipRect(f.origin, corner, true);
    dl->AddRectFilled(f.origin, corner, COLOUR_CANVAS);
    graph_frame_marks(s, f);
    if (s.layout.placement.rects.size() == v.boxes.size()) {
        draw_group_frames(s, f, dl);
        ImDrawListFlags saved_flags = dl->Flags;
        if (!f.curves || v.edges.size() > 1500) dl->Flags &= ~ImDrawListFlags_AntiAliasedLines;   // 1-px lines: 4 vertices
        draw_edges(s, f, dl);
        draw_cross_edges(s, f, dl);
        dl->Flags = saved_flags;
        draw_boxes(s, f, dl);
        if (s.plan.model) draw_plan_overlay(s, dl);
        dl->PushTextureID(s.app.graph_atlas->TexID);   // the labels, in one pass with their font
        for (const GraphFrame::Text& t : f.texts)
            dl->AddText(s.app.graph_font, f.label_px, t.pos, t.colour, t.text->c_str(), nullptr, 0, &t.clip);
        dl->PopTextureID();
    }
    if (s.graph.show_legend && s.plan.model) draw_plan_legend(s, dl, f.origin, f.size.x);
    else if (s.graph.show_legend) draw_legend(dl, f.origin, f.size.x, s.model.diff);
    if (v.boxes.empty()) {
        const char* text = "The tape is empty: run some tensor ops at the prompt.";
        dl->AddText(ImVec2(f.origin.x + 20, f.origin.y + 20), COLOUR_TEXT_DIM, text);
    }
    dl->PopClipRect();
    graph_clicks(s, f);
    window_dl->ChannelsMerge();
    if (ImGui::BeginPopup("box_menu")) {
        draw_box_menu(s, s.graph.menu_key);
        ImGui::EndPopup();
    }
    ImGui::End();
}

}  // namespace td
