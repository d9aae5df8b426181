// kernel_rich_commands.h: the ':' commands as a notebook shows them. Every command runs as in the
// terminal (commands.h: its text comes out as the cell's stdout); those that make a picture also
// give it to the notebook: :graph and :view the graph as SVG, :plot a PNG, :animate a GIF, :dot
// an .svg or .png it wrote.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

struct lua_State;

struct RichCommandResult {
    bool keep_going = true;                  // false: the command was :quit
    std::vector<nlohmann::json> displays;    // MIME bundles to show, in order
    std::string hidden;                      // lines of its output that hold this are not shown
};

// Run `line` (without its ':'), as command_run does, and collect its pictures.
RichCommandResult kernel_rich_command(lua_State* L, const std::string& line);
