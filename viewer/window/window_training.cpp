// window_training.cpp: the Training window: the training log (training_log.h) as the
// plots :plot writes — the loss, the gradient flow (per parameter, the latest gradient norm and
// update/weight ratio as bars on a log scale), the gradient norms and update ratios over the steps,
// and one series picked in a combo (a histogram series by default). It takes the Graph window's
// place while shown (the Controls' Training / Graph button, `:plot NAME`, viewer.show("training")).
//
// One renderer: each plot is drawn by plot_render.cpp (cairo) into a texture of the size it is
// shown at, so the window shows exactly the PNG `:plot` writes. Textures are redrawn when the log
// changed (at most 4 times a second while a script runs) or the window's size did.
#include <GLFW/glfw3.h>

#include <algorithm>
#include <chrono>

#include "plot_render.h"
#include "training_log.h"
#include "training_view.h"
#include "viewer_internal.h"

namespace td {

namespace {

// Draw `what` into texture t at width x height when the log, the size or `what` changed.
void plot_texture_update(ViewerState& s, PlotTexture& t, const std::string& what, int width, int height) {
    if (t.window_serial != s.app.serial) t = PlotTexture(), t.window_serial = s.app.serial;   // GL objects of an older window are gone
    uint64_t version = training_log().version;
    bool stale = t.what != what || t.width != width || t.height != height;
    bool changed = t.log_version != version;
    auto now = std::chrono::steady_clock::now();
    if (!stale && (!changed || (s.engine.live && now - s.training.last_render < std::chrono::milliseconds(250)))) return;
    s.training.last_render = now;
    t.what = what, t.width = width, t.height = height, t.log_version = version;
    std::vector<unsigned char> rgba;
    t.error.clear();
    if (!plot_render_rgba(what, width, height, &rgba, &t.error)) return;
    viewer_texture_upload(&t.id, rgba.data(), width, height);
}

// One plot cell of the grid, `size` pixels.
void draw_plot_cell(ViewerState& s, PlotTexture& t, const std::string& what, ImVec2 size, const char* missing) {
    int w = std::max(16, static_cast<int>(size.x)), h = std::max(16, static_cast<int>(size.y));
    plot_texture_update(s, t, what, w, h);
    if (t.error.empty() && t.id) {
        ImGui::Image(reinterpret_cast<ImTextureID>(static_cast<intptr_t>(t.id)), ImVec2(static_cast<float>(w), static_cast<float>(h)));
    } else {
        ImGui::BeginChild(what.c_str(), ImVec2(static_cast<float>(w), static_cast<float>(h)), true);
        ImGui::TextDisabled("%s", missing);
        ImGui::EndChild();
    }
    viewer_note_item("plot " + what);
}

// The names the combo offers: histogram series first, then every scalar series.
std::vector<std::string> pickable_series() {
    std::vector<std::string> names;
    for (const auto& entry : training_log().histograms) names.push_back("hist " + entry.first);
    for (const auto& entry : training_log().scalars) names.push_back(entry.first);
    return names;
}

}  // namespace

void draw_training_window(ViewerState& s, const Tile& tile) {
    ImGui::SetNextWindowPos(tile.pos);
    ImGui::SetNextWindowSize(tile.size);
    ImGui::Begin("Training", nullptr, ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse);
    const TrainingLog& log = training_log();
    std::vector<std::string> pickable = pickable_series();
    if (s.training.pick.empty() || std::find(pickable.begin(), pickable.end(), s.training.pick) == pickable.end()) {
        s.training.pick.clear();
        for (const std::string& name : pickable)   // a histogram, else the first series not shown above
            if (name.rfind("hist ", 0) == 0 || (name != "loss" && name.rfind("grad_norm/", 0) != 0 && name.rfind("update_ratio/", 0) != 0)) {
                s.training.pick = name;
                break;
            }
    }
    ImGui::Text("step %lld", static_cast<long long>(log.optimizer_steps));
    ImGui::SameLine(0, 16);
    ImGui::TextDisabled("%zu series, %zu parameters%s", log.scalars.size() + log.histograms.size(), log.parameters.size(),
                        training_logs_steps() ? "" : " (automatic logging off)");
    ImGui::SameLine(0, 16);
    ImGui::SetNextItemWidth(std::min(320.0f, tile.size.x * 0.35f));
    if (ImGui::BeginCombo("series", s.training.pick.empty() ? "(none logged)" : s.training.pick.c_str())) {
        for (const std::string& name : pickable)
            if (ImGui::Selectable(name.c_str(), name == s.training.pick)) s.training.pick = name;
        ImGui::EndCombo();
    }
    viewer_note_item("series");
    ImGui::SameLine(0, 16);
    if (ImGui::SmallButton("back to the graph")) viewer_defer([] { viewer_state().training.shown = false; });
    viewer_note_item("back to the graph");

    ImVec2 avail = ImGui::GetContentRegionAvail();
    float gap = ImGui::GetStyle().ItemSpacing.x;
    ImVec2 cell(std::floor((avail.x - gap) / 2), std::floor((avail.y - 2 * ImGui::GetStyle().ItemSpacing.y) / 3));
    draw_plot_cell(s, s.training.plots[0], "loss", cell, "no loss yet: it is logged at each optimizer step (or viewer.log(\"loss\", loss))");
    ImGui::SameLine();
    draw_plot_cell(s, s.training.plots[1], "flow", cell, "gradient flow: after the first optimizer step");
    draw_plot_cell(s, s.training.plots[2], "grad_norm", cell, "gradient norms: after the first optimizer step");
    ImGui::SameLine();
    draw_plot_cell(s, s.training.plots[3], "update_ratio", cell, "update ratios: after the first optimizer step");
    ImVec2 wide(avail.x, cell.y);
    if (s.training.pick.empty()) {
        ImGui::BeginChild("pick", wide, true);
        ImGui::TextDisabled("viewer.log(name, tensor) logs a histogram per step; pick it in the combo above");
        ImGui::EndChild();
    } else {
        draw_plot_cell(s, s.training.plots[4], s.training.pick, wide, "");
    }
    ImGui::End();
}

}  // namespace td

void training_view_show(const std::string& what) {
    td::ViewerState& s = td::viewer_state();
    s.training.shown = true;
    if (what != "loss" && what != "flow" && what != "grad_norm" && what != "update_ratio") s.training.pick = what;
    s.app.force_frames = std::max(s.app.force_frames, 2);
}
