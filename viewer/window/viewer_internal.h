// viewer_internal.h: the viewer's state, shared by window.cpp (lifecycle, frames, the model) and
// the window_*.cpp files (one draw_*() each). Only the viewer's own files include it.
//
// Everything here lives on the Lua thread. The engine owns the data: the viewer keeps copies of
// node records (model.h) and looks live nodes up by id (tape_find) when it shows their values.
#pragma once

#include <imgui.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "layout.h"
#include "model.h"
#include "plan_model.h"
#include "viewer.h"

struct GLFWwindow;

namespace td {

// ---------------------------------------------------------------------------------------------
// Colours of the graph (ImU32 = 0xAABBGGRR). The highlight is a colour no other box uses, so a
// test can find it in the pixels.

constexpr ImU32 COLOUR_CANVAS = IM_COL32(246, 246, 243, 255);
constexpr ImU32 COLOUR_PARAM = IM_COL32(198, 226, 255, 255);        // leaf that requires grad
constexpr ImU32 COLOUR_DATA = IM_COL32(226, 232, 240, 255);         // leaf without grad (inputs, data)
constexpr ImU32 COLOUR_OP = IM_COL32(255, 255, 255, 255);           // forward op
constexpr ImU32 COLOUR_BACKWARD = IM_COL32(253, 222, 190, 255);     // backward op
constexpr ImU32 COLOUR_GROUP = IM_COL32(214, 236, 206, 255);        // collapsed forward group
constexpr ImU32 COLOUR_GROUP_BACKWARD = IM_COL32(247, 200, 160, 255);
constexpr ImU32 COLOUR_BORDER = IM_COL32(110, 110, 110, 255);
constexpr ImU32 COLOUR_TEXT = IM_COL32(20, 20, 20, 255);
constexpr ImU32 COLOUR_TEXT_DIM = IM_COL32(95, 95, 95, 255);
constexpr ImU32 COLOUR_EDGE = IM_COL32(90, 90, 90, 255);
constexpr ImU32 COLOUR_CROSS_EDGE = IM_COL32(150, 90, 200, 90);     // forward value read by backward
constexpr ImU32 COLOUR_SELECTED = IM_COL32(30, 100, 255, 255);
constexpr ImU32 COLOUR_HIGHLIGHT = IM_COL32(255, 196, 0, 255);       // fill of the stopped node
constexpr ImU32 COLOUR_HIGHLIGHT_BORDER = IM_COL32(220, 50, 20, 255);
constexpr ImU32 COLOUR_BREAKPOINT = IM_COL32(215, 30, 30, 255);
constexpr ImU32 COLOUR_GRAD_DONE = IM_COL32(40, 160, 60, 255);
constexpr ImU32 COLOUR_DIFF_NEW = IM_COL32(40, 160, 60, 255);      // the diff option: a node new in this step
constexpr ImU32 COLOUR_DIFF_SHAPE = IM_COL32(230, 120, 20, 255);   // ... one whose shape changed
constexpr ImU32 COLOUR_GRAD_PENDING = IM_COL32(150, 150, 150, 255);
constexpr ImU32 COLOUR_FRAME = IM_COL32(120, 140, 170, 255);

constexpr float GRAPH_FONT_SIZE = 13.0f;   // node labels at zoom 1
constexpr float LEGIBLE_LABEL_PX = 11.0f;  // the camera fits the graph only while labels stay this big

// ---------------------------------------------------------------------------------------------
// State

// What the Graph window's camera does when a new layout arrives.
enum CameraMode {
    CAMERA_FOLLOW,   // the whole graph if its labels stay legible, else the newest nodes (default)
    CAMERA_FIT,      // the whole graph (after Fit / F)
    CAMERA_MANUAL,   // stay (after the user panned or zoomed)
};

enum CrossEdgeMode { CROSS_EDGES_NONE, CROSS_EDGES_SELECTION, CROSS_EDGES_ALL, CROSS_EDGES_AUTO };

// What the Graph window drew for one box in the last drawn frame (screen pixels, top-left origin):
// the viewer's own model of the picture, which tests compare with the tape and the pixels.
struct DrawnBox {
    int box = -1;
    std::string key;
    int64_t node_id = 0;
    BoxKind kind = BOX_NODE;
    float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
    bool visible = false;      // inside the canvas (not culled)
    bool highlighted = false;  // the stopped node's box
    bool selected = false;
    bool has_diff = false;      // the diff option: what the newest step changed in it
    ViewerDiffMark diff;
    bool later = false;        // hidden by the timeline: recorded after the event shown
};

// Where each box of the current view sits, from the latest layout or, for boxes the layout has not
// seen yet, a provisional place next to an input (drawn faded until the layout catches up).
struct Placement {
    std::vector<LayoutRect> rects;           // per box
    std::vector<bool> provisional;           // per box
    std::vector<const LayoutEdgePath*> paths;   // per edge; nullptr: draw straight
    LayoutRect bounds;
};

struct Tile {   // a window's place in the GLFW window
    ImVec2 pos, size;
};

struct ViewerState {
    // The window.
    GLFWwindow* window = nullptr;
    uint64_t window_serial = 0;      // bumped per window made: GL objects of an older one are gone
    bool hidden = false;
    bool in_frame = false;
    bool had_event = false;          // input or resize since the last drawn frame
    int force_frames = 0;            // draw at least this many more frames
    std::chrono::steady_clock::time_point last_draw{}, last_live_frame{}, last_live_update{};
    ImFont* ui_font = nullptr;
    ImFont* mono_font = nullptr;
    ImFont* graph_font = nullptr;    // node labels, in graph_atlas (its own texture)
    ImFontAtlas* graph_atlas = nullptr;

