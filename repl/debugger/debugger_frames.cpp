// debugger_frames.cpp: pdb's ways of looking around a stop — selecting a frame (:up, :down), the
// source around its line (:list), its variables (:locals), and printing values with tables shown
// as their contents (:p, :display).
//
// [SECTION] frames   selecting the frame whose locals the prompt sees
// [SECTION] list     the selected frame's source, with its line and breakpoints marked
// [SECTION] values   :locals and :p's printer
#include <lua.hpp>

#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "debugger.h"
#include "debugger_internal.h"
#include "tapedeck_lua.h"
#include "value_text.h"

using namespace dbg;

// ============================================================================================
// [SECTION] frames

namespace {

// "att, q" : the names of a backward stop's forward tensors (push_forward_names), sorted.
std::string forward_names_list(const DebugStop& stop) {
    lua_State* L = g.L;
    int top = lua_gettop(L);
    push_forward_names(L, stop);
    std::vector<std::string> names;
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        names.push_back(lua_tostring(L, -2));
        lua_pop(L, 1);
    }
    lua_settop(L, top);
    std::sort(names.begin(), names.end());
    std::string list;
    for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
    return list;
}

// Why :up cannot reach the frame that made a backward stop's node: it has returned.
std::string forward_frame_gone(const DebugStop& stop, const td::Node* forward) {
    std::string names = forward_names_list(stop);
    return "at the outermost frame of backward()'s caller: this is a backward stop, and the forward frame that made #" +
           std::to_string(forward->id) + " " + forward->name() + " (" + td::source_loc_str(forward->where) +
           ") has returned, so its locals are gone. " +
           (names.empty() ? std::string("No tensor of this stop has a variable's name; inputs[i], out, saved.x and grad_output hold them")
                          : "The names the banner gives its tensors print them here (" + names +
                                ": :p " + names.substr(0, names.find(',')) + "), as do inputs[i], out and grad_output");
}

}  // namespace

bool debugger_select_frame(int count, std::string* why) {
    DebugStop* stop = g.stop;
    if (!stop) {
        *why = "not stopped (it selects a frame of a stopped program)";
        return false;
    }
    int step = count > 0 ? 1 : -1;
    int frame = stop->frame;
    for (int moved = 0; moved != count;) {
        int next = frame + step;
        while (next >= 0 && next < static_cast<int>(stop->frames.size()) && stop->frames[next].what == "C") next += step;
        if (next < 0 || next >= static_cast<int>(stop->frames.size())) {
            if (moved == 0) {
                td::Node* forward = count > 0 ? stop_forward_node(*stop) : nullptr;
                *why = forward ? forward_frame_gone(*stop, forward) : count > 0 ? "at the outermost frame" : "at the innermost frame";
                return false;
            }
            break;   // as far as it goes
        }
        frame = next;
        moved += step;
    }
    stop->frame = frame;
    viewer_show_stop_begin(*stop);   // a line stop's Source window follows the selection
    return true;
}

bool debugger_select_frame_at(int index, std::string* why) {
    DebugStop* stop = g.stop;
    if (!stop) {
        *why = "not stopped (it selects a frame of a stopped program)";
        return false;
    }
    if (index < 0 || index >= static_cast<int>(stop->frames.size()) || stop->frames[index].what == "C") {
        *why = "no Lua frame " + std::to_string(index) + " at this stop";
        return false;
    }
    if (stop->frame != index) {
        stop->frame = index;
        viewer_show_stop_begin(*stop);
    }
    return true;
}

bool debugger_push_frame_variables(lua_State* L) { return g.stop && push_frame_variables(L, *g.stop); }

void debugger_push_stop_names(lua_State* L) { push_stop_names(L); }

// ============================================================================================
// [SECTION] list

namespace {

// Does a line breakpoint sit on line `line` of the frame's file?
bool breakpoint_on(const DebugFrame& f, int line) {
    for (const Breakpoint& bp : g.breaks)
        if (bp.target == TARGET_LINE && bp.line == line && source_matches(f.source, bp.file)) return true;
    return false;
}

}  // namespace

bool debugger_list(int around, int first, int last, std::string& text, std::string* why) {
    const DebugStop* stop = g.stop;
    if (!stop) {
        *why = "not stopped (it lists the source around a stop's line)";
        return false;
    }
    if (stop->frame < 0) {
        *why = "there is no Lua frame at this stop";
        return false;
    }
    const DebugFrame& f = stop->frames[stop->frame];
    const std::vector<std::string>* lines = source_file_lines(f.source[0] == '@' ? f.source : f.short_src);
    if (!lines) {
        *why = "no source file for " + f.short_src +
               (is_library_source(f.source) ? " (tapedeck's library code, built into the program)" : " (typed at the prompt?)");
        return false;
    }
    const int context = 5;   // lines either side, as pdb
    int count = static_cast<int>(lines->size());
    if (around > count) {
        *why = "line " + std::to_string(around) + " is past the end of " + f.short_src + " (" + std::to_string(count) + " lines)";
        return false;
    }
    bool onward = around == 0 && first == 0 && g.list_serial == stop->serial && g.list_frame == stop->frame && g.list_next > 0;
    if (around > 0) first = std::max(1, around - context);
    else if (first == 0) first = onward ? g.list_next : std::max(1, f.line - context);
    if (last == 0) last = first + 2 * context;
    if (first > count) {
        *why = onward ? "at the end of " + f.short_src + " (" + std::to_string(count) + " lines)"
                      : "line " + std::to_string(first) + " is past the end of " + f.short_src + " (" + std::to_string(count) + " lines)";
        return false;
    }
    last = std::min(last, count);
    text.clear();
    for (int line = first; line <= last; ++line) {
        char head[32];
        snprintf(head, sizeof head, "%4d %s%s ", line, breakpoint_on(f, line) ? "B" : " ", line == f.line ? "->" : "  ");
        text += head + (*lines)[static_cast<size_t>(line - 1)] + "\n";
    }
    g.list_serial = stop->serial;
    g.list_frame = stop->frame;
    g.list_next = last + 1;
    return true;
}

