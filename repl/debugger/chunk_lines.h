// chunk_lines.h: which lines of a Lua file hold code — the lines a line breakpoint can stop at.
#pragma once

#include <string>
#include <vector>

struct lua_State;

// The lines of the file at `path` that hold code, in increasing order: those of the main chunk
// and of every function defined in it (what Lua's activelines would give for each of them).
// False, with `error` set, when the file cannot be read or does not compile.
bool chunk_code_lines(lua_State* L, const std::string& path, std::vector<int>& lines, std::string& error);
