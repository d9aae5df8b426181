// tapedeck_lua.h: the Lua API (global `torch`, also `require "tapedeck"`).
#pragma once

#include <lua.hpp>

#include <memory>

#include "plan.h"
#include "tape.h"

// Open the library in L: the global `torch`, package.preload["tapedeck"], the Tensor metatable,
// and the engine's source locator (so nodes record the Lua file:line that made them).
void tapedeck_open(lua_State* L);

// The tensor at stack index idx, or nullptr when it is not one (or was finalised already).
td::Tensor* tapedeck_test_tensor(lua_State* L, int idx);
// Whether idx holds a tensor that Lua's collector has finalised (another finaliser can still see
// it): an error says so rather than "tensor expected".
bool tapedeck_is_finalised_tensor(lua_State* L, int idx);
// The block of the full userdata at idx when its metatable is `metatable` (as lua_topointer gives
// it), else nullptr: luaL_testudata without a registry lookup by name (bindings on hot paths).
void* tapedeck_test_udata(lua_State* L, int idx, const void* metatable);
// " (did you mean x:sum, torch.stack?)": tensor methods and torch, nn, F functions whose names
// are close to `name`; empty when none is. For errors about a missing name.
std::string tapedeck_name_hint(lua_State* L, const char* name);
// The same for a tensor's missing field or method x.name: the close tensor methods (x:sum) and
// fields (x.grad). For a PyTorch name tapedeck spells otherwise (numpy, astype, ...), both give
// tapedeck's spelling instead: " (in tapedeck: x:totable() ...)".
std::string tapedeck_tensor_name_hint(lua_State* L, const char* name);
// The fields a tensor has besides its methods (x.grad, x.shape, x.T, ...), nullptr-ended.
extern const char* const TAPEDECK_TENSOR_FIELDS[];
// package.loaded["tapedeck.hints"]: close_names(name, candidates) -> " (did you mean a, b?)" or "",
// for the Lua-written library's errors (a module's missing field).
void tapedeck_open_hints(lua_State* L);
// Adds a hint to Lua's own errors about a nil that was called or indexed ("attempt to call a nil
// value (method 'sume')"): the close names, and for x.mm(w) that Lua calls a method with `:`.
std::string tapedeck_error_hint(lua_State* L, const char* message);
// One line ("hint: ...") saying the Lua spelling of the Python habit that made Lua's syntax error
// `message` in `chunk` (keyword arguments, w -= v, x[3:5], import torch, **, @, !=), or "" when
// the line it points at holds none (lua_syntax_hints.cpp). The REPL and the script loader print
// it below the message.
std::string tapedeck_syntax_hint(const std::string& chunk, const std::string& message);
// Push t as a Lua Tensor; returns 1.
int tapedeck_push_tensor(lua_State* L, td::Tensor t);
// Push a Lua table describing a node: id, op, phase, group, inputs, shape, dtype, where, math.
void tapedeck_push_node_record(lua_State* L, const td::Node* node);
// The Lua thread whose binding is running now (engine callbacks call back into Lua on it, and
// nodes record its file:line); every guarded binding sets it (lua_util.h).
lua_State* tapedeck_current_state();
void tapedeck_set_current_state(lua_State* L);
// Loads the Lua-written library (nn, optim, F) as globals and package.loaded entries (lua_library.cpp).
void tapedeck_open_library(lua_State* L);
// Chunk names of that library start with this; source lines skip its frames (they name the user's).
constexpr const char* TAPEDECK_LIBRARY_CHUNK = "=tapedeck/";
// Adds torch.Function to the torch table on top of the stack (lua_function.cpp).
void tapedeck_open_function(lua_State* L);
// Registry field: a set (name -> true) of the torch.Function names defined so far (the debugger's
// breakpoint names and suggestions).
constexpr const char* TAPEDECK_FUNCTION_NAMES = "tapedeck.function_names";
// The options check (lua_options.cpp) for a function registered without the bindings' guard
// (luaL_Reg: dbg, viewer): the keys of the table at idx against `accepted` (space-separated), an
// unknown one raised as a Lua error naming `called`, the key, a near miss and the keys, with the
// user's file:line.
void tapedeck_check_options(lua_State* L, int idx, const char* called, const char* accepted);
// Enters `called` with its accepted keys in the options registry (when its table is opened).
void tapedeck_declare_options(lua_State* L, const char* called, const char* accepted);
// "file.lua:12" of the innermost Lua frame at or above `level` (empty when none).
std::string tapedeck_where(lua_State* L, int level);
// Adds torch.freeze, save_plan, load_plan, save_npy, load_npy to the torch table on top of the
// stack, and the frozen function's metatable (lua_plan.cpp).
void tapedeck_open_plan(lua_State* L);
// Adds torch.save and torch.load (.npz and .safetensors files) to the torch table on top of the
// stack (lua_save_load.cpp).
void tapedeck_open_save_load(lua_State* L);
// Adds torch.cuda (is_available, synchronize, memory_allocated, ...) to the torch table on top of
// the stack (lua_cuda.cpp).
void tapedeck_open_cuda(lua_State* L);
// Adds gradcheck and numerical_jacobian to the torch.autograd table on top of the stack
// (lua_gradcheck.cpp).
void tapedeck_open_gradcheck(lua_State* L);
// Pushes the apply function of the torch.Function that `fn` is one call of, and the table of that
// call's arguments ({n = N, ...}); false, nothing pushed, when fn is no Lua torch.Function
// (lua_function.cpp).
bool tapedeck_push_function_call(lua_State* L, const td::CustomFunction& fn);
// Replaces the arguments table on top of the stack ({n = N, ...}) with its N values; returns N.
int tapedeck_unpack_call_args(lua_State* L);
// Adds torch.onnx (export) to the torch table on top of the stack (lua_onnx.cpp).
void tapedeck_open_onnx(lua_State* L);
// The recorded plan of the frozen function at idx, the one its latest call used (an error when it
// was never called).
std::shared_ptr<const td::Plan> tapedeck_frozen_recording(lua_State* L, int idx);
// The compiled plan of the frozen function at idx that its latest call used (an error likewise).
std::shared_ptr<const td::Plan> tapedeck_frozen_plan(lua_State* L, int idx);
// f:passes([pass]): what each pass of f's plan decided, as a table (lua_plan_log.cpp).
int tapedeck_frozen_passes(lua_State* L);
// Whether the value at idx is a frozen function (from torch.freeze or torch.load_plan).
bool tapedeck_is_frozen(lua_State* L, int idx);
// Offers the engine the names the script gives its tensors now (engine/core/node_names.h): the
// variables of the script's running frames and the globals, modules' parameters by their paths.
// Called when names are about to be shown: a debugger stop, a viewer redraw, a graph printed.
// `newest`: names from assignments are looked for among at most that many newest nodes
// (node_names_from_assignments; the viewer passes its tape window).
void tapedeck_name_tensors(lua_State* L, size_t newest = SIZE_MAX);
