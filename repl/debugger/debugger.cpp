// debugger.cpp: the debugger's state, the engine observer and the Lua hook that decide where to
// stop, stepping, and the stop itself (a nested REPL).
//
// [SECTION] state          the one State, attach/detach, refresh (what the hot path reads)
// [SECTION] events         the engine observer (nodes, backward groups) and the Lua hook (lines, Ctrl-C)
// [SECTION] stop           building a stop, the nested REPL, resuming into a step mode
// [SECTION] resume         debugger_resume, debugger_pause, watches
//
// The cost: when nothing can stop, the debugger subscribes to no engine event (a node costs the
// engine one test) and installs no Lua hook. With breakpoints it subscribes to the events they
// need, and its observer returns after one table lookup and two flags (op_events[op],
// every_node, the interrupt flag) unless a breakpoint or step wants that event.
#include "debugger.h"

#include <lua.hpp>

#include <climits>
#include <cstdio>

#include "debugger_internal.h"
#include "history.h"
#include "tapedeck_lua.h"
#include "value_text.h"

using namespace td;

namespace dbg {

// ============================================================================================
// [SECTION] state

State g;

void refresh() {
    for (uint8_t& bits : g.op_events) bits = 0;
    g.every_node = g.step == STEP_NODE || g.step == STEP_ANY || g.step == STEP_PAUSE;
    g.line_hook = g.step == STEP_LINE || g.step == STEP_RETURN || g.step == STEP_PAUSE || g.step == STEP_UNTIL;
    for (const Breakpoint& bp : g.breaks) {
        if (!bp.enabled) continue;
        if (bp.target == TARGET_OP) {
            uint8_t bits = (bp.phases & BREAK_FORWARD ? EVENT_FORWARD_NODE : 0) | (bp.phases & BREAK_BACKWARD ? EVENT_GROUP : 0);
            if (bp.op != OP_COUNT) g.op_events[bp.op] |= bits;
            else for (uint8_t& every : g.op_events) every |= bits;   // `*`: every op
        } else if (bp.target == TARGET_LINE && bp.phases == BREAK_LINE) {
            g.line_hook = true;
        } else {
            g.every_node = true;
        }
    }
    // Subscribed only to the events something can stop at (none: a node costs the engine one test).
    uint8_t wanted = 0;
    for (uint8_t bits : g.op_events) wanted |= bits;
    uint8_t events = 0;
    if (g.every_node || (wanted & (EVENT_FORWARD_NODE | EVENT_BACKWARD_NODE))) events |= hook_bit(HOOK_AFTER);
    if (g.every_node || (wanted & EVENT_GROUP)) events |= hook_bit(HOOK_GROUP_DONE);
    g.engine_events = g.observer ? events : 0;
    if (g.observer) engine_observe_events(g.observer, events);
    if (!g.observer) g.line_hook = false;   // detached: breakpoints are kept but stop nothing
    if (g.L) apply_lua_hook(g.L);
    viewer_show_breakpoints();
}

int stack_depth(lua_State* T) {
    lua_Debug ar;
    int depth = 0;
    while (lua_getstack(T, depth, &ar)) ++depth;
    return depth;
}

namespace {

void on_lua_hook(lua_State* T, lua_Debug* ar);

// Ctrl-C while Lua runs (called from the signal handler: flags and lua_sethook only). The first
// one stops at the next node or Lua instruction; a second before that stop says "interrupted!".
bool break_in(lua_State* T) {
    if (!g.observer || !g.break_in_on_ctrl_c || g.stop || g.busy || g.break_in) return false;
    g.break_in = 1;
    engine_interrupt_request();
    lua_sethook(T, on_lua_hook, (g.line_hook ? LUA_MASKLINE : 0) | LUA_MASKCOUNT, 1);
    return true;
}

// The outermost chunk has ended: what it was stepping towards no longer exists.
void run_ended(lua_State* T) {
    g.abandoning = false;
    if (g.stop || !g.observer) return;
    g.break_in = 0;
    engine_interrupt_clear();
    if (g.step != STEP_NONE) {
        g.step = STEP_NONE;
        refresh();
    }
    apply_lua_hook(T);
}

void on_engine_event(Node* node, HookEvent event, void*);

}  // namespace

void apply_lua_hook(lua_State* T) {
    int mask = g.line_hook ? LUA_MASKLINE : 0;
    if (g.break_in || g.service_pending) mask |= LUA_MASKCOUNT;
    if (mask && !g.stop) lua_sethook(T, on_lua_hook, mask, 1);
    else if (lua_gethook(T) == on_lua_hook) lua_sethook(T, nullptr, 0, 0);
}

}  // namespace dbg

