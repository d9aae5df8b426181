// viewer_lua.cpp: the `viewer` Lua table, so scripts and tests drive the window:
//
//   viewer.open([hidden]) -> true | nil, message     viewer.close()      viewer.is_open()
//   viewer.frame([n])          draw n frames          viewer.wait_layout([seconds]) -> ready
//   viewer.wait(seconds)       keep drawing for that long (a pause)
//   viewer.screenshot(path [, frames]) -> true | nil, message
//   viewer.capture() -> width, height                 viewer.pixel(x, y) -> r, g, b, a
//   viewer.set_stop(id, backward)  viewer.highlight(id)  viewer.clear_stop()   (the debugger's calls)
//   viewer.select(id | tensor)     viewer.fit()          viewer.tab("value" | "gradient" | "inputs")
//   viewer.show("training" [, series] | "graph")   the Training window in the Graph's place (training_lua.cpp: log, plot)
//   viewer.zoom([z]) -> z      the Graph window's zoom (set about the centre)
//   viewer.options{ghosts=, collapse_loops=, collapse_lines=, collapse_backward=, node_cap=,
//                  loss_graph=, backward_up=, diff=, cross_edges="none"|"selection"|"all", history=} -> the options
//   viewer.expand(name, open) -> true | false, message   a group by key or module name (fc1, Linear)
//   viewer.set_controls{continue=f, step=f, step_line=f, finish=f, break_node=f(id),
//                       break_op=f(op, phase), break_line=f(file, line)} | nil
//   viewer.set_breakpoints{{node=12}, {op="tanh", phase="backward"}, {file=..., line=17}}
//   viewer.on_node(f | nil)    f(id, phase) before each node runs (a stand-in for the debugger)
//   viewer.model() -> {boxes, edges, box_of, highlighted, stop, selected, shown, total, ...}
//   viewer.inspect() -> statistics of the selected node's value, and whether a heatmap was drawn
//                      and .gradient, what its Gradient tab shows
//   viewer.time_layout() -> seconds, boxes, edges     (no window needed)
//   viewer.bench_frames(n) -> {ms...}                 viewer.request_close()
//   viewer.click(x, y [, "left"|"right"|"double"]) or viewer.click(label [, ...])   scripted input
//   viewer.item_rect(label) -> x0, y0, x1, y1   where a button, menu item or "heatmap" was drawn
//   viewer.show_plan(f [, pass]), viewer.plan_pass([pass])   a frozen function's graph, pass by pass
//                                                            (viewer_lua_plan.cpp)
//
// Bindings only: each calls the viewer (viewer.h, viewer_internal.h).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <lua.hpp>

#include "animate.h"
#include "page.h"
#include "node_names.h"
#include "tapedeck_lua.h"
#include "tensor_stats.h"
#include "training_view.h"
#include "history.h"
#include "viewer_internal.h"
#include "lua_util.h"

using namespace td;

