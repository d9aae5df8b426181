// page_lua.cpp: `viewer.export_page` and the `:export` command (page.h). Bindings only: which
// graph, names first, messages.
#include <cstdio>
#include <lua.hpp>
#include <stdexcept>

#include "format.h"
#include "lua_util.h"
#include "node_names.h"
#include "page.h"
#include "tapedeck_lua.h"

namespace td {

namespace {

// viewer.export_page(path [, tensor]) -> {bytes, nodes, nodes_total, events, message}
int l_export_page(lua_State* L) {
    std::string path = tdlua::check_string(L, 1, "path");
    if (!lua_isnoneornil(L, 2) && !tapedeck_test_tensor(L, 2))
        tdlua::arg_fail(2, "the graph's tensor must be a tensor (or nil for the whole tape), got %s", tdlua::type_name_of(L, 2));
    PageSummary s = page_write(page_options_from_lua(L, 2, "viewer.export_page"), path, "viewer.export_page");
    lua_createtable(L, 0, 5);
    tdlua::set_integer(L, "bytes", static_cast<lua_Integer>(s.bytes));
    tdlua::set_integer(L, "nodes", static_cast<lua_Integer>(s.nodes_drawn));
    tdlua::set_integer(L, "nodes_total", static_cast<lua_Integer>(s.nodes_total));
    tdlua::set_integer(L, "events", static_cast<lua_Integer>(s.events));
    tdlua::set_string(L, "message", page_summary_text(path, s));
    return 1;
}

const char* const USAGE = "as in  :export page.html  (the whole tape)  or  :export loss page.html  (the graph of loss)";

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

PageOptions page_options_from_lua(lua_State* L, int index, const char* function) {
    index = index == 0 ? 0 : lua_absindex(L, index);
    tapedeck_name_tensors(L);   // the page shows the script's names
    PageOptions options;
    if (index == 0 || lua_isnoneornil(L, index)) {
        options.nodes = tape_nodes();
        options.title = "the tape";
        return options;
    }
    Tensor* t = tapedeck_test_tensor(L, index);
    if (!t) throw std::runtime_error(std::string(function) + ": needs a tensor, got a " + luaL_typename(L, index));
    options.nodes = graph_collect(*t);
    options.focus = t->node->id;
    std::string label = node_label(t->node.get(), t->output);
    options.title = "the graph of " + (label[0] == '#' ? label + " " + t->node->shown_op() : label);
    return options;
}

void page_open_lua(lua_State* L) {
    static const tdlua::Binding functions[] = {
        {"export_page", l_export_page, nullptr, "viewer.export_page"},
        {nullptr, nullptr},
    };
    tdlua::register_bindings(L, functions, "viewer.");   // guarded: errors name the function and the caller's line
}

void page_command(lua_State* L, const std::string& args) {
    size_t space = args.find_last_of(" \t");
    std::string path = space == std::string::npos ? args : args.substr(space + 1);
    std::string expression = space == std::string::npos ? "" : args.substr(0, space);
    while (!expression.empty() && (expression.back() == ' ' || expression.back() == '\t')) expression.pop_back();
    if (path.empty() || !(ends_with(path, ".html") || ends_with(path, ".htm"))) {
        fprintf(stderr, ":export needs a file ending in .html, %s\n", USAGE);
        return;
    }
    int top = lua_gettop(L);
    if (!expression.empty()) {
        std::string code = "return " + expression;
        if (luaL_loadbuffer(L, code.data(), code.size(), "=export") != LUA_OK || lua_pcall(L, 0, 1, 0) != LUA_OK) {
            fprintf(stderr, ":export: %s\n", lua_tostring(L, -1));
            lua_settop(L, top);
            return;
        }
        if (!tapedeck_test_tensor(L, -1)) {
            fprintf(stderr, ":export: '%s' is a %s, not a tensor\n", expression.c_str(), luaL_typename(L, -1));
            lua_settop(L, top);
            return;
        }
    }
    try {
        PageSummary s = page_write(page_options_from_lua(L, expression.empty() ? 0 : -1, ":export"), path, ":export");
        printf("%s\n", page_summary_text(path, s).c_str());
    } catch (const std::exception& e) {
        fprintf(stderr, "%s\n", e.what());
    }
    lua_settop(L, top);
}

}  // namespace td