using namespace dbg;

void debugger_set_front_end(const DebuggerFrontEnd& front_end) { g.front = front_end; }

void debugger_attach(lua_State* L, LineSource& (*get_source)(), bool break_in_on_ctrl_c) {
    g.L = L;
    g.get_source = get_source;
    g.break_in_on_ctrl_c = break_in_on_ctrl_c;
    if (!g.observer) g.observer = engine_observe(on_engine_event, nullptr, 0);
    g.front.set_break_in(break_in, run_ended);
    g.front.set_error_observer(post_mortem_on_error);
    refresh();
    viewer_show_attachment();
}

void debugger_detach() {
    if (!g.observer) return;
    engine_unobserve(g.observer);
    g.observer = 0;
    g.engine_events = 0;
    g.front.set_break_in(nullptr, nullptr);
    g.front.set_error_observer(nullptr);
    g.line_hook = false;
    if (g.L) apply_lua_hook(g.L);
    viewer_show_attachment();
}

bool debugger_attached() { return g.observer != 0; }

void debugger_request_service(void (*service)(lua_State* T)) {
    if (!g.observer || !g.L || g.stop) return;   // at a stop, its front end serves requests itself
    g.service = service;
    g.service_pending = 1;
    lua_sethook(g.L, on_lua_hook, (g.line_hook ? LUA_MASKLINE : 0) | LUA_MASKCOUNT, 1);
}

bool debugger_input_ended() { return g.input_ended; }