namespace {
using tdlua::set_number;
using tdlua::set_integer;
using tdlua::set_boolean;
using tdlua::set_string;

lua_State* calling_state() {
    lua_State* L = tapedeck_current_state();
    return L ? L : viewer_state().lua.main_state;
}

// Fields of the table on top of the stack.
// An argument passed to a Lua control callback: a string or an integer.
struct ControlArg {
    const char* text;
    lua_Integer number;
};

// Call field `name` of the registered controls table with `args`; an error is printed, not raised
// (the viewer calls this after a frame, outside any Lua call that could catch it).
void call_control(const char* name, std::initializer_list<ControlArg> args) {
    lua_State* L = calling_state();
    if (!L || viewer_state().lua.controls_ref == LUA_NOREF) return;
    lua_rawgeti(L, LUA_REGISTRYINDEX, viewer_state().lua.controls_ref);
    lua_getfield(L, -1, name);
    lua_remove(L, -2);
    if (!lua_isfunction(L, -1)) {
        lua_pop(L, 1);
        return;
    }
    for (const ControlArg& a : args) {
        if (a.text) lua_pushstring(L, a.text);
        else lua_pushinteger(L, a.number);
    }
    if (lua_pcall(L, static_cast<int>(args.size()), 0, 0) != LUA_OK) {
        fprintf(stderr, "viewer: controls.%s: %s\n", name, lua_tostring(L, -1));
        lua_pop(L, 1);
    }
}

void control_continue(void*) { call_control("continue", {}); }
void control_step(void*) { call_control("step", {}); }
void control_step_line(void*) { call_control("step_line", {}); }
void control_finish(void*) { call_control("finish", {}); }
void control_break_node(int64_t id, void*) { call_control("break_node", {{nullptr, id}}); }
void control_break_op(const char* op, int phase, void*) {
    call_control("break_op", {{op, 0}, {phase == PHASE_BACKWARD ? "backward" : "forward", 0}});
}
void control_break_line(const char* file, int line, void*) { call_control("break_line", {{file, 0}, {nullptr, line}}); }

bool has_field_function(lua_State* L, int table, const char* name) {
    lua_getfield(L, table, name);
    bool yes = lua_isfunction(L, -1);
    lua_pop(L, 1);
    return yes;
}

// ---------------------------------------------------------------------------------------------
// Names: what the script's variables, modules and tables call the tensors (lua_names.cpp).

void lua_tensor_names(size_t newest) { tapedeck_name_tensors(calling_state(), newest); }

// ---------------------------------------------------------------------------------------------
// Bindings

int l_open(lua_State* L) {
    std::string error;
    if (viewer_open(&error, lua_toboolean(L, 1))) {
        lua_pushboolean(L, 1);
        return 1;
    }
    lua_pushnil(L);
    lua_pushstring(L, error.c_str());
    return 2;
}

int l_close(lua_State*) {
    viewer_close();
    return 0;
}

int l_is_open(lua_State* L) {
    lua_pushboolean(L, viewer_is_open());
    return 1;
}

int l_frame(lua_State* L) {
    int n = static_cast<int>(luaL_optinteger(L, 1, 1));
    for (int i = 0; i < n && viewer_is_open(); ++i) viewer_frame_forced();
    return 0;
}

// viewer.wait(seconds): keep the window drawing for that long (a pause in a script).
int l_wait(lua_State* L) {
    double seconds = luaL_checknumber(L, 1);
    auto start = std::chrono::steady_clock::now();
    while (viewer_is_open() && std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds) {
        viewer_frame();
        std::this_thread::sleep_for(std::chrono::milliseconds(15));
    }
    return 0;
}

int l_wait_layout(lua_State* L) {
    lua_pushboolean(L, viewer_wait_layout(luaL_optnumber(L, 1, 60.0)));
    return 1;
}

int l_screenshot(lua_State* L) {
    std::string error;
    if (viewer_screenshot(luaL_checkstring(L, 1), static_cast<int>(luaL_optinteger(L, 2, 2)), &error)) {
        lua_pushboolean(L, 1);
        return 1;
    }
    lua_pushnil(L);
    lua_pushstring(L, error.c_str());
    return 2;
}

int l_capture(lua_State* L) {
    std::string error;
    if (!viewer_capture(&error)) {
        lua_pushnil(L);
        lua_pushstring(L, error.c_str());
        return 2;
    }
    lua_pushinteger(L, viewer_state().capture.width);
    lua_pushinteger(L, viewer_state().capture.height);
    return 2;
}

int l_pixel(lua_State* L) {
    const ViewerState& s = viewer_state();
    lua_Integer x = luaL_checkinteger(L, 1), y = luaL_checkinteger(L, 2);
    if (x < 0 || y < 0 || x >= s.capture.width || y >= s.capture.height || s.capture.pixels.empty())
        return luaL_error(L, "pixel (%d, %d) is outside the last capture (%dx%d)", static_cast<int>(x), static_cast<int>(y),
                          s.capture.width, s.capture.height);
    const unsigned char* p = &s.capture.pixels[(static_cast<size_t>(y) * s.capture.width + static_cast<size_t>(x)) * 4];
    for (int i = 0; i < 4; ++i) lua_pushinteger(L, p[i]);
    return 4;
}

int64_t node_id_arg(lua_State* L, int idx) {
    if (Tensor* t = tapedeck_test_tensor(L, idx)) return t->id();
    return luaL_checkinteger(L, idx);
}

int l_set_stop(lua_State* L) {
    viewer_set_stop(node_id_arg(L, 1), lua_toboolean(L, 2));
    return 0;
}

int l_highlight(lua_State* L) {
    int64_t id = node_id_arg(L, 1);
    Node* n = tape_find(id);
    viewer_set_stop(id, n && n->phase == PHASE_BACKWARD);
    return 0;
}

int l_clear_stop(lua_State*) {
    viewer_clear_stop();
    return 0;
}

int l_select(lua_State* L) {
    viewer_select(lua_isnoneornil(L, 1) ? 0 : node_id_arg(L, 1), true);
    return 0;
}

int l_fit(lua_State*) {
    viewer_fit();
    return 0;
}

// viewer.zoom([z]): the Graph window's zoom; with z, zoom about the canvas centre (camera stays).
int l_zoom(lua_State* L) {
    ViewerState& s = viewer_state();
    if (!lua_isnoneornil(L, 1)) {
        float z = static_cast<float>(luaL_checknumber(L, 1));
        ImVec2 centre(s.graph.pan.x + s.graph.canvas_size.x * 0.5f / s.graph.zoom, s.graph.pan.y + s.graph.canvas_size.y * 0.5f / s.graph.zoom);
        s.graph.zoom = z;
        s.graph.pan = ImVec2(centre.x - s.graph.canvas_size.x * 0.5f / z, centre.y - s.graph.canvas_size.y * 0.5f / z);
        s.graph.camera = CAMERA_MANUAL;
        s.app.force_frames = std::max(s.app.force_frames, 2);
    }
    lua_pushnumber(L, s.graph.zoom);
    return 1;
}

// viewer.show("training" [, series] | "graph"): which window takes the left of the viewer; the
// Training window with `series` ("hist h", "loss") picked in its combo.
int l_show(lua_State* L) {
    static const char* const windows[] = {"graph", "training", nullptr};
    int which = luaL_checkoption(L, 1, nullptr, windows);
    if (which == 1) training_view_show(luaL_optstring(L, 2, "loss"));
    else viewer_state().training.shown = false;
    viewer_state().app.force_frames = std::max(viewer_state().app.force_frames, 2);
    return 0;
}

int l_tab(lua_State* L) {
    const char* name = luaL_checkstring(L, 1);
    viewer_state().tensor.tab_request = strcmp(name, "gradient") == 0 ? 1 : strcmp(name, "inputs") == 0 ? 2 : 0;
    viewer_state().app.force_frames = 2;
    return 0;
}

const char* const CROSS_NAMES[] = {"none", "selection", "all", "auto", nullptr};

const char VIEWER_OPTIONS[] = "ghosts collapse_loops collapse_lines collapse_backward loss_graph backward_up diff node_cap "
                             "history window window_above cross_edges";

int l_options(lua_State* L) {
    ViewerState& s = viewer_state();
    if (lua_istable(L, 1)) {
        tapedeck_check_options(L, 1, "viewer.options", VIEWER_OPTIONS);
        ViewOptions o = s.model.options;
        auto flag = [&](const char* name, bool* field) {
            if (lua_getfield(L, 1, name) != LUA_TNIL) *field = lua_toboolean(L, -1);
            lua_pop(L, 1);
        };
        flag("ghosts", &o.ghosts);
        flag("collapse_loops", &o.collapse_loops);
        flag("collapse_lines", &o.collapse_lines);
        flag("collapse_backward", &o.collapse_backward);
        flag("loss_graph", &o.loss_graph);
        flag("backward_up", &s.model.backward_up);
        flag("diff", &s.model.diff);
        if (lua_getfield(L, 1, "node_cap") != LUA_TNIL) o.node_cap = static_cast<int>(luaL_checkinteger(L, -1));
        lua_pop(L, 1);
        if (lua_getfield(L, 1, "history") != LUA_TNIL) s.engine.history_cap = static_cast<size_t>(luaL_checkinteger(L, -1));
        lua_pop(L, 1);
        if (lua_getfield(L, 1, "window") != LUA_TNIL) {
            lua_Integer nodes = luaL_checkinteger(L, -1);
            if (nodes < 1) luaL_error(L, "viewer.options: window must be a number of nodes >= 1, got %d", static_cast<int>(nodes));
            viewer_window_resize(static_cast<size_t>(nodes));
        }
        lua_pop(L, 1);
        if (lua_getfield(L, 1, "window_above") != LUA_TNIL) {
            lua_Integer nodes = luaL_checkinteger(L, -1);
            if (nodes < 0) luaL_error(L, "viewer.options: window_above must be a number of nodes >= 0, got %d", static_cast<int>(nodes));
            s.tape.above = static_cast<size_t>(nodes);
            viewer_window_resize(s.tape.size);
        }
        lua_pop(L, 1);
        if (lua_getfield(L, 1, "cross_edges") != LUA_TNIL) s.graph.cross_edges = static_cast<CrossEdgeMode>(luaL_checkoption(L, -1, nullptr, CROSS_NAMES));
        lua_pop(L, 1);
        s.model.options = o;
        viewer_invalidate();
    }
    lua_createtable(L, 0, 8);
    set_boolean(L, "ghosts", s.model.options.ghosts);
    set_boolean(L, "collapse_loops", s.model.options.collapse_loops);
    set_boolean(L, "collapse_lines", s.model.options.collapse_lines);
    set_boolean(L, "collapse_backward", s.model.options.collapse_backward);
    set_boolean(L, "loss_graph", s.model.options.loss_graph);
    set_boolean(L, "backward_up", s.model.backward_up);
    set_boolean(L, "diff", s.model.diff);
    set_integer(L, "node_cap", s.model.options.node_cap);
    set_integer(L, "history", static_cast<lua_Integer>(s.engine.history_cap));
    set_integer(L, "window", static_cast<lua_Integer>(s.tape.size));
    set_integer(L, "window_above", static_cast<lua_Integer>(s.tape.above));
    set_string(L, "cross_edges", CROSS_NAMES[s.graph.cross_edges]);
    return 1;
}

void push_window_span(lua_State* L, const TapeWindowSpan& span) {
    lua_createtable(L, 0, 7);
    set_integer(L, "first", span.first);
    set_integer(L, "last", span.last);
    set_integer(L, "nodes", span.nodes);
    set_integer(L, "live", span.live);
    set_integer(L, "newest", span.newest);
    set_boolean(L, "following", span.following);
    set_integer(L, "size", static_cast<lua_Integer>(viewer_state().tape.size));
}

TapeWindowSpan current_window_span() {
    viewer_window_span();   // the model brought up to date
    return viewer_state().tape.span;
}

// viewer.window([where]) -> {first, last, nodes, live, newest, following, size}: the tape window
// (the nodes the viewer copies and draws). where: "newest" (follow the tape's end), "older" /
// "newer" (half a window), a node id or a tensor (centred on its node).
int l_window(lua_State* L) {
    const char* usage = "viewer.window: expected \"newest\", \"older\", \"newer\", a node id or a tensor, got %s";
    if (lua_type(L, 1) == LUA_TSTRING) {
        std::string move = lua_tostring(L, 1);
        if (move == "newest") viewer_window_follow();
        else if (move == "older" || move == "newer") viewer_window_page(move == "older" ? -1 : 1);
        else return luaL_error(L, usage, ("'" + move + "'").c_str());
    } else if (lua_isinteger(L, 1)) {
        viewer_window_centre(lua_tointeger(L, 1));
    } else if (Tensor* t = tapedeck_test_tensor(L, 1)) {
        viewer_window_centre(t->id());
    } else if (!lua_isnone(L, 1)) {
        return luaL_error(L, usage, luaL_typename(L, 1));
    }
    push_window_span(L, current_window_span());
    return 1;
}

// viewer.timeline([pos]) -> {serial, oldest, newest, node, newest_id, backward, values_kept}: the
// graph as it stood at one event of the rewind history (history.h; the Controls window's slider,
// the debugger's :back). pos: an event's serial, -N (N events before the newest), 0 or "live".
int l_timeline(lua_State* L) {
    if (lua_type(L, 1) == LUA_TSTRING) {
        if (strcmp(lua_tostring(L, 1), "live") != 0) return luaL_error(L, "viewer.timeline: expected an event number, -N or \"live\", got '%s'", lua_tostring(L, 1));
        viewer_set_timeline(0);
    } else if (lua_isinteger(L, 1)) {
        lua_Integer pos = lua_tointeger(L, 1);
        uint64_t newest = history_newest_serial();
        uint64_t serial = pos >= 0 ? static_cast<uint64_t>(pos) : static_cast<uint64_t>(-pos) < newest ? newest - static_cast<uint64_t>(-pos) : 0;
        if (pos != 0 && !history_event(serial))
            return luaL_error(L, "viewer.timeline: no event %lld in the history (it lists events %llu..%llu)", static_cast<long long>(pos),
                              static_cast<unsigned long long>(history_oldest_serial()), static_cast<unsigned long long>(newest));
        viewer_set_timeline(serial);
    } else if (!lua_isnone(L, 1)) {
        return luaL_error(L, "viewer.timeline: expected an event number, -N or \"live\", got %s", luaL_typename(L, 1));
    }
    const ViewerState& s = viewer_state();
    lua_createtable(L, 0, 7);
    set_integer(L, "serial", static_cast<lua_Integer>(s.timeline.serial));
    set_integer(L, "oldest", static_cast<lua_Integer>(history_oldest_serial()));
    set_integer(L, "newest", static_cast<lua_Integer>(history_newest_serial()));
    set_integer(L, "node", s.timeline.node);
    set_integer(L, "newest_id", s.timeline.newest_id);
    set_boolean(L, "backward", s.timeline.backward);
    const HistoryEvent* e = s.timeline.serial ? history_event(s.timeline.serial) : nullptr;
    set_boolean(L, "values_kept", e ? e->values_kept : false);
    return 1;
}

// viewer.frame_times() -> {draw = {ms...}, total = {ms...}}: the last frames (up to 240), drawing
// alone and with the model's update before it (what the frame really cost the program).
int l_frame_times(lua_State* L) {
    ViewerState& s = viewer_state();
    lua_createtable(L, 0, 2);
    auto push_list = [&](const char* key, const std::vector<double>& values) {
        lua_createtable(L, static_cast<int>(values.size()), 0);
        for (size_t i = 0; i < values.size(); ++i) {
            lua_pushnumber(L, values[i]);
            lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
        }
        lua_setfield(L, -2, key);
    };
    push_list("draw", s.frames.ms);
    push_list("total", s.frames.total_ms);
    return 1;
}

// viewer.expand(name [, open]) -> true | false, message: the groups `name` names (viewer_expand_named);
// when none does, `name` is kept as a group key for a group still to come.
int l_expand(lua_State* L) {
    std::string name = luaL_checkstring(L, 1);
    bool open = lua_isnone(L, 2) ? true : lua_toboolean(L, 2);
    std::string error;
    if (viewer_expand_named(name, open, &error)) {
        lua_pushboolean(L, 1);
        return 1;
    }
    viewer_set_expanded(name, open);
    lua_pushboolean(L, 0);
    lua_pushstring(L, error.c_str());
    return 2;
}

// Keep argument 1 in the registry under *ref (checked to be of `type`), letting go of the value
// kept before. False (nothing kept) when the argument is nil or absent.
bool keep_argument(lua_State* L, int* ref, int type) {
    if (*ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, *ref);
    *ref = LUA_NOREF;
    if (lua_isnoneornil(L, 1)) return false;
    luaL_checktype(L, 1, type);
    lua_pushvalue(L, 1);
    *ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return true;
}

int l_set_controls(lua_State* L) {
    if (!keep_argument(L, &viewer_state().lua.controls_ref, LUA_TTABLE)) {
        viewer_set_controls(nullptr);
        return 0;
    }
    ViewerControls c;
    if (has_field_function(L, 1, "continue")) c.continue_run = control_continue;
    if (has_field_function(L, 1, "step")) c.step = control_step;
    if (has_field_function(L, 1, "step_line")) c.step_line = control_step_line;
    if (has_field_function(L, 1, "finish")) c.finish = control_finish;
    if (has_field_function(L, 1, "break_node")) c.toggle_node_breakpoint = control_break_node;
    if (has_field_function(L, 1, "break_op")) c.toggle_op_breakpoint = control_break_op;
    if (has_field_function(L, 1, "break_line")) c.toggle_line_breakpoint = control_break_line;
    viewer_set_controls(&c);
    return 0;
}

int l_set_breakpoints(lua_State* L) {
    std::vector<ViewerBreakpoint> list;
    if (lua_istable(L, 1)) {
        lua_Integer n = luaL_len(L, 1);
        for (lua_Integer i = 1; i <= n; ++i) {
            lua_rawgeti(L, 1, i);
            luaL_checktype(L, -1, LUA_TTABLE);
            ViewerBreakpoint b;
            if (lua_getfield(L, -1, "node") != LUA_TNIL) b.node_id = node_id_arg(L, lua_gettop(L));
            lua_pop(L, 1);
            if (lua_getfield(L, -1, "op") == LUA_TSTRING) b.op = lua_tostring(L, -1);
            lua_pop(L, 1);
            if (lua_getfield(L, -1, "phase") == LUA_TSTRING) b.phase = strcmp(lua_tostring(L, -1), "backward") == 0 ? 1 : 0;
            lua_pop(L, 1);
            if (lua_getfield(L, -1, "file") == LUA_TSTRING) b.file = lua_tostring(L, -1);
            lua_pop(L, 1);
            if (lua_getfield(L, -1, "line") != LUA_TNIL) b.line = static_cast<int>(lua_tointeger(L, -1));
            lua_pop(L, 1);
            lua_pop(L, 1);
            list.push_back(b);
        }
    }
    viewer_set_breakpoints(list);
    return 0;
}

void call_node_callback(Node* node, HookEvent event) {
    if (event != HOOK_BEFORE || viewer_state().lua.node_callback_ref == LUA_NOREF) return;
    lua_State* L = calling_state();
    if (!L) return;
    lua_rawgeti(L, LUA_REGISTRYINDEX, viewer_state().lua.node_callback_ref);
    lua_pushinteger(L, node->id);
    lua_pushstring(L, node->phase == PHASE_BACKWARD ? "backward" : "forward");
    if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
        fprintf(stderr, "viewer.on_node: %s\n", lua_tostring(L, -1));
        lua_pop(L, 1);
    }
}

