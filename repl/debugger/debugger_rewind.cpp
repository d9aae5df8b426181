// debugger_rewind.cpp: rewinding at a stop — :back, :forward, :history, and what the prompt sees
// while the view is rewound (engine/core/history.h keeps the events and their values).
//
// [SECTION] view       the event a stop is, moving the view, tensors of values as they were
// [SECTION] names      node, inputs, out, outputs, grad_output, grad_input, stop of a rewound event
// [SECTION] banner     "[rewound 3 of 120 back] ..."
// [SECTION] commands   :back [N|step], :forward [N|step], :history [SIZE|off]
//
// A rewound view shows what was recorded; nothing re-runs. Editing (out = ..., grad_input[i] =
// ...) is refused while rewound; resuming (:step, :continue, ...) first returns to the live stop.
#include <lua.hpp>

#include <cstdio>
#include <cstdlib>

#include "debugger_commands.h"
#include "debugger_internal.h"
#include "history.h"
#include "node_names.h"
#include "tapedeck_lua.h"
#include "tensor_stats.h"
#include "value_text.h"
#include "viewer.h"
#include "format.h"

using namespace td;

namespace dbg {

namespace {

// ============================================================================================
// [SECTION] view

// The names table of the rewound view (g.rewound_names) is made once per (stop, event).
void names_release(lua_State* L) {
    if (g.rewound_names.ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, g.rewound_names.ref);
    g.rewound_names = StopTableRef();
}

// A tensor of `hv` as it was at event `serial`: the node's own output when its bytes are still
// those (no in-place write since), else a new leaf holding a copy of the bytes as they were.
Tensor tensor_as_of(const HistoryValue& hv, uint64_t serial) {
    if (!hv.value.storage) return Tensor();
    Value v = history_value_as_of(hv.value, serial);
    if (v.storage.get() == hv.value.storage.get() && hv.node_id) {
        Node* n = tape_find(hv.node_id);
        if (n && hv.output < n->outputs.size()) {
            const Value& now = n->outputs[hv.output].value;
            if (now.storage.get() == v.storage.get() && now.offset == v.offset && now.shape == v.shape) return Tensor(n, hv.output);
        }
    }
    Value copy = value_new(v.shape, v.dtype, v.device());   // a copy: the prompt may write into what it gets
    value_copy_elements(copy, v);
    return tape_record_prepared(OP_tensor, op_attrs_default(), nullptr, nullptr, 0, &copy, 1, PHASE_FORWARD, SourceLoc());
}

uint64_t events_back(const DebugStop& stop) { return stop.live_event - stop.rewound_to; }

// Events before the live stop that are listed (what "of N back" counts).
uint64_t events_listed_back(const DebugStop& stop) {
    uint64_t oldest = history_oldest_serial();
    return oldest == 0 || stop.live_event <= oldest ? 0 : stop.live_event - oldest;
}

// Tell the viewer which event its timeline shows (0: live).
void show_in_viewer(uint64_t serial) { viewer_set_timeline(serial); }

// ============================================================================================
// [SECTION] banner

// "next_h (#10 tanh)" while the node lives and has a name, else "#10 tanh".
std::string event_node_text(int64_t id, const std::string& op) {
    std::string text = "#" + std::to_string(id) + " " + op;
    Node* n = tape_find(id);
    if (!n) return text;
    std::string label = node_label(n);
    return label.empty() || label[0] == '#' ? text : label + " (" + text + ")";
}

// "h2h (#7 mm) [20,1]" for a value the event held: by its producer when it lives.
std::string value_owner_text(const HistoryValue& hv) {
    std::string s;
    if (hv.node_id) {
        Node* n = tape_find(hv.node_id);
        std::string id = "#" + std::to_string(hv.node_id);
        if (n) {
            std::string label = node_label(n, hv.output);
            s = label.empty() || label[0] == '#' ? id + " " + n->shown_op() : label + " (" + id + " " + n->shown_op() + ")";
        } else {
            s = id;
        }
    } else {
        s = "(no node)";
    }
    return s;
}

// "[20,1]  mean 0.1234  min -0.5  max 0.9" of the value as it was; "(fell out)" without bytes.
std::string value_text(const HistoryValue& hv, uint64_t serial) {
    if (!hv.value.storage) return "-";
    Value v = history_value_as_of(hv.value, serial);
    TensorStats st = tensor_stats(v);
    std::string s = v.shape.str() + "  mean " + number_text(st.mean) + "  min " + number_text(st.min) + "  max " + number_text(st.max);
    if (st.nan || st.inf()) s += "  nan " + std::to_string(st.nan) + " inf " + std::to_string(st.inf());
    if (v.storage.get() != hv.value.storage.get()) s += "  (changed in place since; this is the copy kept)";
    return s;
}

void add_line(std::string& s, const char* label, const std::string& text) {
    char head[16];
    snprintf(head, sizeof head, "  %-10s", label);
    s += head + text + "\n";
}

std::string event_location(const HistoryEvent& e) {
    if (e.where.file < 0) return "";
    std::string file = source_file_name(e.where.file);
    std::string text = source_line_text(file, e.where.line);
    return "  (" + file + ":" + std::to_string(e.where.line) + (text.empty() ? "" : "  " + text) + ")";
}

std::string fell_out_text(const HistoryEvent& e) {
    std::string more = history_bytes_text(history_budget() * 4);
    more.erase(more.find(' '), 1);   // "1 GB" -> "1GB", as :history takes it
    return "values of #" + std::to_string(e.node_id) + " fell out of the history (budget " + history_bytes_text(history_budget()) +
           "): `:history " + more + "` keeps more";
}

}  // namespace

std::string rewind_banner(const DebugStop& stop) {
    const HistoryEvent* e = history_event(stop.rewound_to);
    if (!e) return "[rewound] (the event is no longer listed)\n";
    std::string s = "[rewound " + std::to_string(events_back(stop)) + " of " + std::to_string(events_listed_back(stop)) + " back] ";
    s += e->group ? "backward  grad of " : "forward ";
    s += event_node_text(e->node_id, e->op) + event_location(*e) + "\n";
    if (!e->values_kept) {
        add_line(s, "values", fell_out_text(*e));
        return s;
    }
    uint64_t at = e->serial;
    for (size_t i = 0; i < e->inputs().size(); ++i)
        add_line(s, i == 0 ? "in" : "", value_owner_text(e->inputs()[i]) + " " + value_text(e->inputs()[i], at));
    for (size_t i = 0; i < e->outputs().size(); ++i)
        add_line(s, i == 0 ? "out" : "", value_owner_text(e->outputs()[i]) + " " + value_text(e->outputs()[i], at));
    for (size_t i = 0; i < e->grad_outputs().size(); ++i)
        if (e->grad_outputs()[i].value.storage)
            add_line(s, "grad in", value_owner_text(e->grad_outputs()[i]) + " " + value_text(e->grad_outputs()[i], at));
    for (size_t i = 0; i < e->grad_inputs().size(); ++i)
        add_line(s, i == 0 ? "grads out" : "",
                 e->grad_inputs()[i].value.storage ? value_owner_text(e->grad_inputs()[i]) + " " + value_text(e->grad_inputs()[i], at)
                                                 : "-   (none: the input needs no gradient)");
    return s;
}

// ============================================================================================
// [SECTION] names

namespace {

void push_tensor_or_nil(lua_State* L, const HistoryValue& hv, uint64_t serial) {
    Tensor t = tensor_as_of(hv, serial);
    if (t.defined()) tapedeck_push_tensor(L, t);
    else lua_pushnil(L);
}

void push_list(lua_State* L, HistoryValues values, uint64_t serial) {
    lua_createtable(L, static_cast<int>(values.size()), 0);
    for (size_t i = 0; i < values.size(); ++i) {
        push_tensor_or_nil(L, values[i], serial);
        lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
}

int refuse_edit(lua_State* L) {
    return luaL_error(L, "grad_input: editing is only at the live stop (the view is rewound): :forward to return");
}

// grad_input of a rewound group: reads as the list, refuses writes. Upvalue: the list.
int readonly_index(lua_State* L) {
    lua_rawget(L, lua_upvalueindex(1));
    return 1;
}
int readonly_len(lua_State* L) {
    lua_pushinteger(L, static_cast<lua_Integer>(lua_rawlen(L, lua_upvalueindex(1))));
    return 1;
}
int readonly_tostring(lua_State* L) {
    lua_Integer n = static_cast<lua_Integer>(lua_rawlen(L, lua_upvalueindex(1)));
    std::string s = "{";
    for (lua_Integer i = 1; i <= n; ++i) {
        lua_rawgeti(L, lua_upvalueindex(1), i);
        Tensor* t = tapedeck_test_tensor(L, -1);
        s += (i > 1 ? ", " : "") + (t ? repl_tensor_summary(*t) : std::string("nil"));
        lua_pop(L, 1);
    }
    lua_pushstring(L, (s + "}").c_str());
    return 1;
}

void push_readonly_list(lua_State* L, HistoryValues values, uint64_t serial) {
    lua_newtable(L);
    lua_createtable(L, 0, 4);
    push_list(L, values, serial);
    int list = lua_gettop(L);
    const char* names[] = {"__index", "__len", "__tostring"};
    lua_CFunction fns[] = {readonly_index, readonly_len, readonly_tostring};
    for (int i = 0; i < 3; ++i) {
        lua_pushvalue(L, list);
        lua_pushcclosure(L, fns[i], 1);
        lua_setfield(L, -3, names[i]);
    }
    lua_pop(L, 1);
    lua_pushcfunction(L, refuse_edit);
    lua_setfield(L, -2, "__newindex");
    lua_setmetatable(L, -2);
}

void push_new_names(lua_State* L, const DebugStop& stop, const HistoryEvent& e) {
    lua_createtable(L, 0, 10);
    lua_createtable(L, 0, 8);   // stop
    lua_pushstring(L, "rewound");
    lua_setfield(L, -2, "kind");
    lua_pushstring(L, e.phase == PHASE_FORWARD ? "forward" : "backward");
    lua_setfield(L, -2, "phase");
    lua_pushstring(L, "rewound");
    lua_setfield(L, -2, "reason");
    lua_pushinteger(L, static_cast<lua_Integer>(events_back(stop)));
    lua_setfield(L, -2, "back");
    lua_pushinteger(L, static_cast<lua_Integer>(e.serial));
    lua_setfield(L, -2, "event");
    lua_pushboolean(L, e.values_kept);
    lua_setfield(L, -2, "values_kept");
    if (e.where.file >= 0) {
        lua_pushstring(L, source_file_name(e.where.file));
        lua_setfield(L, -2, "file");
        lua_pushinteger(L, e.where.line);
        lua_setfield(L, -2, "line");
    }
    lua_setfield(L, -2, "stop");
    if (Node* n = tape_find(e.node_id)) {
        tapedeck_push_node_record(L, n);
    } else {   // the node is gone: what the event knows of it
        lua_createtable(L, 0, 3);
        lua_pushinteger(L, e.node_id);
        lua_setfield(L, -2, "id");
        lua_pushstring(L, e.op.c_str());
        lua_setfield(L, -2, "op");
    }
    lua_setfield(L, -2, "node");
    if (!e.values_kept) return;
    push_list(L, e.inputs(), e.serial);
    lua_setfield(L, -2, "inputs");
    push_list(L, e.outputs(), e.serial);
    lua_setfield(L, -2, "outputs");
    if (!e.outputs().empty()) {
        push_tensor_or_nil(L, e.outputs()[0], e.serial);
        lua_setfield(L, -2, "out");
    }
    if (!e.group) return;
    if (e.grad_outputs().size() == 1) push_tensor_or_nil(L, e.grad_outputs()[0], e.serial);
    else push_list(L, e.grad_outputs(), e.serial);
    lua_setfield(L, -2, "grad_output");
    push_readonly_list(L, e.grad_inputs(), e.serial);
    lua_setfield(L, -2, "grad_input");
    lua_getfield(L, -1, "grad_output");
    lua_setfield(L, -2, "grad_in");
    lua_getfield(L, -1, "grad_input");
    lua_setfield(L, -2, "grad_out");
}

}  // namespace

bool rewind_push_names(lua_State* L, DebugStop& stop) {
    if (!stop.rewound_to) return false;
    const HistoryEvent* e = history_event(stop.rewound_to);
    if (!e) return false;
    if (g.rewound_names.stop_serial != stop.serial || g.rewound_names.event_serial != e->serial || g.rewound_names.ref == LUA_NOREF) {
        names_release(L);
        push_new_names(L, stop, *e);
        g.rewound_names.ref = luaL_ref(L, LUA_REGISTRYINDEX);
        g.rewound_names.stop_serial = stop.serial;
        g.rewound_names.event_serial = e->serial;
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, g.rewound_names.ref);
    return true;
}

void rewind_stop_begin(DebugStop& stop) {
    uint64_t newest = history_newest_serial();
    const HistoryEvent* e = history_event(newest);
    bool is_event = e && stop.node && e->node_id == stop.node->id &&
                    (stop.kind == STOP_GROUP ? e->group : stop.kind == STOP_NODE && !e->group);
    stop.live_event = is_event ? newest : newest + 1;
    stop.rewound_to = 0;
}

void rewind_stop_end(DebugStop& stop) {
    if (stop.rewound_to || viewer_timeline()) show_in_viewer(0);   // the viewer's slider too: the run goes on live
    stop.rewound_to = 0;
    if (g.L) names_release(g.L);
}

void rewind_push_history_table(lua_State* L) {
    lua_createtable(L, 0, 10);
    auto set = [L](const char* field, double x) {
        lua_pushinteger(L, static_cast<lua_Integer>(x));
        lua_setfield(L, -2, field);
    };
    set("budget", static_cast<double>(history_budget()));
    set("bytes", static_cast<double>(history_bytes_held()));
    set("copies", static_cast<double>(history_copy_bytes()));
    set("events", static_cast<double>(history_events_listed()));
    set("kept", static_cast<double>(history_events_with_values()));
    set("newest", static_cast<double>(history_newest_serial()));
    set("oldest", static_cast<double>(history_oldest_serial()));
    set("oldest_kept", static_cast<double>(history_oldest_kept_serial()));
    lua_pushboolean(L, history_recording());
    lua_setfield(L, -2, "recording");
    if (g.stop && g.stop->rewound_to) set("rewound_to", static_cast<double>(g.stop->rewound_to));
}

}  // namespace dbg

using namespace dbg;

// ============================================================================================
// [SECTION] commands

namespace {

// The N of ":back N" (1 when empty); false with a message when it is not a positive whole number.
bool parse_count(const char* command, const std::string& args, uint64_t* n) {
    if (args.empty()) {
        *n = 1;
        return true;
    }
    char* end = nullptr;
    long long x = strtoll(args.c_str(), &end, 10);
    if (end == args.c_str() || *end != '\0' || x < 1) {
        fprintf(stderr, ":%s: give a number of events (1, 2, ...), not '%s'\n", command, args.c_str());
        return false;
    }
    *n = static_cast<uint64_t>(x);
    return true;
}

// Show the view at `serial` (0: the live stop).
void move_view(lua_State* L, DebugStop& stop, uint64_t serial) {
    stop.rewound_to = serial;
    names_release(L);
    show_in_viewer(serial);
    if (!serial) {
        printf("(back at the live stop)\n");
        fputs(debugger_banner().c_str(), stdout);
        return;
    }
    fputs(debugger_banner().c_str(), stdout);
}

DebugStop* stop_for(const char* command) {
    if (!g.stop) {
        fprintf(stderr, ":%s: only at a debugger stop (set a breakpoint, or dbg.pause(), then run)\n", command);
        return nullptr;
    }
    if (g.stop->kind == STOP_POST_MORTEM) {
        fprintf(stderr, ":%s: a post-mortem has no recorded events to move through\n", command);
        return nullptr;
    }
    return g.stop;
}

std::string history_status() {
    std::string s = "history: ";
    if (history_budget() == 0) return s + "off (:history 64MB turns it on)\n";
    s += "budget " + history_bytes_text(history_budget()) + ", holding " + history_bytes_text(history_bytes_held());
    if (history_copy_bytes()) s += " (" + history_bytes_text(history_copy_bytes()) + " of copies made before in-place writes)";
    s += "\n  " + std::to_string(history_events_listed()) + " events listed, the newest " + std::to_string(history_events_with_values()) +
         " with their values";
    if (history_events_listed()) {
        s += "; oldest listed: event " + std::to_string(history_oldest_serial());
        if (const HistoryEvent* e = history_event(history_oldest_serial())) s += " (#" + std::to_string(e->node_id) + " " + e->op + ")";
        if (history_events_with_values()) {
            s += ", oldest with values: event " + std::to_string(history_oldest_kept_serial());
            if (const HistoryEvent* e = history_event(history_oldest_kept_serial()))
                s += " (#" + std::to_string(e->node_id) + " " + e->op + ")";
        }
    }
    s += "\n  recording " + std::string(g.stop ? "paused at this stop (what the prompt runs is no event)"
                                     : history_recording() ? "now"
                                                           : "while a breakpoint, a step or the viewer watches") + "\n";
    return s;
}

}  // namespace

namespace {

// A stop :step would make: a forward op that ran, or a backward group (not a primitive op inside one).
bool is_step_event(const HistoryEvent* e) { return e && (e->group || e->phase == PHASE_FORWARD); }

// ":back step" / ":forward step": the count of events to the nearest step event before (direction
// -1) or after (+1) `from`, within [oldest, live); 0 when there is none.
uint64_t events_to_step(const DebugStop& stop, uint64_t from, int direction) {
    uint64_t oldest = history_oldest_serial();
    for (uint64_t serial = from + direction, n = 1; oldest && serial >= oldest && serial < stop.live_event; serial += direction, ++n)
        if (is_step_event(history_event(serial))) return n;
    return 0;
}

}  // namespace

bool debugger_cmd_back(lua_State* L, const std::string& args) {
    uint64_t n = 0;
    DebugStop* stop = stop_for("back");
    if (!stop) return true;
    uint64_t from = stop->rewound_to ? stop->rewound_to : stop->live_event;
    if (args == "step") {   // as :step moves, backwards: to the previous forward op or backward group
        n = events_to_step(*stop, from, -1);
        if (n == 0) {
            fprintf(stderr, ":back step: no forward op or backward group before this one is listed (:history says what it holds)\n");
            return true;
        }
    } else if (!parse_count("back", args, &n)) {
        return true;
    }
    uint64_t oldest = history_oldest_serial();
    if (oldest == 0 || from <= oldest) {
        fprintf(stderr, ":back: %s\n", oldest == 0 ? "the history holds no event (:history says why)"
                                                     : "already at the oldest event the history lists (older ones were not recorded or were forgotten)");
        return true;
    }
    if (n > from - oldest) {
        fprintf(stderr, ":back: only %llu event%s before this one %s listed (the oldest: :back %llu)\n",
                static_cast<unsigned long long>(from - oldest), from - oldest == 1 ? "" : "s", from - oldest == 1 ? "is" : "are",
                static_cast<unsigned long long>(stop->live_event - oldest));
        return true;
    }
    move_view(L, *stop, from - n);
    return true;
}

bool debugger_cmd_forward(lua_State* L, const std::string& args) {
    uint64_t n = 0;
    DebugStop* stop = stop_for("forward");
    if (!stop || (args != "step" && !parse_count("forward", args, &n))) return true;
    if (!stop->rewound_to) {
        fprintf(stderr, ":forward: already at the live stop (:back moves the view back)\n");
        return true;
    }
    if (args == "step") n = events_to_step(*stop, stop->rewound_to, +1);   // 0: none before the live stop
    uint64_t to = n ? stop->rewound_to + n : stop->live_event;
    move_view(L, *stop, to >= stop->live_event ? 0 : to);
    return true;
}

bool debugger_cmd_history(lua_State*, const std::string& args) {
    if (!args.empty()) {
        size_t bytes = 0;
        std::string why;
        if (!history_parse_bytes(args, &bytes, &why)) {
            if (!why.empty()) fprintf(stderr, ":history: %s\n", why.c_str());
            else fprintf(stderr, ":history: give a size (200MB, 1GB, 512KB) or off, not '%s'\n", args.c_str());
            return true;
        }
        history_set_budget(bytes);
    }
    fputs(history_status().c_str(), stdout);
    if (g.stop && g.stop->rewound_to && !history_event(g.stop->rewound_to)) {   // off (or forgotten): the view goes live
        g.stop->rewound_to = 0;
        if (g.L) names_release(g.L);
        show_in_viewer(0);
        printf("(back at the live stop: the history no longer lists the event shown)\n");
    }
    return true;
}

int64_t debugger_rewound_newest_id() {
    if (!g.stop || !g.stop->rewound_to) return 0;
    const HistoryEvent* e = history_event(g.stop->rewound_to);
    return e ? e->newest_id : 0;
}
