// viewer_internal.h: the viewer's state, shared by window.cpp (lifecycle, frames, the model) and
// the window_*.cpp files (one draw_*() each). Only the viewer's own files include it.
//
// Everything here lives on the Lua thread. The engine owns the data: the viewer keeps copies of
// node records (model.h) and looks live nodes up by id (tape_find) when it shows their values.
//
// [SECTION] colours    of the graph's boxes, edges and marks
// [SECTION] state      ViewerState: one struct per window or concern (app, engine, tape, model, layout,
//                      selection, stop, graph, frames, capture, input, tensor, source, plan, training,
//                      timeline, lua)
// [SECTION] windows    the draw_*() of each window and what they share
// [SECTION] lua        for the `viewer` Lua table (viewer_lua.cpp): scripts and tests
// [SECTION] display    display_watch.cpp: a lost X connection
#pragma once

#include <imgui.h>
#include <lua.hpp>

#include <atomic>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "layout.h"
#include "model.h"
#include "plan_model.h"
#include "tensor_stats.h"
#include "viewer.h"

struct GLFWwindow;

namespace td {

// ---------------------------------------------------------------------------------------------
// [SECTION] colours
//
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
// [SECTION] state

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

// The viewer's state, one struct per window or concern (as Dear ImGui's imgui_demo.cpp keeps one
// per window), all held in ViewerState. Each draw_*() reads its own struct (s.graph, s.tensor,
// s.training, s.timeline, s.source) and the shared ones it needs (s.model, s.selection, s.stop).

// The GLFW window, its fonts and its frames.
struct AppWindowState {
    GLFWwindow* window = nullptr;
    uint64_t serial = 0;             // bumped per window made: GL objects of an older one are gone
    bool hidden = false;
    bool in_frame = false;
    bool had_event = false;          // input or resize since the last drawn frame
    int force_frames = 0;            // draw at least this many more frames
    std::chrono::steady_clock::time_point last_draw{}, last_live_frame{}, last_live_update{};
    ImFont* ui_font = nullptr;
    ImFont* mono_font = nullptr;
    ImFont* graph_font = nullptr;    // node labels, in graph_atlas (its own texture)
    ImFontAtlas* graph_atlas = nullptr;
    ImVector<ImWchar> glyph_ranges;  // the fonts' characters (kept while the atlases use them)
    std::vector<std::function<void()>> deferred;   // run after the frame (buttons, menus)
    bool glfw_ready = false;         // glfwInit succeeded (once per process)
    std::string glfw_error;          // GLFW's last error message (its error callback)
    // The X connection died (display_watch.cpp: set from Xlib's error handlers).
    std::atomic<bool> display_lost{false};
};

// The engine: the node hook, the nodes started but not finished, the retained history.
struct EngineWatchState {
    int observer = 0;
    std::unordered_set<int64_t> running;
    std::deque<Ref<Node>> history;   // the newest nodes, kept alive for the window (bounded)
    size_t history_cap = 2000;
    bool live = false;               // drawing from the node hook: a script is running
    std::function<void(Node*, HookEvent)> node_callback;   // viewer.on_node (scripts, tests)
    std::function<void(size_t newest)> namer;   // offers the script's names for tensors (node_names.h),
                                                // from assignments among the `newest` nodes
    std::chrono::steady_clock::time_point last_naming{};
};

// The tape window (model.h): the nodes copied and drawn. A tape of at most `above` live nodes is
// copied whole (a model's training step, its evaluation after it); a longer one, from a window of
// `size` nodes, the newest ones unless moved.
struct TapeWindowState {
    size_t size = 1000;              // nodes (a 1,000-node window is rebuilt in ~4 ms, a 2,000-node one in ~10)
    size_t above = 50000;            // live nodes
    Ref<Node> anchor;                // the window's first node when it does not follow the newest
    int64_t centre = 0;              // centre the window on this node at the next update (0: none)
    bool at_stop = false;            // moved to show a stop: follows the newest again when it ends
    bool moved = false;              // records must be copied again though the tape did not change
    TapeWindowSpan span;             // what the last update covered
    std::unordered_map<int64_t, Ref<Node>> nodes_held;   // viewer_node: found once, held while others hold them
    std::unordered_set<int64_t> nodes_gone;              // ... and ids found dead (ids are never reused)
};

// The model: the tape window's records and the view (groups, boxes) made from them.
struct ModelState {
    uint64_t seen_tape_version = ~0ull;
    std::vector<NodeRecord> records;   // the tape window's nodes, by id
    ViewOptions options;
    bool backward_up = true;
    bool diff = false;               // mark what the newest step changed (viewer_set_diff_source)
    ViewerDiffSource diff_source = nullptr;
    uint64_t diff_version = 0;       // of the marks below, as the source numbers them
    std::unordered_map<int64_t, ViewerDiffMark> diff_marks;   // by node id
    std::unordered_map<std::string, bool> user_expanded;
    GraphView view;
    bool view_dirty = true;
    uint64_t view_serial = 0;        // bumped by each rebuild
};

// The layout (layout.h): the worker thread, its latest result, where each box sits.
struct LayoutState {
    LayoutWorker worker;
    LayoutResult result;             // latest finished
    uint64_t requested_signature = 0;
    bool requested = false;
    bool pending = false;            // the view changed; its layout is asked for when layout_may_start
    Placement placement;
    bool placement_dirty = true;
    std::chrono::steady_clock::time_point started{};
};

// The selected node: the Tensor and Source windows show it.
struct SelectionState {
    int64_t node = 0;                // node shown in the Tensor window
    bool scroll_to = false;          // bring it into view in the Graph window
};

// The debugger's stop, its controls and breakpoints.
struct StopState {
    int64_t node = 0;
    bool backward = false;
    bool has_run = false;            // stopped after the node ran (the debugger), not before it
    std::string file;                // stopped at a Lua line with no node: the Source window marks it
    int line = 0;
    bool scroll_to = false;
    ViewerControls controls;
    std::vector<ViewerBreakpoint> breakpoints;
};

// The Graph window (window_graph.cpp): its camera (the layout point at the canvas's top-left,
// pixels per layout unit), its options, and what it drew in the last frame.
struct GraphWindowState {
    ImVec2 pan{0, 0};
    float zoom = 1.0f;
    CameraMode camera = CAMERA_FOLLOW;
    bool fit_request = false;        // show the whole graph now
    bool follow_request = true;      // the whole graph if legible, else the newest nodes, now
    ImVec2 canvas_size{0, 0};
    ImVec2 canvas_origin{0, 0};      // its top-left in window pixels (the legend strip inside it)
    bool side_panes = false;         // the Tensor and Source windows were shown in the last frame
    CrossEdgeMode cross_edges = CROSS_EDGES_AUTO;   // all when few, else those of the selection
    bool show_legend = true;
    char find_text[64] = "";        // the toolbar's find field
    std::string menu_key;           // the box whose context menu is open
    std::vector<DrawnBox> drawn;
};

// Frame times (viewer.frame_times, viewer.bench_frames).
struct FrameTimes {
    std::vector<double> ms;          // the last 240 drawn frames
    std::vector<double> total_ms;    // ... with the model's update before each (frame_step)
    uint64_t drawn = 0;
    double update_ms = 0;            // the last model update that changed something (records, view)
    bool sync = false;               // glFinish before the frame time is taken (benchmarks)
};

// The window's pixels: a screenshot asked for, or the last capture (viewer.capture).
struct CaptureState {
    std::string path;                // write the next frame as this PNG
    bool request = false;
    std::string error;
    std::vector<unsigned char> pixels;   // RGBA, top-left origin
    int width = 0, height = 0;
};

// Scripted input (viewer.click): the mouse as a script puts it, instead of the real one.
struct ScriptedInput {
    bool mouse = false;
    ImVec2 mouse_pos{0, 0};
    bool mouse_down[3] = {false, false, false};
    std::unordered_map<std::string, LayoutRect> item_rects;   // buttons and menu items by label
};

// A heatmap's texture in the Tensor window.
struct HeatTexture {
    unsigned int id = 0;             // GL texture
    uint64_t window_serial = 0;
    std::string key;                 // what it shows; re-uploaded when it changes
    int width = 0, height = 0;
};

// A value's statistics in the Tensor window, made again only when the value changes.
struct StatsCache {
    std::string key;
    TensorStats stats;
    std::vector<float> histogram;   // stats.histogram as ImGui plots it
    Value host;                     // a device value's host copy (value_to_host), made once per key; none for a CPU value
};

// The Tensor window (window_tensor.cpp): its tab (0 value, 1 gradient, 2 inputs) and one a script
// asked for (-1: none); per tab, the value's statistics, slice and heatmap texture; how values are
// shown. (ViewerState is never destroyed, so the caches' Values are never freed at exit.)
struct TensorWindowState {
    int tab = 0;
    int tab_request = -1;
    int64_t last_node = 0;           // the node shown in the last frame
    bool heatmap_drawn = false;      // the last frame drew a heatmap (tests)
    StatsCache caches[3];            // value tab, gradient tab, inputs tab
    std::vector<int> slices[3];      // ... the leading indices picked by the sliders
    HeatTexture textures[3];         // ...
    int as_table = 0;                // values as a table (1) or a heatmap (0): the radio buttons
    int input_chosen = 0;            // the Inputs tab's input shown ...
    int64_t input_chosen_for = 0;    // ... for this node
};

// The Source window (window_source.cpp): the file shown, and the line it last scrolled to.
struct SourceWindowState {
    std::string file;
    int last_target_line = 0;
    int64_t last_target = -1;
};

// The pass-by-pass mode (window_plan.cpp): a frozen function's recorded graph instead of the tape,
// drawn as it is after pass stage `stage` (0: as recorded).
struct PlanViewState {
    std::shared_ptr<PlanModel> model;
    int stage = 0;
    bool records_fresh = false;      // s.model.records holds the plan's records
};

// A plot's texture in the Training window.
struct PlotTexture {
    unsigned int id = 0;             // GL texture
    uint64_t window_serial = 0;
    std::string what;                // what it shows
    uint64_t log_version = ~0ull;
    int width = 0, height = 0;
    std::string error;               // why there is no picture ("no series 'loss'...")
};

// The Training window (window_training.cpp): shown in the Graph window's place; the series its
// combo picked ("hist h", "loss", ...; empty: the first histogram series).
struct TrainingWindowState {
    bool shown = false;
    std::string pick;
    PlotTexture plots[5];            // loss, flow, grad_norm, update_ratio, the picked series
    std::chrono::steady_clock::time_point last_render{};
};

// The timeline (window_timeline.cpp): the history event shown (serial 0: live), and what it hides.
struct TimelineState {
    uint64_t serial = 0;
    int64_t newest_id = 0;           // nodes with a larger id did not exist at that event (hidden)
    int64_t node = 0;                // the event's node (highlighted)
    bool backward = false;           // the event is a backward group
};

// The `viewer` Lua table's hold on Lua (viewer_lua.cpp): the main state, and the registry
// references of viewer.on_node's and viewer.controls' callbacks.
struct LuaHooksState {
    lua_State* main_state = nullptr;
    int node_callback_ref = LUA_NOREF;
    int controls_ref = LUA_NOREF;
};

struct ViewerState {
    AppWindowState app;
    EngineWatchState engine;
    TapeWindowState tape;
    ModelState model;
    LayoutState layout;
    SelectionState selection;
    StopState stop;
    GraphWindowState graph;
    FrameTimes frames;
    CaptureState capture;
    ScriptedInput input;
    TensorWindowState tensor;
    SourceWindowState source;
    PlanViewState plan;
    TrainingWindowState training;
    TimelineState timeline;
    LuaHooksState lua;
};

ViewerState& viewer_state();

// The live node with this id (null when it is gone), for what is drawn every frame (the Tensor
// window's selection and its forward node). tape_find walks back from the newest node, hundreds of
// thousands of nodes to an early step of a long loop: this finds a node once and then holds it,
// until nothing else does (then it lets it go, and it is gone as it would have been).
Node* viewer_node(ViewerState& s, int64_t id);


// ---------------------------------------------------------------------------------------------
// [SECTION] windows: shared by the windows

void draw_graph_window(ViewerState& s, const Tile& tile);
// The Tensor and Source windows have something to show (a selected node: the timeline's event
// selects its node; a stop at a node or a Lua line): they take the right 38% of the window, else
// the Graph (or Training) window has the whole width (window.cpp).
bool side_panes_shown(const ViewerState& s);
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
    return s.timeline.serial != 0 && node_id > s.timeline.newest_id;
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
// In the pass-by-pass mode, s.model.records are the plan's: true when they were just put there.
bool plan_records_refresh(ViewerState& s);
// The Graph window's pass selector (buttons, keys 0-6) and the stage's summary.
void draw_plan_toolbar(ViewerState& s);
// How a box looks at the current stage: its fill and opacity (a buffer's colour, faded when
// dropped or merged; at the reuse stage, steps with no buffer of the plan's are white); then its
// marks (struck through, dashed).
void plan_box_fill(const ViewerState& s, const ViewBox& box, const PlanBoxMark& mark, ImU32* fill, float* alpha);
void draw_plan_box_marks(ImDrawList* dl, const PlanBoxMark& mark, ImVec2 a, ImVec2 c, float zoom);
// Over the boxes (from s.graph.drawn): fused groups framed as one, merged boxes pointing at the kept one.
void draw_plan_overlay(ViewerState& s, ImDrawList* dl);
// The stage's colours, in the strip along the top of the canvas (instead of the tape's legend).
void draw_plan_legend(const ViewerState& s, ImDrawList* dl, ImVec2 origin, float width);

// viewer_lua_plan.cpp: viewer.show_plan, viewer.plan_pass; a box's marks in viewer.model().
int viewer_lua_show_plan(lua_State* L);
int viewer_lua_plan_pass(lua_State* L);
void viewer_lua_plan_fields(lua_State* L, const ViewBox& box);

// ---------------------------------------------------------------------------------------------
// [SECTION] lua: for the `viewer` Lua table (viewer_lua.cpp): scripts and tests

// Draw a frame now even when nothing changed (a wait loop may skip frames).
void viewer_frame_forced();
// Draw frames until the layout of the current tape is placed (or `timeout` seconds passed).
bool viewer_wait_layout(double timeout);
// Draw `frames` frames with glFinish and return each one's milliseconds.
std::vector<double> viewer_bench_frames(int frames);
// Draw one frame and keep its pixels (RGBA) in viewer_state().capture.pixels.
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

// [SECTION] display
// display_watch.cpp. Install, once GLFW has opened its X connection, the Xlib handlers that mark
// the display lost instead of ending the process (false where libX11 cannot: before 1.8).
bool display_watch_install();
// The X connection died (the server stopped, an ssh -X connection dropped); every X call since
// did nothing. The viewer closes its window and cannot open another in this process.
bool display_lost();

}  // namespace td
