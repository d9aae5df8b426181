// animate_render.cpp: one frame of :animate drawn with cairo, headless (an image surface, no
// window). The frame: a title bar (what happens in this frame and its source line), the graph as
// the viewer lays it out (model.h + layout.h) scaled to fit, a panel at the right with the value
// or gradient of the node being computed (a number, or statistics and a heatmap), and a legend.
// Colours and labels are the viewer's (docs/viewer.md): parameters blue, data grey-blue, forward
// ops white, backward ops orange, the node being computed yellow with a red outline; green dots
// on forward nodes whose gradient is done.
//
// [SECTION] colours and text   [SECTION] geometry   [SECTION] graph   [SECTION] panel   [SECTION] frame
#include <cairo.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "animate_internal.h"
#include "heat_colour.h"
#include "format.h"

namespace td {

namespace {

// ============================================================================================
// [SECTION] colours and text

struct Colour {
    double r, g, b;
};
// The viewer's colours (viewer_internal.h, which needs ImGui: repeated here as plain values).
constexpr Colour BACKGROUND{1.0, 1.0, 1.0};
constexpr Colour CANVAS{246 / 255.0, 246 / 255.0, 243 / 255.0};
constexpr Colour PARAM{198 / 255.0, 226 / 255.0, 255 / 255.0};
constexpr Colour DATA{226 / 255.0, 232 / 255.0, 240 / 255.0};
constexpr Colour OP{1.0, 1.0, 1.0};
constexpr Colour BACKWARD{253 / 255.0, 222 / 255.0, 190 / 255.0};
constexpr Colour GROUP{214 / 255.0, 236 / 255.0, 206 / 255.0};
constexpr Colour GROUP_BACKWARD{247 / 255.0, 200 / 255.0, 160 / 255.0};
constexpr Colour BORDER{110 / 255.0, 110 / 255.0, 110 / 255.0};
constexpr Colour TEXT{20 / 255.0, 20 / 255.0, 20 / 255.0};
constexpr Colour TEXT_DIM{95 / 255.0, 95 / 255.0, 95 / 255.0};
constexpr Colour EDGE{90 / 255.0, 90 / 255.0, 90 / 255.0};
constexpr Colour BACKWARD_EDGE{205 / 255.0, 110 / 255.0, 25 / 255.0};   // the pending outline's orange
constexpr Colour CROSS_EDGE{150 / 255.0, 90 / 255.0, 200 / 255.0};
constexpr Colour HIGHLIGHT{255 / 255.0, 196 / 255.0, 0.0};
constexpr Colour HIGHLIGHT_BORDER{220 / 255.0, 50 / 255.0, 20 / 255.0};
constexpr Colour GRAD_DONE{40 / 255.0, 160 / 255.0, 60 / 255.0};
constexpr Colour GRAD_PENDING{150 / 255.0, 150 / 255.0, 150 / 255.0};
constexpr Colour FRAME{120 / 255.0, 140 / 255.0, 170 / 255.0};

constexpr double LABEL_SIZE = 13.0;   // the graph's label text, in layout units
const char* const FONT = "DejaVu Sans";

void set_colour(cairo_t* cr, Colour c, double alpha = 1.0) { cairo_set_source_rgba(cr, c.r, c.g, c.b, alpha); }

void set_font(cairo_t* cr, double size, bool bold = false) {
    cairo_select_font_face(cr, FONT, CAIRO_FONT_SLANT_NORMAL, bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, size);
}

// Text with its top-left corner at (x, y) in the current font; returns its advance.
double text_at(cairo_t* cr, double x, double y, const std::string& text) {
    cairo_font_extents_t fe;
    cairo_font_extents(cr, &fe);
    cairo_move_to(cr, x, y + fe.ascent);
    cairo_show_text(cr, text.c_str());
    cairo_text_extents_t te;
    cairo_text_extents(cr, text.c_str(), &te);
    return te.x_advance;
}

double text_width(cairo_t* cr, const std::string& text) {
    cairo_text_extents_t te;
    cairo_text_extents(cr, text.c_str(), &te);
    return te.x_advance;
}

// `text` cut (with an ellipsis) to fit `width` in the current font.
std::string text_fit(cairo_t* cr, const std::string& text, double width) {
    if (text_width(cr, text) <= width) return text;
    std::string s = text;
    while (!s.empty() && text_width(cr, s + "…") > width) {
        s.pop_back();
        while (!s.empty() && (static_cast<unsigned char>(s.back()) & 0xC0) == 0x80) s.pop_back();   // whole UTF-8 characters
    }
    return s + "…";
}

// `text` in lines of at most `width` (cut at spaces, or anywhere in a word longer than a line),
// from (x, y) down; returns the y under it.
double text_wrapped(cairo_t* cr, double x, double y, double width, double line_height, const std::string& text) {
    std::string rest = text;
    while (!rest.empty()) {
        size_t cut = rest.size();
        while (cut > 1 && text_width(cr, rest.substr(0, cut)) > width) {
            size_t space = rest.rfind(' ', cut - 1);
            cut = space == std::string::npos || space == 0 ? cut - 1 : space;
            while (cut > 1 && (static_cast<unsigned char>(rest[cut]) & 0xC0) == 0x80) --cut;   // whole UTF-8 characters
        }
        text_at(cr, x, y, rest.substr(0, cut));
        y += line_height;
        rest.erase(0, cut);
        if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
    }
    return y;
}

void rounded_rect(cairo_t* cr, double x0, double y0, double x1, double y1, double r) {
    r = std::min({r, (x1 - x0) / 2, (y1 - y0) / 2});
    cairo_new_sub_path(cr);
    cairo_arc(cr, x1 - r, y0 + r, r, -M_PI / 2, 0);
    cairo_arc(cr, x1 - r, y1 - r, r, 0, M_PI / 2);
    cairo_arc(cr, x0 + r, y1 - r, r, M_PI / 2, M_PI);
    cairo_arc(cr, x0 + r, y0 + r, r, M_PI, 3 * M_PI / 2);
    cairo_close_path(cr);
}

// ============================================================================================
// [SECTION] geometry

struct Geometry {
    double unit = 1;              // text scale of the frame's own text: 1 at 720 pixels high
    double title_h = 0;
    double panel_x = 0, panel_w = 0;
    double legend_y = 0;
    double area_x0 = 0, area_y0 = 0, area_x1 = 0, area_y1 = 0;   // where the graph is drawn
    double scale = 1, ox = 0, oy = 0;   // layout units -> pixels: x * scale + ox
    bool follows = false;               // zoomed in on the node computed (the whole graph is too small)
    double px(double x) const { return x * scale + ox; }
    double py(double y) const { return y * scale + oy; }
};

// The frame's parts, and the camera: the whole graph scaled to fit (at most 2x); where its labels
// would be under ANIMATE_LABEL_MIN_PX, frames that compute a node (`current`: its boxes) follow it
// at labels of 11 px (at 720 pixels high) instead, the start and the end show the whole graph.
Geometry geometry(const AnimationStory& story, int width, int height, const std::vector<char>* current = nullptr) {
    Geometry g;
    g.unit = height / 720.0;
    g.title_h = std::round(84 * g.unit);
    g.panel_w = std::round(width * 0.27);
    g.panel_x = width - g.panel_w;
    double margin = 14 * g.unit, legend_h = 30 * g.unit;
    g.legend_y = height - legend_h;
    double x0 = margin, y0 = g.title_h + margin, x1 = g.panel_x - margin, y1 = g.legend_y - margin * 0.5;
    g.area_x0 = x0, g.area_y0 = y0, g.area_x1 = x1, g.area_y1 = y1;
    const LayoutRect& b = story.layout.bounds;
    double bw = std::max(1.0f, b.x1 - b.x0), bh = std::max(1.0f, b.y1 - b.y0);
    g.scale = std::min({(x1 - x0) / bw, (y1 - y0) / bh, 2.0 * g.unit});
    g.ox = x0 + ((x1 - x0) - bw * g.scale) / 2 - b.x0 * g.scale;
    g.oy = y0 + ((y1 - y0) - bh * g.scale) / 2 - b.y0 * g.scale;
    if (!current || LABEL_SIZE * g.scale >= ANIMATE_LABEL_MIN_PX * g.unit) return g;
    // Follow: the bounds of the current boxes; when they do not fit, of its backward ones only.
    double scale = 11.0 * g.unit / LABEL_SIZE;
    for (int pass = 0; pass < 2; ++pass) {
        LayoutRect f{1e30f, 1e30f, -1e30f, -1e30f};
        for (size_t i = 0; i < current->size(); ++i) {
            if (!(*current)[i] || (pass == 1 && story.view.boxes[i].phase != PHASE_BACKWARD)) continue;
            auto r = story.layout.boxes.find(story.view.boxes[i].key);
            if (r == story.layout.boxes.end()) continue;
            f.x0 = std::min(f.x0, r->second.x0), f.y0 = std::min(f.y0, r->second.y0);
            f.x1 = std::max(f.x1, r->second.x1), f.y1 = std::max(f.y1, r->second.y1);
        }
        if (f.x1 < f.x0) return g;   // nothing to follow: the whole graph
        bool fits = (f.x1 - f.x0) * scale <= x1 - x0 && (f.y1 - f.y0) * scale <= y1 - y0;
        if (fits || pass == 1) {
            g.scale = scale;
            g.ox = (x0 + x1) / 2 - (f.x0 + f.x1) / 2 * scale;
            g.oy = (y0 + y1) / 2 - (f.y0 + f.y1) / 2 * scale;
            g.follows = true;
            return g;
        }
    }
    return g;
}

// ============================================================================================
// [SECTION] graph

// How a box looks in one frame.
struct BoxLook {
    bool shown = true;
    double alpha = 1.0;           // faded: not computed yet
    bool current = false;         // the node being computed, or a backward node of the group running
    bool pending = false;         // a backward node not run yet (the viewer's dashed orange outline)
    int dot = 0;                  // forward nodes in the backward pass: 1 done, 2 now, 3 to come
};

Colour box_fill(const ViewBox& b) {
    if (b.kind == BOX_CLUSTER && !b.is_function) return b.phase == PHASE_BACKWARD ? GROUP_BACKWARD : GROUP;
    if (b.phase == PHASE_BACKWARD) return BACKWARD;
    if (b.is_leaf) return b.requires_grad ? PARAM : DATA;
    return OP;
}

int step_of(const std::unordered_map<int64_t, int>& steps, int64_t id) {
    auto it = steps.find(id);
    return it == steps.end() ? -1 : it->second;
}

// The boxes of what this frame computes: the forward node's box (a collapsed group when it is in
// one), and in the backward pass the boxes of the backward nodes its rule ran.
std::vector<char> current_boxes(const AnimationStory& story, const AnimationFrame& f) {
    std::vector<char> current(story.view.boxes.size(), 0);
    if (f.kind != FRAME_FORWARD && f.kind != FRAME_BACKWARD) return current;
    int box = story.view.box_of(f.node);
    if (box >= 0) current[static_cast<size_t>(box)] = 1;
    if (f.kind == FRAME_BACKWARD)
        for (const NodeRecord& r : story.records) {
            if (r.phase != PHASE_BACKWARD || step_of(story.gradient_done_step, r.group) != f.groups_done - 1) continue;
            int b = story.view.box_of(r.id);
            if (b >= 0) current[static_cast<size_t>(b)] = 1;
        }
    return current;
}

BoxLook box_look(const AnimationStory& story, const AnimationFrame& f, const ViewBox& b, bool current) {
    BoxLook look;
    if (b.kind == BOX_STUB) {
        look.alpha = 0.5;
        return look;
    }
    if (b.phase == PHASE_FORWARD) {
        int step = step_of(story.forward_step, b.node_id);
        bool computed = step < 0 || step < f.forward_done;   // leaves (step -1) are known from the start
        look.alpha = computed || current ? 1.0 : 0.22;
        look.current = current;
        if (f.kind == FRAME_BACKWARD || f.kind == FRAME_DONE) {
            int done = step_of(story.gradient_done_step, b.node_id);   // the group after which its gradient is whole
            if (b.requires_grad && b.kind != BOX_GHOST && done >= 0) {
                int now = f.groups_done - 1;
                if (f.kind == FRAME_DONE) look.dot = 1;
                else if (story.group_step.count(b.node_id)) look.dot = done < now ? 1 : done == now ? 2 : 3;   // red: its rule runs now
                else look.dot = done <= now ? 1 : 3;   // a leaf: done once its last user's rule ran
            }
        }
        return look;
    }
    const NodeRecord* r = record_find(story.records, b.node_id);
    int group = r ? step_of(story.gradient_done_step, r->group) : -1;   // a leaf's: its .grad written then
    bool ran = f.kind == FRAME_DONE || (group >= 0 && group < f.groups_done);
    look.alpha = ran ? 1.0 : f.kind == FRAME_BACKWARD ? 0.45 : 0.18;
    look.pending = !ran;
    look.current = current;
    if (current) look.alpha = 1.0, look.pending = false;
    return look;
}

void draw_arrow(cairo_t* cr, double fx, double fy, double tx, double ty, double size) {
    double dx = tx - fx, dy = ty - fy, len = std::sqrt(dx * dx + dy * dy);
    if (len < 1e-6) return;
    dx /= len;
    dy /= len;
    cairo_move_to(cr, tx, ty);
    cairo_line_to(cr, tx - dx * size - dy * size * 0.45, ty - dy * size + dx * size * 0.45);
    cairo_line_to(cr, tx - dx * size + dy * size * 0.45, ty - dy * size - dx * size * 0.45);
    cairo_close_path(cr);
    cairo_fill(cr);
}

void draw_edges(cairo_t* cr, const AnimationStory& story, const AnimationFrame& f, const Geometry& g,
                const std::vector<BoxLook>& looks) {
    const GraphView& v = story.view;
    double s = g.scale;
    for (const ViewEdge& e : v.edges) {
        const ViewBox& from = v.boxes[e.from];
        const ViewBox& to = v.boxes[e.to];
        const BoxLook& lt = looks[e.to];
        if (e.cross) {   // a saved forward value read by a backward node: drawn for the running group only
            if (from.phase == to.phase || f.kind != FRAME_BACKWARD) continue;
            if (!(to.phase == PHASE_BACKWARD ? lt : looks[e.from]).current) continue;
            auto fr = story.layout.boxes.find(from.key), tr = story.layout.boxes.find(to.key);
            if (fr == story.layout.boxes.end() || tr == story.layout.boxes.end()) continue;
            double x0 = g.px((fr->second.x0 + fr->second.x1) / 2), y0 = g.py((fr->second.y0 + fr->second.y1) / 2);
            double x1 = g.px((tr->second.x0 + tr->second.x1) / 2), y1 = g.py((tr->second.y0 + tr->second.y1) / 2);
            set_colour(cr, CROSS_EDGE, 0.75);
            double dash[] = {5 * g.unit, 4 * g.unit};
            cairo_set_dash(cr, dash, 2, 0);
            cairo_set_line_width(cr, 1.6 * g.unit);
            cairo_move_to(cr, x0, y0);
            cairo_curve_to(cr, (x0 + x1) / 2, y0, (x0 + x1) / 2, y1, x1, y1);
            cairo_stroke(cr);
            cairo_set_dash(cr, nullptr, 0, 0);
            continue;
        }
        auto path = story.layout.edges.find(layout_edge_key(from.key, to.key));
        if (path == story.layout.edges.end() || path->second.bezier.size() < 4) continue;
        const std::vector<LayoutPoint>& bz = path->second.bezier;
        bool backward = to.phase == PHASE_BACKWARD;
        double alpha = std::min(lt.alpha, looks[e.from].alpha);
        Colour colour = backward ? BACKWARD_EDGE : EDGE;
        double w = std::clamp(1.2 * s, 1.0, 2.2) * (backward && !lt.pending ? 1.4 : 1.0);
        bool flowing = lt.current && backward == (f.kind == FRAME_BACKWARD);   // read by the node computed now
        if (flowing) {
            colour = HIGHLIGHT_BORDER;
            w *= 1.8;
            alpha = 1.0;
        }
        set_colour(cr, colour, alpha);
        cairo_set_line_width(cr, w);
        cairo_move_to(cr, g.px(bz[0].x), g.py(bz[0].y));
        for (size_t i = 1; i + 2 < bz.size(); i += 3)
            cairo_curve_to(cr, g.px(bz[i].x), g.py(bz[i].y), g.px(bz[i + 1].x), g.py(bz[i + 1].y), g.px(bz[i + 2].x), g.py(bz[i + 2].y));
        LayoutPoint last = bz.back(), tip = path->second.tip;
        cairo_line_to(cr, g.px(tip.x), g.py(tip.y));
        cairo_stroke(cr);
        draw_arrow(cr, g.px(last.x), g.py(last.y), g.px(tip.x), g.py(tip.y), std::clamp(7.0 * s, 5.0, 14.0) * (flowing ? 1.3 : 1.0));
    }
}

// Expanded groups: frames with their titles, under the boxes.
void draw_group_frames(cairo_t* cr, const AnimationStory& story, const Geometry& g) {
    const GraphView& v = story.view;
    double s = g.scale;
    for (const auto& fr : story.layout.frames) {
        const LayoutRect& r = fr.second;
        set_colour(cr, FRAME, 0.9);
        cairo_set_line_width(cr, 1.2);
        rounded_rect(cr, g.px(r.x0), g.py(r.y0), g.px(r.x1), g.py(r.y1), 6 * s);
        cairo_stroke(cr);
        for (const Cluster& c : v.clusters)
            if (c.key == fr.first && c.state == CLUSTER_EXPANDED) {
                set_font(cr, LABEL_SIZE * s * 0.9);
                text_at(cr, g.px(r.x0) + 5 * s, g.py(r.y0) + 2 * s, text_fit(cr, c.title, (r.x1 - r.x0) * s - 10 * s));
            }
    }
}

// One box's shape at (x0, y0)-(x1, y1): stacked for a collapsed group, its fill (the highlight
// while its forward op is the current step), its border (thick when current, dashed for ghosts,
// stubs and pending gradients), and its gradient dot.
void draw_box_shape(cairo_t* cr, const ViewBox& b, const BoxLook& look, const Geometry& g, double x0, double y0, double x1,
                    double y1) {
    double s = g.scale;
    double round = std::min(4.0 * s, 6.0);
    bool stacked = b.kind == BOX_CLUSTER && !b.is_function;
    Colour fill = box_fill(b);
    bool forward_current = look.current && b.phase == PHASE_FORWARD;
    if (forward_current) fill = HIGHLIGHT;
    if (stacked) {
        double off = std::clamp(3.0 * s, 2.0, 4.0);
        set_colour(cr, fill, look.alpha);
        rounded_rect(cr, x0 + off, y0 + off, x1 + off, y1 + off, round);
        cairo_fill_preserve(cr);
        set_colour(cr, BORDER, look.alpha);
        cairo_set_line_width(cr, 1);
        cairo_stroke(cr);
    }
    if (b.kind != BOX_STUB) {
        set_colour(cr, fill, look.alpha);
        rounded_rect(cr, x0, y0, x1, y1, round);
        cairo_fill(cr);
    }
    double border = std::clamp(s, 1.0, 1.6);
    if (look.current) {
        set_colour(cr, HIGHLIGHT_BORDER);
        cairo_set_line_width(cr, 3.0 * g.unit);
        rounded_rect(cr, x0 - 2, y0 - 2, x1 + 2, y1 + 2, round + 2);
        cairo_stroke(cr);
    } else if (b.kind == BOX_GHOST || b.kind == BOX_STUB || look.pending) {
        double dash[] = {4 * g.unit, 3 * g.unit};
        cairo_set_dash(cr, dash, 2, 0);
        set_colour(cr, look.pending ? BACKWARD_EDGE : BORDER, look.pending ? std::max(look.alpha, 0.5) : look.alpha);
        cairo_set_line_width(cr, border);
        rounded_rect(cr, x0, y0, x1, y1, round);
        cairo_stroke(cr);
        cairo_set_dash(cr, nullptr, 0, 0);
    } else {
        set_colour(cr, BORDER, look.alpha);
        cairo_set_line_width(cr, border);
        rounded_rect(cr, x0, y0, x1, y1, round);
        cairo_stroke(cr);
    }
    if (look.dot) {
        double mark = std::clamp(4.0 * s, 3.0, 7.0);
        double cx = x1 - mark - 2, cy = y0 + mark + 2;
        cairo_arc(cr, cx, cy, mark, 0, 2 * M_PI);
        if (look.dot == 3) {
            set_colour(cr, GRAD_PENDING);
            cairo_set_line_width(cr, 1.5);
            cairo_stroke(cr);
        } else {
            set_colour(cr, look.dot == 1 ? GRAD_DONE : HIGHLIGHT_BORDER);
            cairo_fill(cr);
        }
    }
}

// A box's labels: the viewer's lines (title, detail, extra), at its padding, clipped to the box.
void draw_box_labels(cairo_t* cr, const ViewBox& b, const BoxLook& look, const Geometry& g, double x0, double y0, double x1,
                     double y1) {
    double s = g.scale;
    set_font(cr, LABEL_SIZE * s);
    cairo_font_extents_t fe;
    cairo_font_extents(cr, &fe);
    double y = y0 + 4 * s, x = x0 + 8 * s;
    double text_alpha = std::max(look.alpha, 0.35);
    bool first = true;
    for (const std::string* line : {&b.title, &b.detail, &b.extra}) {
        if (line->empty()) continue;
        set_colour(cr, first ? TEXT : TEXT_DIM, text_alpha);
        cairo_save(cr);
        cairo_rectangle(cr, x0, y0, x1 - x0, y1 - y0);
        cairo_clip(cr);
        text_at(cr, x, y, *line);
        cairo_restore(cr);
        y += fe.height;
        first = false;
    }
}

// The story's boxes as `looks` has them in this frame (those not shown left out), over the frames
// of the open groups.
void draw_boxes(cairo_t* cr, const AnimationStory& story, const Geometry& g, const std::vector<BoxLook>& looks) {
    const GraphView& v = story.view;
    draw_group_frames(cr, story, g);
    for (size_t i = 0; i < v.boxes.size(); ++i) {
        const ViewBox& b = v.boxes[i];
        const BoxLook& look = looks[i];
        auto rect = story.layout.boxes.find(b.key);
        if (!look.shown || rect == story.layout.boxes.end()) continue;
        double x0 = g.px(rect->second.x0), y0 = g.py(rect->second.y0), x1 = g.px(rect->second.x1), y1 = g.py(rect->second.y1);
        draw_box_shape(cr, b, look, g, x0, y0, x1, y1);
        draw_box_labels(cr, b, look, g, x0, y0, x1, y1);
    }
}

// ============================================================================================
// [SECTION] panel

void set_heat(cairo_t* cr, double x, double lo, double hi) {
    uint32_t c = heat_colour(x, lo, hi);   // 0xAABBGGRR
    cairo_set_source_rgb(cr, (c & 0xFF) / 255.0, ((c >> 8) & 0xFF) / 255.0, ((c >> 16) & 0xFF) / 255.0);
}

// The panel's heatmap grid at (x, y), `w` wide and at most `room_h` high, and its colour bar
// (lo .. hi) under it; returns the y below them.
double draw_panel_grid(cairo_t* cr, const AnimationGrid& grid, double x, double y, double w, double room_h, double u) {
    double cell = std::min({w / grid.cols, room_h / grid.rows, 26 * u});
    double gx = x + (w - cell * grid.cols) / 2;
    for (int r = 0; r < grid.rows; ++r)
        for (int c = 0; c < grid.cols; ++c) {
            set_heat(cr, grid.values[static_cast<size_t>(r) * grid.cols + c], grid.lo, grid.hi);
            cairo_rectangle(cr, gx + c * cell, y + r * cell, cell + 0.5, cell + 0.5);
            cairo_fill(cr);
        }
    set_colour(cr, BORDER);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, gx, y, cell * grid.cols, cell * grid.rows);
    cairo_stroke(cr);
    y += cell * grid.rows + 10 * u;
    // The colour bar: lo .. hi.
    const int steps = 40;
    double bw = std::min(w, 240 * u), bx = x + (w - bw) / 2;
    for (int i = 0; i < steps; ++i) {
        set_heat(cr, grid.lo + (grid.hi - grid.lo) * (i + 0.5) / steps, grid.lo, grid.hi);
        cairo_rectangle(cr, bx + bw * i / steps, y, bw / steps + 0.5, 9 * u);
        cairo_fill(cr);
    }
    y += 12 * u;
    set_font(cr, 12 * u);
    set_colour(cr, TEXT_DIM);
    text_at(cr, bx, y, number_text(grid.lo));
    std::string hi = number_text(grid.hi);
    text_at(cr, bx + bw - text_width(cr, hi), y, hi);
    return y + 22 * u;
}

// The frame's panel on the right, its edge in `accent`: heading, what it shows, a note, the value
// (a number, or statistics and the heatmap grid), then the panel's lines while they fit.
void draw_panel(cairo_t* cr, const AnimationPanel& p, const Geometry& g, int height, Colour accent) {
    double u = g.unit;
    double x = g.panel_x + 16 * u, w = g.panel_w - 32 * u;
    double y = g.title_h + 14 * u;
    set_colour(cr, CANVAS);
    cairo_rectangle(cr, g.panel_x, g.title_h, g.panel_w, height - g.title_h);
    cairo_fill(cr);
    set_colour(cr, accent);
    cairo_rectangle(cr, g.panel_x, g.title_h, 4 * u, height - g.title_h);
    cairo_fill(cr);

    set_font(cr, 21 * u, true);
    set_colour(cr, TEXT);
    text_at(cr, x, y, text_fit(cr, p.heading, w));
    y += 30 * u;
    set_font(cr, 14 * u);
    set_colour(cr, TEXT_DIM);
    if (!p.what.empty()) {
        text_at(cr, x, y, text_fit(cr, p.what, w));
        y += 24 * u;
    }
    if (!p.note.empty()) {
        set_colour(cr, HIGHLIGHT_BORDER);
        y = text_wrapped(cr, x, y, w, 19 * u, p.note) + 6 * u;
    }
    if (p.has_value && p.scalar) {
        set_font(cr, 40 * u, true);
        set_colour(cr, TEXT);
        text_at(cr, x, y, text_fit(cr, number_text(p.scalar_value), w));
        y += 60 * u;
    } else if (p.has_value) {
        set_font(cr, 14 * u);
        set_colour(cr, TEXT);
        const TensorStats& st = p.stats;
        text_at(cr, x, y, "min " + number_text(st.min) + "   max " + number_text(st.max));
        y += 20 * u;
        text_at(cr, x, y, "mean " + number_text(st.mean) + "   norm " + number_text(st.norm));
        y += 20 * u;
        if (st.nan || st.inf()) {
            set_colour(cr, HIGHLIGHT_BORDER);
            text_at(cr, x, y, "NaN " + std::to_string(st.nan) + "   Inf " + std::to_string(st.inf()));
            y += 20 * u;
        }
        double room_h = height - y - 130 * u - 20.0 * u * static_cast<double>(p.lines.size());
        if (p.grid.rows > 0 && p.grid.cols > 0 && room_h > 20 * u) y = draw_panel_grid(cr, p.grid, x, y + 8 * u, w, room_h, u);
    }
    set_font(cr, 14 * u);
    set_colour(cr, TEXT);
    for (const std::string& line : p.lines) {
        if (y > height - 60 * u) break;
        y = text_wrapped(cr, x, y, w, 20 * u, line);
    }
}

void draw_legend(cairo_t* cr, const Geometry& g, int width) {
    double u = g.unit, x = 16 * u, y = g.legend_y + 6 * u, h = 14 * u;
    struct Item {
        const char* text;
        Colour fill, border;
    };
    const Item items[] = {{"parameter", PARAM, BORDER}, {"data", DATA, BORDER}, {"op", OP, BORDER},
                          {"backward op", BACKWARD, BORDER}, {"being computed", HIGHLIGHT, HIGHLIGHT_BORDER}};
    set_font(cr, 13 * u);
    for (const Item& it : items) {
        set_colour(cr, it.fill);
        cairo_rectangle(cr, x, y, 22 * u, h);
        cairo_fill_preserve(cr);
        set_colour(cr, it.border);
        cairo_set_line_width(cr, 1.2);
        cairo_stroke(cr);
        set_colour(cr, TEXT_DIM);
        x += 28 * u;
        x += text_at(cr, x, y - 1 * u, it.text) + 18 * u;
    }
    cairo_arc(cr, x + 6 * u, y + h / 2, 5 * u, 0, 2 * M_PI);
    set_colour(cr, GRAD_DONE);
    cairo_fill(cr);
    set_colour(cr, TEXT_DIM);
    x += 16 * u;
    x += text_at(cr, x, y - 1 * u, "gradient done") + 18 * u;
    (void)width;
}

}  // namespace

