// lua_nn_ops.cpp: the neural-network ops, each both torch.f(x, ...) and x:f(...): linear, conv2d,
// max_pool2d, softmax, log_softmax (F has these too, nn_functional.lua), and the losses mse_loss,
// cross_entropy, nll_loss, multi_margin_loss (F's own are in nn_functional.lua); and torch._lstm,
// nn.LSTM's fused layer (nn_recurrent.lua). The tables at the end are registered in
// tapedeck_open (lua_tensor.cpp).
//
// Arguments follow PyTorch: positional ones in PyTorch's order, keyword ones in a trailing options
// table under PyTorch's names (`x:conv2d(w, {padding = 1})`).
#include <cstring>
#include <vector>

#include "lua_tensor.h"

using namespace td;
using namespace tdlua;

namespace {

// torch.linear(x, w, b): x wᵀ + b (b may be nil), nn.Linear's forward.
int l_linear(lua_State* L) {
    Tensor bias = lua_isnoneornil(L, 3) ? Tensor() : check_tensor(L, 3);
    return push_tensor(L, ops::linear(check_tensor(L, 1), check_tensor(L, 2), bias));
}

// A size along H and W (kernel_size, stride, padding, dilation): a number for both, or a list
// {h, w}, as PyTorch's int or tuple. Each must fit an int; the engine checks the ranges.
void size_pair_arg(lua_State* L, const Slot& s, int* h, int* w) {
    if (lua_type(L, s.at) == LUA_TNUMBER) {   // 2 or 2.0; 1.5 is an error
        *h = *w = check_int(L, s.at, s.arg, s.name);
        return;
    }
    if (!lua_istable(L, s.at) || test_tensor(L, s.at) || luaL_len(L, s.at) != 2 || is_options_table(L, s.at))
        arg_fail(s.arg, "%s must be an integer or a list {h, w} of two, got %s", s.name, type_name_of(L, s.at));
    lua_geti(L, s.at, 1);
    lua_geti(L, s.at, 2);
    if (lua_type(L, -2) != LUA_TNUMBER || lua_type(L, -1) != LUA_TNUMBER)
        arg_fail(s.arg, "%s must be an integer or a list {h, w} of two integers, got {%s, %s}", s.name,
                 type_name_of(L, -2), type_name_of(L, -1));
    *h = check_int(L, -2, s.arg, s.name);
    *w = check_int(L, -1, s.arg, s.name);
    lua_pop(L, 2);
}

// conv2d(input, weight, bias, stride, padding, dilation, groups), PyTorch's order, or any of them
// after the weight in a trailing options table: x:conv2d(w, {padding = 1}). padding may be
// "valid" (0) or "same" (the output keeps H and W; stride 1 only, as PyTorch).
int l_conv2d(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    Tensor& weight = check_tensor(L, 2);
    std::vector<Slot> a = read_params(L, "conv2d", 3, {{"bias"}, {"stride"}, {"padding"}, {"dilation"}, {"groups"}});
    Tensor* bias = a[0].given() ? test_tensor(L, a[0].at) : nullptr;
    if (a[0].given() && !bias) arg_fail(a[0].arg, "bias must be a tensor or nil, got %s", type_name_of(L, a[0].at));
    Window2d window;
    if (a[1].given()) size_pair_arg(L, a[1], &window.stride_h, &window.stride_w);
    bool same = false;
    if (a[2].given() && lua_type(L, a[2].at) == LUA_TSTRING) {
        const char* mode = lua_tostring(L, a[2].at);
        same = strcmp(mode, "same") == 0;
        if (!same && strcmp(mode, "valid") != 0)
            arg_fail(a[2].arg, "padding must be a size, {h, w}, \"valid\" or \"same\", got '%s'", mode);
    } else if (a[2].given()) {
        size_pair_arg(L, a[2], &window.padding_h, &window.padding_w);
    }
    if (a[3].given()) size_pair_arg(L, a[3], &window.dilation_h, &window.dilation_w);
    if (a[4].given()) {
        if (lua_type(L, a[4].at) != LUA_TNUMBER) arg_fail(a[4].arg, "groups must be an integer, got %s", type_name_of(L, a[4].at));
        window.groups = check_int(L, a[4].at, a[4].arg, "groups");
    }
    Tensor b = bias ? *bias : Tensor();
    return push_tensor(L, same ? ops::conv2d_same(x, weight, b, window) : ops::conv2d(x, weight, b, window));
}

// max_pool2d(input, kernel_size, stride = kernel_size, padding = 0, dilation = 1, ceil_mode =
// false, return_indices = false), PyTorch's order, or by name in a trailing options table.
// return_indices: also the 1-based index of each maximum in its H*W plane (int64).
int l_max_pool2d(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    std::vector<Slot> a = read_params(L, "max_pool2d", 2, {{"kernel_size"}, {"stride"}, {"padding"}, {"dilation"},
                                                           {"ceil_mode"}, {"return_indices"}});
    if (!a[0].given()) arg_fail(a[0].arg, "kernel_size is required (an integer or a list {h, w})");
    Window2d window;
    size_pair_arg(L, a[0], &window.kernel_h, &window.kernel_w);
    window.stride_h = window.kernel_h, window.stride_w = window.kernel_w;
    if (a[1].given()) size_pair_arg(L, a[1], &window.stride_h, &window.stride_w);
    if (a[2].given()) size_pair_arg(L, a[2], &window.padding_h, &window.padding_w);
    if (a[3].given()) size_pair_arg(L, a[3], &window.dilation_h, &window.dilation_w);
    for (int i : {4, 5})
        if (a[i].given() && !lua_isboolean(L, a[i].at))
            arg_fail(a[i].arg, "%s must be true or false, got %s", a[i].name, type_name_of(L, a[i].at));
    window.ceil_mode = a[4].given() && lua_toboolean(L, a[4].at);
    bool return_indices = a[5].given() && lua_toboolean(L, a[5].at);
    Tensor values = ops::max_pool2d(x, window);
    push_tensor(L, values);
    if (!return_indices) return 1;
    push_tensor(L, Tensor(values.node.get(), 1));
    return 2;
}

int l_softmax(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    return push_tensor(L, ops::softmax(x, check_dim(L, 2, "softmax", x.shape().ndim)));
}

int l_log_softmax(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    return push_tensor(L, ops::log_softmax(x, check_dim(L, 2, "log_softmax", x.shape().ndim)));
}

}  // namespace

