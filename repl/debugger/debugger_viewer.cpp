// debugger_viewer.cpp: the debugger as the viewer's window shows it, and the window's buttons and
// menus as debugger commands.
//
//   a stop begins   -> viewer_set_stop (the node highlighted, selected, its line marked) or
//                      viewer_set_stop_line (a Lua line with no node); Continue / Step / Step over
//                      line / Finish become live
//   the stop ends   -> viewer_clear_stop (or the outer stop again); the buttons go grey
//   breakpoints     -> viewer_set_breakpoints (red dots on boxes and in the Source gutter), sent
//                      whenever the list changes
//   right-click, gutter -> add or delete a breakpoint, printed at the prompt as :break prints it
//
// The viewer calls the callbacks after a frame, from the line source's idle callback: a resume
// sets how the stop ends and cancels the waiting read, so the stop's REPL loop returns.
#include <lua.hpp>

#include <algorithm>
#include <functional>

#include "debugger_internal.h"
#include "viewer.h"

using namespace td;

namespace dbg {

namespace {

// Which node box stands for the stop. A forward op: the node (it has run). A backward group: the
// newest backward node its rule recorded (they have run; the gradients are about to flow on), or
// the forward node when the rule recorded none.
int64_t stop_box_node(const DebugStop& stop) {
    if (!stop.node) return 0;
    if (stop.kind == STOP_GROUP && stop.node->backward_nodes().size() > 0) {
        int64_t newest = 0;
        for (const Ref<Node>& b : stop.node->backward_nodes()) newest = std::max(newest, b->id);
        return newest;
    }
    return stop.node->id;
}

void show_stop(const DebugStop& stop) {
    if (stop.node) {
        viewer_set_stop(stop_box_node(stop), stop.phase == PHASE_BACKWARD, true);
    } else if (stop.frame >= 0 && stop.frames[stop.frame].source[0] == '@') {
        viewer_set_stop_line(stop.frames[stop.frame].source.substr(1), stop.frames[stop.frame].line);
    } else {
        viewer_clear_stop();
    }
}

// ---- the buttons

void resume_from_viewer(ResumeMode mode) {
    std::string why;
    if (debugger_resume(mode, &why) && g.get_source) g.get_source().cancel_read();
}

void on_continue(void*) { resume_from_viewer(RESUME_CONTINUE); }
void on_step(void*) { resume_from_viewer(RESUME_STEP); }
void on_step_line(void*) { resume_from_viewer(RESUME_NEXT); }
void on_finish(void*) { resume_from_viewer(RESUME_FINISH); }

// ---- the breakpoint menus: toggle, and say so at the prompt

void say(const std::string& text) {
    if (g.get_source) g.get_source().print_message(text);
    else fputs(text.c_str(), stdout);
}

// Delete the first breakpoint `matches` accepts; false when there is none.
bool delete_matching(const std::function<bool(const Breakpoint&)>& matches) {
    for (const Breakpoint& bp : g.breaks) {
        if (!matches(bp)) continue;
        int id = bp.id;
        std::string description = bp.description;
        debugger_break_delete(g.L, id);
        say("breakpoint " + std::to_string(id) + " deleted (" + description + ")\n");
        return true;
    }
    return false;
}

// Add the breakpoint ":break <text>" would add.
void add_parsed(const std::string& text) {
    Breakpoint bp;
    std::string error;
    int id = debugger_parse_break(g.L, text, bp, error) ? debugger_break_add(g.L, bp, error) : 0;
    if (!id) {
        say("viewer: :break " + text + ": " + error + "\n");
        return;
    }
    for (const Breakpoint& b : g.breaks)
        if (b.id == id) say("breakpoint " + std::to_string(id) + ": " + b.description + "\n");
}

void on_toggle_node(int64_t node_id, void*) {
    bool found = delete_matching([node_id](const Breakpoint& bp) {
        return bp.target == TARGET_NODE && bp.node_id == node_id && bp.condition == CONDITION_NONE;
    });
    if (!found) add_parsed("node " + std::to_string(node_id));
}

void on_toggle_op(const char* op, int phase, void*) {
    uint8_t phases = phase == PHASE_BACKWARD ? BREAK_BACKWARD : BREAK_FORWARD;
    std::string name = op;
    bool found = delete_matching([&](const Breakpoint& bp) {
        if (bp.target != TARGET_OP || bp.phases != phases || bp.condition != CONDITION_NONE) return false;
        return bp.function_name.empty() ? name == op_info(bp.op).name : name == bp.function_name;
    });
    if (!found) add_parsed(std::string(phase == PHASE_BACKWARD ? "bwd " : "fwd ") + "op " + name);
}

void on_toggle_line(const char* file, int line, void*) {
    std::string path = file;
    bool found = delete_matching([&](const Breakpoint& bp) {
        return bp.target == TARGET_LINE && bp.line == line && bp.condition == CONDITION_NONE &&
               (bp.file == path || source_matches(bp.file, path) || source_matches(path, bp.file));
    });
    if (!found) add_parsed(path + ":" + std::to_string(line));
}

// Register the callbacks: none while detached; the breakpoint menus while attached; the resume
// buttons too while stopped (grey otherwise).
void set_controls(bool stopped) {
    if (!g.observer) {
        viewer_set_controls(nullptr);
        return;
    }
    ViewerControls c;
    c.toggle_node_breakpoint = on_toggle_node;
    c.toggle_op_breakpoint = on_toggle_op;
    c.toggle_line_breakpoint = on_toggle_line;
    if (stopped) {
        c.continue_run = on_continue;
        c.step = on_step;
        c.step_line = on_step_line;
        c.finish = on_finish;
    }
    viewer_set_controls(&c);
}

bool same(const ViewerBreakpoint& a, const ViewerBreakpoint& b) {
    return a.node_id == b.node_id && a.op == b.op && a.phase == b.phase && a.file == b.file && a.line == b.line;
}

}  // namespace

void viewer_show_stop_begin(const DebugStop& stop) {
    show_stop(stop);
    set_controls(true);
}

void viewer_show_stop_end(const DebugStop* outer) {
    if (outer) show_stop(*outer);
    else viewer_clear_stop();
    set_controls(outer != nullptr);
}

void viewer_show_attachment() { set_controls(g.stop != nullptr); }

void viewer_show_breakpoints() {
    std::vector<ViewerBreakpoint> list;
    for (const Breakpoint& bp : g.breaks) {
        if (!bp.enabled) continue;
        ViewerBreakpoint v;
        if (bp.target == TARGET_NODE) {
            v.node_id = bp.node_id;
        } else if (bp.target == TARGET_OP) {
            v.op = bp.function_name.empty() ? op_info(bp.op).name : bp.function_name;
            v.phase = bp.phases == BREAK_FORWARD ? PHASE_FORWARD : bp.phases == BREAK_BACKWARD ? PHASE_BACKWARD : -1;
        } else if (bp.target == TARGET_LINE) {
            v.file = bp.file;
            v.line = bp.line;
        } else {
            continue;   // a condition on every node marks nothing in particular
        }
        list.push_back(v);
    }
    bool changed = list.size() != g.shown_breakpoints.size();
    for (size_t i = 0; !changed && i < list.size(); ++i) changed = !same(list[i], g.shown_breakpoints[i]);
    if (!changed) return;
    g.shown_breakpoints = list;
    viewer_set_breakpoints(list);
}

}  // namespace dbg