int l_on_node(lua_State* L) {
    bool kept = keep_argument(L, &viewer_state().lua.node_callback_ref, LUA_TFUNCTION);
    viewer_set_node_callback(kept ? call_node_callback : nullptr);
    return 0;
}

const char* kind_name(BoxKind kind) {
    switch (kind) {
        case BOX_NODE: return "node";
        case BOX_GHOST: return "ghost";
        case BOX_STUB: return "stub";
        case BOX_CLUSTER: return "group";
    }
    return "?";
}



// The viewer's own model of the last drawn frame: every box (drawn rectangle in window pixels,
// kind, flags), every edge (laid out by dot or drawn on top), every node's box.
// One drawn box as viewer.model() gives it: where the window drew it, its marks, and what the
// view says of it (phase, members, labels, group, colour inputs, the plan's marks).
void push_drawn_box(lua_State* L, const ViewerState& s, const DrawnBox& d) {
    const GraphView& v = s.model.view;
    lua_createtable(L, 0, 14);
    set_string(L, "key", d.key);
    set_integer(L, "node", d.node_id);
    set_string(L, "kind", kind_name(d.kind));
    set_number(L, "x0", d.x0);
    set_number(L, "y0", d.y0);
    set_number(L, "x1", d.x1);
    set_number(L, "y1", d.y1);
    set_boolean(L, "visible", d.visible);
    set_boolean(L, "highlighted", d.highlighted);
    set_boolean(L, "selected", d.selected);
    if (d.has_diff) {   // the diff option: what the newest step changed in this node
        lua_createtable(L, 0, 3);
        set_boolean(L, "new", d.diff.is_new);
        if (!d.diff.shape_before.empty()) set_string(L, "shape_before", d.diff.shape_before);
        if (d.diff.value_change >= 0) set_number(L, "value_change", d.diff.value_change);
        lua_setfield(L, -2, "diff");
    }
    set_boolean(L, "later", d.later);
    if (d.box >= 0 && d.box < static_cast<int>(v.boxes.size())) {
        const ViewBox& b = v.boxes[d.box];
        set_string(L, "phase", b.phase == PHASE_BACKWARD ? "backward" : "forward");
        set_integer(L, "members", b.member_count);
        set_boolean(L, "laid_out", !s.layout.placement.provisional.empty() && !s.layout.placement.provisional[d.box]);
        if (b.ghost_of >= 0) {
            set_string(L, "ghost_of", v.boxes[b.ghost_of].key);
        }
        set_string(L, "title", b.title);
        set_string(L, "detail", b.detail);
        set_string(L, "extra", b.extra);
        if (b.cluster >= 0) set_string(L, "group", v.clusters[b.cluster].key);
        if (b.frame >= 0) set_string(L, "frame", v.clusters[b.frame].key);
        set_boolean(L, "parameter", b.is_leaf && b.requires_grad && b.phase == PHASE_FORWARD);
        set_boolean(L, "in_scope", d.box < static_cast<int>(v.in_scope.size()) && v.in_scope[d.box]);
        set_boolean(L, "executed", b.executed);
        set_boolean(L, "leaf", b.is_leaf);                 // with requires_grad: what colours it
        set_boolean(L, "requires_grad", b.requires_grad);  // (parameter, data, op)
        viewer_lua_plan_fields(L, b);   // the pass-by-pass mode's marks (viewer_lua_plan.cpp)
    }
}

