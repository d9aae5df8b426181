// lua_gradcheck.cpp: torch.autograd.gradcheck and torch.autograd.numerical_jacobian, PyTorch's
// gradient check (torch.autograd.gradcheck, its get_numerical_jacobian) for Lua functions.
//
//   local x = torch.randn(3, 4, {dtype = torch.float64, requires_grad = true})
//   torch.autograd.gradcheck(function(x) return x:tanh() end, {x})      -- true, or an error
//
// The numerical Jacobian is made of central differences (engine/core/gradcheck.h): each element of
// each input that requires grad is moved by +-eps in place and the function called again, with
// autograd off. The analytical one row by row: one backward pass per output element, seeded with
// a one-hot gradient, capturing the inputs' gradients (as torch.autograd.grad). Both are compared
// element by element: |analytical - numerical| <= atol + rtol * |numerical|.
//
// [SECTION] options, the call, the inputs checked
// [SECTION] the Jacobians and the budget
// [SECTION] torch.autograd.gradcheck, torch.autograd.numerical_jacobian
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gradcheck.h"
#include "lua_tensor.h"
#include "tapedeck_lua.h"

using namespace td;
using namespace tdlua;

namespace {

// ============================================================================================
// [SECTION] options, the call, the inputs checked

struct Options {
    double eps = 1e-6;
    GradcheckTolerance tolerance;
    bool raise_exception = true;
    int64_t max_evaluations = GRADCHECK_MAX_EVALUATIONS;
};

const char GRADCHECK_OPTIONS[] = "eps atol rtol raise_exception max_evaluations";
const char JACOBIAN_OPTIONS[] = "eps max_evaluations";

// {eps =, atol =, rtol =, raise_exception =, max_evaluations =} at idx (nil: the defaults); a key
// the function does not take is an error naming it (options_check).
Options options_from(lua_State* L, int idx, bool jacobian_only) {
    Options o;
    if (lua_isnoneornil(L, idx)) return o;
    if (!lua_istable(L, idx)) arg_fail(idx, "options must be a table, got %s", type_name_of(L, idx));
    options_check(L, idx, jacobian_only ? JACOBIAN_OPTIONS : GRADCHECK_OPTIONS);
    auto number = [&](const char* what, double fallback) {
        double v = fallback;
        if (lua_getfield(L, idx, what) != LUA_TNIL) {
            if (!lua_isnumber(L, -1)) arg_fail(idx, "option %s must be a number, got %s", what, type_name_of(L, -1));
            v = lua_tonumber(L, -1);
            if (!(v >= 0)) arg_fail(idx, "option %s must be >= 0, got %g", what, v);
        }
        lua_pop(L, 1);
        return v;
    };
    o.eps = number("eps", o.eps);
    std::string refused = gradcheck_eps_refusal(o.eps);
    if (!refused.empty()) arg_fail(idx, "option %s", refused.c_str());
    o.tolerance.atol = number("atol", o.tolerance.atol);
    o.tolerance.rtol = number("rtol", o.tolerance.rtol);
    o.max_evaluations = static_cast<int64_t>(number("max_evaluations", static_cast<double>(o.max_evaluations)));
    if (o.max_evaluations < 3) arg_fail(idx, "option max_evaluations must be at least 3");
    if (lua_getfield(L, idx, "raise_exception") != LUA_TNIL) o.raise_exception = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return o;
}

// The call being checked: fn at fn_idx with the values of the array at args_idx as arguments.
struct Call {
    lua_State* L;
    int fn_idx, args_idx, n_args;
};

// fn(args...): its results, a tensor or a table (array) of tensors. A Lua error in fn, or a result
// of another kind, is an error (thrown, so that guards restore the grad mode).
std::vector<Tensor> call_function(const Call& c) {
    lua_State* L = c.L;
    int top = lua_gettop(L);
    luaL_checkstack(L, c.n_args + 2, "too many arguments");
    lua_pushvalue(L, c.fn_idx);
    for (int i = 1; i <= c.n_args; ++i) lua_rawgeti(L, c.args_idx, i);
    if (lua_pcall(L, c.n_args, 1, 0) != LUA_OK) {
        std::string message = lua_tostring(L, -1) ? lua_tostring(L, -1) : "an error object that is not a string";
        lua_settop(L, top);
        tapedeck_set_current_state(L);
        engine_fail("gradcheck: the function failed: %s", message.c_str());
    }
    tapedeck_set_current_state(L);
    std::vector<Tensor> outputs;
    if (Tensor* t = test_tensor(L, -1)) {
        outputs.push_back(*t);
    } else if (lua_istable(L, -1)) {
        lua_Integer n = luaL_len(L, -1);
        for (lua_Integer i = 1; i <= n; ++i) {
            lua_geti(L, -1, i);
            Tensor* t = test_tensor(L, -1);
            if (!t) {
                std::string kind = type_name_of(L, -1);
                lua_settop(L, top);
                engine_fail("gradcheck: the function's result %lld is a %s; it must return a tensor or a table of tensors",
                            static_cast<long long>(i), kind.c_str());
            }
            outputs.push_back(*t);
            lua_pop(L, 1);
        }
    }
    if (outputs.empty()) {
        std::string kind = type_name_of(L, -1);
        lua_settop(L, top);
        engine_fail("gradcheck: the function returned a %s; it must return a tensor or a table of tensors", kind.c_str());
    }
    lua_settop(L, top);
    return outputs;
}

// While gradcheck runs, the debugger (the global `dbg`, when tapedeck's is attached) is detached:
// the check's own calls of fn and its backward passes, hundreds of them, do not stop at the
// user's breakpoints. Attached again however the check ends.
struct DebuggerDetached {
    lua_State* L;
    bool was_attached = false;

