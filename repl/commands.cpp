// commands.cpp: ':' commands. Adding one = one row in `commands` and its function.
#include "commands.h"

#include <cctype>
#include <cstdio>
#include <lua.hpp>
#include <vector>

#include "animate.h"
#include "debugger.h"
#include "debugger_commands.h"
#include "debugger_why.h"
#include "dot_export.h"
#include "format.h"
#include "model.h"
#include "page.h"
#include "plan_passes.h"
#include "repl.h"
#include "tapedeck_lua.h"
#include "text_util.h"
#include "viewer.h"
#include "training_view.h"

namespace {

struct Command {
    const char* name;
    const char* alias;
    const char* args;
    const char* help;
    bool (*run)(lua_State* L, const std::string& args);   // false: leave the REPL
};

bool cmd_help(lua_State*, const std::string&) {
    fputs(command_help().c_str(), stdout);
    return true;
}

bool cmd_graph(lua_State* L, const std::string& args) {
    td::NodeList nodes;
    if (!command_nodes_for(L, args, nodes)) return true;
    size_t later = 0;
    if (int64_t newest = debugger_rewound_newest_id()) {   // rewound (:back): the graph as it stood
        td::NodeList then;
        for (const td::Ref<td::Node>& n : nodes) (n->id <= newest ? then.push_back(n) : void(++later));
        nodes.swap(then);
    }
    fputs(td::graph_format_table(nodes, debugger_marked_nodes()).c_str(), stdout);
    printf("(%zu node%s", nodes.size(), nodes.size() == 1 ? "" : "s");
    if (later) printf("; rewound: %zu recorded later not shown", later);
    printf(")\n");
    return true;
}

bool cmd_dot(lua_State* L, const std::string& args) {
    size_t space = args.find_last_of(" \t");
    std::string file = space == std::string::npos ? args : args.substr(space + 1);
    std::string expression = space == std::string::npos ? "" : text_trim(args.substr(0, space));
    if (file.empty()) {
        fprintf(stderr, ":dot needs a file name, as in  :dot loss graph.svg\n");
        return true;
    }
    td::NodeList nodes;
    if (!command_nodes_for(L, expression, nodes)) return true;
    try {
        std::vector<const td::Node*> plain;
        for (const td::Ref<td::Node>& n : nodes) plain.push_back(n.get());
        td::DotOptions options;
        options.clusters = td::dot_module_clusters(td::records_of_nodes(plain));   // the nn.Module calls, framed
        td::graph_write(nodes, file, options);
        printf("wrote %s (%zu nodes)\n", file.c_str(), nodes.size());
    } catch (const std::exception& e) {
        fprintf(stderr, "%s\n", e.what());
    }
    return true;
}

bool cmd_view(lua_State* L, const std::string& args) {
    viewer_command(L, args);
    return true;
}

bool cmd_animate(lua_State* L, const std::string& args) {
    td::animate_command(L, args);
    return true;
}

bool cmd_export(lua_State* L, const std::string& args) {
    td::page_command(L, args);   // viewer/page/page_lua.cpp
    return true;
}

bool cmd_plot(lua_State* L, const std::string& args) {
    training_plot_command(L, args);   // viewer/plots/training_lua.cpp
    return true;
}

bool cmd_quit(lua_State*, const std::string&) { return false; }

// The frozen function an expression names, left on the stack; false (message printed) otherwise.
bool frozen_for(lua_State* L, const std::string& expression, const char* command) {
    if (expression.empty()) {
        fprintf(stderr, ":%s needs a frozen function, as in  :%s f\n", command, command);
        return false;
    }
    if (!repl_eval(L, expression)) return false;
    if (!tapedeck_is_frozen(L, -1)) {
        fprintf(stderr, "'%s' is a %s, not a frozen function (make one with :freeze or torch.freeze)\n",
                expression.c_str(), luaL_typename(L, -1));
        lua_pop(L, 1);
        return false;
    }
    return true;
}

// Calls method `name` of the frozen function on top of the stack with `args` (Lua code, may be
// empty), leaving one result; false (error printed) on failure. Pops the frozen function.
bool call_frozen_method(lua_State* L, const char* name, const std::string& args) {
    lua_setglobal(L, "_tapedeck_frozen");
    bool ok = repl_eval(L, "_tapedeck_frozen:" + std::string(name) + "(" + args + ")");
    lua_pushnil(L);
    lua_setglobal(L, "_tapedeck_frozen");
    return ok;
}

// :freeze f = expr, args...   is   f = torch.freeze{name = "f", expr, args...}, then a summary.
bool cmd_freeze(lua_State* L, const std::string& args) {
    size_t equals = args.find('=');
    std::string name = equals == std::string::npos ? "" : text_trim(args.substr(0, equals));
    std::string rest = equals == std::string::npos ? "" : text_trim(args.substr(equals + 1));
    bool is_name = !name.empty() && (isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_');
    for (char c : name) is_name = is_name && (isalnum(static_cast<unsigned char>(c)) || c == '_');
    if (!is_name || rest.empty()) {
        fprintf(stderr, ":freeze needs a name, a function and its arguments, as in  :freeze f = step, x, y\n");
        return true;
    }
    std::string code = name + " = torch.freeze{name = \"" + name + "\", " + rest + "}";
    if (repl_run_chunk(L, code, "=stdin", false) != LUA_OK) return true;
    if (!frozen_for(L, name, "freeze")) return true;
    if (!call_frozen_method(L, "stats", "")) return true;
    auto field = [&](const char* key) {
        lua_getfield(L, -1, key);
        double v = lua_tonumber(L, -1);
        lua_pop(L, 1);
        return v;
    };
    printf("%s: %g nodes recorded -> %g steps (%g fused groups), %g guards; buffers %.1f KiB, eager peak %.1f KiB\n",
           name.c_str(), field("recorded_nodes"), field("steps"), field("fused_groups"), field("guards"),
           field("buffer_bytes") / 1024, field("eager_peak_bytes") / 1024);
    lua_pop(L, 1);
    return true;
}

bool cmd_plan(lua_State* L, const std::string& args) {
    size_t option = args.find("--");
    if (option != std::string::npos) {   // :plan f --passes [PASS] [--view], :plan f --source
        plan_passes_command(L, text_trim(args.substr(0, option)), args.substr(option));
        return true;
    }
    if (!frozen_for(L, args, "plan")) return true;
    if (!call_frozen_method(L, "plan", "")) return true;
    fputs(lua_tostring(L, -1), stdout);
    lua_pop(L, 1);
    return true;
}

bool cmd_timeit(lua_State* L, const std::string& args) {
    TimeitFigures figures;
    if (command_timeit_measure(L, args, figures)) fputs(command_timeit_text(figures).c_str(), stdout);
    return true;
}

const Command commands[] = {
    {"help", "h", "", "list the commands", cmd_help},
    {"graph", "g", "[expr]", "the tape as a table (id, op, name, phase, inputs, shape, file:line); with expr, the graph of that tensor", cmd_graph},
    {"dot", nullptr, "[expr] file", "write the graph as .dot, or render .svg/.png/.pdf with Graphviz", cmd_dot},
    {"freeze", nullptr, "f = fn, args...", "f = torch.freeze(fn, args...): run fn once, recording it, and compile the plan", cmd_freeze},
    {"plan", nullptr, "f [--option]", "the frozen function's plan: passes, steps, fused groups, buffers, guards; --passes [PASS] [--view]: what each pass did; --source: its native code (C++)", cmd_plan},
    {"timeit", nullptr, "f [N]", "eager vs frozen on the same graph: µs per call, speedup, peak memory, max |diff|", cmd_timeit},
    {"break", "b", "SPEC", "set a breakpoint: [once] [fwd|bwd] op NAME | * | fn NAME | node N | FILE:LINE [if nan | max > 1e3 | Lua of t]", debugger_cmd_break},
    {"breaks", nullptr, "", "list the breakpoints", debugger_cmd_breaks},
    {"delete", nullptr, "N|all", "delete breakpoints", debugger_cmd_delete},
    {"disable", nullptr, "N|all", "disable breakpoints (they stay in the list)", debugger_cmd_disable},
    {"enable", nullptr, "N|all", "enable breakpoints again", debugger_cmd_enable},
    {"step", "s", "", "at a stop: run to the next forward op or backward group", debugger_cmd_step},
    {"stepi", "si", "", "at a stop: run to the next node of any kind (the ops inside a backward group)", debugger_cmd_stepi},
    {"next", "n", "", "at a stop: run to the next Lua line of this function", debugger_cmd_next},
    {"finish", "fin", "", "at a stop: run to the end of this backward(), or of this Lua function", debugger_cmd_finish},
    {"continue", "c", "", "at a stop: run to the next breakpoint", debugger_cmd_continue},
    {"abort", nullptr, "", "at a stop: abandon the running code, back to the top prompt", debugger_cmd_abort},
    {"run", "r", "file", "run a script, with any arguments after it (its breakpoints stop it)", debugger_cmd_run},
    {"until", "unt", "[line]", "at a stop: run to a later line of this frame (or line N and after), or until it returns", debugger_cmd_until},
    {"where", "bt", "", "the Lua stack and the position on the tape at the stop", debugger_cmd_where},
    {"up", "u", "[N]", "at a stop: select the frame N levels out (its locals are the prompt's)", debugger_cmd_up},
    {"down", "d", "[N]", "at a stop: select the frame N levels in", debugger_cmd_down},
    {"list", "l", "[N | A,B]", "the selected frame's source around its line (again: onward), around line N, or lines A to B", debugger_cmd_list},
    {"locals", nullptr, "", "the selected frame's locals and upvalues: type, shape and dtype, short value", debugger_cmd_locals},
    {"p", nullptr, "expr", "print expr's value; tables as their contents", debugger_cmd_print},
    {"pm", nullptr, "", "post-mortem: stop in the frame where the last error happened, with its locals", debugger_cmd_post_mortem},
    {"inspect", "i", "expr", "a tensor's shape, dtype, min, max, mean, std, NaN/Inf counts and histogram", debugger_cmd_inspect},
    {"why", nullptr, "[expr]", "where a NaN or Inf came from: the first op that made one, its line, its inputs and why", debugger_cmd_why},
    {"watch", nullptr, "[expr]", "print expr at every stop (no expr: list the watches)", debugger_cmd_watch},
    {"unwatch", nullptr, "N|all", "stop printing a watch", debugger_cmd_unwatch},
    {"display", nullptr, "[expr]", "as :watch (pdb's name): print expr at every stop, numbered", debugger_cmd_watch},
    {"undisplay", nullptr, "N|all", "as :unwatch", debugger_cmd_unwatch},
    {"gradcheck", nullptr, "[eps=E]", "at a backward stop: grad_input against finite differences in float64, worst element per input (also atol=, rtol=, max_evaluations=)", debugger_cmd_gradcheck},
    {"ignore", nullptr, "N COUNT", "breakpoint N does not stop at its next COUNT hits (counted in :breaks)", debugger_cmd_ignore},
    {"diff", nullptr, "[part|off]", "what changed since the previous training step: new and missing nodes, shapes, the values and gradients that moved most (part: nodes, values, grads)", debugger_cmd_diff},
    {"back", nullptr, "[N|step]", "at a stop: show the run as it was N events back (step: at the previous op or group); nothing re-runs", debugger_cmd_back},
    {"forward", nullptr, "[N|step]", "at a rewound stop: move the view N events on (step: to the next op or group), at most to the live stop", debugger_cmd_forward},
    {"history", nullptr, "[SIZE|off]", "the rewind history: its budget (200MB, 1GB, off), bytes and events held", debugger_cmd_history},
    {"view", "v", "[expr]", "open the graph viewer (and select expr's node); also :view close, :view screenshot f.png, :view expand|collapse NAME, :view window older|newer|newest|#ID", cmd_view},
    {"animate", nullptr, "expr f.gif", "backprop as a GIF (or PNG frames: a dir/): forward values, then gradients flowing back; --size WxH --delay MS --backward", cmd_animate},
    {"export", nullptr, "[expr] f.html", "the graph as one self-contained HTML page: click a node for its values and gradient; a slider through the rewind history", cmd_export},
    {"plot", nullptr, "[NAME [f.png]]", "the training log: list the series; plot loss, grad_norm, update_ratio, flow, any series or hist NAME as a PNG", cmd_plot},
    {"quit", "q", "", "leave tapedeck", cmd_quit},
};

}  // namespace

std::vector<std::string> command_names() {
    std::vector<std::string> names;
    for (const Command& c : commands) names.push_back(c.name);
    return names;
}

std::string command_help() {
    std::string s = "Commands (anything else is Lua; an expression prints its value):\n";
    for (const Command& c : commands) {
        char line[256];
        std::string usage = std::string(":") + c.name + (c.args[0] ? " " : "") + c.args;
        if (c.alias) usage += std::string(" (:") + c.alias + ")";
        snprintf(line, sizeof line, "  %-20s %s\n", usage.c_str(), c.help);
        s += line;
    }
    s += "At a (tdb) stop, Lua sees the stopped frame's locals and node, inputs, out, outputs, saved,\n"
         "grad_output, grad_input (backward, as PyTorch's), stop; assigning out or grad_input[i] changes what\n"
         "the rest of the pass uses (grad_in and grad_out are the old names of grad_output and grad_input).\n"
         "From Lua: dbg.break_on{op=, phase=, node=, line=, when=, once=, action=}, dbg.step(), ...\n"
         "Keys: Tab completes names, Up/Down recall earlier lines, Ctrl-C stops running code (in the\n"
         "debugger, at the next node or line; :abort abandons it) or drops the line being typed; Ctrl-C twice\n"
         "within a second leaves tapedeck (status 130). Ctrl-D leaves (at a (tdb) stop: asks whether to quit).\n";
    return s;
}

bool command_run(lua_State* L, const std::string& line) {
    std::string text = text_trim(line);
    size_t space = text.find_first_of(" \t");
    std::string name = text.substr(0, space);
    std::string args = space == std::string::npos ? "" : text_trim(text.substr(space));
    for (const Command& c : commands)
        if (name == c.name || (c.alias && name == c.alias)) return c.run(L, args);
    fprintf(stderr, "unknown command ':%s' (type :help for the list)\n", name.c_str());
    return true;
}

// :timeit f [N]: eager vs frozen on the last call's arguments, from the same state (put back after).
bool command_timeit_measure(lua_State* L, const std::string& args, TimeitFigures& f) {
    f.expression = args;
    f.count = "1000";
    size_t space = args.find_last_of(" \t");
    if (space != std::string::npos && args.find_first_not_of("0123456789", space + 1) == std::string::npos) {
        f.expression = text_trim(args.substr(0, space));
        f.count = args.substr(space + 1);
    }
    if (!frozen_for(L, f.expression, "timeit")) return false;
    if (!call_frozen_method(L, "timeit", f.count)) return false;
    auto field = [&](const char* key) {
        lua_getfield(L, -1, key);
        double v = lua_tonumber(L, -1);
        lua_pop(L, 1);
        return v;
    };
    f.eager_min_us = field("eager_min_us");
    f.eager_median_us = field("eager_median_us");
    f.frozen_min_us = field("frozen_min_us");
    f.frozen_median_us = field("frozen_median_us");
    f.eager_peak_bytes = field("eager_peak_bytes");
    f.frozen_peak_bytes = field("frozen_peak_bytes");
    f.speedup = field("speedup");
    f.max_diff = field("max_diff");
    f.eager_gpu_peak_bytes = field("eager_gpu_peak_bytes");
    f.frozen_gpu_peak_bytes = field("frozen_gpu_peak_bytes");
    lua_getfield(L, -1, "native_min_us");   // present when the latest plan runs native code
    f.has_native = lua_isnumber(L, -1);
    lua_pop(L, 1);
    if (f.has_native) {
        f.native_min_us = field("native_min_us");
        f.native_median_us = field("native_median_us");
        f.native_peak_bytes = field("native_peak_bytes");
        f.native_max_diff = field("native_max_diff");
    }
    lua_pop(L, 1);
    return true;
}

namespace {

// :timeit's lines when the plan runs native code: eager, frozen (interpreted) and native side by
// side, each column's speed and max |diff| against eager.
std::string timeit_text_native(const TimeitFigures& f) {
    char line[256];
    std::string text;
    snprintf(line, sizeof line, "%s: %s calls each, on its last arguments\n", f.expression.c_str(), f.count.c_str());
    text += line;
    auto row = [&](const char* label, const char* format, double eager, double frozen, double native) {
        char cells[3][32];
        snprintf(cells[0], sizeof cells[0], format, eager);
        snprintf(cells[1], sizeof cells[1], format, frozen);
        snprintf(cells[2], sizeof cells[2], format, native);
        snprintf(line, sizeof line, "  %-16s %12s %12s %12s\n", label, cells[0], cells[1], cells[2]);
        text += line;
    };
    snprintf(line, sizeof line, "  %-16s %12s %12s %12s\n", "", "eager", "frozen", "native");
    text += line;
    row("µs per call, min", "%.2f", f.eager_min_us, f.frozen_min_us, f.native_min_us);
    row("  median", "%.2f", f.eager_median_us, f.frozen_median_us, f.native_median_us);
    auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
    row("speedup (min)", "%.2fx", 1.0, ratio(f.eager_min_us, f.frozen_min_us), ratio(f.eager_min_us, f.native_min_us));
    row("peak KiB", "%.1f", f.eager_peak_bytes / 1024, f.frozen_peak_bytes / 1024, f.native_peak_bytes / 1024);
    row("max |diff|", "%g", 0.0, f.max_diff, f.native_max_diff);
    text += "  (max |diff|: outputs, gradients, parameters, against eager; frozen is the interpreted plan)\n";
    return text;
}

}  // namespace

std::string command_timeit_text(const TimeitFigures& f) {
    if (f.has_native) return timeit_text_native(f);
    char line[256];
    std::string text;
    snprintf(line, sizeof line, "%s: %s calls each, on its last arguments (µs per call, min / median)\n", f.expression.c_str(), f.count.c_str());
    text += line;
    snprintf(line, sizeof line, "  eager   %10.2f / %-10.2f  peak %9.1f KiB\n", f.eager_min_us, f.eager_median_us, f.eager_peak_bytes / 1024);
    text += line;
    snprintf(line, sizeof line, "  frozen  %10.2f / %-10.2f  peak %9.1f KiB\n", f.frozen_min_us, f.frozen_median_us, f.frozen_peak_bytes / 1024);
    text += line;
    snprintf(line, sizeof line, "  speedup %.2fx (min)   memory %.2fx   max |diff| %g (outputs, gradients, parameters)\n", f.speedup,
             f.eager_peak_bytes > 0 ? f.frozen_peak_bytes / f.eager_peak_bytes : 0.0, f.max_diff);
    text += line;
    if (f.eager_gpu_peak_bytes > 0 || f.frozen_gpu_peak_bytes > 0) {   // times include waiting for the GPU (synchronised)
        snprintf(line, sizeof line, "  GPU memory peak: eager %.1f KiB, frozen %.1f KiB\n", f.eager_gpu_peak_bytes / 1024,
                 f.frozen_gpu_peak_bytes / 1024);
        text += line;
    }
    return text;
}

// The nodes an optional expression names: the graph of the tensor it evaluates to, or the whole
// tape when there is no expression. False (message printed) when it is not a tensor.
bool command_nodes_for(lua_State* L, const std::string& expression, td::NodeList& nodes) {
    tapedeck_name_tensors(L);   // the table and the drawing show the script's names
    if (expression.empty()) {
        nodes = td::tape_nodes();
        return true;
    }
    if (!repl_eval(L, expression)) return false;
    td::Tensor* t = tapedeck_test_tensor(L, -1);
    if (!t) {
        fprintf(stderr, "'%s' is a %s, not a tensor\n", expression.c_str(), luaL_typename(L, -1));
        lua_pop(L, 1);
        return false;
    }
    nodes = td::graph_collect(*t);
    lua_pop(L, 1);
    return true;
}

