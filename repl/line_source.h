// line_source.h: where the REPL's lines come from, kept apart from the loop that runs them.
//
// A pipe (or file) on stdin is read line by line with no prompt and no echo, so transcripts
// can be tested. A terminal is read through readline's callback interface with poll(): while it
// waits for a key, an idle callback runs (the viewer draws its frames there).
#pragma once

#include <memory>

#include "debugger_front_end.h"   // the LineSource interface, which the debugger's stops read through too

// stdin is a terminal: readline with history (~/.tapedeck_history) and tab completion over the
// globals, table fields and tensor methods of the program's Lua state (the one
// repl_install_interrupt_handler was given). Otherwise: plain lines, no prompt.
std::unique_ptr<LineSource> line_source_for_stdin();