    // The engine: the node hook, the nodes started but not finished, the retained history.
    int observer = 0;
    std::unordered_set<int64_t> running;
    std::deque<Ref<Node>> history;   // the newest nodes, kept alive for the window (bounded)
    size_t history_cap = 2000;
    std::function<void(Node*, HookEvent)> node_callback;   // viewer.on_node (scripts, tests)
    std::function<void(size_t newest)> namer;   // offers the script's names for tensors (node_names.h),
                                                // from assignments among the `newest` nodes
    std::chrono::steady_clock::time_point last_naming{};

    // The tape window (model.h): the nodes copied and drawn. A tape of at most `window_above` live
    // nodes is copied whole (a model's training step, its evaluation after it); a longer one, from
    // a window of `window_size` nodes, the newest ones unless moved.
    size_t window_size = 1000;       // nodes (a 1,000-node window is rebuilt in ~4 ms, a 2,000-node one in ~10)
    size_t window_above = 50000;     // live nodes
    Ref<Node> window_anchor;         // the window's first node when it does not follow the newest
    int64_t window_centre = 0;       // centre the window on this node at the next update (0: none)
    bool window_at_stop = false;     // moved to show a stop: follows the newest again when it ends
    bool window_moved = false;       // records must be copied again though the tape did not change
    TapeWindowSpan window_span;      // what the last update covered
    std::unordered_map<int64_t, Ref<Node>> nodes_held;   // viewer_node: found once, held while others hold them
    std::unordered_set<int64_t> nodes_gone;              // ... and ids found dead (ids are never reused)

    // The model.
    uint64_t seen_tape_version = ~0ull;
    std::vector<NodeRecord> records;   // the tape window's nodes, by id
    ViewOptions options;
    bool backward_up = true;
    bool diff = false;               // mark what the newest step changed (viewer_set_diff_source)
    uint64_t diff_version = 0;       // of the marks below, as the source numbers them
    std::unordered_map<int64_t, ViewerDiffMark> diff_marks;   // by node id
    CrossEdgeMode cross_edges = CROSS_EDGES_AUTO;   // all when few, else those of the selection
    std::unordered_map<std::string, bool> user_expanded;
    GraphView view;
    bool view_dirty = true;
    uint64_t view_serial = 0;        // bumped by each rebuild

    // The layout.
    LayoutWorker worker;
    LayoutResult layout;             // latest finished
    uint64_t requested_signature = 0;
    bool layout_requested = false;
    bool layout_pending = false;     // the view changed; its layout is asked for when layout_may_start
    Placement placement;
    bool placement_dirty = true;
    std::chrono::steady_clock::time_point layout_started{};

    // Selection, stop, debugger.
    int64_t selected = 0;            // node shown in the Tensor window
    int64_t stop_node = 0;
    bool stop_backward = false;
    bool stop_has_run = false;       // stopped after the node ran (the debugger), not before it
    std::string stop_file;           // stopped at a Lua line with no node: the Source window marks it
    int stop_line = 0;
    bool live = false;               // drawing from the node hook: a script is running
    bool scroll_to_stop = false;
    bool scroll_to_selected = false;
    ViewerControls controls;
    std::vector<ViewerBreakpoint> breakpoints;
    std::vector<std::function<void()>> deferred;   // run after the frame (buttons, menus)

