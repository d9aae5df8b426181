// window_controls.cpp: the Controls strip: Continue / Step / Step over line / Finish (the
// debugger's callbacks; disabled while none are registered), what the program is doing, the view
// options, and the numbers (nodes, layout and frame times).
#include <GLFW/glfw3.h>

#include <algorithm>

#include "viewer_internal.h"

namespace td {

namespace {

// A button that calls `action` after the frame; disabled (greyed) when there is none.
void control_button(const char* label, const char* key_hint, void (*action)(void*), void* user, bool pressed_key) {
    ImGui::BeginDisabled(action == nullptr);
    bool clicked = ImGui::Button(label);
    ImGui::EndDisabled();
    viewer_note_item(label);
    if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
        ImGui::SetTooltip(action ? "%s" : "%s (no debugger attached)", key_hint);
    if (action && (clicked || pressed_key)) viewer_defer([action, user] { action(user); });
}

void draw_options(ViewerState& s) {
    ViewOptions o = s.model.options;
    bool backward_up = s.model.backward_up;
    ImGui::TextDisabled("Layout");
    ImGui::Checkbox("copy shared leaves next to each use (ghosts)", &o.ghosts);
    ImGui::Checkbox("collapse loop iterations", &o.collapse_loops);
    ImGui::Checkbox("collapse lines with several ops (nn.Module calls)", &o.collapse_lines);
    ImGui::Checkbox("collapse each node's backward group", &o.collapse_backward);
    ImGui::Checkbox("after backward: only the loss's graph", &o.loss_graph);
    ImGui::Checkbox("backward pass flows upwards (next to its forward)", &backward_up);
    ImGui::Checkbox("diff: what the newest step changed (new ops, shapes, values that moved)", &s.model.diff);
    ImGui::SetNextItemWidth(200);
    ImGui::SliderInt("node cap", &o.node_cap, 50, 5000);
    ImGui::Separator();
    ImGui::TextDisabled("Drawing");
    int cross = static_cast<int>(s.graph.cross_edges);
    ImGui::Text("forward-to-backward edges:");
    ImGui::SameLine();
    ImGui::RadioButton("none", &cross, CROSS_EDGES_NONE);
    ImGui::SameLine();
    ImGui::RadioButton("selection", &cross, CROSS_EDGES_SELECTION);
    ImGui::SameLine();
    ImGui::RadioButton("all", &cross, CROSS_EDGES_ALL);
    ImGui::SameLine();
    ImGui::RadioButton("auto", &cross, CROSS_EDGES_AUTO);
    s.graph.cross_edges = static_cast<CrossEdgeMode>(cross);
    int history = static_cast<int>(s.engine.history_cap);
    ImGui::SetNextItemWidth(200);
    ImGui::SliderInt("nodes kept for the window", &history, 0, 20000);
    s.engine.history_cap = static_cast<size_t>(history);
    int window = static_cast<int>(std::min<size_t>(s.tape.size, 50000));
    ImGui::SetNextItemWidth(200);
    if (ImGui::SliderInt("tape window (nodes drawn from)", &window, 100, 20000)) viewer_window_resize(static_cast<size_t>(window));
    if (!s.model.user_expanded.empty() && ImGui::Button("forget opened/closed groups")) {
        s.model.user_expanded.clear();
        viewer_invalidate();
    }
    if (o != s.model.options || backward_up != s.model.backward_up) {
        s.model.options = o;
        s.model.backward_up = backward_up;
        viewer_invalidate();
    }
}

// "nodes #a..#b of n" and, when the tape is longer than the window, buttons that move it.
void draw_tape_window(const ViewerState& s) {
    const TapeWindowSpan& w = s.tape.span;
    if (w.nodes >= w.live) {
        ImGui::TextDisabled("tape %d nodes", static_cast<int>(w.live));
        return;
    }
    ImGui::Text("showing nodes #%lld..#%lld of %lld live", static_cast<long long>(w.first), static_cast<long long>(w.last),
                static_cast<long long>(w.live));
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("the tape is longer than the window (%d nodes, Options): %s", static_cast<int>(s.tape.size),
                          w.following ? "it follows the newest nodes" : "moved; Newest follows the tape's end again");
    ImGui::SameLine();
    ImGui::BeginDisabled(w.first <= w.oldest);
    if (ImGui::SmallButton("< older")) viewer_defer([] { viewer_window_page(-1); });
    ImGui::EndDisabled();
    viewer_note_item("< older");
    ImGui::SameLine();
    ImGui::BeginDisabled(w.following);
    if (ImGui::SmallButton("newer >")) viewer_defer([] { viewer_window_page(1); });
    viewer_note_item("newer >");
    ImGui::SameLine();
    if (ImGui::SmallButton("newest")) viewer_defer([] { viewer_window_follow(); });
    viewer_note_item("newest");
    ImGui::EndDisabled();
}

double median(std::vector<double> values) {
    if (values.empty()) return 0;
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

}  // namespace

void draw_controls_window(ViewerState& s, const Tile& tile) {
    ImGui::SetNextWindowPos(tile.pos);
    ImGui::SetNextWindowSize(tile.size);
    ImGuiWindowFlags flags = ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse |
                             ImGuiWindowFlags_NoTitleBar | ImGuiWindowFlags_NoScrollbar;
    ImGui::Begin("Controls", nullptr, flags);
    ImGuiIO& io = ImGui::GetIO();
    bool keys = !io.WantTextInput;
    const ViewerControls& c = s.stop.controls;
    control_button("Continue", "F5: run to the next breakpoint", c.continue_run, c.user,
                   keys && ImGui::IsKeyPressed(GLFW_KEY_F5, false));
    ImGui::SameLine();
    control_button("Step", "F11: stop at the next node", c.step, c.user,
                   keys && !io.KeyShift && ImGui::IsKeyPressed(GLFW_KEY_F11, false));
    ImGui::SameLine();
    control_button("Step over line", "F10: the next node on another source line", c.step_line, c.user,
                   keys && ImGui::IsKeyPressed(GLFW_KEY_F10, false));
    ImGui::SameLine();
    control_button("Finish", "Shift+F11: run to the end of this group", c.finish, c.user,
                   keys && io.KeyShift && ImGui::IsKeyPressed(GLFW_KEY_F11, false));
    ImGui::SameLine(0, 18);
    if (s.stop.node || s.stop.line) ImGui::TextColored(ImVec4(1.0f, 0.8f, 0.2f, 1), "%s", viewer_stop_text(s).c_str());
    else ImGui::TextDisabled(s.engine.live ? "running" : "at the prompt");

    if (ImGui::Button("Options")) ImGui::OpenPopup("options");
    viewer_note_item("Options");
    if (ImGui::BeginPopup("options")) {
        draw_options(s);
        ImGui::EndPopup();
    }
    ImGui::SameLine();
    if (ImGui::Button(s.training.shown ? "Graph" : "Training")) s.training.shown = !s.training.shown;   // window_training.cpp
    viewer_note_item(s.training.shown ? "Graph" : "Training");
    ImGui::SameLine(0, 18);
    draw_tape_window(s);
    ImGui::SameLine(0, 18);
    ImGui::TextDisabled("shown %d boxes   layout %.0f ms   frame %.1f ms   kept %d",
                        static_cast<int>(s.model.view.boxes.size()), s.layout.result.seconds * 1000.0,
                        median(s.frames.ms), static_cast<int>(s.engine.history.size()));
    draw_timeline(s);
    ImGui::End();
}

}  // namespace td
