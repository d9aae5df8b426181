// lua_library.cpp: the parts of the Lua API written in Lua (nn, optim), compiled into tapedeck.
#include <cstring>
#include <string>

#include "tapedeck_lua.h"

#include "errors_lua.h"
#include "nn_lua.h"
#include "nn_recurrent_lua.h"
#include "optim_lua.h"

namespace {

struct LibraryModule {
    const char* name;          // the require name
    const char* source;
    bool global;               // also a global of that name
};

// In load order: errors first (nn and optim require it), nn before nn_recurrent (which extends it).
const LibraryModule library[] = {
    {"tapedeck.errors", errors_lua, false},
    {"nn", nn_lua, true},
    {"tapedeck.nn_recurrent", nn_recurrent_lua, false},   // adds RNN, LSTM, GRU and cells to nn
    {"optim", optim_lua, true},
};

}  // namespace

void tapedeck_open_library(lua_State* L) {
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