    // The Graph window's camera: layout point at the canvas's top-left, pixels per layout unit.
    ImVec2 pan{0, 0};
    float zoom = 1.0f;
    CameraMode camera = CAMERA_FOLLOW;
    bool fit_request = false;        // show the whole graph now
    bool follow_request = true;      // the whole graph if legible, else the newest nodes, now
    ImVec2 canvas_size{0, 0};

    // The pictures: frame times, the last capture, the drawn boxes.
    std::vector<double> frame_ms;    // the last 240 drawn frames
    std::vector<double> frame_total_ms;   // ... with the model's update before each (frame_step)
    uint64_t frames_drawn = 0;
    double update_ms = 0;            // the last model update that changed something (records, view)
    bool sync_frames = false;        // glFinish before the frame time is taken (benchmarks)
    std::string capture_path;        // write the next frame as this PNG
    bool capture_request = false;
    std::string capture_error;
    std::vector<unsigned char> captured;   // RGBA, top-left origin
    int captured_width = 0, captured_height = 0;
    std::vector<DrawnBox> drawn;

    // Scripted input (viewer.click): the mouse as a script puts it, instead of the real one.
    bool scripted_mouse = false;
    ImVec2 mouse_pos{0, 0};
    bool mouse_down[3] = {false, false, false};
    std::unordered_map<std::string, LayoutRect> item_rects;   // buttons and menu items by label

    // The Tensor window's tab (0 value, 1 gradient) and one a script asked for (-1: none).
    int tensor_tab = 0;
    int tensor_tab_request = -1;
    bool heatmap_drawn = false;      // the last frame drew a heatmap (tests)