namespace dbg {

// ============================================================================================
// [SECTION] events

namespace {

void stop_here(lua_State* T, StopKind kind, Node* node, const std::string& reason, const Hit& hit);

// The Lua thread an op runs on (the one the bindings last ran on; the main thread without Lua).
lua_State* running_thread() {
    lua_State* T = tapedeck_current_state();
    return T ? T : g.L;
}

// Why a step stops at this node event, or nullptr when it does not.
const char* step_reason(uint8_t bit) {
    switch (g.step) {
        case STEP_NODE: return bit == EVENT_BACKWARD_NODE ? nullptr : "step";
        case STEP_ANY: return "stepi";
        case STEP_PAUSE: return "pause";
        default: return nullptr;
    }
}

// Everything that happens when a node event may stop (off the hot path).
void node_event(Node* node, HookEvent event, uint8_t bit) {
    if (g.busy || g.stop) return;
    lua_State* T = running_thread();
    StopKind kind = event == HOOK_GROUP_DONE ? STOP_GROUP : STOP_NODE;
    if (engine_interrupt_pending()) {
        engine_interrupt_clear();
        g.break_in = 0;
        stop_here(T, kind, node, "Ctrl-C", Hit());
        return;
    }
    Hit hit = breaks_match_node(T, node, event);
    if (hit.id) {
        stop_here(T, kind, node, "breakpoint " + std::to_string(hit.id), hit);
        return;
    }
    if (const char* reason = step_reason(bit)) stop_here(T, kind, node, reason, Hit());
}

// The engine observer (AFTER and GROUP_DONE while armed, AFTER while Ctrl-C is pending): returns
// at once unless an op breakpoint, a step or Ctrl-C wants this event.
void on_engine_event(Node* node, HookEvent event, void*) {
    uint8_t bit = event == HOOK_GROUP_DONE              ? EVENT_GROUP
                  : node->phase == PHASE_FORWARD ? EVENT_FORWARD_NODE
                                                 : EVENT_BACKWARD_NODE;
    if (!(g.op_events[node->op] & bit) && !g.every_node && !engine_interrupt_pending()) return;
    node_event(node, event, bit);
}

// Why a step stops at this line event of T, or nullptr.
const char* line_step_reason(lua_State* T, const lua_Debug* ar) {
    switch (g.step) {
        case STEP_UNTIL: {
            if (T != g.step_thread) return nullptr;
            int depth = stack_depth(T);
            return depth < g.step_depth || (depth == g.step_depth && ar->currentline >= g.step_line) ? "until" : nullptr;
        }
        case STEP_LINE:
            return T == g.step_thread && stack_depth(T) <= g.step_depth ? "next" : nullptr;
        case STEP_RETURN:
            return T == g.step_thread && stack_depth(T) < g.step_depth ? "finish" : nullptr;
        case STEP_PAUSE: return "pause";
        default: return nullptr;
    }
}

// Lua's hook: line events (line breakpoints, :next, :finish, pause) and the count event that
// Ctrl-C arms.
void on_lua_hook(lua_State* T, lua_Debug* ar) {
    if (g.busy || g.stop) return;
    if (ar->event == LUA_HOOKCOUNT) {
        bool interrupted = g.break_in;
        bool serve = g.service_pending;
        g.break_in = 0;
        g.service_pending = 0;
        engine_interrupt_clear();
        apply_lua_hook(T);   // back to line events only (or none)
        if (serve && g.service) g.service(T);
        if (interrupted) stop_here(T, STOP_LINE, nullptr, "Ctrl-C", Hit());
        return;
    }
    if (ar->event != LUA_HOOKLINE) return;
    Hit hit = breaks_match_line(T, ar);
    if (hit.id) {
        stop_here(T, STOP_LINE, nullptr, "breakpoint " + std::to_string(hit.id), hit);
        return;
    }
    if (const char* reason = line_step_reason(T, ar)) stop_here(T, STOP_LINE, nullptr, reason, Hit());
}

// ============================================================================================
// [SECTION] stop

// While stopped: the debugger ignores events, ops typed at the prompt are recorded as ordinary
// forward ops (not into the backward group that is paused), and the Lua hook is off. Restored
// however the stop ends (an :abort unwinds through here as a Lua error).
struct StopScope {
    DebugStop* saved_stop = g.stop;
    RecordingContext saved_recording = engine_recording();
    lua_State* thread;

