// value_text.cpp: tables as their contents, for the prompt's results and the debugger's watches.
//
// A table is laid out on one line when that fits in LINE_WIDTH columns, else one entry a line,
// indented. The sequence part (1, 2, ...) comes first in order, then the other keys sorted
// (numbers, then strings, then the rest). Deeper than MAX_DEPTH a table shows as "{...}"; a table
// that contains itself shows "<cycle>" where it recurs; after MAX_ENTRIES entries "... (N more)";
// a string longer than MAX_STRING bytes is cut, with its length.
#include "value_text.h"

#include <lua.hpp>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <vector>

#include "tapedeck_lua.h"

namespace {

constexpr int MAX_DEPTH = 4;
constexpr int MAX_ENTRIES = 30;
constexpr size_t LINE_WIDTH = 100;
constexpr size_t MAX_STRING = 80;

bool has_tostring(lua_State* L, int idx) {
    if (luaL_getmetafield(L, idx, "__tostring") == LUA_TNIL) return false;
    lua_pop(L, 1);
    return true;
}

// tostring's text of the value at idx, without changing the value (a number key stays a number).
std::string tostring_text(lua_State* L, int idx) {
    size_t len;
    const char* s = luaL_tolstring(L, idx, &len);
    std::string text(s, len);
    lua_pop(L, 1);
    return text;
}

// A string as a table shows it: quoted, escaped, and past MAX_STRING bytes cut with a count.
std::string quoted(const char* s, size_t len) {
    std::string q = "\"";
    for (size_t i = 0; i < std::min(len, MAX_STRING); ++i) {
        unsigned char ch = static_cast<unsigned char>(s[i]);
        if (ch == '"' || ch == '\\') q += '\\', q += static_cast<char>(ch);
        else if (ch == '\n') q += "\\n";
        else if (ch == '\t') q += "\\t";
        else if (ch < 32 || ch == 127) q += "\\" + std::to_string(ch);
        else q += static_cast<char>(ch);
    }
    if (len > MAX_STRING) return q + "...\" (" + std::to_string(len) + " bytes)";
    return q + "\"";
}

bool is_identifier(const char* s, size_t len) {
    static const char* const KEYWORDS[] = {"and", "break", "do", "else", "elseif", "end", "false", "for",
                                           "function", "goto", "if", "in", "local", "nil", "not", "or",
                                           "repeat", "return", "then", "true", "until", "while"};
    if (len == 0 || strlen(s) != len || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
    for (size_t i = 0; i < len; ++i)
        if (!std::isalnum(static_cast<unsigned char>(s[i])) && s[i] != '_') return false;
    for (const char* k : KEYWORDS)
        if (strcmp(k, s) == 0) return false;
    return true;
}

// One entry of a table: its key as written before " = " ("" in the sequence part), its value.
struct Entry {
    int order;           // 0: a number key, 1: a string key, 2: any other
    double number;       // the number key, for sorting
    std::string key;     // "name", "[1.5]", "[\"a b\"]"
    std::string value;
};

// "function <frames.lua:3>": where a Lua function is defined (an address says nothing).
std::string function_text(lua_State* L, int idx) {
    lua_Debug ar;
    lua_pushvalue(L, idx);
    lua_getinfo(L, ">S", &ar);
    if (strcmp(ar.what, "C") == 0) return "builtin function";
    return std::string("function <") + ar.short_src + ":" + std::to_string(ar.linedefined) + ">";
}

class TablePrinter {
  public:
    explicit TablePrinter(lua_State* L) : L_(L) {}

    // The value at idx, `indent` columns in (for the lines of a long table).
    std::string value(int idx, int depth, size_t indent) {
        idx = lua_absindex(L_, idx);
        if (lua_type(L_, idx) == LUA_TSTRING && depth > 0) {
            size_t len;
            const char* s = lua_tolstring(L_, idx, &len);
            return quoted(s, len);
        }
        if (depth > 0)
            if (td::Tensor* t = tapedeck_test_tensor(L_, idx)) return repl_tensor_summary(*t);
        if (lua_type(L_, idx) == LUA_TFUNCTION && depth > 0) return function_text(L_, idx);
        if (lua_type(L_, idx) != LUA_TTABLE || has_tostring(L_, idx)) return tostring_text(L_, idx);
        return table(idx, depth, indent);
    }

  private:
    lua_State* L_;
    std::vector<const void*> open_tables_;   // the tables being printed around this one

    std::string table(int idx, int depth, size_t indent) {
        const void* self = lua_topointer(L_, idx);
        if (std::find(open_tables_.begin(), open_tables_.end(), self) != open_tables_.end()) return "<cycle>";
        if (depth >= MAX_DEPTH) return "{...}";
        if (!lua_checkstack(L_, 8)) return "{...}";
        open_tables_.push_back(self);
        int more = 0;
        std::vector<Entry> entries = entries_of(idx, depth, indent, &more);
        open_tables_.pop_back();
        return layout(entries, more, indent);
    }

    // The sequence part 1, 2, ... first, then the other keys; at most MAX_ENTRIES of them, the
    // count of the rest in *more.
    std::vector<Entry> entries_of(int idx, int depth, size_t indent, int* more) {
        std::vector<Entry> entries;
        lua_Integer sequence = 0;
        while (lua_rawgeti(L_, idx, sequence + 1) != LUA_TNIL) {
            if (static_cast<int>(entries.size()) < MAX_ENTRIES) entries.push_back({0, 0, "", value(-1, depth + 1, indent + 2)});
            else ++*more;
            lua_pop(L_, 1);
            ++sequence;
        }
        lua_pop(L_, 1);
        std::vector<Entry> keyed;
        lua_pushnil(L_);
        while (lua_next(L_, idx)) {
            if (lua_isinteger(L_, -2) && lua_tointeger(L_, -2) >= 1 && lua_tointeger(L_, -2) <= sequence) {
                lua_pop(L_, 1);
                continue;
            }
            if (static_cast<int>(entries.size() + keyed.size()) < MAX_ENTRIES) {
                Entry e = key_of(-2);
                e.value = value(-1, depth + 1, indent + 2);
                keyed.push_back(e);
            } else {
                ++*more;
            }
            lua_pop(L_, 1);
        }
        std::sort(keyed.begin(), keyed.end(), [](const Entry& a, const Entry& b) {
            if (a.order != b.order) return a.order < b.order;
            if (a.order == 0 && a.number != b.number) return a.number < b.number;
            return a.key < b.key;
        });
        entries.insert(entries.end(), keyed.begin(), keyed.end());
        return entries;
    }

    Entry key_of(int idx) {
        idx = lua_absindex(L_, idx);
        Entry e{2, 0, "", ""};
        if (lua_type(L_, idx) == LUA_TSTRING) {
            size_t len;
            const char* s = lua_tolstring(L_, idx, &len);   // a string key: no conversion
            e.order = 1;
            e.key = is_identifier(s, len) ? std::string(s, len) : "[" + quoted(s, len) + "]";
        } else if (lua_type(L_, idx) == LUA_TNUMBER) {
            e.order = 0;
            e.number = lua_tonumber(L_, idx);
            e.key = "[" + tostring_text(L_, idx) + "]";
        } else {
            e.key = "[" + tostring_text(L_, idx) + "]";
        }
        return e;
    }

    static std::string layout(const std::vector<Entry>& entries, int more, size_t indent) {
        std::vector<std::string> items;
        for (const Entry& e : entries) items.push_back(e.key.empty() ? e.value : e.key + " = " + e.value);
        if (more > 0) items.push_back("... (" + std::to_string(more) + " more)");
        if (items.empty()) return "{}";
        std::string line = "{";
        bool multiline_item = false;
        for (size_t i = 0; i < items.size(); ++i) {
            line += (i ? ", " : "") + items[i];
            multiline_item = multiline_item || items[i].find('\n') != std::string::npos;
        }
        line += "}";
        if (!multiline_item && indent + line.size() <= LINE_WIDTH) return line;
        // One entry a line; the sequence part's one-line values fill their lines, as a list of
        // numbers reads best.
        std::string pad(indent + 2, ' ');
        std::string lines = "{\n", current;
        for (size_t i = 0; i < items.size(); ++i) {
            bool packs = i < entries.size() && entries[i].key.empty() && items[i].find('\n') == std::string::npos;
            if (!current.empty() && (!packs || pad.size() + current.size() + items[i].size() + 2 > LINE_WIDTH)) {
                lines += pad + current + "\n";
                current.clear();
            }
            if (!packs) {
                lines += pad + items[i] + ",\n";
                continue;
            }
            current += (current.empty() ? "" : " ") + items[i] + ",";
        }
        if (!current.empty()) lines += pad + current + "\n";
        return lines + std::string(indent, ' ') + "}";
    }
};

}  // namespace

std::string repl_device_text(const td::Value& v) {
    if (td::value_freed(v) || v.device() == td::DEVICE_CPU) return "";
    return std::string(" ") + td::device_name(v.device());
}

std::string repl_tensor_summary(const td::Tensor& t) {
    if (!t.defined()) return "tensor (undefined)";
    std::string s = "tensor " + t.shape().str() + " " + td::dtype_name(t.dtype()) + repl_device_text(t.value()) + " #" +
                    std::to_string(t.node->id);
    if (t.node->outputs.size() > 1) s += "." + std::to_string(t.output + 1);
    return s + " " + t.node->name();
}

namespace {

// value_text(v, depth) -> the text (a protected call: a __tostring inside a table may raise an error).
int value_text(lua_State* L) {
    TablePrinter printer(L);
    std::string text = printer.value(1, static_cast<int>(lua_tointeger(L, 2)), 0);
    lua_pushlstring(L, text.data(), text.size());
    return 1;
}

std::string text_at_depth(lua_State* L, int idx, int depth) {
    idx = lua_absindex(L, idx);
    lua_pushcfunction(L, value_text);
    lua_pushvalue(L, idx);
    lua_pushinteger(L, depth);
    bool ok = lua_pcall(L, 2, 1, 0) == LUA_OK;
    size_t len = 0;
    const char* s = lua_tolstring(L, -1, &len);
    std::string text = s ? std::string(s, len) : "";
    lua_pop(L, 1);
    return ok ? text : "(error printing a " + std::string(luaL_typename(L, idx)) + ": " + text + ")";
}

}  // namespace

std::string repl_value_text(lua_State* L, int idx) { return text_at_depth(L, idx, 0); }

std::string repl_nested_value_text(lua_State* L, int idx) { return text_at_depth(L, idx, 1); }

std::string repl_error_text(lua_State* L, int idx) {
    if (lua_type(L, idx) == LUA_TSTRING || lua_type(L, idx) == LUA_TNUMBER) {
        size_t length;
        const char* text = lua_tolstring(L, idx, &length);   // a number converts in place: it is a string after
        return std::string(text, length);
    }
    return std::string("(error object is a ") + luaL_typename(L, idx) + " value)";
}
