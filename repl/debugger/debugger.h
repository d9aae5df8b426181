// debugger.h: tapedeck's debugger. Stops in the forward pass after an op, in the backward pass per
// forward node (after its gradients are computed, before they flow on), at a Lua line, or where a
// predicate over a node's output holds; steps by node, by primitive op or by Lua line; and at a
// stop opens a REPL in the stopped context (the script frame's locals, plus node, inputs, out,
// grad_output, grad_input, saved), where out and grad_input can be replaced (edit and continue).
//
// A stop is a nested REPL inside the engine's one hook (or Lua's line hook): single thread, no
// locks, as Lua's debug.debug(). The pieces:
//   debugger.cpp              state, attaching, the engine observer and the Lua hook, stepping, the stop loop
//   debugger_breaks.cpp       breakpoints: parsing ":break ..." and dbg.break_on{...}, checking them, listing
//   debugger_stop.cpp         the stopped context: its _ENV, the stop's names, the banner, :where, :inspect
//   debugger_commands.cpp     the ':' commands (rows of the command table in commands.cpp)
//   debugger_lua.cpp          the global `dbg` table: every command from Lua
//   debugger_frames.cpp       pdb's look-around: :up/:down frame selection, :list, :locals, :p's printer
//   debugger_post_mortem.cpp  post-mortem: --pm (before unwinding) and :pm (a snapshot of every frame)
//
//   debugger_viewer.cpp       the viewer's window: the stop highlighted, its buttons and breakpoint menus
//   debugger_front_end.h      what the core asks of the front end that drives it (the terminal REPL is one)
//
// The viewer's window shows every stop (debugger_viewer.cpp): its Continue/Step buttons call the
// resume functions from the line source's on_idle, then LineSource::cancel_read().
#pragma once

#include <string>
#include <vector>

#include "tape.h"

struct lua_State;
class LineSource;

// ---------------------------------------------------------------------------------------------
// Attaching

// Open the global `dbg` table in L (works attached or not).
void debugger_open_lua(lua_State* L);
// Attach to the engine (an observer) and to Lua's hooks. A stop reads its commands from the
// source `get_source()` returns (called at the first stop). With `break_in_on_ctrl_c` (an
// interactive session), Ctrl-C while code runs stops at the next node or Lua line.
void debugger_attach(lua_State* L, LineSource& (*get_source)(), bool break_in_on_ctrl_c);
void debugger_detach();
bool debugger_attached();
// From another thread while Lua runs (the DAP server's reader, when a request that changes
// breakpoints comes): `service(T)` runs on the main Lua thread at its next instruction, with no
// stop (it may change breakpoints; it must not run user code). Not at a stop: its front end serves
// requests there.
void debugger_request_service(void (*service)(lua_State* T));
// True when stdin ended at a stop that is not a terminal's: the program was abandoned (exit status 1).
bool debugger_input_ended();

// ---------------------------------------------------------------------------------------------
// The stop

enum StopKind : uint8_t {
    STOP_NODE,    // a node has run (a forward op, or with :stepi a primitive op of a backward group)
    STOP_GROUP,   // backward: a forward node's rule has run; its gradients are about to flow on
    STOP_LINE,    // a Lua line is about to run (line breakpoint, :next, :finish, Ctrl-C in Lua code)
    STOP_POST_MORTEM,   // a script failed: the failing frame's locals, before (--pm) or after (:pm) unwinding
};

// One level of the Lua stack at the stop, innermost first.
struct DebugFrame {
    std::string source;      // the chunk name: "@scripts/rnn_cell.lua", "=stdin", "=[C]"
    std::string short_src;   // "scripts/rnn_cell.lua"
    int line = 0;            // current line; 0 for C functions
    std::string name;        // the function's name, when Lua knows it
    std::string what;        // "Lua", "C", "main"
    int line_defined = 0;    // where a Lua function starts
};

