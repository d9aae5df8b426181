// bindings_state.h: the mutable state of the Lua bindings, in one place (as the engine keeps its
// own in one struct): what the files of bindings share and keep from one call to the next. One
// per process, as the engine is; immortal, so a finaliser that runs while the program exits still
// finds it.
#pragma once

#include <lua.hpp>

#include <cstddef>
#include <string>

#include "device.h"

namespace tdlua {

struct LuaValueRecorder;   // lua_plan_values.cpp

struct BindingsState {
    // Metatables compared by address: a binding tells a tensor (a frozen function) from other
    // userdata without a registry lookup by name (tapedeck_test_udata).
    const void* tensor_metatable = nullptr;
    const void* frozen_metatable = nullptr;   // lua_plan.cpp
    // Used for their addresses only: the registry key of the Tensor metatable (push_tensor's
    // lookup), and the light userdata that marks a tensor's place in a frozen function's return
    // template (lua_plan.cpp).
    char tensor_metatable_key = 0;
    char tensor_marker = 0;
    // The thread whose binding is running (engine callbacks call back into Lua on it, and the
    // source locator reads its file:line); every guarded binding sets it.
    lua_State* current_state = nullptr;
    // Where tensors are made when no device is given (torch.set_default_device).
    td::Device default_device = td::DEVICE_CPU;
    // Lua's collector told of the engine's bytes (tell_collector, lua_tensor.cpp): the engine's
    // allocation total when last told, and its live bytes after the last full collection.
    size_t bytes_told_to_lua = 0;
    size_t live_bytes_after_full = 0;
    // The source locator's cache (locate_in_lua): the file name it interned last, and its id.
    std::string locator_file_name;
    int locator_file = -1;
    // While torch.freeze records a call: what it notes of the Lua values the call reads
    // (lua_plan_values.cpp; its call hook and globals proxy find it here). Null otherwise.
    LuaValueRecorder* lua_value_recorder = nullptr;
};

extern BindingsState& bindings_state;

}  // namespace tdlua
