// commands.h: the REPL's ':' commands, one table of them.
#pragma once

#include <string>
#include <vector>

struct lua_State;

// Run one command line (without its ':'), e.g. "graph loss". False means leave the REPL.
// An unknown command or bad arguments print a message and keep the session.
bool command_run(lua_State* L, const std::string& line);

// The command names (without ':'), for tab completion.
std::vector<std::string> command_names();

// The ':help' text.
std::string command_help();
