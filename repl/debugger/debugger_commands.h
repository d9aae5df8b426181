// debugger_commands.h: the debugger's ':' commands, as rows of the table in commands.cpp.
// Each takes the text after the command's name; false means leave the REPL (none of them does).
#pragma once

#include <string>

struct lua_State;

bool debugger_cmd_break(lua_State* L, const std::string& args);     // :break SPEC
bool debugger_cmd_breaks(lua_State* L, const std::string& args);    // :breaks
bool debugger_cmd_delete(lua_State* L, const std::string& args);    // :delete N|all
bool debugger_cmd_disable(lua_State* L, const std::string& args);   // :disable N|all
bool debugger_cmd_enable(lua_State* L, const std::string& args);    // :enable N|all
bool debugger_cmd_step(lua_State* L, const std::string& args);      // :step
bool debugger_cmd_stepi(lua_State* L, const std::string& args);     // :stepi
bool debugger_cmd_next(lua_State* L, const std::string& args);      // :next
bool debugger_cmd_finish(lua_State* L, const std::string& args);    // :finish
bool debugger_cmd_continue(lua_State* L, const std::string& args);  // :continue
bool debugger_cmd_abort(lua_State* L, const std::string& args);     // :abort
bool debugger_cmd_run(lua_State* L, const std::string& args);       // :run FILE [ARGS]
bool debugger_cmd_where(lua_State* L, const std::string& args);     // :where
bool debugger_cmd_inspect(lua_State* L, const std::string& args);   // :inspect EXPR
bool debugger_cmd_watch(lua_State* L, const std::string& args);     // :watch [EXPR]
bool debugger_cmd_unwatch(lua_State* L, const std::string& args);   // :unwatch N|all
bool debugger_cmd_up(lua_State* L, const std::string& args);        // :up [N]
bool debugger_cmd_down(lua_State* L, const std::string& args);      // :down [N]
bool debugger_cmd_list(lua_State* L, const std::string& args);      // :list [N | FIRST,LAST]
bool debugger_cmd_locals(lua_State* L, const std::string& args);    // :locals
bool debugger_cmd_print(lua_State* L, const std::string& args);     // :p EXPR
bool debugger_cmd_until(lua_State* L, const std::string& args);     // :until [LINE]
bool debugger_cmd_ignore(lua_State* L, const std::string& args);    // :ignore N COUNT
bool debugger_cmd_post_mortem(lua_State* L, const std::string& args);   // :pm
bool debugger_cmd_gradcheck(lua_State* L, const std::string& args);     // :gradcheck [eps=E ...] (debugger_gradcheck.cpp)
bool debugger_cmd_diff(lua_State* L, const std::string& args);      // :diff [nodes|values|grads|on|off] (debugger_diff.cpp)
bool debugger_cmd_back(lua_State* L, const std::string& args);      // :back [N]
bool debugger_cmd_forward(lua_State* L, const std::string& args);   // :forward [N]
bool debugger_cmd_history(lua_State* L, const std::string& args);   // :history [SIZE|off]
