// lua_onnx.cpp: torch.onnx.export, a frozen function's plan as an ONNX model (engine/io/onnx/onnx_export.h,
// docs/onnx.md).
//
//   f = torch.freeze(step, x, y)
//   torch.onnx.export(f, "step.onnx")                       -- opset 17, backward ops as functions
//   torch.onnx.export(f, "step.onnx", {opset = 17, inline = true, strict = true, quiet = true})
//   torch.onnx.export("step.tdp", "step.onnx")              -- a plan file (torch.save_plan)
//   torch.onnx.ops()                                        -- the mapping table: op -> ONNX ops or why not
//
// Returns {inputs = {...}, outputs = {...}, arguments = {...}, captured = {name = tensor},
// warnings = {...}, nodes = N, functions = M}: the graph's input and output names, the inputs that
// stand for the function's arguments, the captured tensors by their initializers' names. Warnings
// (a value guard exported as the branch recorded, a random op) are also printed to stderr unless
// quiet = true.
#include <cstdio>
#include <cstring>

#include "lua_util.h"
#include "onnx_export.h"
#include "tapedeck_lua.h"

using namespace td;
using namespace tdlua;

namespace {

const char ONNX_EXPORT_OPTIONS[] = "opset inline strict quiet";

void read_options(lua_State* L, int idx, OnnxExportOptions& options, bool& quiet) {
    if (lua_isnoneornil(L, idx)) return;
    if (!lua_istable(L, idx))
        arg_fail(idx, "options must be a table like {opset = 17, inline = true, strict = true}, got %s", type_name_of(L, idx));
    options_check(L, idx, ONNX_EXPORT_OPTIONS);
    if (lua_getfield(L, idx, "opset") != LUA_TNIL) {
        int is_integer = 0;
        lua_Integer n = lua_tointegerx(L, -1, &is_integer);
        if (!is_integer) arg_fail(idx, "opset must be a whole number, got %s", luaL_tolstring(L, -1, nullptr));
        options.opset = static_cast<int>(n);
    }
    lua_getfield(L, idx, "inline");
    lua_getfield(L, idx, "strict");
    lua_getfield(L, idx, "quiet");
    if (!lua_isnil(L, -3)) options.inline_backward = lua_toboolean(L, -3);
    if (!lua_isnil(L, -2)) options.strict = lua_toboolean(L, -2);
    quiet = lua_toboolean(L, -1);
    lua_pop(L, 4);
}

void push_strings(lua_State* L, const std::vector<std::string>& list, const char* field) {
    lua_createtable(L, static_cast<int>(list.size()), 0);
    for (size_t i = 0; i < list.size(); ++i) {
        lua_pushstring(L, list[i].c_str());
        lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
    lua_setfield(L, -2, field);
}

// torch.onnx.export(f or plan path, path [, options])
int l_onnx_export(lua_State* L) {
    std::shared_ptr<const Plan> recorded;
    if (lua_type(L, 1) == LUA_TSTRING) {
        PlanPasses passes;
        recorded = std::shared_ptr<const Plan>(plan_load(lua_tostring(L, 1), &passes));
    } else if (tapedeck_is_frozen(L, 1)) {
        recorded = tapedeck_frozen_recording(L, 1);
    } else {
        arg_fail(1, "expected a frozen function (torch.freeze) or a plan file's path, got %s", type_name_of(L, 1));
    }
    const char* path = check_string(L, 2, "path");
    OnnxExportOptions options;
    bool quiet = false;
    read_options(L, 3, options, quiet);
    OnnxExportResult result = onnx_export(recorded, options, path);
    if (!quiet)
        for (const std::string& w : result.warnings) std::fprintf(stderr, "export_onnx: warning: %s\n", w.c_str());
    lua_newtable(L);
    push_strings(L, result.inputs, "inputs");
    push_strings(L, result.outputs, "outputs");
    push_strings(L, result.warnings, "warnings");
    push_strings(L, result.arguments, "arguments");
    lua_newtable(L);
    for (const auto& [name, tensor] : result.captured) {
        tapedeck_push_tensor(L, tensor);
        lua_setfield(L, -2, name.c_str());
    }
    lua_setfield(L, -2, "captured");
    set_integer(L, "nodes", result.nodes);
    set_integer(L, "functions", result.functions);
    return 1;
}

// torch.onnx.ops(): {op = {onnx = "Gemm (transA, transB); ..."} or {refused = "why"}} for every op
// of the op table: the mapping table (docs/onnx.md lists it).
int l_onnx_ops(lua_State* L) {
    lua_createtable(L, 0, OP_COUNT);
    for (int i = 0; i < OP_COUNT; ++i) {
        const OnnxOpMapping& m = onnx_op_mapping(static_cast<OpId>(i));
        lua_createtable(L, 0, 2);
        lua_pushstring(L, m.emit ? m.onnx : m.refusal);
        lua_setfield(L, -2, m.emit ? "onnx" : "refused");
        set_boolean(L, "function", onnx_op_is_function(static_cast<OpId>(i)));
        lua_setfield(L, -2, op_info(static_cast<OpId>(i)).name);
    }
    return 1;
}

const Binding onnx_functions[] = {
    {"export", l_onnx_export, ONNX_EXPORT_OPTIONS, "onnx.export"},
    {"ops", l_onnx_ops, nullptr, "onnx.ops"},
    {nullptr, nullptr},
};

}  // namespace

void tapedeck_open_onnx(lua_State* L) {
    lua_newtable(L);
    register_bindings(L, onnx_functions, "torch.onnx.");
    lua_setfield(L, -2, "onnx");
}