    // Calls dbg.<name>() and returns its first result as a boolean (false when there is no dbg).
    static bool call_dbg(lua_State* L, const char* name) {
        int top = lua_gettop(L);
        bool result = false;
        if (lua_getglobal(L, "dbg") == LUA_TTABLE && lua_getfield(L, -1, name) == LUA_TFUNCTION &&
            lua_pcall(L, 0, 1, 0) == LUA_OK)
            result = lua_toboolean(L, -1);
        lua_settop(L, top);
        tapedeck_set_current_state(L);
        return result;
    }
    explicit DebuggerDetached(lua_State* state) : L(state) {
        was_attached = call_dbg(L, "attached");
        if (was_attached) call_dbg(L, "detach");
    }
    ~DebuggerDetached() {
        if (was_attached) call_dbg(L, "attach");
    }
};

// An input that requires grad: its position in the inputs (0-based) and the tensor.
struct Checked {
    int position;
    Tensor tensor;
};

// Reads fn (slot 1) and inputs (slot 2) into a Call whose argument array sits at the top of the
// stack, and finds the inputs that require grad (an error when there is none, as PyTorch's).
Call read_call(lua_State* L, std::vector<Checked>& wrt) {
    if (!lua_isfunction(L, 1) && !luaL_getmetafield(L, 1, "__call"))
        arg_fail(1, "fn must be a function (or callable), got %s", type_name_of(L, 1));
    lua_settop(L, 3);
    Call c{L, 1, 0, 0};
    if (test_tensor(L, 2)) {
        lua_createtable(L, 1, 0);
        lua_pushvalue(L, 2);
        lua_rawseti(L, -2, 1);
    } else if (lua_istable(L, 2)) {
        lua_pushvalue(L, 2);
    } else {
        arg_fail(2, "inputs must be a tensor or a table of tensors (and other values), got %s", type_name_of(L, 2));
    }
    c.args_idx = lua_gettop(L);
    c.n_args = static_cast<int>(luaL_len(L, c.args_idx));
    for (int i = 1; i <= c.n_args; ++i) {
        lua_rawgeti(L, c.args_idx, i);
        Tensor* t = test_tensor(L, -1);
        if (t && t->requires_grad()) wrt.push_back({i - 1, *t});
        lua_pop(L, 1);
    }
    if (wrt.empty())
        arg_fail(2, "gradcheck expects at least one input tensor to require grad, but none of them has requires_grad = true");
    for (const Checked& w : wrt) {
        if (w.tensor.value().device() != DEVICE_CPU)
            engine_fail("gradcheck: input %d is on %s; the check perturbs its elements on the CPU (pass x:cpu())",
                        w.position + 1, device_name(w.tensor.value().device()));
        if (w.tensor.dtype() != DTYPE_F64) {
            fflush(stdout);
            fprintf(stderr,
                    "gradcheck: warning: input %d requires grad and is %s, not float64: the check will likely fail "
                    "unless every input is float64 (finite differences need double precision)\n",
                    w.position + 1, dtype_name(w.tensor.dtype()));
            fflush(stderr);
        }
    }
    if (engine_backward_pass())
        engine_fail("gradcheck: a backward pass is paused at a debugger stop; the analytical gradients need passes of "
                    "their own: call it after that pass ends (:continue), or use :gradcheck at the stop");
    return c;
}

// ============================================================================================
// [SECTION] the Jacobians and the budget

// The numerical Jacobian columns of input w, for its elements `columns`: column[c] holds
// d (every float output element) / d element columns[c]. Autograd is off meanwhile.
std::vector<std::vector<double>> numeric_columns(const Call& c, const Checked& w, const std::vector<int64_t>& columns,
                                                 double eps) {
    NoGradGuard no_grad;
    GradcheckEvaluate f = [&]() {
        std::vector<Tensor> outputs = call_function(c);
        std::vector<Value> values;
        for (const Tensor& t : outputs) values.push_back(t.value());
        return values;
    };
    std::vector<std::vector<double>> result;
    for (int64_t k : columns) result.push_back(gradcheck_numeric_column(f, w.tensor.value(), k, eps));
    return result;
}

// A one-hot gradient for `like`: 1 at element r, 0 elsewhere; a leaf of its own.
Tensor one_hot(const Tensor& like, int64_t r) {
    Value v = value_new(like.shape(), like.dtype(), DEVICE_CPU);
    for (int64_t i = 0; i < v.numel(); ++i) value_set(v, i, i == r ? 1 : 0);
    v = value_to_device(v, like.value().device());
    return tape_record_prepared(OP_tensor, OpAttrs(), nullptr, nullptr, 0, &v, 1, PHASE_FORWARD, SourceLoc());
}

// How many elements of each input and of each output a check can afford within max_evaluations
// (two calls per input element, one backward pass per output element) and a bounded Jacobian.
void budget(const std::vector<int64_t>& in_numel, const std::vector<int64_t>& out_numel, int64_t max_evaluations,
            std::vector<int64_t>& in_limit, std::vector<int64_t>& out_limit) {
    double total_in = 0, total_out = 0;
    for (int64_t n : in_numel) total_in += static_cast<double>(n);
    for (int64_t n : out_numel) total_out += static_cast<double>(n);
    double cost = 2 * total_in + total_out;
    double scale = cost > static_cast<double>(max_evaluations) ? static_cast<double>(max_evaluations) / cost : 1;
    constexpr double MAX_ENTRIES = 1e7;   // the analytical Jacobian kept: 80 MB
    double entries = total_in * total_out * scale * scale;
    if (entries > MAX_ENTRIES) scale *= std::sqrt(MAX_ENTRIES / entries);
    auto limit = [&](int64_t n) { return scale >= 1 ? n : std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(n) * scale)); };
    in_limit.clear();
    out_limit.clear();
    for (int64_t n : in_numel) in_limit.push_back(limit(n));
    for (int64_t n : out_numel) out_limit.push_back(limit(n));
}