// ============================================================================================
// [SECTION] values

namespace {

constexpr size_t SHORT_VALUE = 60;      // :locals cuts values to this many characters

// A value inside :locals' list: a tensor as its shape and dtype, the rest as the prompt shows a
// value inside a table (value_text.h: the one printer of tables).
std::string short_value(lua_State* L, int idx) {
    if (td::Tensor* t = tapedeck_test_tensor(L, idx))
        return t->shape().str() + " " + td::dtype_name(t->dtype()) + repl_device_text(t->value());
    return repl_nested_value_text(L, idx);
}

// "tensor", or Lua's type name.
std::string type_word(lua_State* L, int idx) {
    return tapedeck_test_tensor(L, idx) ? "tensor" : luaL_typename(L, idx);
}

// One {name, value} entry per line: "  name  type  value", the value cut short.
void format_entries(lua_State* L, int list, std::string& out) {
    size_t width = 0;
    lua_Integer n = static_cast<lua_Integer>(lua_rawlen(L, list));
    for (lua_Integer i = 1; i <= n; ++i) {
        lua_rawgeti(L, list, i);
        lua_rawgeti(L, -1, 1);
        width = std::max(width, strlen(lua_tostring(L, -1)));
        lua_pop(L, 2);
    }
    for (lua_Integer i = 1; i <= n; ++i) {
        lua_rawgeti(L, list, i);
        lua_rawgeti(L, -1, 1);
        lua_rawgeti(L, -2, 2);
        std::string value = short_value(L, lua_gettop(L));
        if (value.size() > SHORT_VALUE) value = value.substr(0, SHORT_VALUE - 3) + "...";
        char head[160];
        snprintf(head, sizeof head, "  %-*s  %-8s ", static_cast<int>(std::min<size_t>(width, 100)), lua_tostring(L, -2),
                 type_word(L, -1).c_str());
        out += head + value + "\n";
        lua_pop(L, 3);
    }
}

}  // namespace

// :p's text: as a value inside a table prints (strings quoted, tensors whole at the top level).
std::string debugger_format_value(lua_State* L, int idx) {
    if (tapedeck_test_tensor(L, idx)) return repl_value_text(L, idx);
    return repl_nested_value_text(L, idx);
}

std::string debugger_locals(lua_State* L) {
    const DebugStop* stop = g.stop;
    if (!stop) return "not stopped (:locals lists the variables of a stopped frame)\n";
    if (!push_frame_variables(L, *stop)) return "there is no Lua frame at this stop\n";
    int vars = lua_gettop(L);
    std::string out = "locals of " + frame_text(stop->frames[stop->frame]) + ":\n";
    lua_getfield(L, vars, "locals");
    if (lua_rawlen(L, -1) == 0) out += "  (none)\n";
    format_entries(L, lua_gettop(L), out);
    lua_getfield(L, vars, "upvalues");
    if (lua_rawlen(L, -1) > 0) {
        out += "upvalues:\n";
        format_entries(L, lua_gettop(L), out);
    }
    lua_settop(L, vars - 1);
    if (td::Node* forward = stop_forward_node(*stop)) {   // the names that come before the frame's (env_index)
        push_forward_names(L, *stop);
        lua_newtable(L);
        int list = lua_gettop(L), n = 0;
        std::vector<std::string> names;
        lua_pushnil(L);
        while (lua_next(L, list - 1)) {
            names.push_back(lua_tostring(L, -2));
            lua_pop(L, 1);
        }
        std::sort(names.begin(), names.end());
        for (const std::string& name : names) {
            lua_createtable(L, 2, 0);
            lua_pushstring(L, name.c_str());
            lua_rawseti(L, -2, 1);
            lua_getfield(L, list - 1, name.c_str());
            lua_rawseti(L, -2, 2);
            lua_rawseti(L, list, ++n);
        }
        if (n > 0) {
            out += "the forward tensors of #" + std::to_string(forward->id) + " " + forward->name() + " (" +
                   td::source_loc_str(forward->where) + "; its frame has returned), by the banner's names, before the locals above:\n";
            format_entries(L, list, out);
        }
        lua_settop(L, vars - 1);
    }
    return out;
}
