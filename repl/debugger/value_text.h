// value_text.h: how the REPL and the debugger show a Lua value — the one place that decides it.
// A table shows its contents (tensors in it as one-line summaries, nested tables to a few levels,
// cycles marked, long tables shortened with a count); anything else shows as tostring does.
#pragma once

#include <string>

struct lua_State;
namespace td {
struct Tensor;
struct Value;
}

// The value at idx as the prompt prints it: a table without __tostring as its contents,
// "{1, 2, x = "a"}" (several lines when long); a tensor and everything else through tostring.
std::string repl_value_text(lua_State* L, int idx);

// The value as it shows inside a table (what :p and :locals print): a string quoted, a tensor as
// one line, a function by where it is defined, a table as its contents.
std::string repl_nested_value_text(lua_State* L, int idx);

// A tensor as one line, as it shows inside a table: "tensor [20,1] float32 #10 tanh" (a tensor
// not on the CPU: "tensor [20,1] float32 cuda #10 tanh").
std::string repl_tensor_summary(const td::Tensor& t);

// " cuda" for a value on a device other than the CPU, put after the dtype wherever a tensor is
// shown as shape and dtype; "" for a CPU value or one whose bytes were freed.
std::string repl_device_text(const td::Value& v);

// The error object at idx as text: a string or number as it is, anything else as "(error object is
// a table value)" (never null, never runs Lua code).
std::string repl_error_text(lua_State* L, int idx);
