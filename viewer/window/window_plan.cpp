// window_plan.cpp: the viewer's pass-by-pass mode (plan_model.h; docs/freeze.md, "Pass by pass").
//
// The Graph window shows a frozen function's recorded graph instead of the tape, laid out once;
// a pass selector picks the stage, and the stage changes only how boxes are drawn: dropped steps
// faded and struck through, merged ones dashed with an arrow to the step whose result they reuse,
// folded ones as data, fused groups framed as one, buffers as colours (one per buffer, with a
// legend), and under each box the pass's word on it.
#include <GLFW/glfw3.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "viewer_internal.h"

namespace td {

namespace {

constexpr ImU32 COLOUR_DROPPED_STRIKE = IM_COL32(200, 40, 40, 220);
constexpr ImU32 COLOUR_MERGE_ARROW = IM_COL32(130, 60, 200, 230);
constexpr ImU32 COLOUR_FUSED_FRAME = IM_COL32(40, 130, 60, 255);

ImU32 with_alpha(ImU32 colour, float alpha) {
    unsigned a = (colour >> IM_COL32_A_SHIFT) & 0xFF;
    a = static_cast<unsigned>(static_cast<float>(a) * alpha);
    return (colour & ~IM_COL32_A_MASK) | (a << IM_COL32_A_SHIFT);
}

void dashed_outline(ImDrawList* dl, ImVec2 p0, ImVec2 p1, ImU32 colour, float thickness) {
    auto dashed = [&](ImVec2 a, ImVec2 b) {
        float dx = b.x - a.x, dy = b.y - a.y, length = std::sqrt(dx * dx + dy * dy);
        for (float t = 0; t < length; t += 8.5f) {
            float e = std::min(t + 5.0f, length);
            dl->AddLine(ImVec2(a.x + dx * t / length, a.y + dy * t / length),
                        ImVec2(a.x + dx * e / length, a.y + dy * e / length), colour, thickness);
        }
    };
    dashed(p0, ImVec2(p1.x, p0.y));
    dashed(ImVec2(p1.x, p0.y), p1);
    dashed(p1, ImVec2(p0.x, p1.y));
    dashed(ImVec2(p0.x, p1.y), p0);
}

const DrawnBox* drawn_box_of(const ViewerState& s, int64_t id) {
    int b = s.model.view.box_of(id);
    if (b < 0) return nullptr;
    for (const DrawnBox& d : s.graph.drawn)
        if (d.box == b) return &d;
    return nullptr;
}

}  // namespace

void viewer_show_plan(std::shared_ptr<PlanModel> model, int stage) {
    ViewerState& s = viewer_state();
    bool was_plan = s.plan.model != nullptr;
    s.plan.model = std::move(model);
    s.plan.stage = std::clamp(stage, 0, PLAN_STAGES - 1);
    s.plan.records_fresh = false;
    s.model.records.clear();
    s.selection.node = 0;
    s.model.view_dirty = true;
    if (!s.plan.model || !was_plan) {   // a new picture: fit it (a plan after a plan keeps the camera's mode)
        s.graph.camera = CAMERA_FIT;
        s.graph.fit_request = true;
    }
    if (!s.plan.model) s.model.seen_tape_version = ~0ull;   // back to the tape: copy it again
    s.app.force_frames = std::max(s.app.force_frames, 3);
}

void viewer_plan_stage(int stage) {
    ViewerState& s = viewer_state();
    s.plan.stage = std::clamp(stage, 0, PLAN_STAGES - 1);
    s.app.force_frames = std::max(s.app.force_frames, 2);   // only the drawing changes: no new view, no layout
}

bool plan_records_refresh(ViewerState& s) {
    if (s.plan.records_fresh) return false;
    s.model.records = s.plan.model->records;
    s.tape.span = TapeWindowSpan();
    s.tape.span.nodes = s.tape.span.live = static_cast<int64_t>(s.model.records.size());
    s.tape.span.changed = true;
    s.plan.records_fresh = true;
    return true;
}

void draw_plan_toolbar(ViewerState& s) {
    ImGui::TextColored(ImVec4(0.25f, 0.45f, 0.25f, 1), "plan %s, pass by pass:", s.plan.model->name.c_str());
    for (int stage = 0; stage < PLAN_STAGES; ++stage) {
        ImGui::SameLine();
        char label[32];
        snprintf(label, sizeof label, "%d %s", stage, plan_stage_name(stage));
        bool current = stage == s.plan.stage;
        if (current) ImGui::PushStyleColor(ImGuiCol_Button, ImGui::GetStyleColorVec4(ImGuiCol_ButtonActive));
        if (ImGui::Button(label)) viewer_plan_stage(stage);
        if (current) ImGui::PopStyleColor();
        viewer_note_item(std::string("pass ") + plan_stage_name(stage));
    }
    ImGuiIO& io = ImGui::GetIO();
    if (ImGui::IsWindowFocused() && !io.WantTextInput) {
        for (int stage = 0; stage < PLAN_STAGES; ++stage)
            if (ImGui::IsKeyPressed(GLFW_KEY_0 + stage, false)) viewer_plan_stage(stage);
    }
    if (ImGui::SmallButton("back to the tape")) viewer_defer([] { viewer_show_plan(nullptr, 0); });
    viewer_note_item("back to the tape");
    ImGui::SameLine();
    ImGui::TextDisabled("%s", s.plan.model->summary[s.plan.stage].c_str());
}

constexpr int STAGE_FUSE = 4, STAGE_REUSE = 6;

void plan_box_fill(const ViewerState& s, const ViewBox& box, const PlanBoxMark& mark, ImU32* fill, float* alpha) {
    if (s.plan.stage == STAGE_REUSE && !box.is_leaf) *fill = COLOUR_OP;   // only buffers coloured
    if (mark.buffer >= 0) *fill = plan_buffer_colour(mark.buffer);
    if (mark.state == PLAN_FOLDED) *fill = COLOUR_DATA;
    if (mark.state == PLAN_DROPPED || mark.state == PLAN_MERGED) *alpha = std::min(*alpha, 0.35f);
}

void draw_plan_box_marks(ImDrawList* dl, const PlanBoxMark& mark, ImVec2 a, ImVec2 c, float zoom) {
    float w = std::clamp(1.5f * zoom, 1.0f, 2.5f);
    if (mark.state == PLAN_DROPPED) {   // struck through
        dl->AddLine(a, c, COLOUR_DROPPED_STRIKE, w);
        dl->AddLine(ImVec2(a.x, c.y), ImVec2(c.x, a.y), COLOUR_DROPPED_STRIKE, w);
    } else if (mark.state == PLAN_MERGED) {
        dashed_outline(dl, ImVec2(a.x - 2, a.y - 2), ImVec2(c.x + 2, c.y + 2), COLOUR_MERGE_ARROW, w);
    } else if (mark.state == PLAN_FOLDED) {
        dashed_outline(dl, ImVec2(a.x - 2, a.y - 2), ImVec2(c.x + 2, c.y + 2), COLOUR_BORDER, w);
    }
    if (mark.in_place) dl->AddRect(ImVec2(a.x - 3, a.y - 3), ImVec2(c.x + 3, c.y + 3), COLOUR_FRAME, 4, 0, w);
}

void draw_plan_overlay(ViewerState& s, ImDrawList* dl) {
    const PlanModel& m = *s.plan.model;
    float z = s.graph.zoom;
    // Fused groups (from the fuse stage on): one frame around their boxes, titled, as an open
    // group's frame is drawn (an outline only: drawn over the boxes, it leaves their colours be).
    bool fused_shown = s.plan.stage >= STAGE_FUSE;
    for (size_t g = 0; fused_shown && g < m.fused.size(); ++g) {
        float x0 = 1e30f, y0 = 1e30f, x1 = -1e30f, y1 = -1e30f;
        int boxes = 0;
        for (int64_t id : m.fused[g]) {
            const DrawnBox* d = drawn_box_of(s, id);
            if (!d) continue;
            x0 = std::min(x0, d->x0);
            y0 = std::min(y0, d->y0);
            x1 = std::max(x1, d->x1);
            y1 = std::max(y1, d->y1);
            ++boxes;
        }
        if (!boxes) continue;
        float pad = 6 * z;
        bool titled = GRAPH_FONT_SIZE * z >= 9.0f;   // as box labels: no title when too small to read
        ImVec2 a(x0 - pad, y0 - pad - (titled ? 14 : 0)), c(x1 + pad, y1 + pad);
        dl->AddRect(a, c, COLOUR_FUSED_FRAME, 6 * z, 0, 2.0f);
        char title[48];
        snprintf(title, sizeof title, "fused loop %zu: %zu ops", g + 1, m.fused[g].size());
        if (titled) dl->AddText(ImVec2(a.x + 4, a.y + 1), COLOUR_FUSED_FRAME, title);
    }
    // Merged boxes point at the box whose result they reuse.
    for (const DrawnBox& d : s.graph.drawn) {
        if (d.kind != BOX_NODE) continue;
        const PlanBoxMark* mark = plan_mark_of(m, s.plan.stage, d.node_id);
        if (!mark || mark->state != PLAN_MERGED || !mark->merged_into) continue;
        const DrawnBox* kept = drawn_box_of(s, mark->merged_into);
        if (!kept) continue;
        ImVec2 from((d.x0 + d.x1) * 0.5f, (d.y0 + d.y1) * 0.5f), to((kept->x0 + kept->x1) * 0.5f, (kept->y0 + kept->y1) * 0.5f);
        // end at the kept box's border, on the line between the centres
        float dx = to.x - from.x, dy = to.y - from.y;
        float hw = (kept->x1 - kept->x0) * 0.5f + 3, hh = (kept->y1 - kept->y0) * 0.5f + 3;
        float t = 1.0f;
        if (std::fabs(dx) > 1e-3f) t = std::min(t, hw / std::fabs(dx));
        if (std::fabs(dy) > 1e-3f) t = std::min(t, hh / std::fabs(dy));
        ImVec2 tip(to.x - dx * t, to.y - dy * t);
        ImVec2 mid((from.x + tip.x) * 0.5f + dy * 0.15f, (from.y + tip.y) * 0.5f - dx * 0.15f);
        dl->AddBezierQuadratic(from, mid, tip, COLOUR_MERGE_ARROW, 2.0f, 16);
        float ax = tip.x - mid.x, ay = tip.y - mid.y, len = std::sqrt(ax * ax + ay * ay);
        if (len > 1) {
            ax /= len;
            ay /= len;
            float size = 9;
            dl->AddTriangleFilled(tip, ImVec2(tip.x - ax * size - ay * size * 0.5f, tip.y - ay * size + ax * size * 0.5f),
                                  ImVec2(tip.x - ax * size + ay * size * 0.5f, tip.y - ay * size - ax * size * 0.5f),
                                  COLOUR_MERGE_ARROW);
        }
    }
}

void draw_plan_legend(const ViewerState& s, ImDrawList* dl, ImVec2 origin, float width) {
    const float height = 20.0f;   // window_graph.cpp's LEGEND_HEIGHT
    dl->AddRectFilled(origin, ImVec2(origin.x + width, origin.y + height), IM_COL32(255, 255, 255, 215));
    float x = origin.x + 6, y = origin.y + 3;
    auto item = [&](const std::string& text, ImU32 fill, int style) {   // style: 0 box, 1 struck, 2 dashed, 3 frame, 4 in place
        if (x + 30 + ImGui::CalcTextSize(text.c_str()).x > origin.x + width) return;
        ImVec2 a(x, y + 2), b(x + 18, y + 13);
        dl->AddRectFilled(a, b, fill, 2);
        dl->AddRect(a, b, style == 3 ? COLOUR_FUSED_FRAME : COLOUR_BORDER, 2, 0, style == 3 ? 2.0f : 1.0f);
        if (style == 1) {
            dl->AddLine(a, b, COLOUR_DROPPED_STRIKE, 1.5f);
            dl->AddLine(ImVec2(a.x, b.y), ImVec2(b.x, a.y), COLOUR_DROPPED_STRIKE, 1.5f);
        }
        if (style == 4) dl->AddRect(ImVec2(a.x - 2, a.y - 2), ImVec2(b.x + 2, b.y + 2), COLOUR_FRAME, 3, 0, 1.5f);
        if (style == 2) dashed_outline(dl, ImVec2(a.x - 1, a.y - 1), ImVec2(b.x + 1, b.y + 1), COLOUR_MERGE_ARROW, 1.5f);
        dl->AddText(ImVec2(x + 23, y - 1), COLOUR_TEXT_DIM, text.c_str());
        x += 30 + ImGui::CalcTextSize(text.c_str()).x;
    };
    int stage = s.plan.stage;
    if (stage == STAGE_REUSE) {   // the buffers, one colour each
        item("own bytes (returned, .grad)", COLOUR_OP, 0);
    } else {
        item("step", COLOUR_OP, 0);
        item("backward", COLOUR_BACKWARD, 0);
        if (stage >= 1) item("dropped (dce)", with_alpha(COLOUR_OP, 0.35f), 1);
        if (stage >= 2) item("merged (cse)", with_alpha(COLOUR_OP, 0.35f), 2);
        if (stage >= 3) item("folded", COLOUR_DATA, 2);
        if (stage >= 4) item("fused loop", IM_COL32(40, 130, 60, 40), 3);
        if (stage >= 5) item("in place", COLOUR_OP, 4);
    }
    if (stage == STAGE_REUSE)
        for (size_t b = 0; b < s.plan.model->buffer_bytes.size(); ++b) {
            char text[48];
            size_t bytes = s.plan.model->buffer_bytes[b];
            if (bytes < 1024) snprintf(text, sizeof text, "buf%zu %zu B", b, bytes);
            else snprintf(text, sizeof text, "buf%zu %.1f KiB", b, bytes / 1024.0);
            item(text, plan_buffer_colour(static_cast<int>(b)), 0);
        }
}

}  // namespace td