// ============================================================================================
// [SECTION] frame

void animation_measure(const std::string& text, float* width, float* height) {
    static cairo_surface_t* surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 1, 1);   // never freed: a cache
    static cairo_t* cr = cairo_create(surface);
    set_font(cr, LABEL_SIZE);
    cairo_font_extents_t fe;
    cairo_font_extents(cr, &fe);
    *width = static_cast<float>(text_width(cr, text));
    *height = static_cast<float>(fe.height);
}

double animation_label_px(const AnimationStory& story, int width, int height) {
    return LABEL_SIZE * geometry(story, width, height).scale / (height / 720.0);
}

void animation_render(const AnimationStory& story, int index, cairo_t* cr, int width, int height) {
    const AnimationFrame& f = story.frames[static_cast<size_t>(index)];
    std::vector<char> current = current_boxes(story, f);
    Geometry g = geometry(story, width, height, &current);
    double u = g.unit;
    set_colour(cr, BACKGROUND);
    cairo_paint(cr);

    std::vector<BoxLook> looks;
    looks.reserve(story.view.boxes.size());
    for (size_t i = 0; i < story.view.boxes.size(); ++i) looks.push_back(box_look(story, f, story.view.boxes[i], current[i] != 0));
    cairo_save(cr);
    cairo_rectangle(cr, 0, g.title_h, g.panel_x, g.legend_y - g.title_h);
    cairo_clip(cr);
    draw_edges(cr, story, f, g, looks);
    draw_boxes(cr, story, g, looks);
    cairo_restore(cr);
    if (g.follows) {   // say that this is a part of the graph
        const std::string note = "zoomed in on the node computed (the first and last frames show the whole graph)";
        set_font(cr, 13 * u);
        set_colour(cr, BACKGROUND, 0.85);
        cairo_rectangle(cr, 0, g.title_h, text_width(cr, note) + g.area_x0 + 8 * u, 24 * u);
        cairo_fill(cr);
        set_colour(cr, TEXT_DIM);
        text_at(cr, g.area_x0, g.title_h + 5 * u, note);
    }

    // The title bar: what happens, then where (the source line).
    Colour accent = f.kind == FRAME_BACKWARD ? HIGHLIGHT_BORDER : f.kind == FRAME_FORWARD ? Colour{0.85, 0.65, 0.0} : FRAME;
    set_colour(cr, CANVAS);
    cairo_rectangle(cr, 0, 0, width, g.title_h);
    cairo_fill(cr);
    set_colour(cr, accent);
    cairo_rectangle(cr, 0, g.title_h - 4 * u, width, 4 * u);
    cairo_fill(cr);
    set_font(cr, 26 * u, true);
    set_colour(cr, TEXT);
    text_at(cr, 18 * u, 10 * u, text_fit(cr, f.title, width - 36 * u));
    set_font(cr, 17 * u);
    set_colour(cr, TEXT_DIM);
    text_at(cr, 18 * u, 46 * u, text_fit(cr, f.where, width - 36 * u));

    draw_panel(cr, f.panel, g, height, accent);
    draw_legend(cr, g, width);
    // The frame counter, bottom right of the graph.
    set_font(cr, 13 * u);
    set_colour(cr, TEXT_DIM);
    std::string counter = std::to_string(index + 1) + " / " + std::to_string(story.frames.size());
    text_at(cr, g.panel_x - 14 * u - text_width(cr, counter), g.legend_y + 5 * u, counter);
}

}  // namespace td
