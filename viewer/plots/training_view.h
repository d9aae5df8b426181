// training_view.h: the training log as the REPL and the window see it (the log itself is
// training_log.h, its pictures plot_render.h). Every build has these; without the viewer window,
// training_view_show does nothing.
#pragma once

#include <string>

struct lua_State;

// Add viewer.log, viewer.plot, viewer.series, viewer.step, viewer.log_options, viewer.log_clear,
// viewer.png_stats (and optim.lua's viewer._step_begin, _step_end, _step_counted, _param_names) to
// the global `viewer` table (made if missing).
void training_open_lua(lua_State* L);
// The ':plot' command: "" lists the series; "NAME [out.png] [WxH]" or "hist NAME [out.png] [WxH]"
// writes the plot (or, with no file, prints what the series holds and shows it in the Training
// window). Prints its messages; an unknown name is an error listing the series there are.
void training_plot_command(lua_State* L, const std::string& args);
// Show the Training window with plot `what` picked (a histogram: "hist NAME"), when the viewer is
// open; else remember it for when it opens.
void training_view_show(const std::string& what);
