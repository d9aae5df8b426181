// plan_passes.h: the options of `:plan`: `:plan f --passes [PASS] [--view]`, the freeze compiler
// pass by pass (docs/freeze.md, "Pass by pass"), and `:plan f --source`, the plan's generated C++
// (docs/freeze.md, "Native code").
#pragma once

#include <string>

struct lua_State;

// `expression` names the frozen function, `options` is the rest of the line ("--passes cse
// --view"). Prints the recorded graph's steps and what each pass (or PASS) did; with --view,
// opens the viewer on the recorded graph with its pass selector. With --source (alone), prints the
// latest plan's generated C++ (f:source()). Bad input (an unknown option or pass, something not
// frozen, a function never called) prints one line naming :plan and changes nothing.
void plan_passes_command(lua_State* L, const std::string& expression, const std::string& options);
