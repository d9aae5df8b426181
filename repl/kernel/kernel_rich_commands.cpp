// kernel_rich_commands.cpp: ':' commands with their pictures (kernel_rich_commands.h).
#include "kernel_rich_commands.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <lua.hpp>
#include <sstream>

#include "commands.h"
#include "debugger.h"
#include "format.h"
#include "kernel_display.h"
#include "repl.h"
#include "tapedeck_lua.h"
#include "text_util.h"

namespace {

std::vector<std::string> words_of(const std::string& text) {
    std::istringstream in(text);
    std::vector<std::string> words;
    for (std::string w; in >> w;) words.push_back(w);
    return words;
}

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// A file name in the temporary directory for a picture the user did not name; removed by the caller.
std::string temporary_path(const std::string& suffix) {
    const char* dir = getenv("TMPDIR");
    std::string pattern = std::string(dir && *dir ? dir : "/tmp") + "/tapedeck-kernel-XXXXXX" + suffix;
    int fd = mkstemps(pattern.data(), static_cast<int>(suffix.size()));
    if (fd < 0) return "";
    close(fd);
    return pattern;
}

// The nodes of `expression`'s graph (the live tape when empty); false, with a message on stderr,
// when it is no tensor. As :graph takes them, rewound to the stop's view when :back moved it.
bool graph_nodes(lua_State* L, const std::string& expression, td::NodeList& nodes) {
    if (!command_nodes_for(L, expression, nodes)) return false;
    if (int64_t newest = debugger_rewound_newest_id()) {
        td::NodeList then;
        for (const td::Ref<td::Node>& n : nodes) if (n->id <= newest) then.push_back(n);
        nodes.swap(then);
    }
    return true;
}

// :plot NAME and :animate EXPR without a file: the picture goes to a temporary file, shown, removed.
void run_with_picture(lua_State* L, const std::string& name, const std::string& args, const std::string& suffix,
                      const std::string& mime, RichCommandResult& result) {
    std::string path;
    for (const std::string& w : words_of(args))
        if (ends_with(w, suffix)) path = w;
    bool temporary = path.empty();
    if (temporary) path = temporary_path(suffix);
    if (path.empty()) {
        fprintf(stderr, ":%s: cannot make a temporary file for the picture\n", name.c_str());
        return;
    }
    std::string before = kernel_read_file(path);
    command_run(L, name + " " + args + (temporary ? " " + path : ""));
    std::string bytes = kernel_read_file(path);
    if (temporary) {
        unlink(path.c_str());
        result.hidden = path;   // "wrote /tmp/tapedeck-kernel-...": not the user's file
    }
    if (!bytes.empty() && (temporary || bytes != before)) result.displays.push_back(kernel_display_image(bytes, mime, ":" + name + " " + args));
}

// :view [expr]: the exported page of expr's graph (the tape's without one), inline.
void show_page(lua_State* L, const std::string& expression, RichCommandResult& result) {
    int top = lua_gettop(L);
    if (!expression.empty() && !repl_eval(L, expression)) return;
    try {
        td::PageOptions options = td::page_options_from_lua(L, expression.empty() ? 0 : top + 1, ":view");
        result.displays.push_back(kernel_display_page(options));
    } catch (const std::exception& e) {
        fprintf(stderr, "%s\n", e.what());
    }
    lua_settop(L, top);
}

// Call method `name` of the frozen function at stack index `f` with no arguments, one result left
// on the stack; false (the error reported) when it fails.
bool call_method(lua_State* L, int f, const char* name) {
    lua_getfield(L, f, name);
    lua_pushvalue(L, f);
    if (repl_docall(L, 1, 1) == LUA_OK) return true;
    repl_report(L);
    return false;
}

// :plan f: the terminal's text, and a table of the plan's figures (f:stats()) above it.
void show_plan(lua_State* L, const std::string& args, RichCommandResult& result) {
    int top = lua_gettop(L);
    if (!repl_eval(L, args)) return;
    if (!tapedeck_is_frozen(L, -1)) {
        fprintf(stderr, "'%s' is a %s, not a frozen function (make one with :freeze or torch.freeze)\n", args.c_str(),
                luaL_typename(L, -1));
    } else if (call_method(L, top + 1, "plan") && call_method(L, top + 1, "stats")) {
        static const char* const FIGURES[][2] = {
            {"recorded_nodes", "nodes recorded"}, {"steps", "steps"}, {"fused_groups", "fused groups"},
            {"buffer_bytes", "buffer bytes"}, {"eager_peak_bytes", "eager peak bytes"}, {"guards", "guards"},
            {"calls", "calls"}, {"replays", "replays"}, {"records", "records"}, {"cached", "plans cached"}};
        std::string html = "<table><tr>";
        for (const auto& figure : FIGURES) html += std::string("<th>") + figure[1] + "</th>";
        html += "</tr><tr>";
        for (const auto& figure : FIGURES) {
            lua_getfield(L, -1, figure[0]);
            html += "<td>" + std::string(lua_isnumber(L, -1) ? lua_tostring(L, -1) : "") + "</td>";
            lua_pop(L, 1);
        }
        std::string text = lua_tostring(L, -2) ? lua_tostring(L, -2) : "";
        nlohmann::json data;
        data["text/plain"] = text;
        data["text/html"] = html + "</tr></table><pre>" + td::page_html_escape(text) + "</pre>";
        result.displays.push_back(data);
    }
    lua_settop(L, top);
}

// :timeit as a table beside the terminal's lines; a native row when the plan runs native code.
void show_timeit(lua_State* L, const std::string& args, RichCommandResult& result) {
    TimeitFigures f;
    if (!command_timeit_measure(L, args, f)) return;
    char html[2048], frozen_diff[48] = "";
    if (f.has_native) snprintf(frozen_diff, sizeof frozen_diff, "<td>%g</td>", f.max_diff);
    snprintf(html, sizeof html,
             "<table><caption>%s: %s calls each, on its last arguments</caption>"
             "<tr><th></th><th>min µs</th><th>median µs</th><th>peak KiB</th>%s</tr>"
             "<tr><th>eager</th><td>%.2f</td><td>%.2f</td><td>%.1f</td>%s</tr>"
             "<tr><th>frozen</th><td>%.2f</td><td>%.2f</td><td>%.1f</td>%s</tr>",
             f.expression.c_str(), f.count.c_str(), f.has_native ? "<th>max |diff|</th>" : "", f.eager_min_us,
             f.eager_median_us, f.eager_peak_bytes / 1024, f.has_native ? "<td>0</td>" : "", f.frozen_min_us,
             f.frozen_median_us, f.frozen_peak_bytes / 1024, frozen_diff);
    std::string table = html;
    if (f.has_native) {
        snprintf(html, sizeof html, "<tr><th>native</th><td>%.2f</td><td>%.2f</td><td>%.1f</td><td>%g</td></tr></table>"
                 "<p>speedup (min): frozen %.2fx, native %.2fx; max |diff|: outputs, gradients, parameters, against eager</p>",
                 f.native_min_us, f.native_median_us, f.native_peak_bytes / 1024, f.native_max_diff, f.speedup,
                 f.native_min_us > 0 ? f.eager_min_us / f.native_min_us : 0.0);
    } else {
        snprintf(html, sizeof html, "<tr><th>frozen / eager</th><td>%.2fx faster</td><td></td><td>%.2fx</td></tr></table>"
                 "<p>max |diff| %g (outputs, gradients, parameters)</p>",
                 f.speedup, f.eager_peak_bytes > 0 ? f.frozen_peak_bytes / f.eager_peak_bytes : 0.0, f.max_diff);
    }
    nlohmann::json data;
    data["text/plain"] = command_timeit_text(f);
    data["text/html"] = table + html;
    result.displays.push_back(data);
}

}  // namespace

