// debugger_post_mortem.cpp: stopping in the frame that failed, as pdb's post-mortem.
//
// Lua unwinds the stack when an error propagates, so everything happens in the message handler of
// the REPL's pcall (repl.cpp calls post_mortem_on_error before it builds the traceback), while the
// failing frames still exist:
//   - every error of code the REPL runs (a script, a line typed at `>`) leaves a snapshot: for each
//     frame its source, line and variables (locals and upvalues, values held, tensors included),
//     kept until the next error or until a `:pm` over it ends;
//   - with --pm, the post-mortem prompt opens right there, over the live frames: writes to an
//     upvalue reach the closures that share it; the program then goes on failing.
// `:pm` opens the same prompt later over the snapshot: the variables are the values they had at
// the error, an assignment changes only the snapshot, and no function of the stack can be resumed.
#include <lua.hpp>

#include "debugger.h"
#include "debugger_internal.h"

namespace dbg {

namespace {

constexpr int SNAPSHOT_MAX_FRAMES = 200;   // a stack overflow's 100,000 frames: the innermost ones

void snapshot_release(lua_State* L) {
    luaL_unref(L, LUA_REGISTRYINDEX, g.snapshot_ref);
    g.snapshot_ref = LUA_NOREF;
    g.snapshot_frames.clear();
    g.snapshot_frame = -1;
    g.snapshot_error.clear();
}

// Keep the frames of thread L from `first_level` out (the error's message handler is level 0).
void snapshot_take(lua_State* L, const char* message, int first_level) {
    snapshot_release(L);
    DebugStop frames;
    capture_frames(L, frames, first_level);
    if (frames.frames.size() > SNAPSHOT_MAX_FRAMES) frames.frames.resize(SNAPSHOT_MAX_FRAMES);
    lua_createtable(L, static_cast<int>(frames.frames.size()), 0);
    lua_Debug ar;
    for (int i = 0; i < static_cast<int>(frames.frames.size()) && lua_getstack(L, first_level + i, &ar); ++i) {
        push_live_frame_variables(L, L, &ar);
        lua_rawseti(L, -2, i + 1);
    }
    g.snapshot_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    g.snapshot_frames = std::move(frames.frames);
    g.snapshot_frame = frames.frame < SNAPSHOT_MAX_FRAMES ? frames.frame : -1;
    g.snapshot_error = message;
}

}  // namespace

void post_mortem_on_error(lua_State* L, const char* message) {
    // Errors typed at a stop (post-mortem ones included) keep the snapshot being looked at; an
    // :abort or :quit unwinding is not a failure of the program.
    if (!g.observer || g.stop || g.busy || g.abandoning || g.front.quit_requested()) return;
    if (!lua_checkstack(L, 8)) return;   // a stack overflow left no room: the plain traceback
    const int handler_level = 1;         // level 0 is the message handler itself
    snapshot_take(L, message, handler_level);
    if (!g.post_mortem_on_error) return;
    DebugStop stop;
    capture_frames(L, stop, handler_level);
    stop.error = message;
    fflush(stdout);
    run_post_mortem(L, stop);
}

}  // namespace dbg

using namespace dbg;

void debugger_set_post_mortem_on_error(bool on) { g.post_mortem_on_error = on; }

bool debugger_post_mortem_last_error(lua_State* L, std::string* why) {
    if (g.stop) {
        *why = "already stopped; :pm looks at the last error from the top prompt (:continue first)";
        return false;
    }
    if (g.snapshot_ref == LUA_NOREF) {
        *why = "no error to look at (the last one's post-mortem has ended, or nothing has failed yet)";
        return false;
    }
    DebugStop stop;
    stop.frames = g.snapshot_frames;
    stop.frame = g.snapshot_frame;
    stop.error = g.snapshot_error;
    stop.snapshot_ref = g.snapshot_ref;
    run_post_mortem(L, stop);
    snapshot_release(L);   // its tensors go with it
    return true;
}
