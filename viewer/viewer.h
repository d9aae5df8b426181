// viewer.h: the live graph viewer, as the REPL, the debugger and scripts see it.
//
// One GLFW window with four Dear ImGui windows: Graph (the tape laid out by Graphviz), Tensor (the
// selected node's value and gradient), Source (the script, the stop line, breakpoints) and
// Controls. Everything runs on the thread that runs Lua; only the Graphviz layout runs on a worker
// thread, from a copy of the node records (it never touches engine objects).
//
// The viewer draws a frame only when someone calls viewer_frame(): the prompt's idle callback does
// (about every 15 ms), and so must every other wait loop while the window is open (a breakpoint's
// nested prompt), so the window never freezes. While a script runs, the viewer also draws from the
// engine's node hook, at most ~30 frames a second.
//
// Built without the viewer (CMake option TAPEDECK_VIEWER off), every function here still exists:
// viewer_open() fails with a message saying so, and the rest do nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

struct lua_State;

// ---------------------------------------------------------------------------------------------
// Opening and drawing

// Open the window (or bring it to the front). False with a message in *error when it cannot: no
// display, no OpenGL 3.3, or a build without the viewer. `hidden` keeps the window off screen
// (screenshots); a later viewer_open(..., false) shows it.
bool viewer_open(std::string* error, bool hidden = false);
// Close the window and let go of everything it held (the retained history of nodes included).
void viewer_close();
bool viewer_is_open();
// Draw one frame when the window is open, else nothing. Safe to call from any wait loop, as
// often as wanted (it skips frames when nothing changed) and re-entrantly (a nested call returns).
void viewer_frame();

// Write the window as a PNG (in the next frame, after the layout of the current tape is ready and
// `frames` more frames were drawn). False with a message when the window is not open or the file
// cannot be written.
bool viewer_screenshot(const std::string& path, int frames, std::string* error);

// Show this node in the Tensor and Source windows and bring its box into view (0: none).
void viewer_select_node(int64_t node_id);

// The tape window: on a tape longer than its threshold, the part of it the viewer copies and draws
// (model.h TapeWindow; docs/viewer.md, Big graphs). Moves apply at the next frame.
struct ViewerWindowSpan {
    int64_t first = 0, last = 0;   // ids of its oldest and newest node
    int64_t nodes = 0, live = 0;   // records copied; live nodes on the tape
    bool following = true;         // it follows the newest node
    size_t size = 0;               // its size in nodes
};
void viewer_window_follow();                 // the newest nodes, as the tape grows
void viewer_window_centre(int64_t node_id);  // centred on this node (or the first live one after it)
void viewer_window_page(int direction);      // -1: half a window older, +1: newer
void viewer_window_resize(size_t nodes);
ViewerWindowSpan viewer_window_span();       // what it shows now (the model brought up to date)

// Open (or close) the groups `name` names in the Graph window (`:view expand fc1`): a module by its
// field ("fc1"), class ("Linear"), path ("Sequential/0:Linear") or title, any group by its key
// ("loop:12", "update"). False with a message naming the groups there are when none matches.
bool viewer_expand_named(const std::string& name, bool open, std::string* error);

// ---------------------------------------------------------------------------------------------
// The debugger's interface. The debugger (repl/debugger, branch dbg) calls these when it stops in
// the node hook and when it runs on; all of them are cheap and may be called with the window closed
// (the state is kept and shown when the window opens).

// The program is stopped at node `node_id`, in the forward or the backward pass: before it runs
// (`has_run` false), or after (the debugger stops after a forward op, and at a backward group once
// its gradients are computed). The viewer highlights its box (expanding a collapsed group that
// hides it), scrolls it into view, selects it in the Tensor window and marks its line in the Source
// window. While stopped in the backward pass, forward nodes whose gradient is done and those still
// waiting are drawn apart.
void viewer_set_stop(int64_t node_id, bool backward, bool has_run = false);
// The program is stopped at a Lua line, at no node (a line breakpoint, :next): the Source window
// shows `file` (a path, as the tape records it) with `line` marked; no box is highlighted.
void viewer_set_stop_line(const std::string& file, int line);
// Running again (or back at the prompt): no node is highlighted, no line marked.
void viewer_clear_stop();
// The timeline (window_timeline.cpp): show the graph as it stood at history event `serial`
// (engine/core/history.h; the debugger's :back), or live (0). Nodes recorded later are hidden (the
// layout stays), the event's node is highlighted and its line marked.
void viewer_set_timeline(uint64_t serial);
uint64_t viewer_timeline();