    StopScope(DebugStop& stop, lua_State* T) : thread(T) {
        g.stop = &stop;
        g.busy = true;
        g.resume = RESUME_NONE;
        engine_recording() = RecordingContext();
        history_pause();   // ops typed at the prompt are no events of the run
        if (lua_gethook(T) == on_lua_hook) lua_sethook(T, nullptr, 0, 0);
        rewind_stop_begin(stop);
    }
    ~StopScope() {
        rewind_stop_end(*g.stop);   // resuming returns to the live stop first
        history_resume();
        viewer_show_stop_end(saved_stop);
        engine_recording() = saved_recording;
        g.stop = saved_stop;
        g.busy = false;
        refresh();
        apply_lua_hook(thread);
    }
};

bool stop_should_leave(void*) { return g.resume != RESUME_NONE; }

// A breakpoint's action (or the dbg.on_stop handler) runs instead of the prompt: f(stop names).
void run_stop_action(lua_State* T, const DebugStop& stop, int function_ref) {
    lua_rawgeti(T, LUA_REGISTRYINDEX, function_ref);
    push_stop_names(T);
    if (g.front.call(T, 1, 0) != LUA_OK) {
        if (stop.breakpoint) lua_pushfstring(T, "breakpoint %d: error in its action: %s", stop.breakpoint, lua_tostring(T, -1));
        else lua_pushfstring(T, "dbg.on_stop: error in the handler: %s", lua_tostring(T, -1));
        lua_remove(T, -2);
        g.front.report(T);
    }
}

// Ctrl-D at a (tdb) prompt on a terminal: "quit?" — true when the answer is yes (or Ctrl-D again).
bool confirm_quit() {
    std::string answer;
    for (;;) {
        if (!g.get_source().read_line("quit? (y or n) ", answer)) return true;
        if (answer == "y" || answer == "yes") return true;
        if (answer == "n" || answer == "no" || g.get_source().interrupted) return false;
        printf("please answer y or n\n");
    }
}

// The input of a stop's prompt ended (Ctrl-D). A post-mortem ends; otherwise a terminal asks
// whether to quit (false: prompt again), and a pipe or file quits: nobody is left to type.
bool input_ended_leaves(const DebugStop& stop) {
    if (stop.kind == STOP_POST_MORTEM) return true;
    if (g.break_in_on_ctrl_c) {
        printf("\n");
        if (!confirm_quit()) return false;
    } else {
        g.input_ended = true;
        fflush(stdout);
        fprintf(stderr, "tapedeck: input ended at a debugger stop: quitting (exit status 1)\n");
        fflush(stderr);
    }
    g.front.request_quit();
    return true;
}

// The banner, then the nested REPL of a stop, in the stop's _ENV.
void run_stop_prompt(lua_State* T, DebugStop& stop) {
    if (g.front.quit_requested()) {   // a script's pcall caught the quit: it keeps ending the run, no prompt
        g.resume = RESUME_ABORT;
        return;
    }
    ReplLoopOptions options;
    options.prompt = "(tdb) ";
    options.continuation = "(tdb)>> ";
    options.env_ref = env_create(T, stop);
    options.should_leave = stop_should_leave;
    options.stack_base = stack_depth(T);
    options.push_env_names = push_env_names;
    if (stop.reason == "Ctrl-C") printf("\n");   // after the terminal's ^C
    print_stop(T, options.env_ref);
    ReplEnd end;
    do {
        end = g.front.loop(T, g.get_source(), options);
    } while (end == REPL_END_INPUT && !input_ended_leaves(stop));
    env_release(T, options.env_ref);
    if (g.front.quit_requested()) g.resume = RESUME_ABORT;
}

// The depth of the stop's script frame: a line event in that frame has this depth.
int script_frame_depth(const DebugStop& stop) {
    if (stop.frame < 0) return INT_MAX;
    return static_cast<int>(stop.frames.size()) - stop.frame;
}

// Turn how the stop ended into what the resumed run looks for.
void start_stepping(const DebugStop& stop, ResumeMode mode) {
    g.step = STEP_NONE;
    g.step_thread = stop.thread;
    g.step_depth = script_frame_depth(stop);
    switch (mode) {
        case RESUME_STEP: g.step = STEP_NODE; break;
        case RESUME_STEPI: g.step = STEP_ANY; break;
        case RESUME_NEXT: g.step = STEP_LINE; break;
        case RESUME_FINISH:   // in backward: to the line after backward() returns; else out of the function
            g.step = stop.phase == PHASE_BACKWARD ? STEP_LINE : STEP_RETURN;
            break;
        case RESUME_UNTIL:
            g.step = STEP_UNTIL;
            g.step_line = g.until_line;
            break;
        default: break;
    }
}

void stop_here(lua_State* T, StopKind kind, Node* node, const std::string& reason, const Hit& hit) {
    DebugStop stop;
    stop.kind = kind;
    stop.node = Ref<Node>(node);
    stop.phase = kind == STOP_GROUP || (node && node->phase == PHASE_BACKWARD) ? PHASE_BACKWARD : PHASE_FORWARD;
    stop.pass = engine_backward_pass();
    stop.reason = reason;
    stop.breakpoint = hit.id;
    stop.why = hit.why;
    stop.thread = T;
    stop.serial = ++g.serial;
    int action_ref = hit.id ? breaks_record_hit(T, hit.id) : LUA_NOREF;
    g.step = STEP_NONE;
    ResumeMode mode;
    {
        StopScope scope(stop, T);
        capture_frames(T, stop);
        viewer_show_stop_begin(stop);
        if (action_ref != LUA_NOREF) {
            run_stop_action(T, stop, action_ref);
            luaL_unref(T, LUA_REGISTRYINDEX, action_ref);
        } else if (g.on_stop_ref != LUA_NOREF) {
            run_stop_action(T, stop, g.on_stop_ref);
        } else {
            run_stop_prompt(T, stop);
        }
        stop_names_release(T);
        mode = g.resume == RESUME_NONE ? RESUME_CONTINUE : g.resume;
        start_stepping(stop, mode);
    }
    if (mode == RESUME_ABORT) {   // the user's line where the run was abandoned (not a library frame's)
        std::string where = tapedeck_where(T, 0);
        std::string message = std::string("abandoned at a debugger stop (") +
                              (g.input_ended ? "input ended: quitting" : g.front.quit_requested() ? ":quit" : ":abort") + ")";
        if (!where.empty()) message += " (" + where + ")";
        g.abandoning = true;   // cleared when the outermost chunk has ended (run_ended)
        lua_pushstring(T, message.c_str());
        lua_error(T);
    }
}

}  // namespace

void run_post_mortem(lua_State* T, DebugStop& stop) {
    stop.kind = STOP_POST_MORTEM;
    stop.phase = PHASE_FORWARD;
    stop.reason = "post-mortem";
    stop.thread = T;
    stop.serial = ++g.serial;
    StopScope scope(stop, T);
    viewer_show_stop_begin(stop);
    run_stop_prompt(T, stop);
    stop_names_release(T);
}

}  // namespace dbg