RichCommandResult kernel_rich_command(lua_State* L, const std::string& line) {
    RichCommandResult result;
    std::string trimmed = text_trim(line);
    size_t space = trimmed.find_first_of(" \t");
    std::string name = trimmed.substr(0, space);
    std::string args = space == std::string::npos ? "" : text_trim(trimmed.substr(space + 1));
    if (name == "graph" || name == "g") {
        result.keep_going = command_run(L, line);
        td::NodeList nodes;
        if (graph_nodes(L, args, nodes) && !nodes.empty())
            result.displays.push_back(kernel_display_graph(nodes, debugger_marked_nodes()));
    } else if ((name == "view" || name == "v") && words_of(args).size() <= 1) {
        show_page(L, args, result);   // the notebook's view of the graph: the page, inline, no window
    } else if (name == "plan" && !args.empty() && args.find("--") == std::string::npos) {
        show_plan(L, args, result);   // :plan f --passes ...: the terminal's text
    } else if (name == "timeit") {
        show_timeit(L, args, result);
    } else if (name == "plot" && !args.empty()) {
        run_with_picture(L, name, args, ".png", "image/png", result);
    } else if (name == "animate" && !args.empty() && !ends_with(words_of(args).back(), "/")) {
        run_with_picture(L, name, args, ".gif", "image/gif", result);
    } else if (name == "dot") {
        result.keep_going = command_run(L, line);
        std::string file = words_of(args).empty() ? "" : words_of(args).back();
        if (ends_with(file, ".svg")) {
            nlohmann::json data;
            data["image/svg+xml"] = kernel_svg_inline(kernel_read_file(file));
            data["text/plain"] = file;
            if (!data["image/svg+xml"].get<std::string>().empty()) result.displays.push_back(data);
        } else if (ends_with(file, ".png")) {
            std::string bytes = kernel_read_file(file);
            if (!bytes.empty()) result.displays.push_back(kernel_display_image(bytes, "image/png", file));
        }
    } else {
        result.keep_going = command_run(L, line);
    }
    return result;
}
