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

#include "debugger.h"
#include "debugger_internal.h"
#include "tapedeck_lua.h"

using namespace dbg;

// ============================================================================================
// [SECTION] frames

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
                *why = count > 0 ? "at the outermost frame" : "at the innermost frame";
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

constexpr int PRINT_DEPTH = 3;          // tables inside tables inside tables, then {...}
constexpr int PRINT_ENTRIES = 20;       // entries of one table, then ...
constexpr size_t SHORT_VALUE = 60;      // :locals cuts values to this many characters

bool is_identifier(const char* s) {
    static const std::set<std::string> keywords = {"and", "break", "do", "else", "elseif", "end", "false", "for",
                                                   "function", "goto", "if", "in", "local", "nil", "not", "or",
                                                   "repeat", "return", "then", "true", "until", "while"};
    if (!(isalpha(static_cast<unsigned char>(*s)) || *s == '_')) return false;
    for (const char* c = s; *c; ++c)
        if (!(isalnum(static_cast<unsigned char>(*c)) || *c == '_')) return false;
    return !keywords.count(s);
}

std::string quoted(lua_State* L, int idx) {
    size_t length;
    const char* s = lua_tolstring(L, idx, &length);
    std::string out = "\"";
    for (size_t i = 0; i < length; ++i) {
        char c = s[i];
        if (c == '"' || c == '\\') out += '\\';
        if (c == '\n') out += "\\n";
        else out += c;
    }
    return out + "\"";
}

// Tensors inside tables: "tensor [20,1] float32" (printing each one whole would bury the table).
std::string format_nested(lua_State* L, int idx, int depth, std::set<const void*>& open_tables);

std::string format_table(lua_State* L, int idx, int depth, std::set<const void*>& open_tables) {
    if (luaL_getmetafield(L, idx, "__tostring") != LUA_TNIL) {   // the author's own text (an nn module, ...)
        lua_pop(L, 1);
        size_t length;
        const char* s = luaL_tolstring(L, idx, &length);
        std::string text(s, length);
        lua_pop(L, 1);
        return text;
    }
    const void* self = lua_topointer(L, idx);
    if (open_tables.count(self)) return "{<cycle>}";
    if (depth >= PRINT_DEPTH) return "{...}";
    open_tables.insert(self);
    std::string out = "{";
    int shown = 0;
    lua_Integer length = static_cast<lua_Integer>(lua_rawlen(L, idx));
    for (lua_Integer i = 1; i <= length && shown < PRINT_ENTRIES; ++i, ++shown) {   // the array part, in order
        lua_rawgeti(L, idx, i);
        out += (shown ? ", " : "") + format_nested(L, lua_gettop(L), depth + 1, open_tables);
        lua_pop(L, 1);
    }
    std::vector<std::pair<std::string, std::string>> fields;   // the rest, sorted by key
    int total = static_cast<int>(length);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        bool in_array = lua_isinteger(L, -2) && lua_tointeger(L, -2) >= 1 && lua_tointeger(L, -2) <= length;
        if (!in_array) {
            ++total;
            std::string key;
            if (lua_type(L, -2) == LUA_TSTRING && is_identifier(lua_tostring(L, -2))) {
                key = lua_tostring(L, -2);
            } else {
                lua_pushvalue(L, -2);
                key = "[" + format_nested(L, lua_gettop(L), PRINT_DEPTH, open_tables) + "]";
                lua_pop(L, 1);
            }
            if (static_cast<int>(fields.size()) < 4 * PRINT_ENTRIES)
                fields.emplace_back(key, format_nested(L, lua_gettop(L), depth + 1, open_tables));
        }
        lua_pop(L, 1);
    }
    std::sort(fields.begin(), fields.end());
    for (const auto& field : fields) {
        if (shown >= PRINT_ENTRIES) break;
        out += (shown++ ? ", " : "") + field.first + " = " + field.second;
    }
    if (total > shown) out += (shown ? ", " : "") + std::string("... (") + std::to_string(total - shown) + " more)";
    open_tables.erase(self);
    return out + "}";
}

// "function <frames.lua:3>": where a Lua function is defined (an address says nothing).
std::string function_text(lua_State* L, int idx) {
    lua_Debug ar;
    lua_pushvalue(L, idx);
    lua_getinfo(L, ">S", &ar);
    if (strcmp(ar.what, "C") == 0) return "builtin function";
    return std::string("function <") + ar.short_src + ":" + std::to_string(ar.linedefined) + ">";
}

std::string format_nested(lua_State* L, int idx, int depth, std::set<const void*>& open_tables) {
    if (lua_type(L, idx) == LUA_TFUNCTION) return function_text(L, idx);
    if (td::Tensor* t = tapedeck_test_tensor(L, idx))
        return "tensor " + t->shape().str() + " " + td::dtype_name(t->dtype());
    if (lua_type(L, idx) == LUA_TSTRING) return quoted(L, idx);
    if (lua_type(L, idx) == LUA_TTABLE) return format_table(L, idx, depth, open_tables);
    size_t length;
    const char* s = luaL_tolstring(L, idx, &length);
    std::string text(s, length);
    lua_pop(L, 1);
    return text;
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
        std::set<const void*> open_tables;
        std::string value = format_nested(L, lua_gettop(L), 1, open_tables);
        if (tapedeck_test_tensor(L, -1)) value = value.substr(strlen("tensor "));
        if (value.size() > SHORT_VALUE) value = value.substr(0, SHORT_VALUE - 3) + "...";
        char head[160];
        snprintf(head, sizeof head, "  %-*s  %-8s ", static_cast<int>(std::min<size_t>(width, 100)), lua_tostring(L, -2),
                 type_word(L, -1).c_str());
        out += head + value + "\n";
        lua_pop(L, 3);
    }
}

}  // namespace

std::string debugger_format_value(lua_State* L, int idx) {
    idx = lua_absindex(L, idx);
    if (lua_type(L, idx) == LUA_TTABLE) {
        std::set<const void*> open_tables;
        return format_table(L, idx, 0, open_tables);
    }
    if (lua_type(L, idx) == LUA_TSTRING) return quoted(L, idx);
    if (lua_type(L, idx) == LUA_TFUNCTION) return function_text(L, idx);
    size_t length;
    const char* s = luaL_tolstring(L, idx, &length);   // a tensor whole, as print shows it
    std::string text(s, length);
    lua_pop(L, 1);
    return text;
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
    return out;
}
