// animate_lua.cpp: `viewer.animate`, `viewer.gif_info` and the `:animate` command (animate.h).
// Bindings only: argument checks, running loss:backward() for --backward, messages.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <lua.hpp>
#include <sstream>
#include <stdexcept>

#include "animate.h"
#include "lua_util.h"
#include "tapedeck_lua.h"

namespace td {

namespace {

// Run the animation of the tensor at `index`: names first (the labels say the script's names),
// then loss:backward() under a watch when asked, then the frames. Throws std::runtime_error.
AnimateResult animate_run(lua_State* L, int index, const std::string& path, const AnimateOptions& options) {
    index = lua_absindex(L, index);
    Tensor* t = tapedeck_test_tensor(L, index);
    if (!t) throw std::runtime_error(std::string("needs a tensor (the loss), got a ") + luaL_typename(L, index));
    Tensor loss = *t;
    if (!options.run_backward) {
        tapedeck_name_tensors(L);
        return animate_write(loss, path, options);
    }
    if (loss.node->phase != PHASE_FORWARD || loss.node->is_leaf())
        return animate_write(loss, path, options);   // says why there is nothing to animate
    AnimateBackwardWatch watch;
    // A tool's pass: it may go again through a graph a script's backward() released (tapedeck keeps
    // saved values), and it releases nothing itself.
    BackwardOptions backward_options;
    backward_options.retain_graph = true;
    int64_t released = 0;
    backward_options.released_rerun = &released;
    try {
        backward(loss, nullptr, backward_options);
    } catch (const std::exception& e) {
        throw std::runtime_error(std::string("loss:backward() failed: ") + e.what());
    }
    watch.finish(loss);
    tapedeck_name_tensors(L);
    return animate_write(loss, path, options, &watch.gradients);
}

std::string result_message(const std::string& path, const AnimateResult& r) {
    char text[512];
    snprintf(text, sizeof text, "wrote %s: %d frames, %dx%d, %.1f s", path.c_str(), r.frames, r.width, r.height, r.seconds);
    return text;
}

// viewer.animate(loss, path [, {size = {w, h}, delay = ms, backward = bool}]) -> {frames, width,
// height, seconds, message, notes, steps = {{kind, node, title, heading, value = {min, max, mean,
// norm} where the panel shows numbers}...}}
int l_animate(lua_State* L) {
    std::string path = tdlua::check_string(L, 2, "path");
    AnimateOptions options;
    if (!lua_isnoneornil(L, 3)) {
        if (!lua_istable(L, 3)) tdlua::arg_fail(3, "options must be a table {size = {w, h}, delay = ms, backward = true}, got %s", tdlua::type_name_of(L, 3));
        if (lua_getfield(L, 3, "size") != LUA_TNIL) {
            if (!lua_istable(L, -1)) throw std::runtime_error("size must be {width, height}, as {1920, 1080}");
            lua_rawgeti(L, -1, 1);
            lua_rawgeti(L, -2, 2);
            if (!lua_isinteger(L, -2) || !lua_isinteger(L, -1))
                throw std::runtime_error("size must be {width, height} in whole pixels, as {1920, 1080}");
            options.width = static_cast<int>(lua_tointeger(L, -2));
            options.height = static_cast<int>(lua_tointeger(L, -1));
            lua_pop(L, 2);
        }
        lua_pop(L, 1);
        if (lua_getfield(L, 3, "delay") != LUA_TNIL) {
            if (!lua_isinteger(L, -1)) throw std::runtime_error("delay must be whole milliseconds, as 700");
            options.delay_ms = static_cast<int>(lua_tointeger(L, -1));
        }
        lua_pop(L, 1);
        lua_getfield(L, 3, "backward");
        options.run_backward = lua_toboolean(L, -1);
        lua_pop(L, 1);
    }
    if (!tapedeck_test_tensor(L, 1)) tdlua::arg_fail(1, "the loss must be a tensor, got %s", tdlua::type_name_of(L, 1));
    AnimateResult r = animate_run(L, 1, path, options);
    lua_createtable(L, 0, 6);
    tdlua::set_integer(L, "frames", r.frames);
    tdlua::set_integer(L, "width", r.width);
    tdlua::set_integer(L, "height", r.height);
    tdlua::set_number(L, "seconds", r.seconds);
    tdlua::set_string(L, "message", result_message(path, r));
    lua_createtable(L, static_cast<int>(r.notes.size()), 0);
    for (size_t i = 0; i < r.notes.size(); ++i) {
        lua_pushstring(L, r.notes[i].c_str());
        lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
    lua_setfield(L, -2, "notes");
    lua_createtable(L, static_cast<int>(r.frame_list.size()), 0);
    for (size_t i = 0; i < r.frame_list.size(); ++i) {
        lua_createtable(L, 0, 3);
        lua_pushstring(L, r.frame_list[i].kind);
        lua_setfield(L, -2, "kind");
        lua_pushinteger(L, r.frame_list[i].node);
        lua_setfield(L, -2, "node");
        const AnimateResult::Frame& f = r.frame_list[i];
        lua_pushstring(L, f.title.c_str());
        lua_setfield(L, -2, "title");
        lua_pushstring(L, f.heading.c_str());
        lua_setfield(L, -2, "heading");
        if (f.has_value) {   // the panel's numbers: {min, max, mean, norm}
            lua_createtable(L, 0, 4);
            const std::pair<const char*, double> fields[] = {{"min", f.min}, {"max", f.max}, {"mean", f.mean}, {"norm", f.norm}};
            for (const auto& field : fields) {
                lua_pushnumber(L, field.second);
                lua_setfield(L, -2, field.first);
            }
            lua_setfield(L, -2, "value");
        }
        lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
    lua_setfield(L, -2, "steps");
    return 1;
}

// viewer.gif_info(path) -> {width, height, frames, loops, loop_count, delays = {ms...}, changed = {pixels...}}
int l_gif_info(lua_State* L) {
    std::string path = tdlua::check_string(L, 1, "path");
    GifInfo info = gif_info(path);
    lua_createtable(L, 0, 7);
    tdlua::set_integer(L, "width", info.width);
    tdlua::set_integer(L, "height", info.height);
    tdlua::set_integer(L, "frames", info.frames);
    tdlua::set_boolean(L, "loops", info.loops);
    tdlua::set_integer(L, "loop_count", info.loop_count);
    lua_createtable(L, info.frames, 0);
    for (size_t i = 0; i < info.delays_ms.size(); ++i) {
        lua_pushinteger(L, info.delays_ms[i]);
        lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
    lua_setfield(L, -2, "delays");
    lua_createtable(L, info.frames, 0);
    for (size_t i = 0; i < info.changed_pixels.size(); ++i) {
        lua_pushinteger(L, info.changed_pixels[i]);
        lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
    lua_setfield(L, -2, "changed");
    return 1;
}

// "1920x1080" -> width, height; false when it is not one.
bool size_parse(const std::string& text, int* width, int* height) {
    char* end = nullptr;
    long w = strtol(text.c_str(), &end, 10);
    if (end == text.c_str() || (*end != 'x' && *end != 'X')) return false;
    const char* rest = end + 1;
    long h = strtol(rest, &end, 10);
    if (end == rest || *end != '\0' || w <= 0 || h <= 0 || w > 100000 || h > 100000) return false;
    *width = static_cast<int>(w);
    *height = static_cast<int>(h);
    return true;
}

const char* const USAGE = "as in  :animate loss out.gif [--size 1920x1080] [--delay 700] [--backward]  or  :animate loss frames/";

}  // namespace

void animate_open_lua(lua_State* L) {
    static const tdlua::Binding functions[] = {
        {"animate", l_animate, "size delay backward", "viewer.animate"},
        {"gif_info", l_gif_info, nullptr, "viewer.gif_info"},
        {nullptr, nullptr},
    };
    tdlua::register_bindings(L, functions, "viewer.");   // guarded: errors name the function and the caller's line
}

void animate_command(lua_State* L, const std::string& args) {
    std::istringstream in(args);
    std::vector<std::string> words;
    AnimateOptions options;
    for (std::string w; in >> w;) {
        if (w == "--backward") {
            options.run_backward = true;
        } else if (w == "--size" || w == "--delay") {
            std::string value;
            if (!(in >> value)) {
                fprintf(stderr, ":animate: %s needs a value, %s\n", w.c_str(), USAGE);
                return;
            }
            if (w == "--size" && !size_parse(value, &options.width, &options.height)) {
                fprintf(stderr, ":animate: --size takes WIDTHxHEIGHT in pixels, as 1920x1080 (got '%s')\n", value.c_str());
                return;
            }
            if (w == "--delay") {
                char* end = nullptr;
                long ms = strtol(value.c_str(), &end, 10);
                if (end == value.c_str() || *end != '\0' || ms <= 0 || ms > 1000000) {
                    fprintf(stderr, ":animate: --delay takes milliseconds per frame, as 700 (got '%s')\n", value.c_str());
                    return;
                }
                options.delay_ms = static_cast<int>(ms);
            }
        } else if (w.compare(0, 2, "--") == 0) {
            fprintf(stderr, ":animate: unknown option %s, %s\n", w.c_str(), USAGE);
            return;
        } else {
            words.push_back(w);
        }
    }
    if (words.size() < 2) {
        fprintf(stderr, ":animate needs a tensor and a file, %s\n", USAGE);
        return;
    }
    std::string path = words.back(), expression;
    for (size_t i = 0; i + 1 < words.size(); ++i) expression += (i ? " " : "") + words[i];
    std::string code = "return " + expression;
    if (luaL_loadbuffer(L, code.data(), code.size(), "=animate") != LUA_OK || lua_pcall(L, 0, 1, 0) != LUA_OK) {
        fprintf(stderr, ":animate: %s\n", lua_tostring(L, -1));
        lua_pop(L, 1);
        return;
    }
    if (!tapedeck_test_tensor(L, -1)) {
        fprintf(stderr, ":animate: '%s' is a %s, not a tensor\n", expression.c_str(), luaL_typename(L, -1));
        lua_pop(L, 1);
        return;
    }
    AnimateResult r;
    std::string error;
    try {
        r = animate_run(L, -1, path, options);
    } catch (const std::exception& e) {
        error = e.what();
    }
    lua_pop(L, 1);
    if (!error.empty()) {
        fprintf(stderr, ":animate: %s\n", error.c_str());
        return;
    }
    printf("%s\n", result_message(path, r).c_str());
    for (const std::string& note : r.notes) printf("  (%s)\n", note.c_str());
}

}  // namespace td
