// lua_function.cpp: torch.Function, autograd functions written in Lua (the lecture's MyReLU).
//
//   local MyReLU = torch.Function{
//     name = "MyReLU",
//     forward = function(ctx, x) ctx:save_for_backward(x); return x:clamp{min = 0} end,
//     backward = function(ctx, grad) local x = ctx.saved_tensors[1]; return grad * (x:gt(0)) end,
//   }
//   y = MyReLU.apply(x)      -- or MyReLU(x)
//
// Each apply is one node on the tape named after the function (engine/core/function.h); the ops inside
// forward and backward are recorded in its group with their own lines. ctx is a plain Lua table
// (keep anything on it) with save_for_backward(...), saved_tensors and needs_input_grad.
//
// [SECTION] one apply     LuaFunction: the definition, ctx and arguments; forward and backward in Lua
// [SECTION] bindings      ctx:save_for_backward, Definition.apply, torch.Function{...}
#include <memory>
#include <stdexcept>
#include <string>

#include "function.h"
#include "lua_util.h"
#include "tapedeck_lua.h"

using namespace td;

int tapedeck_unpack_call_args(lua_State* L) {
    int args = lua_gettop(L);
    lua_getfield(L, args, "n");
    int n = static_cast<int>(lua_tointeger(L, -1));
    lua_pop(L, 1);
    luaL_checkstack(L, n, "too many arguments");
    for (int i = 1; i <= n; ++i) lua_rawgeti(L, args, i);
    lua_remove(L, args);
    return n;
}

namespace {

const char* const CTX_TYPE = "tapedeck.FunctionContext";

// ============================================================================================
// [SECTION] one apply

// An error raised by the user's Lua code: its message already names the line.
struct LuaCodeError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// The Lua side of one apply: the definition table, the ctx table and the arguments, held in the
// registry for as long as the node lives (the backward needs all three).
class LuaFunction : public CustomFunction {
public:
    LuaFunction(lua_State* L, std::string name, int definition_ref, int ctx_ref, int args_ref)
        : CustomFunction(std::move(name)), main_(tdlua::main_thread(L)), definition_ref_(definition_ref), ctx_ref_(ctx_ref),
          args_ref_(args_ref) {}

    ~LuaFunction() override {
        luaL_unref(main_, LUA_REGISTRYINDEX, definition_ref_);
        luaL_unref(main_, LUA_REGISTRYINDEX, ctx_ref_);
        luaL_unref(main_, LUA_REGISTRYINDEX, args_ref_);
    }

    // ctx.saved_tensors holds something (save_for_backward was called).
    bool saves_tensors() const override {
        lua_State* L = main_;
        int top = lua_gettop(L);
        lua_rawgeti(L, LUA_REGISTRYINDEX, ctx_ref_);
        bool saves = lua_istable(L, -1) && lua_getfield(L, -1, "saved_tensors") == LUA_TTABLE && lua_rawlen(L, -1) > 0;
        lua_settop(L, top);
        return saves;
    }

    std::vector<Tensor> forward(const std::vector<Tensor>&) override {
        lua_State* L = tapedeck_current_state();
        int top = lua_gettop(L);
        push_method(L, "forward");
        lua_rawgeti(L, LUA_REGISTRYINDEX, args_ref_);
        int n_args = tapedeck_unpack_call_args(L);
        call(L, 1 + n_args, "forward");
        std::vector<Tensor> results;
        for (int i = top + 1; i <= lua_gettop(L); ++i) {
            Tensor* t = tapedeck_test_tensor(L, i);
            if (!t) {
                std::string kind = luaL_typename(L, i);
                lua_settop(L, top);
                engine_fail("%s: forward must return tensors; result %d is a %s", name.c_str(), i - top, kind.c_str());
            }
            results.push_back(*t);
        }
        lua_settop(L, top);
        return results;
    }