// viewer.model()'s boxes, edges, box_of (node id -> box key) and clusters (key -> state), into the
// table on top of the stack.
void set_model_boxes(lua_State* L, const ViewerState& s) {
    const GraphView& v = s.model.view;
    lua_createtable(L, static_cast<int>(s.graph.drawn.size()), 0);
    for (size_t i = 0; i < s.graph.drawn.size(); ++i) {
        push_drawn_box(L, s, s.graph.drawn[i]);
        lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
    lua_setfield(L, -2, "boxes");

    lua_createtable(L, static_cast<int>(v.edges.size()), 0);
    for (size_t i = 0; i < v.edges.size(); ++i) {
        const ViewEdge& e = v.edges[i];
        lua_createtable(L, 0, 4);
        set_string(L, "from", v.boxes[e.from].key);
        set_string(L, "to", v.boxes[e.to].key);
        set_boolean(L, "cross", e.cross);
        set_boolean(L, "laid_out", i < s.layout.placement.paths.size() && s.layout.placement.paths[i] != nullptr);
        lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
    lua_setfield(L, -2, "edges");

    lua_createtable(L, 0, static_cast<int>(v.box_of_node.size()));
    for (const auto& entry : v.box_of_node) {
        lua_pushstring(L, v.boxes[entry.second].key.c_str());
        lua_rawseti(L, -2, entry.first);
    }
    lua_setfield(L, -2, "box_of");

    lua_createtable(L, 0, static_cast<int>(v.clusters.size()));
    for (const Cluster& c : v.clusters) {
        const char* state = c.state == CLUSTER_COLLAPSED ? "collapsed" : c.state == CLUSTER_EXPANDED ? "expanded" : "plain";
        lua_pushstring(L, state);
        lua_setfield(L, -2, c.key.c_str());
    }
    lua_setfield(L, -2, "clusters");
}

// viewer.model()'s groups: every group with its kind, title, module path and parent:
// {key=, kind=, title=, name=, state=, parent=}.
void set_model_groups(lua_State* L, const ViewerState& s) {
    const GraphView& v = s.model.view;
    static const char* const CLUSTER_KINDS[] = {"function", "loop", "line", "backward", "module", "update"};
    lua_createtable(L, static_cast<int>(v.clusters.size()), 0);
    for (size_t i = 0; i < v.clusters.size(); ++i) {
        const Cluster& c = v.clusters[i];
        lua_createtable(L, 0, 7);
        set_string(L, "key", c.key);
        set_string(L, "kind", CLUSTER_KINDS[c.kind]);
        set_string(L, "title", c.title);
        set_string(L, "name", c.name);
        set_string(L, "state", c.state == CLUSTER_COLLAPSED ? "collapsed" : c.state == CLUSTER_EXPANDED ? "expanded" : "plain");
        set_string(L, "phase", c.phase == PHASE_BACKWARD ? "backward" : "forward");
        if (c.parent >= 0) set_string(L, "parent", v.clusters[c.parent].key);
        set_integer(L, "members", static_cast<lua_Integer>(c.members.size()));
        lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
    lua_setfield(L, -2, "groups");
}

// viewer.model()'s scalars: the stop, the selection, counts, timings, the camera, the tape window,
// the plan's stage.
void set_model_state(lua_State* L, const ViewerState& s) {
    const GraphView& v = s.model.view;
    int highlighted = 0;
    for (const DrawnBox& d : s.graph.drawn)
        if (d.highlighted) {
            set_integer(L, "highlighted", d.node_id);
            set_string(L, "highlighted_key", d.key);
            ++highlighted;
        }
    set_integer(L, "highlighted_count", highlighted);
    set_integer(L, "stop", s.stop.node);
    set_integer(L, "stop_line", s.stop.line);
    set_boolean(L, "can_step", s.stop.controls.step != nullptr);
    set_boolean(L, "can_break", s.stop.controls.toggle_node_breakpoint != nullptr);
    set_string(L, "stop_file", s.stop.file);
    set_integer(L, "selected", s.selection.node);
    set_integer(L, "shown", static_cast<lua_Integer>(v.boxes.size()));
    set_integer(L, "total", v.total_boxes);
    set_integer(L, "total_nodes", v.total_nodes);
    set_integer(L, "cap_focus", v.cap_focus);
    set_integer(L, "records", static_cast<lua_Integer>(s.model.records.size()));
    set_number(L, "layout_seconds", s.layout.result.seconds);
    set_number(L, "update_ms", s.frames.update_ms);
    set_number(L, "zoom", s.graph.zoom);
    set_number(L, "label_px", s.graph.zoom * GRAPH_FONT_SIZE);   // node labels' text height on screen
    set_integer(L, "loss", v.loss_node);
    lua_createtable(L, 0, 4);   // the Graph window's canvas, window pixels (the legend strip at its top)
    set_number(L, "x0", s.graph.canvas_origin.x);
    set_number(L, "y0", s.graph.canvas_origin.y);
    set_number(L, "x1", s.graph.canvas_origin.x + s.graph.canvas_size.x);
    set_number(L, "y1", s.graph.canvas_origin.y + s.graph.canvas_size.y);
    lua_setfield(L, -2, "canvas");
    set_boolean(L, "side_panes", side_panes_shown(s));
    set_integer(L, "hidden_records", v.hidden_records);
    set_integer(L, "history", static_cast<lua_Integer>(s.engine.history.size()));
    set_integer(L, "frames", static_cast<lua_Integer>(s.frames.drawn));
    push_window_span(L, s.tape.span);
    lua_setfield(L, -2, "window");
    if (s.plan.model) {
        set_string(L, "plan_pass", plan_stage_name(s.plan.stage));
        set_string(L, "plan_summary", s.plan.model->summary[s.plan.stage]);
        set_integer(L, "plan_fused_groups", static_cast<lua_Integer>(s.plan.model->fused.size()));
    }
}

int l_model(lua_State* L) {
    const ViewerState& s = viewer_state();
    lua_createtable(L, 0, 12);
    set_model_boxes(L, s);
    set_model_groups(L, s);
    set_model_state(L, s);
    return 1;
}

// The Gradient tab's content: {source = text, count, mean, std, min, max, norm} or {note = text}.
void push_gradient_shown(lua_State* L, const GradientShown& g) {
    lua_createtable(L, 0, 8);
    if (!g.found) {
        set_string(L, "note", g.note);
        return;
    }
    TensorStats st = tensor_stats(g.value);
    set_string(L, "source", g.source);
    set_integer(L, "count", st.count);
    set_number(L, "min", st.min);
    set_number(L, "max", st.max);
    set_number(L, "mean", st.mean);
    set_number(L, "std", st.std);
    set_number(L, "sum", st.sum);
    set_number(L, "norm", st.norm);
}

int l_inspect(lua_State* L) {
    ViewerState& s = viewer_state();
    Node* n = s.selection.node ? viewer_node(s, s.selection.node) : nullptr;
    if (!n || n->outputs.size() == 0) return 0;
    TensorStats st = tensor_stats(n->outputs[0].value);
    lua_createtable(L, 0, 12);
    set_integer(L, "node", n->id);
    set_integer(L, "count", st.count);
    set_integer(L, "nan", st.nan);
    set_integer(L, "pos_inf", st.pos_inf);
    set_integer(L, "neg_inf", st.neg_inf);
    set_number(L, "min", st.min);
    set_number(L, "max", st.max);
    set_number(L, "mean", st.mean);
    set_number(L, "std", st.std);
    set_boolean(L, "heatmap", s.tensor.heatmap_drawn);
    set_string(L, "tab", s.tensor.tab == 1 ? "gradient" : s.tensor.tab == 2 ? "inputs" : "value");
    push_gradient_shown(L, viewer_gradient_of(s, n));
    lua_setfield(L, -2, "gradient");
    return 1;
}

int l_time_layout(lua_State* L) {
    LayoutResult r = viewer_layout_now();
    if (!r.ok) return luaL_error(L, "layout failed: %s", r.error.c_str());
    lua_pushnumber(L, r.seconds);
    lua_pushinteger(L, r.box_count);
    lua_pushinteger(L, r.edge_count);
    return 3;
}

int l_bench_frames(lua_State* L) {
    std::vector<double> ms = viewer_bench_frames(static_cast<int>(luaL_optinteger(L, 1, 30)));
    lua_createtable(L, static_cast<int>(ms.size()), 0);
    for (size_t i = 0; i < ms.size(); ++i) {
        lua_pushnumber(L, ms[i]);
        lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
    return 1;
}

// viewer.click(x, y [, "left"|"right"|"double"]) or viewer.click(label [, ...]): a label names a
// button or menu item drawn in the last frame ("Step", "Break at #14", "gutter 17").
int l_click(lua_State* L) {
    ViewerState& s = viewer_state();
    float x, y;
    int next = 3;
    if (lua_type(L, 1) == LUA_TSTRING) {
        auto it = s.input.item_rects.find(lua_tostring(L, 1));
        if (it == s.input.item_rects.end()) return luaL_error(L, "viewer.click: no item '%s' in the last frame", lua_tostring(L, 1));
        x = (it->second.x0 + it->second.x1) * 0.5f;
        y = (it->second.y0 + it->second.y1) * 0.5f;
        next = 2;
    } else {
        x = static_cast<float>(luaL_checknumber(L, 1));
        y = static_cast<float>(luaL_checknumber(L, 2));
    }
    const char* const kinds[] = {"left", "right", "double", nullptr};
    int kind = luaL_checkoption(L, next, "left", kinds);
    viewer_click(x, y, kind == 1 ? 1 : 0, kind == 2);
    return 0;
}

// viewer.item_rect(label) -> x0, y0, x1, y1 of a button, menu item or the heatmap in the last frame.
int l_item_rect(lua_State* L) {
    const ViewerState& s = viewer_state();
    auto it = s.input.item_rects.find(luaL_checkstring(L, 1));
    if (it == s.input.item_rects.end()) return 0;
    lua_pushnumber(L, it->second.x0);
    lua_pushnumber(L, it->second.y0);
    lua_pushnumber(L, it->second.x1);
    lua_pushnumber(L, it->second.y1);
    return 4;
}

int l_request_close(lua_State*) {
    viewer_request_close();
    return 0;
}

// Closing the Lua state closes the window first (retained nodes may hold Lua functions).
int sentinel_gc(lua_State* L) {
    viewer_shutdown();
    LuaHooksState& hooks = viewer_state().lua;
    if (hooks.node_callback_ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, hooks.node_callback_ref);
    if (hooks.controls_ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, hooks.controls_ref);
    hooks.node_callback_ref = hooks.controls_ref = LUA_NOREF;
    hooks.main_state = nullptr;
    return 0;
}

const luaL_Reg viewer_functions[] = {
    {"open", l_open},
    {"close", l_close},
    {"is_open", l_is_open},
    {"frame", l_frame},
    {"wait", l_wait},
    {"wait_layout", l_wait_layout},
    {"screenshot", l_screenshot},
    {"capture", l_capture},
    {"pixel", l_pixel},
    {"set_stop", l_set_stop},
    {"highlight", l_highlight},
    {"clear_stop", l_clear_stop},
    {"select", l_select},
    {"fit", l_fit},
    {"tab", l_tab},
    {"show", l_show},
    {"zoom", l_zoom},
    {"options", l_options},
    {"expand", l_expand},
    {"set_controls", l_set_controls},
    {"set_breakpoints", l_set_breakpoints},
    {"on_node", l_on_node},
    {"model", l_model},
    {"inspect", l_inspect},
    {"time_layout", l_time_layout},
    {"bench_frames", l_bench_frames},
    {"frame_times", l_frame_times},
    {"window", l_window},
    {"timeline", l_timeline},
    {"request_close", l_request_close},
    {"click", l_click},
    {"show_plan", viewer_lua_show_plan},
    {"plan_pass", viewer_lua_plan_pass},
    {"item_rect", l_item_rect},
    {nullptr, nullptr},
};

}  // namespace

void viewer_open_lua(lua_State* L) {
    viewer_state().lua.main_state = L;
    luaL_newlib(L, viewer_functions);
    tapedeck_declare_options(L, "viewer.options", VIEWER_OPTIONS);
    td::animate_open_lua(L);   // viewer.animate, viewer.gif_info: built either way
    td::page_open_lua(L);      // viewer.export_page: built either way
    lua_setglobal(L, "viewer");
    training_open_lua(L);   // viewer.log, viewer.plot, ... (training_lua.cpp)
    lua_newuserdatauv(L, 0, 0);   // closes the window when L closes
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, sentinel_gc);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    lua_setfield(L, LUA_REGISTRYINDEX, "tapedeck.viewer_sentinel");
    viewer_state().engine.namer = lua_tensor_names;
}
