// lua_tensor.h: the helpers every file of Tensor bindings shares (defined in lua_tensor.cpp
// unless said): reading tensors, dims, shapes and options from the Lua stack, and pushing tensors
// back; and the tables of bindings each file declares here and tapedeck_open registers
// (lua_tensor.cpp [SECTION] open), the way a file of new bindings joins.
#pragma once

#include <lua.hpp>

#include <functional>
#include <vector>

#include "lua_util.h"
#include "tape.h"

namespace tdlua {

// The tensor at idx, or nullptr (not a tensor, or one Lua has finalised already).
td::Tensor* test_tensor(lua_State* L, int idx);
// The tensor at idx, or an ArgError "tensor expected, got ...".
td::Tensor& check_tensor(lua_State* L, int idx);
// Push t as a new Lua Tensor; returns 1.
int push_tensor(lua_State* L, td::Tensor t);
// The same with `user_values` Lua value slots on the userdata (a view keeps its base in slot 1;
// plain tensors have none, so the collector has less to walk and to sweep).
int push_tensor_with_slots(lua_State* L, td::Tensor t, int user_values);
// A method's result when it is the tensor it was called on (x:add_(y), x:t() of a 1-d x): leaves
// argument 1 alone on the stack; returns 1.
int return_self(lua_State* L);
// A 1-based (or negative) dim at idx, as a 0-based dim of a tensor with `ndim` dims.
int check_dim(lua_State* L, int idx, const char* op_name, int ndim);
// Sizes given as d1, d2, ... (numbers from `first` on) or as one table {d1, d2, ...};
// *next is set to the first argument after them.
td::Shape shape_from_args(lua_State* L, int first, int* next);

struct CreateOptions {
    td::DType dtype = td::DTYPE_F32;
    bool requires_grad = false;
    td::Device device = td::DEVICE_CPU;
};
// The keys of a creation function's options table (torch.zeros, x:new_zeros, torch.arange, ...).
inline constexpr char CREATE_OPTIONS[] = "dtype device requires_grad";
// {requires_grad=, dtype=, device=} at idx (nil: the defaults); unknown keys are errors.
// Where tensors are made when no device is given: torch.set_default_device (cpu unless set).
td::Device default_device();
CreateOptions options_from_arg(lua_State* L, int idx, td::DType default_dtype,
                               td::Device default_device = tdlua::default_device());
// A device name at stack slot idx ("cpu", "cuda", "cuda:0"); errors name argument `arg`.
td::Device device_from_arg(lua_State* L, int idx, int arg);
void set_requires_grad(td::Tensor& t, bool flag);
// Push a freshly created tensor, applying o.requires_grad.
int push_created(lua_State* L, td::Tensor t, const CreateOptions& o);
// An integer that fits in an int at stack slot `at`, reported as argument `arg`.
int check_int(lua_State* L, int at, int arg, const char* what);
// A loss's reduction: nil (mean), "mean", "sum" or {reduction = ...} (lua_nn_ops.cpp).
td::Reduction reduction_from_arg(lua_State* L, int idx);
// t beside the number at number_idx, promoted as PyTorch does (int64 with a fraction: float32)
// (lua_tensor_ops.cpp).
td::Tensor promoted_for_number(lua_State* L, int number_idx, const td::Tensor& t);
// An in-place op's operand: a tensor, or a number as a 0-d tensor of like's dtype.
td::Tensor operand_of(lua_State* L, int idx, const td::Tensor& like);
// The user's file:line for the op being recorded (the engine's source locator).
td::SourceLoc locate_in_lua(void*);
// Push a shape as a torch.Size-like table.
void push_shape(lua_State* L, const td::Shape& s);

// Optional parameters by position or by name (lua_reduce_shape_ops.cpp). One parameter of a
// function, by PyTorch's name (and an alias: keepdims for keepdim).
struct Param {
    const char* name;
    const char* alias = nullptr;
};
// Where a parameter's value is: stack slot `at` (0: not given), reported as argument `arg` (the
// options table's position for a value given by name).
struct Slot {
    int at = 0;
    int arg = 0;
    const char* name = "";
    bool given() const { return at != 0; }
};
// The parameters of `fn` from stack slot `first` on: positional values in order, then an optional
// trailing options table with values by name. More positional values than parameters, a name the
// function does not take, or a value given both ways is an error naming it.
std::vector<Slot> read_params(lua_State* L, const char* fn, int first, const std::vector<Param>& params);

// Creation, arithmetic, comparisons, products, shape views, in-place ops (lua_tensor_ops.cpp).
extern const Binding tensor_op_functions[];    // torch.f(x, ...) and x:f(...)
extern const Binding tensor_op_method_only[];
extern const Binding tensor_op_torch_only[];
extern const Binding tensor_op_metamethods[];  // a + b, a - b, a * b, a / b, a ^ p, -a
// x:f() and torch.f(x) for every op the op table marks op_is_simple_method (x:sin(), ...), so
// that such an op needs no binding of its own.
const Binding* table_unary_bindings();
// linear, conv2d, max_pool2d, softmax, the losses; torch._lstm (lua_nn_ops.cpp).
extern const Binding nn_op_functions[];        // torch.f(x, ...) and x:f(...)
extern const Binding nn_op_torch_only[];
// Tensors to Lua values (item, totable, a < b) and to other dtypes and devices (lua_conversions.cpp).
extern const Binding conversion_method_only[];
extern const Binding conversion_torch_only[];
extern const Binding conversion_metamethods[];
// backward, torch.autograd.grad, the grad mode (lua_autograd.cpp).
extern const Binding autograd_method_only[];
extern const Binding autograd_torch_only[];
extern const Binding autograd_functions[];     // the torch.autograd table
void open_grad_mode(lua_State* L);             // the metatable of torch.no_grad()'s guard
// Node records, torch.graph, tape, graphviz, scope, ops, memory (lua_tape.cpp).
extern const Binding tape_torch_only[];
extern const Binding tape_method_only[];       // x:graph()
void open_node_records(lua_State* L);          // the metatable of node records
// Views (lua_views.cpp). Push `view`, a view of the tensor at base_idx, linked to that tensor's
// root base so that writes through it reach autograd (a result that shares no storage with it,
// as reshape's copy, is pushed as a plain tensor).
int push_view(lua_State* L, td::Tensor view, int base_idx);
// Runs op on the tensor at slot 1, in place: directly, or when it is a view whose write autograd
// must record (it, its base or an operand requires grad), on a copy assigned into the base.
void run_inplace(lua_State* L, const std::function<void(td::Tensor&)>& op, std::initializer_list<const td::Tensor*> operands);
int index_read(lua_State* L);     // t[key]: key an integer or a table of entries (args: t, key)
int index_assign(lua_State* L);   // t[key] = value (args: t, key, value)
extern const Binding view_tensor_functions[];   // torch.f(x, ...) and x:f(...)
extern const Binding view_method_only[];
extern const Binding view_torch_only[];
// Reductions, shape and product functions (lua_reduce_shape_ops.cpp).
extern const Binding reduce_shape_functions[];         // torch.f(x, ...) and x:f(...)
extern const Binding reduce_shape_methods[];
extern const Binding reduce_shape_torch_functions[];
// Tensor hooks (lua_hooks.cpp): x:register_hook(fn), and the handles it returns.
extern const Binding hook_method_only[];
void open_hook_handles(lua_State* L);
// The tables of lua_elementwise_ops.cpp: torch.f and x:f, torch.f only, x:f only, F.f only.
extern const Binding elementwise_tensor_functions[];
extern const Binding elementwise_torch_only[];
extern const Binding elementwise_method_only[];
extern const Binding elementwise_functional[];

}  // namespace tdlua