// What the viewer's buttons and menus do. A null function shows its button disabled. The viewer
// calls them after the frame in which they were clicked (never from inside ImGui), so a callback
// may leave the debugger's wait loop, run Lua, or call any function of this header.
struct ViewerControls {
    void* user = nullptr;
    void (*continue_run)(void* user) = nullptr;   // Continue (F5): run to the next breakpoint
    void (*step)(void* user) = nullptr;           // Step (F11): stop at the next node
    void (*step_line)(void* user) = nullptr;      // Step over line (F10): next node on another line
    void (*finish)(void* user) = nullptr;         // Finish (Shift+F11): run to the end of this group
    // Right-click on a node in the Graph window.
    void (*toggle_node_breakpoint)(int64_t node_id, void* user) = nullptr;
    // Right-click on a node: "break at every <op> in the <phase> pass" (phase 0 forward, 1 backward).
    void (*toggle_op_breakpoint)(const char* op, int phase, void* user) = nullptr;
    // Click in the Source window's gutter.
    void (*toggle_line_breakpoint)(const char* file, int line, void* user) = nullptr;
};
// Register the callbacks (copied), or none with nullptr.
void viewer_set_controls(const ViewerControls* controls);

// A breakpoint as the viewer marks it: by node id, by op name and phase, or by source line.
struct ViewerBreakpoint {
    int64_t node_id = 0;    // > 0: this node
    std::string op;         // not empty: every node of this op ...
    int phase = -1;         // ... in this pass (0 forward, 1 backward, -1 both)
    std::string file;       // not empty: this source line (file as the nodes record it)
    int line = 0;
};
// The debugger's current breakpoints (replaces the previous list). Shown as red dots on node
// boxes and in the Source window's gutter.
void viewer_set_breakpoints(const std::vector<ViewerBreakpoint>& breakpoints);

// What the newest training step changed, per node of it (the Options' "diff" checkbox,
// viewer.options{diff = true}; repl/debugger/debugger_diff.cpp computes it, as :diff does).
struct ViewerDiffMark {
    int64_t node_id = 0;
    bool is_new = false;          // no node of the step before matches it (a branch that changed)
    std::string shape_before;     // not empty: its shape changed, from this
    double value_change = -1;     // ||now - before|| / ||before|| of its value; < 0: not compared
};
// Called at each frame while the option is on: when the comparison's version differs from
// *version, fills *marks (the newest step against the one before), sets *version and returns
// true. It keeps step summaries from its first call on.
typedef bool (*ViewerDiffSource)(uint64_t* version, std::vector<ViewerDiffMark>* marks);
void viewer_set_diff_source(ViewerDiffSource source);

// ---------------------------------------------------------------------------------------------
// The program's command line and the REPL

// The viewer's part of the program's command line (the program keeps it with its other options).
struct ViewerOptions {
    bool view = false;
    std::string screenshot;   // write this PNG after the script
    int frames = 3;           // frames drawn before the screenshot
};
// Consume a viewer option at argv[*i] (--view, --screenshot FILE, --frames N) into *options, moving
// *i past its argument. False when argv[*i] is not one (or lacks its argument: then *error says so).
bool viewer_parse_option(int argc, char** argv, int* i, ViewerOptions* options, std::string* error);
// Before the script runs: open the window when an option asked for it (a failure is reported and
// the program goes on without it).
void viewer_start_from_options(const ViewerOptions& options);
// After the script ran: write the --screenshot, or, with --view and no REPL to follow, keep drawing
// until the window is closed or `interrupted()` says Ctrl-C came. Returns the exit status to add
// (1 when the screenshot failed).
int viewer_finish_from_options(const ViewerOptions& options, bool interactive, bool (*interrupted)());
// The ':view' command: "" open, "close", "screenshot FILE", or a Lua expression (open and select
// that tensor's node). Prints its messages.
void viewer_command(lua_State* L, const std::string& args);

// Add the `viewer` table to L (open, close, frame, screenshot, set_stop, ...; see viewer_lua.cpp):
// scripts and tests drive the viewer with it. Closing L closes the window.
void viewer_open_lua(lua_State* L);
