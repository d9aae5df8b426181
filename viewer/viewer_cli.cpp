// viewer_cli.cpp: the viewer's command-line options (--view, --screenshot FILE, --frames N) and
// the ':view' command. Only viewer.h is used, so this works in a build without the window too.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <lua.hpp>

#include "tapedeck_lua.h"
#include "viewer.h"

namespace {

std::string trim(const std::string& s) {
    size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
    return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

}  // namespace

bool viewer_parse_option(int argc, char** argv, int* i, ViewerOptions* options, std::string* error) {
    const char* arg = argv[*i];
    if (strcmp(arg, "--view") == 0) {
        options->view = true;
        return true;
    }
    bool screenshot = strcmp(arg, "--screenshot") == 0;
    bool frames = strcmp(arg, "--frames") == 0;
    if (!screenshot && !frames) return false;
    if (*i + 1 >= argc) {
        *error = std::string(arg) + (screenshot ? " needs a file name (out.png)" : " needs a number");
        return true;
    }
    const char* value = argv[++*i];
    if (screenshot) {
        options->screenshot = value;
        options->view = true;
    } else {
        char* end = nullptr;
        long n = strtol(value, &end, 10);
        if (!end || *end != '\0' || n < 0 || n > 100000) {
            *error = std::string("--frames needs a number of frames, not '") + value + "'";
            return true;
        }
        options->frames = static_cast<int>(n);
    }
    return true;
}

void viewer_start_from_options(const ViewerOptions& options) {
    if (!options.view) return;
    std::string error;
    if (!viewer_open(&error, !options.screenshot.empty()))
        fprintf(stderr, "viewer: %s\n", error.c_str());   // the program goes on without the window
}

int viewer_finish_from_options(const ViewerOptions& options, bool interactive, bool (*interrupted)()) {
    if (!options.screenshot.empty()) {
        std::string error;
        if (!viewer_is_open()) {
            fprintf(stderr, "viewer: no screenshot written to %s: the window is not open\n", options.screenshot.c_str());
            return 1;
        }
        if (!viewer_screenshot(options.screenshot, options.frames, &error)) {
            fprintf(stderr, "viewer: no screenshot written to %s: %s\n", options.screenshot.c_str(), error.c_str());
            return 1;
        }
        fprintf(stderr, "viewer: wrote %s\n", options.screenshot.c_str());
        return 0;
    }
    if (options.view && !interactive && viewer_is_open()) {   // a script to look at: until the window closes
        fprintf(stderr, "viewer: close the window (or press Ctrl-C) to quit\n");
        while (viewer_is_open() && !(interrupted && interrupted())) {
            viewer_frame();
            usleep(15000);
        }
    }
    return 0;
}

// :view window [older|newer|newest|#ID|size N]: a move or a size for the tape window.
struct WindowMove {
    enum Kind { SHOW, OLDER, NEWER, NEWEST, CENTRE, SIZE } kind = SHOW;
    long long value = 0;   // CENTRE: the node id; SIZE: nodes
};

// A positive integer, or 0 when `text` is not one.
static long long positive_integer(const std::string& text) {
    char* end = nullptr;
    long long value = text.empty() ? 0 : strtoll(text.c_str(), &end, 10);
    return value >= 1 && *end == '\0' ? value : 0;
}

// False (with the error printed) when `what` is not a move.
static bool window_move_parse(const std::string& what, WindowMove* move) {
    if (what.empty()) move->kind = WindowMove::SHOW;
    else if (what == "older") move->kind = WindowMove::OLDER;
    else if (what == "newer") move->kind = WindowMove::NEWER;
    else if (what == "newest") move->kind = WindowMove::NEWEST;
    else if (what.compare(0, 4, "size") == 0 && (what.size() == 4 || what[4] == ' ')) {
        move->kind = WindowMove::SIZE;
        move->value = positive_integer(trim(what.substr(4)));
        if (!move->value) {
            fprintf(stderr, ":view window size needs a number of nodes >= 1, as in  :view window size 3000 (got '%s')\n",
                    trim(what.substr(4)).c_str());
            return false;
        }
    } else {
        move->kind = WindowMove::CENTRE;
        move->value = positive_integer(what[0] == '#' ? what.substr(1) : what);
        if (!move->value) {
            fprintf(stderr, ":view window takes older, newer, newest, a node id (#120 or 120) or size N, as in  "
                            ":view window older (got '%s')\n", what.c_str());
            return false;
        }
    }
    return true;
}

// Move the open window's tape window, then say what it shows.
static void window_move_apply(const WindowMove& move) {
    switch (move.kind) {
        case WindowMove::SHOW: break;
        case WindowMove::OLDER: viewer_window_page(-1); break;
        case WindowMove::NEWER: viewer_window_page(1); break;
        case WindowMove::NEWEST: viewer_window_follow(); break;
        case WindowMove::CENTRE: viewer_window_centre(move.value); break;
        case WindowMove::SIZE: viewer_window_resize(static_cast<size_t>(move.value)); break;
    }
    ViewerWindowSpan w = viewer_window_span();
    size_t size = w.size;
    if (w.nodes >= w.live)
        printf("the window shows the whole tape: %lld nodes (window %zu nodes)\n", static_cast<long long>(w.live), size);
    else
        printf("showing nodes #%lld..#%lld of %lld live (window %zu nodes, %s)\n", static_cast<long long>(w.first),
               static_cast<long long>(w.last), static_cast<long long>(w.live), size,
               w.following ? "following the newest" : "moved: :view window newest follows again");
}

void viewer_command(lua_State* L, const std::string& args_in) {
    std::string args = trim(args_in);
    if (args == "close" || args == "off") {
        viewer_close();
        return;
    }
    if (args.compare(0, 10, "screenshot") == 0) {
        std::string path = trim(args.substr(10));
        if (path.empty()) {
            fprintf(stderr, ":view screenshot needs a file name, as in  :view screenshot graph.png\n");
            return;
        }
        std::string error;
        if (viewer_screenshot(path, 2, &error)) printf("wrote %s\n", path.c_str());
        else fprintf(stderr, "viewer: %s\n", error.c_str());
        return;
    }
    bool window_command = args.compare(0, 6, "window") == 0 && (args.size() == 6 || args[6] == ' ');
    WindowMove move;
    if (window_command && !window_move_parse(trim(args.substr(6)), &move)) return;
    std::string error;
    if (!viewer_open(&error, false)) {
        fprintf(stderr, "viewer: %s\n", error.c_str());
        return;
    }
    if (args.empty()) return;
    bool expand = args.compare(0, 6, "expand") == 0 && (args.size() == 6 || args[6] == ' ');
    bool collapse = args.compare(0, 8, "collapse") == 0 && (args.size() == 8 || args[8] == ' ');
    if (expand || collapse) {   // :view expand NAME, :view collapse NAME
        std::string name = trim(args.substr(expand ? 6 : 8));
        if (name.empty()) {
            fprintf(stderr, ":view %s needs a group's name, as in  :view %s fc1  (a module's field, class or path)\n",
                    expand ? "expand" : "collapse", expand ? "expand" : "collapse");
            return;
        }
        if (!viewer_expand_named(name, expand, &error)) fprintf(stderr, ":view %s: %s\n", expand ? "expand" : "collapse", error.c_str());
        return;
    }
    if (window_command) {
        window_move_apply(move);
        return;
    }
    std::string code = "return " + args;
    if (luaL_loadbuffer(L, code.data(), code.size(), "=view") != LUA_OK || lua_pcall(L, 0, 1, 0) != LUA_OK) {
        fprintf(stderr, "%s\n", lua_tostring(L, -1));
        lua_pop(L, 1);
        return;
    }
    td::Tensor* t = tapedeck_test_tensor(L, -1);
    if (t) viewer_select_node(t->id());
    else fprintf(stderr, "'%s' is a %s, not a tensor\n", args.c_str(), luaL_typename(L, -1));
    lua_pop(L, 1);
}
