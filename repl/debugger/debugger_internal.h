// debugger_internal.h: what the debugger's files share (debugger.h is what the rest may use).
#pragma once

#include <csignal>
#include <string>
#include <vector>

#include "debugger.h"
#include "debugger_front_end.h"
#include "viewer.h"

struct lua_Debug;

namespace dbg {

// What a resumed run is looking for (besides breakpoints).
enum StepMode : uint8_t {
    STEP_NONE,
    STEP_NODE,     // :step — the next forward node (after it ran) or backward group
    STEP_ANY,      // :stepi — the next node of any kind, or backward group
    STEP_LINE,     // :next — a Lua line of step_thread at depth <= step_depth
    STEP_RETURN,   // :finish in forward — a Lua line of step_thread at depth < step_depth
    STEP_PAUSE,    // dbg.pause() — the next node, group or Lua line
    STEP_UNTIL,    // :until — a Lua line of step_thread at depth step_depth numbered >= step_line, or a return from it
};

// Bits of State::op_events: which events of an op some breakpoint wants.
enum EventBit : uint8_t {
    EVENT_FORWARD_NODE = 1,    // HOOK_AFTER of a forward node
    EVENT_BACKWARD_NODE = 2,   // HOOK_AFTER of a backward node
    EVENT_GROUP = 4,           // HOOK_GROUP_DONE
};

struct Watch {
    int id;
    std::string expression;
};

// A Lua table made for one stop on first use and kept while that stop lasts (a registry ref).
struct StopTableRef {
    int ref = -2;               // LUA_NOREF: none
    uint64_t stop_serial = 0;   // the stop it was made for
    uint64_t event_serial = 0;  // the history event it shows (the rewound view's names only)
};

// The debugger's state, all of it: the one instance is `g` (debugger.cpp).
struct State {
    lua_State* L = nullptr;                   // the main thread
    DebuggerFrontEnd front;                   // the front end that drives the debugger (debugger_set_front_end)
    LineSource& (*get_source)() = nullptr;    // where a stop's prompt reads (debugger_attach)
    int observer = 0;                         // engine observer handle; 0 when detached
    bool break_in_on_ctrl_c = false;          // an interactive session (stdin is a terminal)

    std::vector<Breakpoint> breaks;
    int next_break_id = 1;
    std::vector<Watch> watches;
    int next_watch_id = 1;

    // Read on every node: rebuilt by refresh() whenever breakpoints or stepping change.
    uint8_t op_events[td::OP_COUNT] = {};     // EventBit per op, from op breakpoints
    bool every_node = false;                  // node, line-of-node or condition breakpoints, or stepping
    bool line_hook = false;                   // Lua line events wanted (line breakpoints, :next, :finish, pause)
    uint8_t engine_events = 0;                // the hook events subscribed to (hook_bit()s); none: costs nothing

    StepMode step = STEP_NONE;
    lua_State* step_thread = nullptr;
    int step_depth = 0;
    int step_line = 0;                        // STEP_UNTIL: the first line that stops
    int until_line = 0;                       // debugger_resume_until: the line for the step it starts

    DebugStop* stop = nullptr;                // the stop in progress
    ResumeMode resume = RESUME_NONE;          // how it ends (set by :continue, dbg.step(), ...)
    uint64_t serial = 0;
    bool busy = false;                        // testing a condition or stopped: node events are ignored
    bool input_ended = false;                 // stdin ended at a stop: stops no longer prompt
    int on_stop_ref = -2;                     // dbg.on_stop(f): f(stop) runs at every stop instead of the prompt
    // Ctrl-C taken: stop at the next node or Lua instruction. Written from the SIGINT handler
    // (through break_in() in debugger.cpp), hence volatile sig_atomic_t.
    volatile sig_atomic_t break_in = 0;
    // debugger_request_service (from another thread): run `service` at the next Lua instruction.
    volatile sig_atomic_t service_pending = 0;
    void (*service)(lua_State* T) = nullptr;
    bool abandoning = false;                  // an :abort or :quit is unwinding as an error: no post-mortem of it