struct DebugStop {
    StopKind kind = STOP_NODE;
    td::Ref<td::Node> node;       // NODE: the node that ran; GROUP: the forward node; LINE: none
    td::Phase phase = td::PHASE_FORWARD;
    const td::BackwardPass* pass = nullptr;   // in backward: the pass (pass->group: the gradients at a GROUP stop)
    std::string reason;           // "breakpoint 2", "step", "stepi", "next", "finish", "Ctrl-C", "pause"
    int breakpoint = 0;           // the breakpoint that stopped here; 0 for none
    std::string why;              // what a condition found ("output has 3 NaN"), or its error
    lua_State* thread = nullptr;  // the Lua thread that is stopped
    std::vector<DebugFrame> frames;
    int frame = -1;               // index in frames of the frame whose locals the prompt sees (:up/:down move it); -1: none
    std::string error;            // POST_MORTEM: the error message
    int snapshot_ref = -2;        // POST_MORTEM after unwinding (:pm): registry ref of the frames' variables
                                  // (debugger_post_mortem.cpp); LUA_NOREF (-2): the frames are live on `thread`
    uint64_t serial = 0;          // increases with every stop
    // Rewind (debugger_rewind.cpp): the history event this stop is (history.h; one past the newest
    // when the stop is no event: a line, a :stepi node), and the event the view shows (0: live).
    uint64_t live_event = 0;
    uint64_t rewound_to = 0;
};

// The stop the program is in, or null.
const DebugStop* debugger_stop();
// The node ids :graph marks at the stop (the node, and at a GROUP stop its backward nodes; when
// rewound, the rewound event's node).
std::vector<int64_t> debugger_marked_nodes();
// While the stop's view is rewound (:back): the newest node id at the event shown (nodes after it
// did not exist yet), else 0.
int64_t debugger_rewound_newest_id();

// ---------------------------------------------------------------------------------------------
// Resuming and stepping

enum ResumeMode : uint8_t {
    RESUME_NONE,
    RESUME_CONTINUE,   // run to the next breakpoint
    RESUME_STEP,       // to the next forward op or backward group
    RESUME_STEPI,      // to the next node of any kind (the primitive ops inside a backward group)
    RESUME_NEXT,       // to the next Lua line of the stopped frame (or a caller)
    RESUME_FINISH,     // to the end of the current backward(), or of the current Lua function
    RESUME_ABORT,      // abandon the running code (as an error), back to the top prompt
    RESUME_UNTIL,      // to a later line of the selected frame, or its return (debugger_resume_until)
};

// End the stop with `mode`. False, with `why` set, when not stopped.
bool debugger_resume(ResumeMode mode, std::string* why);
// Stop at the next node or Lua line (dbg.pause(); Ctrl-C does the same).
void debugger_pause();
// Forget a pending step or pause (not at a stop: dbg.continue()).
void debugger_cancel_step();
// Run until a line after the selected frame's current one (or line `line` and later, when > 0) in
// that frame, or until the frame returns (pdb's until). False, with `why` set, when it cannot.
bool debugger_resume_until(int line, std::string* why);

// ---------------------------------------------------------------------------------------------
// Post-mortem (debugger_post_mortem.cpp)

// --pm: an error in code run from now on opens a post-mortem prompt in the failing frame, before
// the stack unwinds (inside the error's message handler).
void debugger_set_post_mortem_on_error(bool on);
// :pm: a post-mortem prompt over the snapshot taken at the last error (every frame's locals,
// upvalues, source and line). False, with `why` set, when there was no error since the last :pm.
bool debugger_post_mortem_last_error(lua_State* L, std::string* why);

// ---------------------------------------------------------------------------------------------
// Frames and source at a stop (debugger_frames.cpp)

// Select the frame `count` levels out (:up, count > 0) or in (:down, count < 0) from the selected
// one, skipping C functions. False, with `why` set, at the end of the stack or when not stopped.
bool debugger_select_frame(int count, std::string* why);
// The :list text of the selected frame's file: around line `around` (> 0), or lines first..last
// (all 0: around the current line the first time, then onward from the last listing). False,
// with `why` set, past the file's end or when there is no source.
bool debugger_list(int around, int first, int last, std::string& text, std::string* why);
// Select frame `index` of stop->frames (a Lua function's), for a front end that lists every frame
// (the DAP server). False, with `why` set, when not stopped or that frame is no Lua function's.
bool debugger_select_frame_at(int index, std::string* why);
// Push the selected frame's variables as {locals = {{name, value}, ...}, upvalues = {...}} (in
// their order; temporaries and _ENV left out); false, nothing pushed, when there is no such frame.
bool debugger_push_frame_variables(lua_State* L);
// Push the stop's names as dbg.stopped() returns them (a table whose writes edit the stop as the
// prompt's do); nil when not stopped.
void debugger_push_stop_names(lua_State* L);
// The :locals text: the selected frame's locals and upvalues, one a line, with types and short values.
std::string debugger_locals(lua_State* L);
// The value at idx as :p prints it: tables as their contents (to depth 3), tensors in tables by
// shape and dtype, everything else as tostring.
std::string debugger_format_value(lua_State* L, int idx);

