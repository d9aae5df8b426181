// debugger_why.h: `:why` — where a NaN or Inf came from (debugger_why.cpp).
#pragma once

#include <string>

struct lua_State;

// :why [EXPR]: explain the NaN/Inf of EXPR's tensor, or at a stop of what the stop shows (the
// stopped node's result or gradients, else the tensors of the selected frame's variables).
bool debugger_cmd_why(lua_State* L, const std::string& args);
// dbg.why(t): the explanation as a table {node=, op=, phase=, kind=, file=, line=, reason=, inputs=,
// path=, text=, ...}; nil and a message when t has no NaN or Inf.
int debugger_why_lua(lua_State* L);
