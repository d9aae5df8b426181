// lua_autograd.cpp: autograd from Lua: x:backward(), torch.autograd.grad, x:retain_grad(),
// x:requires_grad_(), and the grad mode (torch.no_grad, enable_grad, set_grad_enabled,
// is_grad_enabled, torch.autograd.keep_backward_graph). Tensor hooks: lua_hooks.cpp; gradcheck:
// lua_gradcheck.cpp. The tables at the end are registered in tapedeck_open (lua_tensor.cpp).
//
// [SECTION] backward     x:backward, torch.autograd.grad, retain_grad, requires_grad_
// [SECTION] grad mode    no_grad (a function's call or a <close> guard), enable_grad, ...
// [SECTION] tables
#include <cstdio>
#include <cstring>
#include <vector>

#include "lua_tensor.h"

using namespace td;
using namespace tdlua;

namespace {

const char* const GRAD_MODE_TYPE = "tapedeck.GradMode";

// ============================================================================================
// [SECTION] backward

const char BACKWARD_OPTIONS[] = "create_graph retain_graph";
const char GRAD_OPTIONS[] = "create_graph retain_graph grad_outputs allow_unused";

// {create_graph =, retain_graph =} at idx into options (retain_graph: a later pass may go through
// the graph again; without it a second pass through a node whose rule reads saved values fails,
// as in PyTorch).
void backward_options_from(lua_State* L, int idx, BackwardOptions* options, bool* allow_unused) {
    if (lua_isnoneornil(L, idx)) return;
    if (!lua_istable(L, idx)) arg_fail(idx, "options must be a table like {create_graph = true}, got %s", type_name_of(L, idx));
    options_check(L, idx, allow_unused ? GRAD_OPTIONS : BACKWARD_OPTIONS);   // grad_outputs: read by the caller
    lua_getfield(L, idx, "create_graph");
    options->create_graph = lua_toboolean(L, -1);
    lua_getfield(L, idx, "retain_graph");
    options->retain_graph = lua_toboolean(L, -1);
    lua_getfield(L, idx, "allow_unused");
    if (allow_unused) *allow_unused = lua_toboolean(L, -1);
    lua_pop(L, 3);
}

// A backward() typed at a prompt (the REPL's or a stop's: chunk "=stdin") may go again through a
// graph an earlier pass released, as the debugger's workflow does (run the script, set a backward
// breakpoint, backward() again): tapedeck kept the saved values. It runs, with a note, where a
// script's backward() fails as PyTorch's does. Sets options->released_rerun to *released.
bool allow_rerun_at_prompt(lua_State* L, BackwardOptions* options, int64_t* released) {
    lua_Debug ar;
    if (!find_user_frame(L, 1, &ar) || strcmp(ar.source, "=stdin") != 0) return false;
    options->released_rerun = released;
    return true;
}

// The note for a backward() at the prompt that went through a released graph (node `id`).
void note_rerun(lua_State* L, const char* function, int64_t id) {
    if (id == 0) return;
    Node* n = tape_find(id);
    fprintf(stderr,
            "note: %s went through the graph a second time: %s%s%s was gone through by an earlier backward() without "
            "{retain_graph = true}. PyTorch raises here (it frees saved tensors), as a script's %s does; at the prompt "
            "tapedeck runs it (it kept them), and .grad accumulates again (%s)\n",
            function, n ? ("#" + std::to_string(id) + " " + n->name()).c_str() : ("#" + std::to_string(id)).c_str(),
            n ? " at " : "", n ? source_loc_str(n->where).c_str() : "", function, where_at(L, 1).c_str());
    fflush(stderr);
}

// x:backward(), x:backward(grad), x:backward(grad, {create_graph = true}), x:backward{create_graph = true}
int l_backward(lua_State* L) {
    Tensor root = check_tensor(L, 1);   // a copy: the pass must not see x rebased under it
    int options_at = 3;
    Tensor* grad = nullptr;
    if (lua_istable(L, 2) && !test_tensor(L, 2)) options_at = 2;
    else if (!lua_isnoneornil(L, 2)) grad = &check_tensor(L, 2);
    if (!lua_isnone(L, options_at + 1)) arg_fail(options_at + 1, "backward takes a gradient and an options table, got more");
    BackwardOptions options;
    backward_options_from(L, options_at, &options, nullptr);
    int64_t released = 0;
    allow_rerun_at_prompt(L, &options, &released);
    backward(root, grad, options);
    note_rerun(L, "backward()", released);
    return 0;
}

// Tensors given as one tensor or a table of tensors, at idx.
std::vector<Tensor> tensor_list_arg(lua_State* L, int idx, const char* what) {
    std::vector<Tensor> list;
    if (Tensor* t = test_tensor(L, idx)) {
        list.push_back(*t);
        return list;
    }
    if (!lua_istable(L, idx)) arg_fail(idx, "%s must be a tensor or a table of tensors, got %s", what, type_name_of(L, idx));
    lua_Integer n = luaL_len(L, idx);
    for (lua_Integer i = 1; i <= n; ++i) {
        lua_geti(L, idx, i);
        Tensor* t = test_tensor(L, -1);
        if (!t) arg_fail(idx, "%s: element %lld is a %s, not a tensor", what, static_cast<long long>(i), type_name_of(L, -1));
        list.push_back(*t);
        lua_pop(L, 1);
    }
    if (list.empty()) arg_fail(idx, "%s is an empty table", what);
    return list;
}

// torch.autograd.grad(outputs, inputs, {grad_outputs =, create_graph =, allow_unused =}): the
// gradients of the outputs (summed, each weighted by its grad_output) with respect to each input,
// as several return values (PyTorch's tuple); .grad is left alone.
int l_autograd_grad(lua_State* L) {
    std::vector<Tensor> outputs = tensor_list_arg(L, 1, "outputs");
    std::vector<Tensor> inputs = tensor_list_arg(L, 2, "inputs");
    BackwardOptions options;
    bool allow_unused = false;
    backward_options_from(L, 3, &options, &allow_unused);
    if (!lua_isnone(L, 4)) arg_fail(4, "grad takes outputs, inputs and an options table, got more");
    std::vector<Tensor> grad_outputs;
    if (lua_istable(L, 3) && lua_getfield(L, 3, "grad_outputs") != LUA_TNIL) grad_outputs = tensor_list_arg(L, lua_gettop(L), "grad_outputs");
    if (!grad_outputs.empty() && grad_outputs.size() != outputs.size())
        arg_fail(3, "grad_outputs has %zu tensors for %zu outputs", grad_outputs.size(), outputs.size());
    for (const Tensor& input : inputs)
        if (!input.requires_grad()) engine_fail("grad: input #%lld does not require grad", static_cast<long long>(input.id()));
    Tensor root = outputs[0];
    const Tensor* seed = grad_outputs.empty() ? nullptr : &grad_outputs[0];
    Tensor weighted;
    if (outputs.size() > 1) {   // one root: sum over outputs of sum(output * grad_output)
        {
            NoGradGuard restore_mode;   // saves the mode; the sum is recorded with autograd on
            set_grad_enabled(true);
            for (size_t i = 0; i < outputs.size(); ++i) {
                Tensor term = grad_outputs.empty() ? outputs[i] : ops::mul(outputs[i], grad_outputs[i]);
                term = ops::reduce_all(OP_sum, term);
                weighted = weighted.defined() ? ops::add(weighted, term) : term;
            }
        }
        root = weighted;
        seed = nullptr;
    }
    std::vector<Tensor> captured;
    options.capture = &inputs;
    options.captured = &captured;
    int64_t released = 0;   // at the prompt: runs (the values are right, and no .grad changes)
    allow_rerun_at_prompt(L, &options, &released);
    backward(root, seed, options);
    for (size_t i = 0; i < inputs.size(); ++i) {
        if (captured[i].defined()) {
            push_tensor(L, captured[i]);
        } else if (allow_unused) {
            lua_pushnil(L);
        } else {
            engine_fail("grad: input %zu (#%lld) was not used to compute the outputs (pass {allow_unused = true} to get nil)",
                        i + 1, static_cast<long long>(inputs[i].id()));
        }
    }
    return static_cast<int>(inputs.size());
}

int l_retain_grad(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    if (!x.requires_grad()) engine_fail("retain_grad: tensor #%lld does not require grad", static_cast<long long>(x.id()));
    x.node->retains_grad = true;
    return return_self(L);
}

int l_requires_grad_(lua_State* L) {
    set_requires_grad(check_tensor(L, 1), lua_isnoneornil(L, 2) ? true : lua_toboolean(L, 2));
    return return_self(L);
}

// ============================================================================================
// [SECTION] grad mode

// The guard's __close: the mode as it was when torch.no_grad() (or enable_grad()) made the guard.
int grad_mode_close(lua_State* L) {
    bool* saved = static_cast<bool*>(luaL_checkudata(L, 1, GRAD_MODE_TYPE));
    set_grad_enabled(*saved);
    return 0;
}

// torch.no_grad(fn, ...) calls fn with autograd off and returns its results; torch.no_grad()
// returns a guard for `local _ <close> = torch.no_grad()`.
int run_with_grad_mode(lua_State* L, bool enabled) {
    bool saved = grad_enabled();
    if (lua_isnoneornil(L, 1)) {
        bool* guard = static_cast<bool*>(lua_newuserdatauv(L, sizeof(bool), 0));
        *guard = saved;
        luaL_setmetatable(L, GRAD_MODE_TYPE);
        set_grad_enabled(enabled);
        return 1;
    }
    if (lua_type(L, 1) != LUA_TFUNCTION) arg_fail(1, "expected a function (or nothing), got %s", type_name_of(L, 1));
    int nargs = lua_gettop(L) - 1;
    set_grad_enabled(enabled);
    int status = lua_pcall(L, nargs, LUA_MULTRET, 0);
    set_grad_enabled(saved);
    if (status != LUA_OK) return lua_error(L);   // the function's own error, unchanged
    return lua_gettop(L);
}

int l_no_grad(lua_State* L) { return run_with_grad_mode(L, false); }
int l_enable_grad(lua_State* L) { return run_with_grad_mode(L, true); }

int l_is_grad_enabled(lua_State* L) {
    lua_pushboolean(L, grad_enabled());
    return 1;
}

int l_set_grad_enabled(lua_State* L) {
    set_grad_enabled(lua_toboolean(L, 1));
    return 0;
}

// torch.autograd.keep_backward_graph([keep]): whether backward passes keep the nodes they record
// (engine_keep_backward_graph); returns the setting as it was, and sets it when given a boolean.
int l_keep_backward_graph(lua_State* L) {
    bool was = engine_keeps_backward_graph_setting();
    if (lua_gettop(L) > 1) arg_fail(2, "expects at most one argument (true or false), got %d", lua_gettop(L));
    if (lua_gettop(L) == 1) {
        if (!lua_isboolean(L, 1)) arg_fail(1, "keep must be true or false, got %s", luaL_typename(L, 1));
        engine_keep_backward_graph(lua_toboolean(L, 1));
    }
    lua_pushboolean(L, was);
    return 1;
}

}  // namespace

// ============================================================================================
// [SECTION] tables

namespace tdlua {

const Binding autograd_method_only[] = {
    {"backward", l_backward, BACKWARD_OPTIONS}, {"retain_grad", l_retain_grad}, {"requires_grad_", l_requires_grad_},
    {nullptr, nullptr},
};

const Binding autograd_torch_only[] = {
    {"backward", l_backward, BACKWARD_OPTIONS}, {"no_grad", l_no_grad}, {"enable_grad", l_enable_grad},
    {"is_grad_enabled", l_is_grad_enabled}, {"set_grad_enabled", l_set_grad_enabled},
    {nullptr, nullptr},
};

const Binding autograd_functions[] = {
    {"grad", l_autograd_grad, GRAD_OPTIONS}, {"backward", l_backward, BACKWARD_OPTIONS}, {"keep_backward_graph", l_keep_backward_graph},
    {nullptr, nullptr},
};

// The metatable of the guards torch.no_grad() and torch.enable_grad() return.
void open_grad_mode(lua_State* L) {
    luaL_newmetatable(L, GRAD_MODE_TYPE);
    lua_pushcfunction(L, grad_mode_close);
    lua_setfield(L, -2, "__close");
    lua_pop(L, 1);
}

}  // namespace tdlua