// ---------------------------------------------------------------------------------------------
// Breakpoints

enum BreakTarget : uint8_t {
    TARGET_ANY,    // any node (a condition alone: ":break if nan")
    TARGET_OP,     // an op of the table, or a torch.Function by name
    TARGET_NODE,   // one node id
    TARGET_LINE,   // a Lua line
};

enum BreakPhase : uint8_t {
    BREAK_LINE = 0,         // TARGET_LINE only: before the line runs
    BREAK_FORWARD = 1,      // after the node runs
    BREAK_BACKWARD = 2,     // at the node's backward group (TARGET_ANY: after each backward node)
    BREAK_BOTH = 3,
};

// What a breakpoint tests on the tensors of the event (outputs after a node ran, the gradients
// produced at a backward group).
enum ConditionKind : uint8_t {
    CONDITION_NONE,
    CONDITION_NAN,     // some element is NaN or Inf
    CONDITION_STAT,    // min/max/mean/std/sum/absmax/norm compared with a number
    CONDITION_LUA,     // a Lua function of (tensor, stop) returns true
};

struct Breakpoint {
    int id = 0;
    bool enabled = true;
    bool once = false;            // deleted when it first stops
    int hits = 0;                 // times it matched, ignored ones included
    int ignore = 0;               // :ignore N COUNT: the next COUNT hits do not stop
    BreakTarget target = TARGET_ANY;
    uint8_t phases = BREAK_BOTH;
    td::OpId op = td::OP_COUNT;   // TARGET_OP: the op (OP_function for a torch.Function)
    std::string function_name;    // TARGET_OP of a torch.Function: its name
    int64_t node_id = 0;
    std::string file;             // TARGET_LINE: the script's path as loaded
    int line = 0;
    ConditionKind condition = CONDITION_NONE;
    std::string stat;             // CONDITION_STAT: "max", ...
    std::string compare;          // ">", ">=", "<", "<=", "==", "~="
    double value = 0;
    std::string condition_text;   // as the user wrote it
    int function_ref = -2;        // CONDITION_LUA: registry ref of the function (LUA_NOREF: none)
    int action_ref = -2;          // dbg.break_on{action = f}: f(stop) runs at the stop, no prompt
    std::string description;      // "backward of op tanh", "line scripts/rnn_cell.lua:17", ...
};

// Parse the arguments of ":break" ("[once] [fwd|bwd] [op] NAME | node N | FILE:LINE [if CONDITION]")
// into a breakpoint (not added). False, with `error` set, on bad input.
bool debugger_parse_break(lua_State* L, const std::string& text, Breakpoint& out, std::string& error);
// Check and add a breakpoint (op names known, the line has code, the condition compiles).
// Returns its id; 0 with `error` set when it is not valid.
int debugger_break_add(lua_State* L, Breakpoint bp, std::string& error);
bool debugger_break_delete(lua_State* L, int id);
bool debugger_break_enable(int id, bool enabled);
// :ignore: the next `count` hits of breakpoint `id` do not stop (0: every hit stops again).
bool debugger_break_ignore(int id, int count);
const std::vector<Breakpoint>& debugger_breakpoints();
// The :breaks table.
std::string debugger_breaks_format();

// Names of ops and torch.Functions close to `name` (edit distance), best first.
std::vector<std::string> debugger_suggest_ops(lua_State* L, const std::string& name);

// ---------------------------------------------------------------------------------------------
// Looking around (the :where, :inspect, :watch commands and dbg.*)

// The Lua stack at the stop and the position on the tape. Not stopped: says so.
std::string debugger_where();
// The stop's banner (what the stop prints first).
std::string debugger_banner();

// The :inspect text of a tensor: shape, dtype, statistics, NaN/Inf counts, a histogram.
std::string debugger_inspect(const td::Tensor& t);

// Expressions printed at every stop. Returns the watch id.
// Adds a watch: `expression` is printed at every stop. 0 (and *error) when it does not parse as a
// Lua expression.
int debugger_watch_add(lua_State* L, const std::string& expression, std::string* error);
bool debugger_watch_delete(int id);
void debugger_watch_clear();
std::string debugger_watches_format();
