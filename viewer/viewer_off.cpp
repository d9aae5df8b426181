// viewer_off.cpp: viewer.h in a build without the window (TAPEDECK_VIEWER off): opening fails with
// a message saying so, the debugger's calls do nothing, and `viewer` in Lua has open/is_open,
// animate/gif_info (animate.h) and export_page (page.h): headless.
#include <lua.hpp>

#include "animate.h"
#include "page.h"
#include "training_view.h"
#include "viewer.h"

namespace {

const char* const NOT_BUILT =
    "this tapedeck was built without the viewer (install libimgui-dev libglfw3-dev libgl-dev and "
    "configure with -DTAPEDECK_VIEWER=ON)";

int l_open(lua_State* L) {
    lua_pushnil(L);
    lua_pushstring(L, NOT_BUILT);
    return 2;
}

int l_is_open(lua_State* L) {
    lua_pushboolean(L, 0);
    return 1;
}

}  // namespace

bool viewer_open(std::string* error, bool) {
    if (error) *error = NOT_BUILT;
    return false;
}
void viewer_close() {}
bool viewer_is_open() { return false; }
void viewer_frame() {}
bool viewer_screenshot(const std::string&, int, std::string* error) {
    if (error) *error = NOT_BUILT;
    return false;
}
void viewer_select_node(int64_t) {}
void viewer_window_follow() {}
void viewer_window_centre(int64_t) {}
void viewer_window_page(int) {}
void viewer_window_resize(size_t) {}
ViewerWindowSpan viewer_window_span() { return ViewerWindowSpan(); }
bool viewer_expand_named(const std::string&, bool, std::string* error) {
    if (error) *error = NOT_BUILT;
    return false;
}
void viewer_set_stop(int64_t, bool, bool) {}
void viewer_set_stop_line(const std::string&, int) {}
void viewer_clear_stop() {}
void viewer_set_timeline(uint64_t) {}
uint64_t viewer_timeline() { return 0; }
void viewer_set_controls(const ViewerControls*) {}
void viewer_set_breakpoints(const std::vector<ViewerBreakpoint>&) {}
void viewer_set_diff_source(ViewerDiffSource) {}

void viewer_open_lua(lua_State* L) {
    lua_createtable(L, 0, 3);
    lua_pushcfunction(L, l_open);
    lua_setfield(L, -2, "open");
    lua_pushcfunction(L, l_is_open);
    lua_setfield(L, -2, "is_open");
    lua_pushcfunction(L, l_open);   // show_plan: nil and the same message
    lua_setfield(L, -2, "show_plan");
    td::animate_open_lua(L);   // viewer.animate, viewer.gif_info: no window needed
    td::page_open_lua(L);      // viewer.export_page: no window needed
    lua_setglobal(L, "viewer");
    training_open_lua(L);   // viewer.log, viewer.plot, ...: the plots need no window
}
void training_view_show(const std::string&) {}
