// commands.cpp: ':' commands. Adding one = one row in `commands` and its function.
#include "commands.h"

#include <cstdio>
#include <lua.hpp>
#include <vector>

#include "dot_export.h"
#include "format.h"
#include "repl.h"
#include "tapedeck_lua.h"
#include "viewer.h"

namespace {

struct Command {
    const char* name;
    const char* alias;
    const char* args;
    const char* help;
    bool (*run)(lua_State* L, const std::string& args);   // false: leave the REPL
};

std::string trim(const std::string& s) {
    size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
    return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// The nodes an optional expression names: the graph of the tensor it evaluates to, or the whole
// tape when there is no expression. False (message printed) when it is not a tensor.
bool nodes_for(lua_State* L, const std::string& expression, std::vector<td::Node*>& nodes) {
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

bool cmd_help(lua_State*, const std::string&) {
    fputs(command_help().c_str(), stdout);
    return true;
}

bool cmd_graph(lua_State* L, const std::string& args) {
    std::vector<td::Node*> nodes;
    if (!nodes_for(L, args, nodes)) return true;
    fputs(td::graph_format_table(nodes).c_str(), stdout);
    printf("(%zu node%s)\n", nodes.size(), nodes.size() == 1 ? "" : "s");
    return true;
}

bool cmd_dot(lua_State* L, const std::string& args) {
    size_t space = args.find_last_of(" \t");
    std::string file = space == std::string::npos ? args : args.substr(space + 1);
    std::string expression = space == std::string::npos ? "" : trim(args.substr(0, space));
    if (file.empty()) {
        fprintf(stderr, ":dot needs a file name, as in  :dot loss graph.svg\n");
        return true;
    }
    std::vector<td::Node*> nodes;
    if (!nodes_for(L, expression, nodes)) return true;
    try {
        td::graph_write(nodes, file);
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

bool cmd_quit(lua_State*, const std::string&) { return false; }

const Command commands[] = {
    {"help", "h", "", "list the commands", cmd_help},
    {"graph", "g", "[expr]", "the tape as a table (id, op, phase, inputs, shape, file:line); with expr, the graph of that tensor", cmd_graph},
    {"dot", nullptr, "[expr] file", "write the graph as .dot, or render .svg/.png/.pdf with Graphviz", cmd_dot},
    {"view", "v", "[expr]", "open the graph viewer (and select expr's node); also :view close, :view screenshot f.png", cmd_view},
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
    s += "Keys: Tab completes names, Up/Down recall earlier lines, Ctrl-C stops running code or drops\n"
         "the line being typed, Ctrl-D leaves.\n";
    return s;
}

bool command_run(lua_State* L, const std::string& line) {
    std::string text = trim(line);
    size_t space = text.find_first_of(" \t");
    std::string name = text.substr(0, space);
    std::string args = space == std::string::npos ? "" : trim(text.substr(space));
    for (const Command& c : commands)
        if (name == c.name || (c.alias && name == c.alias)) return c.run(L, args);
    fprintf(stderr, "unknown command ':%s' (type :help for the list)\n", name.c_str());
    return true;
}
