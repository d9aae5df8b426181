// window_source.cpp: the Source window: the script of the stopped (or selected) node, with the
// stop line marked, breakpoint dots in the gutter (a click there toggles one through the
// debugger's callback), and a dot on every line that recorded nodes (a click selects its newest).
#include <algorithm>
#include <map>

#include "source_cache.h"
#include "viewer_internal.h"

namespace td {

namespace {

constexpr ImU32 COLOUR_STOP_LINE = IM_COL32(120, 95, 0, 255);
constexpr ImU32 COLOUR_SELECTED_LINE = IM_COL32(40, 70, 120, 255);

// What the lines of the file shown are marked with: the stop's line, the selection's, and the
// lines that recorded nodes in this file (line -> newest node, and how many).
struct SourceMarks {
    int stop_line = 0;
    int selected_line = 0;
    std::map<int, int64_t> line_nodes;
    std::map<int, int> line_counts;
};

// Line i (0-based) of `text`: its highlight, gutter (a click toggles a breakpoint), number and
// text (a click selects the line's newest node).
void draw_source_line(ViewerState& s, const std::string& file, const std::string& text, int i, SourceMarks& m,
                      float line_h, float gutter) {
    ImDrawList* dl = ImGui::GetWindowDrawList();
    int line = i + 1;
    ImVec2 p = ImGui::GetCursorScreenPos();
    float width = std::max(ImGui::GetWindowWidth(), 600.0f);
    if (line == m.stop_line) dl->AddRectFilled(p, ImVec2(p.x + width, p.y + line_h), COLOUR_STOP_LINE);
    else if (line == m.selected_line) dl->AddRectFilled(p, ImVec2(p.x + width, p.y + line_h), COLOUR_SELECTED_LINE);
    ImVec2 dot(p.x + gutter * 0.5f, p.y + line_h * 0.5f);
    if (viewer_breakpoint_on_line(s, file, line)) dl->AddCircleFilled(dot, 5.0f, COLOUR_BREAKPOINT);
    else if (m.line_nodes.count(line)) dl->AddCircleFilled(dot, 2.0f, IM_COL32(150, 150, 150, 255));
    if (line == m.stop_line)
        dl->AddTriangleFilled(ImVec2(p.x + gutter, p.y + 3), ImVec2(p.x + gutter + 7, p.y + line_h * 0.5f),
                              ImVec2(p.x + gutter, p.y + line_h - 3), COLOUR_HIGHLIGHT);

    ImGui::PushID(i);
    if (ImGui::InvisibleButton("gutter", ImVec2(gutter, line_h))) {
        ViewerControls c = s.stop.controls;
        std::string f = file;
        if (c.toggle_line_breakpoint) viewer_defer([c, f, line] { c.toggle_line_breakpoint(f.c_str(), line, c.user); });
    }
    viewer_note_item("gutter " + std::to_string(line));
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip(s.stop.controls.toggle_line_breakpoint ? "toggle a breakpoint on line %d"
                                                                 : "line %d (no debugger attached for breakpoints)",
                          line);
    ImGui::SameLine(0, 10);
    ImGui::TextDisabled("%4d", line);
    ImGui::SameLine();
    ImGui::TextUnformatted(text.c_str());
    if (ImGui::IsItemClicked() && m.line_nodes.count(line)) viewer_select(m.line_nodes[line], true);
    if (ImGui::IsItemHovered() && m.line_counts.count(line))
        ImGui::SetTooltip("%d node%s recorded here (click: select the newest)", m.line_counts[line],
                          m.line_counts[line] == 1 ? "" : "s");
    ImGui::PopID();
}

}  // namespace

void draw_source_window(ViewerState& s, const Tile& tile) {
    ImGui::SetNextWindowPos(tile.pos);
    ImGui::SetNextWindowSize(tile.size);
    ImGui::Begin("Source", nullptr, ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse);

    // Which file: the stop's (a node's, or a Lua line's), else the selection's, else the last one shown.
    std::string& file = s.source.file;
    const NodeRecord* stop = s.stop.node ? record_find(s.model.records, s.stop.node) : nullptr;
    const NodeRecord* selected = s.selection.node ? record_find(s.model.records, s.selection.node) : nullptr;
    const NodeRecord* target = stop ? stop : selected;
    bool line_stop = !stop && s.stop.line > 0;
    if (line_stop) file = s.stop.file;
    else if (target && target->where.file >= 0) file = source_file_name(target->where.file);
    if (file.empty()) {
        ImGui::TextDisabled("The script of the selected node shows here.");
        ImGui::End();
        return;
    }
    const std::vector<std::string>* lines = source_lines(file);
    ImGui::TextDisabled("%s", file.c_str());
    if (!lines) {
        ImGui::TextDisabled("(no source: typed at the prompt, or not a file)");
        ImGui::End();
        return;
    }
    SourceMarks m;
    m.stop_line = stop && file == source_file_name(stop->where.file) ? stop->where.line : line_stop ? s.stop.line : 0;
    m.selected_line = selected && file == source_file_name(selected->where.file) ? selected->where.line : 0;
    for (const NodeRecord& r : s.model.records) {
        if (r.where.file < 0 || r.phase != PHASE_FORWARD || source_file_name(r.where.file) != file) continue;
        m.line_nodes[r.where.line] = r.id;
        ++m.line_counts[r.where.line];
    }

    ImGui::PushFont(s.app.mono_font);
    ImGui::BeginChild("lines", ImVec2(0, 0), false, ImGuiWindowFlags_HorizontalScrollbar);
    float line_h = ImGui::GetTextLineHeightWithSpacing();
    int want = m.stop_line ? m.stop_line : m.selected_line;
    int64_t target_id = line_stop ? 0 : target ? target->id : 0;
    if (want > 0 && (target_id != s.source.last_target || want != s.source.last_target_line)) {   // scroll to it once per change
        ImGui::SetScrollY(std::max(0.0f, (want - 1) * line_h - ImGui::GetWindowHeight() * 0.4f));
        s.source.last_target = target_id;
        s.source.last_target_line = want;
    }
    ImGuiListClipper clipper;
    clipper.Begin(static_cast<int>(lines->size()), line_h);
    while (clipper.Step())
        for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) draw_source_line(s, file, (*lines)[i], i, m, line_h, 16.0f);
    ImGui::EndChild();
    ImGui::PopFont();
    ImGui::End();
}

}  // namespace td
