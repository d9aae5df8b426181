// lua_hooks.cpp: Tensor:register_hook(fn), PyTorch's tensor hooks.
//
//   local handle = h:register_hook(function(grad) print(grad:norm()); return grad:clamp(-1, 1) end)
//   loss:backward()     -- fn sees dloss/dh once it is complete; what it returns flows on instead
//   handle:remove()
//
// The engine keeps the hook with the tensor's node (grad_hook_add, engine/core/tape.h): it lives as long
// as the node, also when no Lua variable names the tensor any more, and is called by backward()
// in the node's backward group, so the ops it calls are recorded (and drawn, stepped, frozen) there.
// The Lua function is held in the registry until the hook goes.
#include <memory>
#include <stdexcept>
#include <string>

#include "lua_tensor.h"
#include "tapedeck_lua.h"

using namespace td;
using namespace tdlua;

namespace {

const char* const HOOK_HANDLE_TYPE = "tapedeck.RemovableHandle";

// The Lua function of one hook, held in the registry of its Lua state while the hook lives. Nodes
// go before their Lua state closes (the tensors that hold them are finalised by lua_close).
class LuaHookFunction {
public:
    LuaHookFunction(lua_State* L, int function_idx, int64_t tensor_id) : main_(main_thread(L)), tensor_id_(tensor_id) {
        lua_pushvalue(L, function_idx);
        ref_ = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    ~LuaHookFunction() { luaL_unref(main_, LUA_REGISTRYINDEX, ref_); }
    LuaHookFunction(const LuaHookFunction&) = delete;
    LuaHookFunction& operator=(const LuaHookFunction&) = delete;

    // fn(grad) on the running Lua thread: its tensor result, or an empty Tensor for nil.
    Tensor call(const Tensor& grad) const {
        lua_State* L = tapedeck_current_state();
        int top = lua_gettop(L);
        lua_rawgeti(L, LUA_REGISTRYINDEX, ref_);
        tapedeck_push_tensor(L, grad);
        if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
            std::string message = lua_tostring(L, -1) ? lua_tostring(L, -1) : "error";
            lua_settop(L, top);
            throw std::runtime_error("the hook on tensor #" + std::to_string(tensor_id_) + " failed: " + message);
        }
        Tensor* result = tapedeck_test_tensor(L, -1);
        if (!result && !lua_isnil(L, -1)) {
            std::string kind = type_name_of(L, -1);
            lua_settop(L, top);
            engine_fail("register_hook: the hook on tensor #%lld returned a %s; a hook returns the new gradient (a "
                        "tensor) or nil to keep it",
                        static_cast<long long>(tensor_id_), kind.c_str());
        }
        Tensor replacement = result ? *result : Tensor();
        lua_settop(L, top);
        return replacement;
    }

private:
    lua_State* main_;
    int ref_;
    int64_t tensor_id_;
};

// x:register_hook(fn) -> handle (handle:remove() takes the hook off)
int l_register_hook(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    if (!lua_isfunction(L, 2)) arg_fail(2, "the hook must be a function of the gradient, got %s", type_name_of(L, 2));
    if (!lua_isnone(L, 3)) arg_fail(3, "unexpected argument (register_hook takes one function)");
    if (!x.requires_grad())
        engine_fail("register_hook: tensor #%lld does not require grad, so no gradient will reach a hook on it",
                    static_cast<long long>(x.id()));
    auto function = std::make_shared<LuaHookFunction>(L, 2, x.id());
    int64_t handle = grad_hook_add(x, [function](const Tensor& grad) { return function->call(grad); });

    *static_cast<int64_t*>(lua_newuserdatauv(L, sizeof(int64_t), 0)) = handle;
    luaL_setmetatable(L, HOOK_HANDLE_TYPE);
    return 1;
}

int64_t check_handle(lua_State* L) {
    void* handle = luaL_testudata(L, 1, HOOK_HANDLE_TYPE);
    if (!handle) arg_fail(1, "expected a RemovableHandle (call it as handle:remove()), got %s", type_name_of(L, 1));
    return *static_cast<int64_t*>(handle);
}

// handle:remove(): the hook is not called any more (removing it twice is harmless, as PyTorch's).
int l_handle_remove(lua_State* L) {
    grad_hook_remove(check_handle(L));
    return 0;
}

int l_handle_tostring(lua_State* L) {
    lua_pushfstring(L, "RemovableHandle %I", static_cast<lua_Integer>(check_handle(L)));
    return 1;
}

}  // namespace

const Binding tdlua::hook_method_only[] = {
    {"register_hook", l_register_hook},
    {nullptr, nullptr},
};

void tdlua::open_hook_handles(lua_State* L) {
    static const Binding handle_methods[] = {{"remove", l_handle_remove}, {nullptr, nullptr}};
    luaL_newmetatable(L, HOOK_HANDLE_TYPE);
    lua_newtable(L);
    register_bindings(L, handle_methods, "handle:");
    lua_setfield(L, -2, "__index");
    static const Binding metamethods[] = {{"__tostring", l_handle_tostring, nullptr, "tostring"}, {nullptr, nullptr}};
    register_bindings(L, metamethods, nullptr);
    lua_pop(L, 1);
}
