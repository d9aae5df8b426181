// lua_cuda.cpp: torch.cuda, as PyTorch's: whether there is a device, its memory, synchronisation
// and its random seed. Tensors move with x:cuda(), x:cpu() and x:to(...) (lua_conversions.cpp).
// Without a usable device (or in a build without CUDA) is_available() is false and the rest say
// why where a device is needed; the memory figures are 0.
#include "device.h"
#include "lua_util.h"
#include "tapedeck_lua.h"

using namespace td;
using namespace tdlua;

namespace {

int l_is_available(lua_State* L) {
    lua_pushboolean(L, cuda_available());
    return 1;
}

int l_device_count(lua_State* L) {
    lua_pushinteger(L, cuda_device_count());
    return 1;
}

// torch.cuda.get_device_name(): the GPU's name; an error giving the reason when there is none.
int l_get_device_name(lua_State* L) {
    cuda_require("get_device_name");
    lua_pushstring(L, cuda_device_name().c_str());
    return 1;
}

// torch.cuda.why_unavailable(): nil when a device is there, else the reason (tapedeck's own).
int l_why_unavailable(lua_State* L) {
    if (cuda_available()) lua_pushnil(L);
    else lua_pushstring(L, cuda_unavailable_reason().c_str());
    return 1;
}

int l_synchronize(lua_State*) {
    cuda_synchronize();
    return 0;
}

int push_bytes(lua_State* L, size_t bytes) {
    lua_pushinteger(L, static_cast<lua_Integer>(bytes));
    return 1;
}
int l_memory_allocated(lua_State* L) { return push_bytes(L, cuda_memory_allocated()); }
int l_max_memory_allocated(lua_State* L) { return push_bytes(L, cuda_max_memory_allocated()); }
int l_memory_reserved(lua_State* L) { return push_bytes(L, cuda_memory_reserved()); }
int l_reset_peak_memory_stats(lua_State*) {
    cuda_reset_peak_memory();
    return 0;
}
int l_empty_cache(lua_State*) {
    cuda_empty_cache();
    return 0;
}

int l_manual_seed(lua_State* L) {
    cuda_manual_seed(static_cast<uint64_t>(check_integer(L, 1, "seed")));
    return 0;
}

const Binding cuda_functions[] = {
    {"is_available", l_is_available}, {"device_count", l_device_count},
    {"get_device_name", l_get_device_name}, {"why_unavailable", l_why_unavailable},
    {"synchronize", l_synchronize}, {"memory_allocated", l_memory_allocated},
    {"max_memory_allocated", l_max_memory_allocated}, {"memory_reserved", l_memory_reserved},
    {"reset_peak_memory_stats", l_reset_peak_memory_stats}, {"empty_cache", l_empty_cache},
    {"manual_seed", l_manual_seed}, {"manual_seed_all", l_manual_seed},
    {nullptr, nullptr},
};

}  // namespace

void tapedeck_open_cuda(lua_State* L) {
    lua_newtable(L);
    register_bindings(L, cuda_functions, "torch.cuda.");
    lua_setfield(L, -2, "cuda");
}