void warn_sample(const char* what, int index, int64_t checked, int64_t numel, int64_t max_evaluations) {
    if (checked >= numel) return;
    fflush(stdout);
    fprintf(stderr,
            "gradcheck: warning: checking a sample of %lld of the %lld elements of %s %d (the whole check would take "
            "more than %lld evaluations; raise {max_evaluations = N} to check more)\n",
            static_cast<long long>(checked), static_cast<long long>(numel), what, index, static_cast<long long>(max_evaluations));
    fflush(stderr);
}

// ============================================================================================
// [SECTION] torch.autograd.gradcheck, torch.autograd.numerical_jacobian

std::string number_text(double x) {
    char buffer[64];
    snprintf(buffer, sizeof buffer, "%.6g", x);
    return buffer;
}

// What the analytical half of a check leaves for the numerical half: the elements checked (the
// columns of each input, the rows of each floating-point output) and the analytical derivatives.
struct Analytic {
    std::vector<int> float_outputs;      // indices into the function's outputs of the floating-point ones
    std::vector<Shape> out_shapes;       // of the floating-point outputs
    std::vector<size_t> out_offset;      // where output j's elements start in a numerical column
    size_t out_total = 0;                // the elements of all floating-point outputs
    std::vector<int64_t> in_numel;
    std::vector<std::vector<int64_t>> columns, rows;
    // jacobian[j][i][r * columns[i].size() + c]: d output j's row r / d input i's column c.
    std::vector<std::vector<std::vector<double>>> jacobian;
};