    // The pass-by-pass mode (window_plan.cpp): a frozen function's recorded graph instead of the
    // tape, drawn as it is after pass stage `plan_stage` (0: as recorded).
    std::shared_ptr<PlanModel> plan;
    int plan_stage = 0;
    bool plan_records_fresh = false; // `records` holds the plan's records
    // The Training window (window_training.cpp): shown in the Graph window's place; the series its
    // combo picked ("hist h", "loss", ...; empty: the first histogram series).
    bool show_training = false;
    std::string training_pick;
    // The timeline (window_timeline.cpp): the history event shown (0: live), and what it hides.
    uint64_t timeline_serial = 0;
    int64_t timeline_newest_id = 0;  // nodes with a larger id did not exist at that event (hidden)
    int64_t timeline_node = 0;       // the event's node (highlighted)
    bool timeline_backward = false;  // the event is a backward group
};

ViewerState& viewer_state();

// The live node with this id (null when it is gone), for what is drawn every frame (the Tensor
// window's selection and its forward node). tape_find walks back from the newest node, hundreds of
// thousands of nodes to an early step of a long loop: this finds a node once and then holds it,
// until nothing else does (then it lets it go, and it is gone as it would have been).
Node* viewer_node(ViewerState& s, int64_t id);


// ---------------------------------------------------------------------------------------------
// Shared by the windows

void draw_graph_window(ViewerState& s, const Tile& tile);
// The diff option's marks brought up to date (window.cpp; cleared while the option is off).
void viewer_diff_refresh(ViewerState& s);
void draw_tensor_window(ViewerState& s, const Tile& tile);
// What the Tensor window's Gradient tab shows for output 0 of a node: the gradient (its .grad, else
// the one that arrived at it in the last backward pass, or at the current backward stop) and where
// it came from, or a note saying why there is none.
struct GradientShown {
    bool found = false;
    Value value;
    std::string source;   // "arrived in backward pass 1 (from #9): from #24 expand, backward of #11 sum"
    std::string note;     // when !found
};
GradientShown viewer_gradient_of(const ViewerState& s, const Node* n);
// Upload width x height RGBA pixels (rows top to bottom, 4 bytes each) into the GL texture *id,
// made when 0; sampled NEAREST, clamped. The Tensor window's heatmaps, the Training window's plots.
void viewer_texture_upload(unsigned int* id, const void* rgba, int width, int height);
void draw_source_window(ViewerState& s, const Tile& tile);
void draw_controls_window(ViewerState& s, const Tile& tile);
void draw_training_window(ViewerState& s, const Tile& tile);
// The Controls window's timeline slider over the history's events (window_timeline.cpp).
void draw_timeline(ViewerState& s);
// Whether the timeline hides this node (recorded after the event shown).
inline bool viewer_timeline_hides(const ViewerState& s, int64_t node_id) {
    return s.timeline_serial != 0 && node_id > s.timeline_newest_id;
}

// Select a node (0: none): the Tensor and Source windows show it; `scroll` brings it into view.
void viewer_select(int64_t node_id, bool scroll);
// Open (true) or close a group by its cluster key; the view is rebuilt.
void viewer_set_expanded(const std::string& cluster_key, bool expanded);
// Run `action` after the current frame (a button's callback).
void viewer_defer(std::function<void()> action);
// Remember where the last ImGui item was drawn, under `label` (scripts click it: viewer.click).
void viewer_note_item(const std::string& label);
// The breakpoints that mark this node / this source line.
bool viewer_breakpoint_on_node(const ViewerState& s, const NodeRecord& r);
bool viewer_breakpoint_on_line(const ViewerState& s, const std::string& file, int line);
// A short description of the stop: "stopped before #14 tanh_backward (backward of #10)".
std::string viewer_stop_text(const ViewerState& s);

// window_plan.cpp: the pass-by-pass mode.
// Show `model` (null: back to the tape) at `stage`; change the stage (the layout stays).
void viewer_show_plan(std::shared_ptr<PlanModel> model, int stage);
void viewer_plan_stage(int stage);
// In the pass-by-pass mode, `records` are the plan's: true when they were just put there.
bool plan_records_refresh(ViewerState& s);
// The Graph window's pass selector (buttons, keys 0-6) and the stage's summary.
void draw_plan_toolbar(ViewerState& s);
// How a box looks at the current stage: its fill and opacity (a buffer's colour, faded when
// dropped or merged; at the reuse stage, steps with no buffer of the plan's are white); then its
// marks (struck through, dashed).
void plan_box_fill(const ViewerState& s, const ViewBox& box, const PlanBoxMark& mark, ImU32* fill, float* alpha);
void draw_plan_box_marks(ImDrawList* dl, const PlanBoxMark& mark, ImVec2 a, ImVec2 c, float zoom);
// Over the boxes (from s.drawn): fused groups framed as one, merged boxes pointing at the kept one.
void draw_plan_overlay(ViewerState& s, ImDrawList* dl);
// The stage's colours, in the strip along the top of the canvas (instead of the tape's legend).
void draw_plan_legend(const ViewerState& s, ImDrawList* dl, ImVec2 origin, float width);

// viewer_lua_plan.cpp: viewer.show_plan, viewer.plan_pass; a box's marks in viewer.model().
int viewer_lua_show_plan(lua_State* L);
int viewer_lua_plan_pass(lua_State* L);
void viewer_lua_plan_fields(lua_State* L, const ViewBox& box);

// ---------------------------------------------------------------------------------------------
// For the `viewer` Lua table (viewer_lua.cpp): scripts and tests

// Draw a frame now even when nothing changed (a wait loop may skip frames).
void viewer_frame_forced();
// Draw frames until the layout of the current tape is placed (or `timeout` seconds passed).
bool viewer_wait_layout(double timeout);
// Draw `frames` frames with glFinish and return each one's milliseconds.
std::vector<double> viewer_bench_frames(int frames);
// Draw one frame and keep its pixels (RGBA) in viewer_state().captured.
bool viewer_capture(std::string* error);
// Rebuild the view now and lay it out on this thread: seconds dot took, boxes, edges.
LayoutResult viewer_layout_now();
// As if the user closed the window (its close button).
void viewer_request_close();
// As if the user clicked at (x, y) (window pixels) with `button` (0 left, 1 right): frames with the
// mouse moved there, pressed, released. `double_click` clicks twice.
void viewer_click(float x, float y, int button, bool double_click);
// Fit the whole graph into the window.
void viewer_fit();
// Mark the model out of date (options changed).
void viewer_invalidate();
// Call `callback` before and after every node runs (viewer.on_node); empty: none.
void viewer_set_node_callback(std::function<void(Node*, HookEvent)> callback);
// Closing the Lua state: close the window and forget every callback into Lua.
void viewer_shutdown();

// display_watch.cpp. Install, once GLFW has opened its X connection, the Xlib handlers that mark
// the display lost instead of ending the process (false where libX11 cannot: before 1.8).
bool display_watch_install();
// The X connection died (the server stopped, an ssh -X connection dropped); every X call since
// did nothing. The viewer closes its window and cannot open another in this process.
bool display_lost();

}  // namespace td