// ============================================================================================
// [SECTION] resume

const DebugStop* debugger_stop() { return g.stop; }

std::vector<int64_t> debugger_marked_nodes() {
    std::vector<int64_t> ids;
    if (g.stop && g.stop->rewound_to)
        if (const HistoryEvent* e = history_event(g.stop->rewound_to)) return {e->node_id};
    if (!g.stop || !g.stop->node) return ids;
    ids.push_back(g.stop->node->id);
    if (g.stop->kind == STOP_GROUP)
        for (const Ref<Node>& b : g.stop->node->backward_nodes()) ids.push_back(b->id);
    return ids;
}

bool debugger_resume(ResumeMode mode, std::string* why) {
    if (!g.stop) {
        if (why) *why = "not stopped: there is nothing to resume (set a breakpoint with :break, then run code)";
        return false;
    }
    if (g.stop->kind == STOP_POST_MORTEM && mode != RESUME_CONTINUE && mode != RESUME_ABORT) {
        if (why) *why = "this is a post-mortem: the program has already failed, nothing runs on (:continue or Ctrl-D leaves it)";
        return false;
    }
    g.resume = mode;
    return true;
}

bool debugger_resume_until(int line, std::string* why) {
    const DebugStop* stop = g.stop;
    if (!stop || stop->kind == STOP_POST_MORTEM) return debugger_resume(RESUME_UNTIL, why);   // says why not
    if (stop->frame < 0) {
        *why = "there is no Lua frame at this stop to run on in";
        return false;
    }
    int current = stop->frames[stop->frame].line;
    if (line > 0 && line <= current) {
        *why = "line " + std::to_string(line) + " is not after the current line " + std::to_string(current) +
               " (it runs forward: give a later line)";
        return false;
    }
    g.until_line = line > 0 ? line : current + 1;
    g.resume = RESUME_UNTIL;
    return true;
}

void debugger_pause() {
    g.step = STEP_PAUSE;
    refresh();
}

void debugger_cancel_step() {
    g.step = STEP_NONE;
    refresh();
}

int debugger_watch_add(lua_State* L, const std::string& expression, std::string* error) {
    std::string code = "return " + expression;
    if (luaL_loadbuffer(L, code.data(), code.size(), "=watch") != LUA_OK) {
        *error = repl_error_text(L, -1);
        lua_pop(L, 1);
        return 0;
    }
    lua_pop(L, 1);
    g.watches.push_back({g.next_watch_id, expression});
    return g.next_watch_id++;
}

bool debugger_watch_delete(int id) {
    for (size_t i = 0; i < g.watches.size(); ++i) {
        if (g.watches[i].id == id) {
            g.watches.erase(g.watches.begin() + static_cast<long>(i));
            return true;
        }
    }
    return false;
}

void debugger_watch_clear() { g.watches.clear(); }

std::string debugger_watches_format() {
    if (g.watches.empty()) return "no watches (add one with :watch EXPR)\n";
    std::string s;
    for (const Watch& w : g.watches) s += "  " + std::to_string(w.id) + "  " + w.expression + "\n";
    return s;
}
