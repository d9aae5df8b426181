// lua_plan_values.h: the Lua values a frozen function reads, found while it is recorded and
// checked at each call (lua_plan_values.cpp; docs/freeze.md, "Lua values").
//
// While torch.freeze records a call, a call hook on the recording thread sees every function the
// call runs. For each Lua function that is not the shipped library (nn, optim), at its first call:
// its upvalues that are numbers, booleans or strings are guarded, and so are those at the top
// level of the tables its upvalues hold; its _ENV, when it is the globals table, is swapped for a
// proxy that notes each global read (and its line) and forwards reads and writes to the globals.
// Table arguments' top-level numbers, booleans and strings are guarded too, and so are those of
// every nn module a call receives as its self (a library forward's too). A closure written
// inside a function that runs in the recording reads that function's locals (fresh each call) or
// its upvalues (noted with it): only its _ENV is taken. A call of a function whose result varies
// from call to call (math.random, os.time, os.clock, os.date, io.read, a file's read) refuses the
// recording, naming the call and its line. docs/freeze.md ("Lua values") says what is not seen.
//
// A guard compares the current value with the recorded one (Lua's raw equality, NaN equal to
// NaN): a few API calls per guard, none when the plan has no guard.
#pragma once

#include <lua.hpp>

#include <string>
#include <vector>

#include "tape.h"

namespace tdlua {

enum LuaValueHolder : unsigned char {
    LUA_VALUE_UPVALUE,   // upvalue `upvalue` of a function
    LUA_VALUE_GLOBAL,    // a key of the globals table (read with metamethods, as the code did)
    LUA_VALUE_FIELD,     // a key of a table (read raw: the key was in the table itself)
};

struct LuaValueGuard {
    LuaValueHolder holder = LUA_VALUE_UPVALUE;
    int upvalue = 0;
    std::string name;       // as the user wrote it: "lr", "temperature", "cfg.lr"
    std::string kind;       // "an upvalue", "a global", "a field"
    td::SourceLoc where;    // the line that read it (an upvalue: its first use in the function)
};

// The guards of one plan. `values_ref` is a registry table holding, per guard k (from 0), the
// holder (function or table) at 3k+1, the key at 3k+2 (nil for an upvalue) and the value at 3k+3.
struct LuaValueGuards {
    int values_ref = LUA_NOREF;
    std::vector<LuaValueGuard> list;
};

// Starts noting the Lua values a call reads (one recording at a time). The call's arguments are
// at [first, first + n), named `names` (a table argument's fields are guarded).
void lua_values_record_begin(lua_State* L, int first, int n, const std::vector<std::string>& names);
// Stops: the hook and the swapped _ENVs are put back (a hook set meanwhile by someone else, such
// as Ctrl-C's, is left in place). Returns the guards noted, but for the values the call itself
// changed (a counter it increments: a replay runs no Lua code, so it would not change them); those
// that are now numbers, booleans or strings are said in `changed` ("calls (an upvalue,
// step.lua:4; 0 when the call began, 1 after it)").
LuaValueGuards lua_values_record_end(lua_State* L, std::vector<std::string>* changed);
// -1 when every guard holds, else the index of the first that does not.
int lua_values_check(lua_State* L, const LuaValueGuards& guards);
// "lr (an upvalue, step.lua:9) was 0.1 when recorded, now 0.099" for guard `index`.
std::string lua_values_describe_change(lua_State* L, const LuaValueGuards& guards, int index);
void lua_values_release(lua_State* L, LuaValueGuards& guards);

}  // namespace tdlua