    std::vector<Tensor> backward(const std::vector<Tensor>& grad_outputs) override {
        lua_State* L = tapedeck_current_state();
        int top = lua_gettop(L);
        fail_if_saved_changed(L);
        push_method(L, "backward");
        for (const Tensor& g : grad_outputs) tapedeck_push_tensor(L, g);
        call(L, 1 + static_cast<int>(grad_outputs.size()), "backward");
        int n_results = lua_gettop(L) - top;

        // One result per apply argument; a gradient for a tensor argument, nil for others.
        lua_rawgeti(L, LUA_REGISTRYINDEX, args_ref_);
        int args = lua_gettop(L);
        lua_getfield(L, args, "n");
        int n_args = static_cast<int>(lua_tointeger(L, -1));
        lua_pop(L, 1);
        std::vector<Tensor> grads;
        for (int i = 1; i <= n_args; ++i) {
            bool is_tensor_arg = lua_rawgeti(L, args, i) == LUA_TUSERDATA && tapedeck_test_tensor(L, -1);
            lua_pop(L, 1);
            bool returned = i <= n_results;
            if (!returned && is_tensor_arg) {
                lua_settop(L, top);
                engine_fail("%s: backward returned %d value%s for %d argument%s of apply (one per argument: a "
                            "gradient, or nil)",
                            name.c_str(), n_results, n_results == 1 ? "" : "s", n_args, n_args == 1 ? "" : "s");
            }
            if (!returned) continue;
            int slot = top + i;
            Tensor* g = tapedeck_test_tensor(L, slot);
            if (!lua_isnil(L, slot) && (!g || !is_tensor_arg)) {
                std::string kind = g ? "tensor" : luaL_typename(L, slot);
                lua_settop(L, top);
                engine_fail("%s: backward result %d is a %s; argument %d of apply %s", name.c_str(), i, kind.c_str(), i,
                            is_tensor_arg ? "is a tensor, so return its gradient (a tensor) or nil"
                                          : "is not a tensor, so return nil for it");
            }
            if (is_tensor_arg) grads.push_back(g ? *g : Tensor());
        }
        if (n_results > n_args) {
            lua_settop(L, top);
            engine_fail("%s: backward returned %d values for %d argument%s of apply", name.c_str(), n_results, n_args,
                        n_args == 1 ? "" : "s");
        }
        lua_settop(L, top);
        return grads;
    }

    // Pushes definition.apply and the arguments of this call ({n = N, ...}): a call of the same
    // function on other arguments (the debugger's :gradcheck).
    void push_call(lua_State* L) const {
        lua_rawgeti(L, LUA_REGISTRYINDEX, definition_ref_);
        lua_getfield(L, -1, "apply");
        lua_remove(L, -2);
        lua_rawgeti(L, LUA_REGISTRYINDEX, args_ref_);
    }

private:
    // Pushes definition[method] and the ctx table.
    void push_method(lua_State* L, const char* method) const {
        lua_rawgeti(L, LUA_REGISTRYINDEX, definition_ref_);
        lua_getfield(L, -1, method);
        lua_remove(L, -2);
        lua_rawgeti(L, LUA_REGISTRYINDEX, ctx_ref_);
    }

    // Calls the function below n_args values, leaving its results; a Lua error becomes an exception.
    void call(lua_State* L, int n_args, const char* method) const {
        if (lua_pcall(L, n_args, LUA_MULTRET, 0) != LUA_OK) {
            std::string message = name + "." + method + ": " + (lua_tostring(L, -1) ? lua_tostring(L, -1) : "error");
            lua_pop(L, 1);
            throw LuaCodeError(message);
        }
    }

    // PyTorch's check: a tensor saved for backward must not have changed in place since.
    void fail_if_saved_changed(lua_State* L) const {
        int top = lua_gettop(L);
        lua_rawgeti(L, LUA_REGISTRYINDEX, ctx_ref_);
        lua_getfield(L, -1, "saved_tensors");
        lua_getfield(L, -2, "_saved_versions");
        if (lua_istable(L, -2) && lua_istable(L, -1)) {
            lua_Integer n = luaL_len(L, -1);
            for (lua_Integer i = 1; i <= n; ++i) {
                lua_rawgeti(L, -2, i);
                lua_rawgeti(L, -2, i);
                Tensor* t = tapedeck_test_tensor(L, -2);
                lua_Integer then = lua_tointeger(L, -1);
                lua_pop(L, 2);
                if (t && t->value().storage->version != static_cast<uint32_t>(then)) {
                    uint32_t now = t->value().storage->version;
                    lua_settop(L, top);
                    engine_fail("%s: backward needs saved tensor %lld, which an in-place op changed after "
                                "save_for_backward (version %lld, now %u)",
                                name.c_str(), static_cast<long long>(i), static_cast<long long>(then), now);
                }
            }
        }
        lua_settop(L, top);
    }

