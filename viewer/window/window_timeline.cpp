// window_timeline.cpp: the timeline — the graph as it stood at one event of the rewind history
// (engine/core/history.h), moved by the Controls window's slider, the debugger's :back / :forward, or
// viewer.timeline(pos).
//
// Moving it changes no layout: the Graph window hides the boxes of nodes recorded after the event
// (viewer_timeline_hides) and highlights the event's node, the Tensor window shows that node, the
// Source window marks its line. A step back costs one redraw.
#include <algorithm>

#include "history.h"
#include "viewer_internal.h"

namespace td {

// One line of the Controls window: a slider over the listed events, the last position live.
void draw_timeline(ViewerState& s) {
    uint64_t oldest = history_oldest_serial(), newest = history_newest_serial();
    if (oldest == 0) {
        ImGui::TextDisabled("timeline: no history (%s)", history_budget() ? "nothing watched yet" : ":history off");
        return;
    }
    int count = static_cast<int>(newest - oldest + 1);
    int position = s.timeline.serial ? static_cast<int>(s.timeline.serial - oldest) : count;   // count: live
    ImGui::SetNextItemWidth(260);
    char format[64];
    if (s.timeline.serial) snprintf(format, sizeof format, "event %llu", static_cast<unsigned long long>(s.timeline.serial));
    else snprintf(format, sizeof format, "live");
    if (ImGui::SliderInt("##timeline", &position, 0, count, format)) {
        uint64_t serial = position >= count ? 0 : oldest + static_cast<uint64_t>(position);
        viewer_set_timeline(serial);
    }
    viewer_note_item("timeline");
    ImGui::SameLine();
    if (!s.timeline.serial) {
        ImGui::TextDisabled("timeline: %d events (%s held)", count, history_bytes_text(history_bytes_held()).c_str());
        return;
    }
    const HistoryEvent* e = history_event(s.timeline.serial);
    if (!e) return;
    ImGui::TextColored(ImVec4(0.45f, 0.3f, 0.85f, 1), "rewound %d back: %s #%lld %s%s",
                       static_cast<int>(newest - e->serial), e->group ? "grad of" : "forward", static_cast<long long>(e->node_id),
                       e->op.c_str(), e->values_kept ? "" : " (values fell out)");
}

}  // namespace td

// The debugger's interface (viewer.h): outside namespace td, as its other functions.
void viewer_set_timeline(uint64_t serial) {
    td::ViewerState& s = td::viewer_state();
    const td::HistoryEvent* e = serial ? td::history_event(serial) : nullptr;
    if (!e) serial = 0;
    if (serial == s.timeline.serial) return;
    s.timeline.serial = serial;
    s.timeline.newest_id = e ? e->newest_id : 0;
    s.timeline.node = e ? e->node_id : 0;
    s.timeline.backward = e && e->group;
    if (e) {
        s.selection.node = e->node_id;   // the Tensor and Source windows follow
        s.selection.scroll_to = true;
    } else if (s.stop.node) {
        s.selection.node = s.stop.node;
    }
    s.app.force_frames = std::max(s.app.force_frames, 2);
}

uint64_t viewer_timeline() { return td::viewer_state().timeline.serial; }