// The elements a check looks at, within o's budget (budget()): all, or a sample, with a warning.
void choose_elements(const std::vector<Checked>& wrt, const Options& o, Analytic& a) {
    std::vector<int64_t> out_numel, in_limit, out_limit;
    for (const Checked& w : wrt) a.in_numel.push_back(w.tensor.numel());
    for (const Shape& shape : a.out_shapes) out_numel.push_back(shape.numel());
    budget(a.in_numel, out_numel, o.max_evaluations, in_limit, out_limit);
    for (size_t i = 0; i < wrt.size(); ++i) {
        a.columns.push_back(gradcheck_sample(a.in_numel[i], in_limit[i]));
        warn_sample("input", wrt[i].position + 1, static_cast<int64_t>(a.columns.back().size()), a.in_numel[i], o.max_evaluations);
    }
    for (size_t j = 0; j < a.float_outputs.size(); ++j) {
        a.rows.push_back(gradcheck_sample(out_numel[j], out_limit[j]));
        warn_sample("output", a.float_outputs[j] + 1, static_cast<int64_t>(a.rows.back().size()), out_numel[j], o.max_evaluations);
    }
}

// One output's block of rows of the analytical Jacobian (jacobian[i] for each input i): for each
// checked element of `out`, one backward pass seeded with a one-hot gradient, capturing the
// inputs' gradients (as torch.autograd.grad) at their checked columns.
void fill_analytic_rows(const Tensor& out, const std::vector<Tensor>& inputs, const std::vector<int64_t>& rows,
                        const std::vector<std::vector<int64_t>>& columns, std::vector<std::vector<double>>& jacobian) {
    jacobian.resize(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) jacobian[i].assign(rows.size() * columns[i].size(), 0.0);
    if (!out.requires_grad()) return;   // no graph: every analytical derivative is 0
    for (size_t r = 0; r < rows.size(); ++r) {
        Tensor seed = one_hot(out, rows[r]);
        std::vector<Tensor> captured;
        BackwardOptions options;
        options.capture = &inputs;
        options.captured = &captured;
        options.retain_graph = true;   // one pass per row through the same graph
        backward(out, &seed, options);
        for (size_t i = 0; i < inputs.size(); ++i) {
            if (!captured[i].defined()) continue;
            Value host = value_to_host(captured[i].value());
            for (size_t k = 0; k < columns[i].size(); ++k) jacobian[i][r * columns[i].size() + k] = value_get(host, columns[i][k]);
        }
    }
}