    // :list: where the next plain :list goes on (for the stop `list_serial`, frame `list_frame`).
    uint64_t list_serial = 0;
    int list_frame = -1;
    int list_next = 0;

    // Post-mortem (debugger_post_mortem.cpp).
    bool post_mortem_on_error = false;        // --pm: errors open a post-mortem prompt before unwinding
    int snapshot_ref = -2;                    // the last error's frames' variables (registry ref; LUA_NOREF: none)
    std::vector<DebugFrame> snapshot_frames;  // ... and the frames themselves
    int snapshot_frame = -1;                  // ... and the one to select first
    std::string snapshot_error;               // ... and the error message

    // Tables of names the stop's prompt sees, made on first use and released when it ends.
    StopTableRef stop_names;                  // the stop's names (debugger_stop.cpp)
    StopTableRef rewound_names;               // the rewound view's names, per (stop, event) (debugger_rewind.cpp)
    StopTableRef forward_names;               // a backward stop's forward tensors by the banner's names (debugger_stop.cpp)

    // The breakpoints the viewer's window was last sent (debugger_viewer.cpp): sent again only on change.
    std::vector<ViewerBreakpoint> shown_breakpoints;
};

extern State g;

// Recompute the hot-path summary (op_events, every_node, line_hook) and the Lua hook.
void refresh();
// Install (or remove) the debugger's Lua hook on thread T as the state wants it.
void apply_lua_hook(lua_State* T);
// The number of levels on T's stack (a line event's depth).
int stack_depth(lua_State* T);

// ---- debugger_breaks.cpp
// A condition as ":break ... if CONDITION" takes it: nan, STAT OP NUMBER, or Lua (compiled when
// the breakpoint is added). False when a STAT comparison is malformed.
bool parse_condition(const std::string& text, Breakpoint& bp);
struct Hit {
    int id = 0;          // the breakpoint; 0: none
    std::string why;     // what its condition found, or the condition's error
};
// The first enabled breakpoint that wants this node event and whose condition holds.
Hit breaks_match_node(lua_State* L, td::Node* node, td::HookEvent event);
// The first enabled line breakpoint on the line that `ar` (a line event) is about to run.
Hit breaks_match_line(lua_State* L, lua_Debug* ar);
// A hit breakpoint: count it, and delete it when it was `once`. Returns its action ref (or LUA_NOREF).
int breaks_record_hit(lua_State* L, int id);
// Does a chunk name ("@scripts/rnn_cell.lua", "scripts/rnn_cell.lua") name the file `path`?
bool source_matches(const std::string& source, const std::string& path);
// Edit distance (for suggestions).
int edit_distance(const std::string& a, const std::string& b);

// ---- debugger_stop.cpp
// Fill stop.frames from T's stack (level `first_level` up) and choose the script frame.
void capture_frames(lua_State* T, DebugStop& stop, int first_level = 0);
// Is this chunk name tapedeck's embedded library code (nn, optim)?
bool is_library_source(const std::string& source);
// Push a table of the variables of the frame `ar` of thread T onto L:
// {locals = {{name, value}, ...}, upvalues = {{name, value}, ...}} in their order (temporaries and
// _ENV left out; a nil value is a missing [2]). A post-mortem snapshot keeps these tables.
void push_live_frame_variables(lua_State* L, lua_State* T, lua_Debug* ar);
// Push the variables of the stop's selected frame as push_live_frame_variables does (from the
// snapshot after unwinding); false (nothing pushed) when there is no such frame.
bool push_frame_variables(lua_State* L, const DebugStop& stop);
// The text of one frame as :where prints it ("rnn_cell.lua:17: in main chunk").
std::string frame_text(const DebugFrame& f);
// The table stop-prompt chunks get as _ENV (locals of the stopped frame, the stop's names,
// globals); a registry ref. Released by env_release.
int env_create(lua_State* L, DebugStop& stop);
void env_release(lua_State* L, int ref);
// Let go of the stop's names table (made on first use), so its tensors do not outlive the stop.
void stop_names_release(lua_State* L);
// Push a plain table of the stopped frame's locals and the stop's names (Tab completion).
void push_env_names(lua_State* L);
// The forward node a backward stop is about (the group's node; for a node inside a group, the node
// it differentiates); null at a forward, line or post-mortem stop, and in a rewound view.
td::Node* stop_forward_node(const DebugStop& stop);
// A backward stop's forward tensors by the names its banner gives them ({att = tensor, ...}): the
// forward node's outputs, then its inputs, by the names bound to them (Lua names only; an output
// keeps a name an input shares). An empty table at other stops. Made once per stop.
void push_forward_names(lua_State* L, const DebugStop& stop);
// Push the stop's names as one table (what dbg.stopped() returns and an action receives).
void push_stop_names(lua_State* L);
// The watch `id` evaluated now, in the innermost loop's _ENV, as print_stop prints it ("" if none).
std::string watch_text(lua_State* L, int id);
// Print the banner and the watches (evaluated with the stop's _ENV, env_ref) of the stop in progress.
void print_stop(lua_State* L, int env_ref);
// The source text of line `line` of the file a chunk name or short_src names ("" when unknown),
// and all its lines (nullptr when unknown), read through the viewer's source cache (re-read when
// the file changes).
std::string source_line_text(const std::string& file, int line);
const std::vector<std::string>* source_file_lines(const std::string& file);
// Remember that a chunk name ("@path") was seen, so short_src names can be resolved to files.
void note_source(const std::string& chunk_name);

// ---- debugger.cpp
// The post-mortem stop: the prompt over `stop` (kind POST_MORTEM, frames and error filled), as
// any stop's prompt but with no stepping; returns when it is left (:continue, :quit, Ctrl-D).
void run_post_mortem(lua_State* T, DebugStop& stop);

// ---- debugger_post_mortem.cpp
// The message handler of every chunk the REPL runs calls this (before the stack unwinds):
// snapshot the frames for :pm, and with --pm open the post-mortem prompt.
void post_mortem_on_error(lua_State* L, const char* message);

// ---- debugger_gradcheck.cpp
// dbg.gradcheck([opts]): :gradcheck's findings at the current backward stop, as a table.
int lua_gradcheck(lua_State* L);
// ---- debugger_rewind.cpp: :back, :forward, :history (the view of the history at a stop)
// A stop began (after the history recorded its event) / is about to end.
void rewind_stop_begin(DebugStop& stop);
void rewind_stop_end(DebugStop& stop);
// When the stop's view is rewound: push the rewound event's names (node, inputs, out, outputs,
// grad_output, grad_input, stop) and return true; else push nothing and return false.
bool rewind_push_names(lua_State* L, DebugStop& stop);
// The banner of the rewound view ("" when live).
std::string rewind_banner(const DebugStop& stop);
// Push dbg.history()'s table: {budget, bytes, copies, events, kept, newest, oldest, oldest_kept, recording}.
void rewind_push_history_table(lua_State* L);

// ---- debugger_viewer.cpp: what the viewer's window shows of the debugger
// A stop began: highlight its node (or mark its line) and make the resume buttons live.
void viewer_show_stop_begin(const DebugStop& stop);
// A stop ended: show the stop it was nested in (`outer`), or none.
void viewer_show_stop_end(const DebugStop* outer);
// Attached or detached (g.observer): the window's breakpoint menus work only while attached.
void viewer_show_attachment();
// Send the breakpoint list to the viewer when it changed (called by refresh()).
void viewer_show_breakpoints();

}  // namespace dbg

// dbg.diff (debugger_diff.cpp): what changed between training steps, as a table.
int debugger_diff_lua(lua_State* L);
