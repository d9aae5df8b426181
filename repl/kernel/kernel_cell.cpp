// kernel_cell.cpp: a cell split into Lua and ':' commands, loaded as the REPL loads a line
// (kernel_cell.h).
#include "kernel_cell.h"

#include <cstring>
#include <lua.hpp>
#include <regex>

#include "repl.h"

namespace {

// `code` placed at line `first_line` of the chunk (blank lines before it), so that errors, the
// debugger and the tape name the cell's own line numbers.
std::string at_line(const std::string& code, int first_line) {
    return std::string(static_cast<size_t>(first_line - 1), '\n') + code;
}

bool ends_with_eof_error(lua_State* L) {
    const char* message = lua_tostring(L, -1);
    const char* mark = "<eof>";
    size_t length = message ? strlen(message) : 0;
    return length >= strlen(mark) && strcmp(message + length - strlen(mark), mark) == 0;
}

// Whether `code` compiles as a chunk (popped either way).
bool compiles(lua_State* L, const std::string& code, const char* name) {
    bool ok = luaL_loadbuffer(L, code.data(), code.size(), name) == LUA_OK;
    lua_pop(L, 1);
    return ok;
}

// Where each line of `text` starts.
std::vector<size_t> line_starts(const std::string& text) {
    std::vector<size_t> starts{0};
    for (size_t i = 0; i < text.size(); ++i)
        if (text[i] == '\n' && i + 1 < text.size()) starts.push_back(i + 1);
    return starts;
}

}  // namespace

std::vector<CellPart> cell_split(const std::string& code) {
    std::vector<CellPart> parts;
    size_t at = 0;
    int line = 1;
    while (at < code.size()) {
        size_t end = code.find('\n', at);
        std::string text = code.substr(at, end == std::string::npos ? std::string::npos : end - at);
        size_t first = text.find_first_not_of(" \t\r");
        bool command = first != std::string::npos && text[first] == ':' && text.compare(first, 2, "::") != 0;
        if (command) {
            parts.push_back({true, text.substr(first + 1), line});
        } else if (parts.empty() || parts.back().is_command) {
            parts.push_back({false, text, line});
        } else {
            parts.back().text += "\n" + text;
        }
        if (end == std::string::npos) break;
        at = end + 1;
        ++line;
    }
    std::vector<CellPart> kept;   // Lua parts of blank lines only run nothing
    for (CellPart& p : parts)
        if (p.is_command || p.text.find_first_not_of(" \t\r\n") != std::string::npos) kept.push_back(std::move(p));
    return kept;
}

int cell_load(lua_State* L, const CellPart& part, const std::string& chunk_name, bool* returns) {
    const char* name = chunk_name.c_str();
    *returns = true;
    if (repl_load(L, at_line("return " + part.text, part.first_line), name) == LUA_OK) return LUA_OK;
    lua_pop(L, 1);
    std::vector<size_t> starts = line_starts(part.text);
    for (size_t k = 1; k <= starts.size() && k <= 8; ++k) {   // the last k lines as the result
        size_t split = starts[starts.size() - k];
        std::string before = part.text.substr(0, split), tail = part.text.substr(split);
        if (!compiles(L, before, name)) continue;
        std::string code = at_line(before + "return " + tail, part.first_line);
        if (repl_load(L, code, name) == LUA_OK) return LUA_OK;
        lua_pop(L, 1);
    }
    *returns = false;
    return repl_load(L, at_line(part.text, part.first_line), name);
}

std::string cell_completeness(lua_State* L, const std::string& code) {
    for (const CellPart& part : cell_split(code)) {
        if (part.is_command) continue;
        if (compiles(L, "return " + part.text, "=cell") || compiles(L, part.text, "=cell")) continue;
        luaL_loadbuffer(L, part.text.data(), part.text.size(), "=cell");
        bool more = ends_with_eof_error(L);
        lua_pop(L, 1);
        return more ? "incomplete" : "invalid";
    }
    return "complete";
}

std::string cell_error_text(const std::string& message) {
    static const std::regex cell_line(R"(\bcell (\d+):(\d+)\b)");
    return std::regex_replace(message, cell_line, "cell $1, line $2");
}