// Calls the function once with autograd on, chooses the elements to check, and fills the
// analytical Jacobian row by row. Its outputs, and their graph, go before the numerical calls.
Analytic analytic_jacobian(const Call& c, const std::vector<Checked>& wrt, const Options& o) {
    Analytic a;
    std::vector<Tensor> outputs;
    {
        NoGradGuard restore;
        set_grad_enabled(true);
        outputs = call_function(c);
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
        if (!dtype_is_float(outputs[i].dtype())) continue;
        a.float_outputs.push_back(static_cast<int>(i));
        a.out_shapes.push_back(outputs[i].shape());
        a.out_offset.push_back(a.out_total);
        a.out_total += static_cast<size_t>(outputs[i].numel());
    }
    choose_elements(wrt, o, a);
    std::vector<Tensor> inputs;
    for (const Checked& w : wrt) inputs.push_back(w.tensor);
    a.jacobian.resize(a.float_outputs.size());
    for (size_t j = 0; j < a.float_outputs.size(); ++j)
        fill_analytic_rows(outputs[static_cast<size_t>(a.float_outputs[j])], inputs, a.rows[j], a.columns, a.jacobian[j]);
    return a;
}

// The numerical Jacobian, column by column, compared with the analytical one block by block:
// compared[j][i] for output j and input i.
std::vector<std::vector<GradcheckComparison>> compare_numeric(const Call& c, const std::vector<Checked>& wrt,
                                                              const Analytic& a, const Options& o) {
    std::vector<std::vector<GradcheckComparison>> compared(a.float_outputs.size(), std::vector<GradcheckComparison>(wrt.size()));
    for (size_t i = 0; i < wrt.size(); ++i) {
        const std::vector<int64_t>& columns = a.columns[i];
        std::vector<std::vector<double>> numeric = numeric_columns(c, wrt[i], columns, o.eps);
        for (size_t k = 0; k < columns.size(); ++k) {
            if (numeric[k].size() != a.out_total)
                engine_fail("gradcheck: the function's outputs changed size between calls (%zu elements, then %zu)", a.out_total,
                            numeric[k].size());
            for (size_t j = 0; j < a.float_outputs.size(); ++j)
                for (size_t r = 0; r < a.rows[j].size(); ++r)
                    compared[j][i].add(a.rows[j][r] * a.in_numel[i] + columns[k], a.jacobian[j][i][r * columns.size() + k],
                                       numeric[k][a.out_offset[j] + static_cast<size_t>(a.rows[j][r])], o.tolerance);
        }
    }
    return compared;
}

// What gradcheck says of a block (output j, input i) that did not match: its worst element.
std::string mismatch_text(const Analytic& a, const std::vector<Checked>& wrt, size_t j, size_t i,
                          const GradcheckComparison& cmp, const Options& o) {
    int64_t r = cmp.worst / a.in_numel[i], k = cmp.worst % a.in_numel[i];
    double tolerance = o.tolerance.atol + o.tolerance.rtol * std::fabs(cmp.worst_numeric);
    return "gradcheck: Jacobian mismatch for output " + std::to_string(a.float_outputs[j] + 1) + " with respect to input " +
           std::to_string(wrt[i].position + 1) + ": worst at d output" + gradcheck_index_text(a.out_shapes[j], r) +
           " / d input" + gradcheck_index_text(wrt[i].tensor.shape(), k) + ": analytical " + number_text(cmp.worst_analytic) +
           ", numerical " + number_text(cmp.worst_numeric) + " (|difference| " +
           number_text(std::fabs(cmp.worst_analytic - cmp.worst_numeric)) + " > atol + rtol * |numerical| = " +
           number_text(tolerance) + "); " + std::to_string(cmp.mismatched) + " of " + std::to_string(cmp.checked) +
           " elements differ";
}