namespace tdlua {
// A loss's reduction: nothing (the mean), "mean" or "sum", or an options table {reduction = "sum"}.
Reduction reduction_from_arg(lua_State* L, int idx) {
    if (lua_isnoneornil(L, idx)) return REDUCTION_MEAN;
    const char* name = nullptr;
    if (lua_type(L, idx) == LUA_TSTRING) {
        name = lua_tostring(L, idx);
    } else if (lua_istable(L, idx)) {
        options_check(L, idx, "reduction");
        if (lua_getfield(L, idx, "reduction") == LUA_TNIL) return REDUCTION_MEAN;
        if (lua_type(L, -1) != LUA_TSTRING) arg_fail(idx, "reduction must be \"mean\" or \"sum\", got %s", type_name_of(L, -1));
        name = lua_tostring(L, -1);
        lua_pop(L, 1);   // the string stays alive in the options table
    } else {
        arg_fail(idx, "expected \"mean\", \"sum\" or {reduction = \"sum\"}, got %s", type_name_of(L, idx));
    }
    if (strcmp(name, "mean") == 0) return REDUCTION_MEAN;
    if (strcmp(name, "sum") == 0) return REDUCTION_SUM;
    arg_fail(idx, "unknown reduction '%s' (use \"mean\" or \"sum\")", name);
}
}  // namespace tdlua

namespace {

int l_mse_loss(lua_State* L) {
    Tensor& input = check_tensor(L, 1);
    Tensor& target = check_tensor(L, 2);
    return push_tensor(L, ops::mse_loss(input, target, reduction_from_arg(L, 3)));
}

// cross_entropy, nll_loss, multi_margin_loss: (scores, labels [, reduction]).
int class_loss(lua_State* L, OpId op) {
    Tensor& scores = check_tensor(L, 1);
    Tensor& labels = check_tensor(L, 2);
    return push_tensor(L, ops::class_loss(op, scores, labels, reduction_from_arg(L, 3)));
}

int l_cross_entropy(lua_State* L) { return class_loss(L, OP_cross_entropy); }
int l_nll_loss(lua_State* L) { return class_loss(L, OP_nll_loss); }
int l_multi_margin_loss(lua_State* L) { return class_loss(L, OP_multi_margin_loss); }

// torch._lstm(xw, h0, c0, w_hh): nn.LSTM's fused layer (ops.def's lstm); h and the state
// (nn_recurrent.lua). torch._steps_watched(): whether its steps may be looked at (engine_steps_watched).
int l_lstm(lua_State* L) {
    Tensor h = ops::lstm(check_tensor(L, 1), check_tensor(L, 2), check_tensor(L, 3), check_tensor(L, 4));
    push_tensor(L, h);
    push_tensor(L, Tensor(h.node.get(), 1));
    return 2;
}

int l_steps_watched(lua_State* L) {
    lua_pushboolean(L, engine_steps_watched());
    return 1;
}

}  // namespace

namespace tdlua {

const Binding nn_op_functions[] = {
    {"linear", l_linear}, {"conv2d", l_conv2d, "bias stride padding dilation groups"},
    {"max_pool2d", l_max_pool2d, "kernel_size stride padding dilation ceil_mode return_indices"},
    {"softmax", l_softmax}, {"log_softmax", l_log_softmax},
    {"mse_loss", l_mse_loss, "reduction"}, {"cross_entropy", l_cross_entropy, "reduction"},
    {"nll_loss", l_nll_loss, "reduction"}, {"multi_margin_loss", l_multi_margin_loss, "reduction"},
    {nullptr, nullptr},
};

const Binding nn_op_torch_only[] = {
    {"_lstm", l_lstm}, {"_steps_watched", l_steps_watched},
    {nullptr, nullptr},
};

}  // namespace tdlua
