// completion.h: the words that complete what is typed (the terminal's Tab, the kernel's completion).
#pragma once

#include <string>
#include <vector>

struct lua_State;

// The completions of `text`, the word before the cursor: globals (and what the innermost loop's
// _ENV adds: a debugger stop's locals) and Lua keywords; fields after '.', methods after ':'
// (tensor methods included); ':' commands when `line_start` (the word begins the line). Each is
// the whole word ("torch.matmul", "x:sum"). Never runs user code.
std::vector<std::string> repl_completions(lua_State* L, const std::string& text, bool line_start);
