// commands.h: the REPL's ':' commands, one table of them.
#pragma once

#include <string>
#include <vector>

#include "tape.h"

struct lua_State;

// Run one command line (without its ':'), e.g. "graph loss". False means leave the REPL.
// An unknown command or bad arguments print a message and keep the session.
bool command_run(lua_State* L, const std::string& line);

// The command names (without ':'), for tab completion.
std::vector<std::string> command_names();

// The nodes an optional expression names: the graph of the tensor it evaluates to, or the whole
// tape when it is empty (the script's names given first). False (message printed) when it is not a tensor.
bool command_nodes_for(lua_State* L, const std::string& expression, td::NodeList& nodes);

// The ':help' text.
std::string command_help();

// :timeit's figures (eager against frozen on the same graph), for the terminal's text and the
// notebook's table.
struct TimeitFigures {
    std::string expression, count;   // the frozen function as typed, calls per side
    double eager_min_us = 0, eager_median_us = 0, frozen_min_us = 0, frozen_median_us = 0;
    double eager_peak_bytes = 0, frozen_peak_bytes = 0, eager_gpu_peak_bytes = 0, frozen_gpu_peak_bytes = 0;
    double speedup = 0, max_diff = 0;
    bool has_native = false;         // the latest plan runs native code: a third column
    double native_min_us = 0, native_median_us = 0, native_peak_bytes = 0, native_max_diff = 0;
};
// Measure `args` ("f [N]"); false, with the message printed, when it names no frozen function.
bool command_timeit_measure(lua_State* L, const std::string& args, TimeitFigures& figures);
// The terminal's lines for them.
std::string command_timeit_text(const TimeitFigures& figures);
