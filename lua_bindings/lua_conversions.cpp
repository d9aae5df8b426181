// lua_conversions.cpp: tensors made into Lua values, and into tensors of another dtype or device.
// Reading values onto the host is noted while freezing (plan.h): a value the script reads, or a
// guard on a comparison's truth. The tables at the end are registered in tapedeck_open.
//
// [SECTION] to Lua       x:item(), x:totable() (x:tolist()), a < b and a <= b of one-element tensors
// [SECTION] to tensors   x:to(...), cpu, cuda, float, double, long, int, bool, type_as; torch.device,
//                        set_default_device, get_default_device
// [SECTION] tables
#include <cstdio>
#include <string>

#include "bindings_state.h"
#include "lua_source_text.h"
#include "lua_tensor.h"
#include "plan.h"
#include "source_cache.h"

using namespace td;
using namespace tdlua;

namespace {

// ============================================================================================
// [SECTION] to Lua

// Element i of v, a host value (value_to_host first).
void push_element(lua_State* L, const Value& v, int64_t i) {
    if (v.dtype == DTYPE_I64) lua_pushinteger(L, static_cast<const int64_t*>(v.storage->data)[value_storage_index(v, i)]);
    else lua_pushnumber(L, value_get(v, i));
}

// While freezing: the code read x's values with x:method(); the guard is named by the call as
// the user wrote it ("loss:sum():item()"), or "item()" when the line does not say.
void note_values_read(const Tensor& x, const char* method) {
    SourceLoc where = locate_in_lua(nullptr);
    std::string text = source_method_call(where, method);
    plan_record_note_values(x, where, text.empty() ? std::string(method) + "()" : text);
}

int l_item(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    if (x.numel() != 1)
        engine_fail("item: tensor #%lld has %lld elements (shape %s); item() needs exactly one",
                    static_cast<long long>(x.id()), static_cast<long long>(x.numel()), x.shape().str().c_str());
    if (plan_recording()) note_values_read(x, "item");
    push_element(L, value_to_host(x.value()), 0);
    return 1;
}

void push_nested(lua_State* L, const Value& v, int dim, int64_t offset) {
    if (dim == v.shape.ndim) {
        push_element(L, v, offset);
        return;
    }
    int64_t stride = 1;
    for (int i = dim + 1; i < v.shape.ndim; ++i) stride *= v.shape.dims[i];
    lua_createtable(L, static_cast<int>(v.shape.dims[dim]), 0);
    for (int64_t i = 0; i < v.shape.dims[dim]; ++i) {
        push_nested(L, v, dim + 1, offset + i * stride);
        lua_rawseti(L, -2, i + 1);
    }
}

int l_totable(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    if (plan_recording()) note_values_read(x, "totable");
    push_nested(L, value_to_host(x.value()), 0, 0);   // one host copy for a device tensor
    return 1;
}

// a < b and a <= b (also a > b, a >= b, which Lua turns around): one-element tensors or numbers,
// a boolean. While freezing, the truth is a guard (it may decide an if).
int compare_scalars(lua_State* L, CompareOp op) {
    Tensor* a = test_tensor(L, 1);
    Tensor* b = test_tensor(L, 2);
    const char* symbol = op == COMPARE_LT ? "<" : "<=";
    auto scalar = [&](int idx, Tensor* t) {
        if (!t) return check_number(L, idx, "operand");
        if (t->numel() != 1)
            engine_fail("compare: tensor #%lld has %lld elements; %s needs one (use lt/le/gt/ge for elementwise "
                        "comparisons)",
                        static_cast<long long>(t->id()), static_cast<long long>(t->numel()), symbol);
        return value_get(value_to_host(t->value()), 0);
    };
    double x = scalar(1, a), y = scalar(2, b);
    bool truth = op == COMPARE_LT ? x < y : x <= y;
    if (plan_recording()) {
        SourceLoc where = locate_in_lua(nullptr);
        // As written on the line (`b:norm() > 1000`; Lua calls that 1000 < b:norm()); else the
        // tensor first, with the operator turned as Lua turned it.
        std::string text = source_comparison(where);
        if (text.empty()) {
            auto side = [&](Tensor* t, double v) {
                if (t) return "#" + std::to_string(t->id());
                char buffer[32];
                snprintf(buffer, sizeof buffer, "%.6g", v);
                return std::string(buffer);
            };
            if (a) text = side(a, x) + " " + symbol + " " + side(b, y);
            else text = side(b, y) + (op == COMPARE_LT ? " > " : " >= ") + side(a, x);
            std::string line = where.file >= 0 ? source_line_text(source_file_name(where.file), where.line) : "";
            if (!line.empty()) text += " in `" + line + "`";   // a line with several comparisons
        }
        Tensor* subject = a ? a : b;
        Tensor* other = a ? b : nullptr;
        plan_record_note_compare(*subject, op, a == nullptr, other, a ? y : x, truth, where, text);
    }
    lua_pushboolean(L, truth);
    return 1;
}

int l_less(lua_State* L) { return compare_scalars(L, COMPARE_LT); }
int l_less_equal(lua_State* L) { return compare_scalars(L, COMPARE_LE); }

// ============================================================================================
// [SECTION] to tensors

// x converted to `dtype`; x itself (argument 1) when it has that dtype already, as PyTorch's x.to().
int push_converted(lua_State* L, const Tensor& x, DType dtype) {
    if (dtype != x.dtype()) return push_tensor(L, ops::to(x, dtype));
    lua_pushvalue(L, 1);
    return 1;
}

// x:to(dtype), x:to(device), x:to(device, dtype), x:to{dtype = ..., device = ...}, x:to(other_tensor)
// (other's dtype and device). x itself when nothing changes, as PyTorch's x.to(); a move between
// devices is the to_device op, recorded (its gradient is the copy back).
int l_to(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    DType dtype = x.dtype();
    Device device = x.value().device();
    int top = lua_gettop(L);
    if (top < 2) arg_fail(2, "expected a dtype, a device, a tensor or {dtype = ..., device = ...}");
    for (int i = 2; i <= top; ++i) {
        Device named;
        if (Tensor* other = test_tensor(L, i)) {
            dtype = other->dtype();
            device = other->value().device();
        } else if (lua_istable(L, i)) {
            CreateOptions options = options_from_arg(L, i, dtype, device);
            if (options.requires_grad) arg_fail(i, "to does not take requires_grad (use x:requires_grad_())");
            dtype = options.dtype;
            device = options.device;
        } else if (lua_type(L, i) == LUA_TSTRING && device_parse(lua_tostring(L, i), &named)) {
            device = named;
        } else if (lua_type(L, i) != LUA_TSTRING || !dtype_parse(lua_tostring(L, i), &dtype)) {
            arg_fail(i, "expected a dtype (float32, float64, int64) or a device (cpu, cuda), got %s",
                     lua_type(L, i) == LUA_TSTRING ? lua_tostring(L, i) : type_name_of(L, i));
        }
    }
    if (device == x.value().device()) return push_converted(L, x, dtype);
    Tensor moved = ops::to_device(x, device);
    return push_tensor(L, dtype == moved.dtype() ? moved : ops::to(moved, dtype));
}

// x:cpu() and x:cuda(): x on that device (x itself when it is there already).
int move_to(lua_State* L, Device device, const char* name) {
    Tensor& x = check_tensor(L, 1);
    if (lua_gettop(L) > 1) arg_fail(2, "%s takes only the tensor, got %s", name, type_name_of(L, 2));
    if (x.value().device() == device) {
        lua_pushvalue(L, 1);
        return 1;
    }
    return push_tensor(L, ops::to_device(x, device));
}
int l_cpu(lua_State* L) { return move_to(L, DEVICE_CPU, "cpu"); }
int l_cuda(lua_State* L) { return move_to(L, DEVICE_CUDA, "cuda"); }

// torch.set_default_device(device): where creation functions make tensors when not told
// (PyTorch 2's); torch.get_default_device() reads it.
int l_set_default_device(lua_State* L) {
    Device device = device_from_arg(L, 1, 1);
    if (device != DEVICE_CPU) cuda_require("set_default_device");
    bindings_state.default_device = device;
    return 0;
}
int l_get_default_device(lua_State* L) {
    lua_pushstring(L, device_name(bindings_state.default_device));
    return 1;
}

// torch.device("cpu"): the device's name, as dtypes are their names (t.device == torch.device("cpu")).
int l_device(lua_State* L) {
    lua_pushstring(L, device_name(device_from_arg(L, 1, 1)));
    return 1;
}

int convert(lua_State* L, DType dtype) { return push_converted(L, check_tensor(L, 1), dtype); }

int l_float(lua_State* L) { return convert(L, DTYPE_F32); }
int l_double(lua_State* L) { return convert(L, DTYPE_F64); }
int l_long(lua_State* L) { return convert(L, DTYPE_I64); }

// Conveniences PyTorch users reach for.
int l_type_as(lua_State* L) { return push_converted(L, check_tensor(L, 1), check_tensor(L, 2).dtype()); }
int l_int(lua_State* L) { return push_converted(L, check_tensor(L, 1), DTYPE_I64); }   // no int32: int64
// x:bool(): 1 where x is non-zero, else 0, in float32 (there is no bool dtype; masks take any dtype)
int l_bool(lua_State* L) {
    Tensor& x = check_tensor(L, 1);
    return push_tensor(L, ops::to(ops::compare_scalar(OP_ne, x, 0), DTYPE_F32));
}

}  // namespace

// ============================================================================================
// [SECTION] tables

namespace tdlua {

const Binding conversion_method_only[] = {
    {"item", l_item}, {"totable", l_totable}, {"tolist", l_totable}, {"to", l_to, "dtype device"}, {"cpu", l_cpu}, {"cuda", l_cuda},
    {"float", l_float}, {"double", l_double}, {"long", l_long}, {"int", l_int}, {"bool", l_bool}, {"type_as", l_type_as},
    {nullptr, nullptr},
};

const Binding conversion_torch_only[] = {
    {"device", l_device}, {"set_default_device", l_set_default_device}, {"get_default_device", l_get_default_device},
    {nullptr, nullptr},
};

// a < b is "compare" in errors, as a <= b (and a > b, a >= b, which Lua turns around).
const Binding conversion_metamethods[] = {
    {"__lt", l_less, nullptr, "compare"}, {"__le", l_less_equal, nullptr, "compare"},
    {nullptr, nullptr},
};

}  // namespace tdlua
