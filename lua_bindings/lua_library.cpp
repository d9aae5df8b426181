// lua_library.cpp: the parts of the Lua API written in Lua (nn, optim, the progress line and the
// model scripts' options), compiled into tapedeck, and the one C function they need (isatty).
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "tapedeck_lua.h"

#include "errors_lua.h"
#include "nn_attention_lua.h"
#include "nn_functional_lua.h"
#include "nn_layers_lua.h"
#include "nn_lua.h"
#include "nn_recurrent_lua.h"
#include "optim_lua.h"
#include "progress_lua.h"
#include "script_args_lua.h"

namespace {

struct LibraryModule {
    const char* name;          // the require name
    const char* source;
    bool global;               // also a global of that name
};

// In load order: errors first (the others require it), nn before the files that extend it, each
// after the ones it builds on.
const LibraryModule library[] = {
    {"tapedeck.errors", errors_lua, false},
    {"nn", nn_lua, true},                                   // Module, parameters, containers, nn.utils
    {"tapedeck.nn_functional", nn_functional_lua, false},   // adds nn.functional (F)
    {"tapedeck.nn_layers", nn_layers_lua, false},           // adds Linear, Conv2d, ... and the loss modules
    {"tapedeck.nn_attention", nn_attention_lua, false},     // adds MultiheadAttention
    {"tapedeck.nn_recurrent", nn_recurrent_lua, false},     // adds RNN, LSTM, GRU and cells
    {"optim", optim_lua, true},
    {"tapedeck.progress", progress_lua, false},
    {"tapedeck.args", script_args_lua, false},
};

// terminal.isatty(file): whether an open Lua file (io.stdout, io.stderr, ...) is a terminal.
int l_isatty(lua_State* L) {
    auto* stream = static_cast<luaL_Stream*>(luaL_testudata(L, 1, LUA_FILEHANDLE));
    if (!stream || !stream->closef) return luaL_error(L, "isatty: expected an open file such as io.stdout, got %s", luaL_typename(L, 1));
    lua_pushboolean(L, isatty(fileno(stream->f)) == 1);
    return 1;
}

// package.loaded["tapedeck.terminal"] = {isatty = ...}: what progress.lua asks of the system.
void open_terminal_module(lua_State* L) {
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_newtable(L);
    lua_pushcfunction(L, l_isatty);
    lua_setfield(L, -2, "isatty");
    lua_setfield(L, -2, "tapedeck.terminal");
    lua_pop(L, 1);
}

}  // namespace

void tapedeck_open_library(lua_State* L) {
    open_terminal_module(L);
    tapedeck_open_hints(L);
    for (const LibraryModule& module : library) {
        std::string chunk_name = std::string(TAPEDECK_LIBRARY_CHUNK) + module.name + ".lua";
        if (luaL_loadbuffer(L, module.source, strlen(module.source), chunk_name.c_str()) != LUA_OK)
            lua_error(L);   // a syntax error in the shipped library: the build is broken
        lua_call(L, 0, 1);
        luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
        lua_pushvalue(L, -2);
        lua_setfield(L, -2, module.name);
        lua_pop(L, 1);
        if (module.global) lua_setglobal(L, module.name);
        else lua_pop(L, 1);
    }
    // PyTorch's spellings of the same tables: torch.nn, torch.optim, torch.nn.functional (= F)
    lua_getglobal(L, "torch");
    lua_getglobal(L, "nn");
    lua_getfield(L, -1, "functional");
    lua_setglobal(L, "F");
    lua_setfield(L, -2, "nn");
    lua_getglobal(L, "optim");
    lua_setfield(L, -2, "optim");
    lua_pop(L, 1);
}