    lua_State* main_;
    int definition_ref_, ctx_ref_, args_ref_;
};

// ============================================================================================
// [SECTION] bindings

// ctx:save_for_backward(t1, t2, ...): ctx.saved_tensors = {t1, t2, ...}, with their versions.
int ctx_save_for_backward(lua_State* L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    int n = lua_gettop(L) - 1;
    lua_createtable(L, n, 0);
    lua_createtable(L, n, 0);
    for (int i = 1; i <= n; ++i) {
        Tensor* t = tapedeck_test_tensor(L, i + 1);
        if (!t && !lua_isnil(L, i + 1))
            return luaL_error(L, "save_for_backward: argument %d is a %s, not a tensor (keep other values as "
                                 "fields of ctx)", i, luaL_typename(L, i + 1));
        lua_pushvalue(L, i + 1);
        lua_rawseti(L, -3, i);
        lua_pushinteger(L, t ? t->value().storage->version : 0);
        lua_rawseti(L, -2, i);
    }
    lua_setfield(L, 1, "_saved_versions");
    lua_setfield(L, 1, "saved_tensors");
    return 0;
}

// Definition.apply(...): upvalue 1 is the definition table.
int function_apply_lua(lua_State* L) {
    int n_args = lua_gettop(L);
    int definition = lua_upvalueindex(1);
    lua_getfield(L, definition, "name");
    std::string name = lua_tostring(L, -1) ? lua_tostring(L, -1) : "Function";
    lua_pop(L, 1);

    std::vector<Tensor> inputs;
    lua_createtable(L, n_args, 1);   // args
    lua_createtable(L, n_args, 0);   // needs_input_grad
    for (int i = 1; i <= n_args; ++i) {
        Tensor* t = tapedeck_test_tensor(L, i);
        if (t) inputs.push_back(*t);
        lua_pushvalue(L, i);
        lua_rawseti(L, -3, i);
        lua_pushboolean(L, t && t->requires_grad() && grad_enabled());
        lua_rawseti(L, -2, i);
    }
    if (inputs.empty()) return luaL_error(L, "%s.apply: needs at least one tensor argument", name.c_str());
    lua_newtable(L);   // ctx
    luaL_setmetatable(L, CTX_TYPE);
    lua_insert(L, -2);
    lua_setfield(L, -2, "needs_input_grad");
    int ctx_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    tdlua::set_integer(L, "n", n_args);
    int args_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_pushvalue(L, definition);
    int definition_ref = luaL_ref(L, LUA_REGISTRYINDEX);

    std::string message;
    try {
        auto fn = std::make_shared<LuaFunction>(L, name, definition_ref, ctx_ref, args_ref);
        std::vector<Tensor> outputs = function_apply(fn, inputs);
        for (Tensor& t : outputs) tapedeck_push_tensor(L, std::move(t));
        return static_cast<int>(outputs.size());
    } catch (const LuaCodeError& e) {
        message = e.what();   // names the line inside the function already
    } catch (const std::exception& e) {   // an engine error: said as the call the user made, unless it names it
        message = e.what();
        if (message.compare(0, name.size(), name) != 0) message = name + ".apply: " + message;
        std::string where = tapedeck_where(L, 1);
        if (!where.empty()) message += " (" + where + ")";
    }
    lua_pushstring(L, message.c_str());
    return lua_error(L);
}

// Definition(...) is Definition.apply(...).
int function_call_lua(lua_State* L) {
    lua_getfield(L, 1, "apply");
    lua_replace(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

// torch.Function{name = "MyReLU", forward = function(ctx, ...) end, backward = function(ctx, ...) end}
// (run guarded as torch.Function: its errors name the call and the user's line)
int torch_function(lua_State* L) {
    if (!lua_istable(L, 1))
        tdlua::arg_fail(1, "takes a table {forward = function(ctx, ...), backward = function(ctx, ...) [, name =]}, got %s",
                        tdlua::type_name_of(L, 1));
    for (const char* method : {"forward", "backward"})
        if (lua_getfield(L, 1, method) != LUA_TFUNCTION)
            engine_fail("torch.Function: the table needs a %s function (ctx, ...), got %s", method, luaL_typename(L, -1));
    lua_settop(L, 1);
    if (lua_getfield(L, 1, "name") == LUA_TNIL) {
        lua_pop(L, 1);
        lua_pushstring(L, "Function");
        lua_pushvalue(L, -1);
        lua_setfield(L, 1, "name");   // the name stays on the stack: it is registered below
    } else if (lua_type(L, -1) != LUA_TSTRING) {
        engine_fail("torch.Function: name must be a string, got %s", luaL_typename(L, -1));
    }
    luaL_getsubtable(L, LUA_REGISTRYINDEX, TAPEDECK_FUNCTION_NAMES);
    lua_pushvalue(L, -2);
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);
    lua_settop(L, 1);
    lua_pushvalue(L, 1);
    lua_pushcclosure(L, function_apply_lua, 1);
    lua_setfield(L, 1, "apply");
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, function_call_lua);
    lua_setfield(L, -2, "__call");
    lua_setmetatable(L, 1);
    return 1;
}

}  // namespace

bool tapedeck_push_function_call(lua_State* L, const CustomFunction& fn) {
    const LuaFunction* lua_fn = dynamic_cast<const LuaFunction*>(&fn);
    if (!lua_fn) return false;
    lua_fn->push_call(L);
    return true;
}

void tapedeck_open_function(lua_State* L) {
    luaL_newmetatable(L, CTX_TYPE);
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, ctx_save_for_backward);
    lua_setfield(L, -2, "save_for_backward");
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    static const tdlua::Binding function_binding[] = {{.name = "Function", .fn = torch_function, .options = tdlua::OPTIONS_TABLE_IS_VALUE,
                                                       .call_name = "torch.Function"},
                                                      {nullptr, nullptr}};
    tdlua::register_bindings(L, function_binding, "torch.");   // into the torch table on top of the stack
}
