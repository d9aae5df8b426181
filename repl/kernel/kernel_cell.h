// kernel_cell.h: a notebook cell as the REPL would run it, line for line: Lua (many lines), ':'
// commands, and the value of its last expression as the cell's result.
#pragma once

#include <string>
#include <vector>

struct lua_State;

// A run of a cell's lines: one ':' command line, or the Lua lines between commands.
struct CellPart {
    bool is_command = false;
    std::string text;     // the command without its ':' (and without leading blanks), or the Lua code
    int first_line = 1;   // the cell's line it starts at (1-based)
};

// The parts of a cell, in order. A line whose first non-blank character is ':' is a command,
// except a Lua label ("::continue::"). Blank cells give no parts.
std::vector<CellPart> cell_split(const std::string& code);

// Load a Lua part as the chunk `chunk_name` ("=cell 3"), its lines numbered as the cell's: as
// "return <part>" when the whole part is an expression, else with its last lines returned when
// they are an expression and the lines before them compile alone (`x = f()` then `x:sum()`), else
// as plain statements. `returns` says whether the chunk's values are the part's result. A lua
// status; the function, or the statements' syntax error, on the stack.
int cell_load(lua_State* L, const CellPart& part, const std::string& chunk_name, bool* returns);

// Whether the Lua of a cell is complete ("complete"), needs more lines ("incomplete": an
// unfinished function, table or string) or can never compile ("invalid"), for is_complete_request.
std::string cell_completeness(lua_State* L, const std::string& code);

// An error message or traceback with the cell's chunk names made readable:
// "cell 3:2: attempt to ..." becomes "cell 3, line 2: attempt to ..."; "(cell 3:2)" "(cell 3, line 2)".
std::string cell_error_text(const std::string& message);