// torch.autograd.gradcheck(fn, inputs [, {eps, atol, rtol, raise_exception, max_evaluations}])
int l_gradcheck(lua_State* L) {
    Options o = options_from(L, 3, false);
    std::vector<Checked> wrt;
    Call c = read_call(L, wrt);
    DebuggerDetached quiet(L);
    Analytic a = analytic_jacobian(c, wrt, o);
    std::vector<std::vector<GradcheckComparison>> compared = compare_numeric(c, wrt, a, o);
    for (size_t j = 0; j < compared.size(); ++j) {
        for (size_t i = 0; i < wrt.size(); ++i) {
            if (compared[j][i].ok()) continue;
            std::string message = mismatch_text(a, wrt, j, i, compared[j][i], o);
            if (o.raise_exception) engine_fail("%s", message.c_str());
            lua_pushboolean(L, 0);
            lua_pushstring(L, message.c_str());
            return 2;
        }
    }
    lua_pushboolean(L, 1);
    return 1;
}

// torch.autograd.numerical_jacobian(fn, inputs [, {eps, max_evaluations}]): PyTorch's
// torch.autograd.gradcheck.get_numerical_jacobian: J[i][j], a float64 tensor [numel of input i,
// numel of output j], for each input i that requires grad and each floating-point output j.
int l_numerical_jacobian(lua_State* L) {
    Options o = options_from(L, 3, true);
    std::vector<Checked> wrt;
    Call c = read_call(L, wrt);
    DebuggerDetached quiet(L);
    int64_t total = 0;
    for (const Checked& w : wrt) total += 2 * w.tensor.numel();
    if (total > o.max_evaluations)
        engine_fail("numerical_jacobian: the inputs have %lld elements: %lld calls of the function, more than "
                    "max_evaluations = %lld (raise it, or use gradcheck, which checks a sample)",
                    static_cast<long long>(total / 2), static_cast<long long>(total), static_cast<long long>(o.max_evaluations));
    std::vector<Shape> out_shapes;
    {
        NoGradGuard no_grad;
        for (const Tensor& t : call_function(c))
            if (dtype_is_float(t.dtype())) out_shapes.push_back(t.shape());
    }
    lua_createtable(L, static_cast<int>(wrt.size()), 0);
    for (size_t i = 0; i < wrt.size(); ++i) {
        int64_t n_in = wrt[i].tensor.numel();
        std::vector<int64_t> all = gradcheck_sample(n_in, n_in);
        std::vector<std::vector<double>> numeric = numeric_columns(c, wrt[i], all, o.eps);
        lua_createtable(L, static_cast<int>(out_shapes.size()), 0);
        size_t offset = 0;
        for (size_t j = 0; j < out_shapes.size(); ++j) {
            int64_t n_out = out_shapes[j].numel();
            Value v = value_new(Shape{n_in, n_out}, DTYPE_F64, DEVICE_CPU);
            for (int64_t k = 0; k < n_in; ++k) {
                const std::vector<double>& column = numeric[static_cast<size_t>(k)];
                if (column.size() < offset + static_cast<size_t>(n_out))
                    engine_fail("numerical_jacobian: the function's outputs changed size between calls");
                for (int64_t r = 0; r < n_out; ++r) value_set(v, k * n_out + r, column[offset + static_cast<size_t>(r)]);
            }
            offset += static_cast<size_t>(n_out);
            push_tensor(L, tape_record_prepared(OP_tensor, OpAttrs(), nullptr, nullptr, 0, &v, 1, PHASE_FORWARD, SourceLoc()));
            lua_rawseti(L, -2, static_cast<lua_Integer>(j + 1));
        }
        lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
    return 1;
}

}  // namespace

// Adds gradcheck and numerical_jacobian to the torch.autograd table on top of the stack.
void tapedeck_open_gradcheck(lua_State* L) {
    static const Binding functions[] = {{"gradcheck", l_gradcheck, GRADCHECK_OPTIONS},
                                        {"numerical_jacobian", l_numerical_jacobian, JACOBIAN_OPTIONS},
                                        {nullptr, nullptr}};
    register_bindings(L, functions, "torch.autograd.");
}
