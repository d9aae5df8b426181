// debugger_gradcheck.cpp: :gradcheck at a backward stop. The stopped group's forward node is
// evaluated again in float64 on its own input values, each input element moved by +-eps, and the
// central differences of sum(grad_output * output) are the numerical gradients: a vector-Jacobian
// product with the gradient that arrived. They are compared with the grad_input the recorded rule
// computed (in the tensors' dtype) and with the same rule run again on float64 copies.
//
// Nothing of it reaches the tape the user sees or stops at a breakpoint: an op of the table runs
// its kernel with no node (op_evaluate_untracked); a torch.Function's Lua forward is called on
// float64 copies of its arguments with autograd off, and the float64 rule's nodes are temporary;
// the debugger ignores node events while stopped, and a full collection at the end lets go of
// every node the check made, so the tape's length is what it was.
//
// [SECTION] arguments and refusals
// [SECTION] the function of the group (an op's kernel, or a torch.Function's forward)
// [SECTION] the rule in float64
// [SECTION] the check (a Report)
// [SECTION] the report: printed (:gradcheck) or a Lua table (dbg.gradcheck)
#include <lua.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "debugger.h"
#include "debugger_commands.h"
#include "debugger_internal.h"
#include "function.h"
#include "gradcheck.h"
#include "node_names.h"
#include "tapedeck_lua.h"
#include "lua_util.h"
#include "format.h"

using namespace td;

namespace {
using tdlua::set_number;

// ============================================================================================
// [SECTION] arguments and refusals

void fail(const std::string& message) {
    fflush(stdout);
    fprintf(stderr, ":gradcheck: %s\n", message.c_str());
    fflush(stderr);
}

struct CheckOptions {
    double eps = 1e-6;
    GradcheckTolerance tolerance;   // for float64 gradients; float32 ones get a looser atol (tolerance_for)
    int64_t max_evaluations = GRADCHECK_MAX_EVALUATIONS;
};

// "eps=1e-4 atol=1e-6 rtol=1e-2 max_evaluations=1000", any of them; false (message printed) on bad input.
bool parse_options(const std::string& args, CheckOptions& o) {
    size_t at = 0;
    while (at < args.size()) {
        size_t start = args.find_first_not_of(" \t,", at);
        if (start == std::string::npos) break;
        size_t end = args.find_first_of(" \t,", start);
        std::string word = args.substr(start, end == std::string::npos ? std::string::npos : end - start);
        at = end == std::string::npos ? args.size() : end;
        size_t equals = word.find('=');
        std::string key = word.substr(0, equals);
        char* stop = nullptr;
        double value = equals == std::string::npos ? NAN : strtod(word.c_str() + equals + 1, &stop);
        bool number = equals != std::string::npos && stop && *stop == '\0' && value >= 0 && std::isfinite(value);
        if (!number || (key != "eps" && key != "atol" && key != "rtol" && key != "max_evaluations") ||
            (key == "max_evaluations" && value < 2)) {
            fail("'" + word + "' is not an option: it takes eps=E, atol=A, rtol=R, max_evaluations=N (as in :gradcheck eps=1e-4)");
            return false;
        }
        std::string refused = key == "eps" ? gradcheck_eps_refusal(value) : "";
        if (!refused.empty()) {
            fail(refused);
            return false;
        }
        if (key == "eps") o.eps = value;
        else if (key == "atol") o.tolerance.atol = value;
        else if (key == "rtol") o.tolerance.rtol = value;
        else o.max_evaluations = static_cast<int64_t>(value);
    }
    return true;
}

// "next_h (#10 tanh)", or "#10 tanh" for a node nobody named.
std::string node_text(const Node* node, int output = 0) {
    std::string id = "#" + std::to_string(node->id) + " " + node->shown_op();
    std::string label = node_label(node, output);
    return label[0] == '#' ? id : label + " (" + id + ")";
}

std::string edge_text(const Edge& e) {
    Node* producer = e.node() ? e.node() : tape_find(e.id);
    return producer ? node_text(producer, e.output) : "#" + std::to_string(e.id);
}

// Why :gradcheck cannot run at this stop (empty: it can). It works at a backward group's stop.
std::string refusal(const DebugStop* stop) {
    const char* where = "it works at a backward stop, where a node's rule has just computed grad_input (:break bwd OP, "
                        "then backward()); for a function of your own, call torch.autograd.gradcheck(fn, inputs)";
    if (!stop) return std::string("not stopped; ") + where;
    if (stop->kind == STOP_POST_MORTEM) return std::string("this is a post-mortem (no gradient was computed here); ") + where;
    if (stop->kind == STOP_LINE) return std::string("this is a line stop (no node ran here); ") + where;
    if (stop->kind == STOP_NODE && stop->phase == PHASE_FORWARD)
        return "this is a forward stop (" + node_text(stop->node.get()) + " has run; no gradient exists yet); " + where;
    if (stop->kind == STOP_NODE) {
        Node* group = stop->node->group ? tape_find(stop->node->group) : nullptr;
        return "this is a node stop: one op inside the backward group of " +
               (group ? node_text(group) : "#" + std::to_string(stop->node->group)) +
               ", whose grad_input is not complete yet; :step to that group's stop (after its whole rule ran) and :gradcheck there";
    }
    const BackwardPass* pass = stop->pass;
    if (!pass || pass->group.node != stop->node.get() || !pass->group.grad_inputs)
        return "this backward stop has no gradients to check";
    return "";
}

// Why the group's forward node cannot be evaluated again on its recorded inputs (empty: it can).
std::string node_refusal(const Node* node) {
    uint32_t flags = node->info().flags;
    if (flags & OPF_INPLACE)
        return "#" + std::to_string(node->id) + " " + node->name() +
               " is an in-place op: it overwrote its input, so its input values are gone (check the out-of-place op)";
    if ((flags & OPF_CUSTOM) && node->op != OP_function) return std::string(node->name()) + " is not a forward node";
    for (int i = 0; i < node->inputs.size(); ++i) {
        const Edge& e = node->inputs[i];
        if (value_freed(e.value())) return "input " + std::to_string(i + 1) + " of #" + std::to_string(node->id) + " was " + VALUE_FREED_TEXT;
        if (e.value().storage->version != e.version)
            return "input " + std::to_string(i + 1) + " (" + edge_text(e) + ") was changed in place after #" +
                   std::to_string(node->id) + " read it (version " + std::to_string(e.version) + ", now " +
                   std::to_string(e.value().storage->version) + "): its values are not the ones the forward used";
    }
    return "";
}

// A float64 (or, for int64, an int64) contiguous CPU copy of v.
Value copy_for_check(const Value& v) {
    Value host = value_to_host(v);
    Value copy = value_new(v.shape, dtype_is_float(v.dtype) ? DTYPE_F64 : v.dtype, DEVICE_CPU);
    for (int64_t i = 0; i < copy.numel(); ++i) value_set(copy, i, value_get(host, i));
    return copy;
}

Tensor leaf_of(const Value& v) {
    return tape_record_prepared(OP_tensor, OpAttrs(), nullptr, nullptr, 0, &v, 1, PHASE_FORWARD, SourceLoc());
}

// ============================================================================================
// [SECTION] the function of the group (an op's kernel, or a torch.Function's forward)

// The attributes the float64 evaluation runs with: `to`'s target dtype becomes float64.
OpAttrs attrs_for_check(const Node* node) {
    OpAttrs attrs = node->attrs();
    attrs.init_values = nullptr;
    if (node->op == OP_to && dtype_is_float(attrs.dtype)) attrs.dtype = DTYPE_F64;
    return attrs;
}

// A torch.Function's call with float64 tensors in place of its tensor arguments: apply and the
// argument list sit in registry references while the check runs.
struct FunctionCall {
    lua_State* L = nullptr;
    int apply_ref = LUA_NOREF;
    int args_ref = LUA_NOREF;   // {n = N, ...}: the call's arguments, tensors replaced
    std::string name;

    ~FunctionCall() {
        if (!L) return;
        luaL_unref(L, LUA_REGISTRYINDEX, apply_ref);
        luaL_unref(L, LUA_REGISTRYINDEX, args_ref);
    }

    // Prepares the call of the function `node` applied, with `tensors` for its tensor arguments in
    // order. False when the node's function is not a Lua torch.Function.
    bool prepare(lua_State* state, const Node* node, const std::vector<Tensor>& tensors) {
        if (!tapedeck_push_function_call(state, *node->custom())) return false;
        L = state;
        name = node->custom()->name;
        int args = lua_gettop(L);
        lua_getfield(L, args, "n");
        int n = static_cast<int>(lua_tointeger(L, -1));
        lua_pop(L, 1);
        lua_createtable(L, n, 1);
        size_t next = 0;
        for (int i = 1; i <= n; ++i) {
            lua_rawgeti(L, args, i);
            if (tapedeck_test_tensor(L, -1) && next < tensors.size()) {
                lua_pop(L, 1);
                tapedeck_push_tensor(L, tensors[next++]);
            }
            lua_rawseti(L, -2, i);
        }
        lua_pushinteger(L, n);
        lua_setfield(L, -2, "n");
        args_ref = luaL_ref(L, LUA_REGISTRYINDEX);
        lua_pop(L, 1);   // the original arguments
        apply_ref = luaL_ref(L, LUA_REGISTRYINDEX);
        return true;
    }

    // apply(arguments...) with autograd as it is now: its tensor results (an error on a Lua error).
    std::vector<Tensor> call() const {
        int top = lua_gettop(L);
        lua_rawgeti(L, LUA_REGISTRYINDEX, apply_ref);
        lua_rawgeti(L, LUA_REGISTRYINDEX, args_ref);
        int n = tapedeck_unpack_call_args(L);
        if (lua_pcall(L, n, LUA_MULTRET, 0) != LUA_OK) {
            std::string message = lua_tostring(L, -1) ? lua_tostring(L, -1) : "error";
            lua_settop(L, top);
            tapedeck_set_current_state(L);
            engine_fail("%s on float64 copies of its arguments: %s", name.c_str(), message.c_str());
        }
        tapedeck_set_current_state(L);
        std::vector<Tensor> results;
        for (int i = top + 1; i <= lua_gettop(L); ++i)
            if (Tensor* t = tapedeck_test_tensor(L, i)) results.push_back(*t);
        lua_settop(L, top);
        return results;
    }
};

// ============================================================================================
// [SECTION] the rule in float64

// The forward node's rule run again on float64 copies: a temporary forward node made from leaves
// holding `inputs` (those in `wanted` require grad), then its backward rule with float64 copies of
// `grad_outputs`, as backward() would call it. Returns grad_input (undefined where the rule gave
// none); its nodes die with the returned tensors.
std::vector<Tensor> rule_in_float64(const Node* node, const FunctionCall* function, const std::vector<Value>& inputs,
                                    const std::vector<bool>& wanted, const std::vector<Value>& grad_outputs) {
    std::vector<Tensor> leaves;
    for (size_t i = 0; i < inputs.size(); ++i) {
        leaves.push_back(leaf_of(inputs[i]));
        if (wanted[i] && dtype_is_float(inputs[i].dtype)) node_set_requires_grad(leaves.back().node.get(), 0, true);
    }
    Tensor y;
    {
        NoGradGuard restore;
        set_grad_enabled(true);
        if (function) {
            FunctionCall again;
            if (!again.prepare(function->L, node, leaves)) engine_fail("the function cannot be called again");
            std::vector<Tensor> results = again.call();
            if (results.empty()) engine_fail("%s returned no tensor", function->name.c_str());
            y = results[0];
        } else {
            std::vector<const Tensor*> pointers;
            for (const Tensor& t : leaves) pointers.push_back(&t);
            y = op_call(node->op, pointers.data(), static_cast<int>(pointers.size()), attrs_for_check(node));
        }
    }
    Node* forward = y.node.get();
    if (!forward->tracks_grad) engine_fail("the float64 copy recorded no graph");
    std::vector<Tensor> grad_output(static_cast<size_t>(forward->outputs.size()));
    for (size_t j = 0; j < grad_output.size() && j < grad_outputs.size(); ++j)
        if (grad_outputs[j].storage) grad_output[j] = leaf_of(grad_outputs[j]);
    std::vector<Tensor> grad_input(inputs.size());
    struct Context {   // backward() runs a rule with autograd off, its group set
        RecordingContext saved = engine_recording();
        NoGradGuard no_grad;
        ~Context() { engine_recording() = saved; }
    } context;
    engine_recording().group_node = forward;
    BackwardCall call{forward, grad_output.data(), grad_input.data(), nullptr};
    forward->info().backward_rule(call);
    return grad_input;
}

// ============================================================================================
// [SECTION] the check (a Report)

// The tolerance a gradient of `dtype` is judged with: the options' for float64; for float32 (whose
// rule rounds every product) atol grows with the gradient's largest element.
GradcheckTolerance tolerance_for(DType dtype, const CheckOptions& o, double largest) {
    GradcheckTolerance t = o.tolerance;
    if (dtype != DTYPE_F64) t.atol += 1e-4 * largest;
    return t;
}

// The work one evaluation of the node costs, in element operations (a product's multiply-adds).
double evaluation_cost(const Node* node) {
    double cost = 0;
    for (const Edge& e : node->inputs) cost += static_cast<double>(e.value().numel());
    for (const Output& out : node->outputs) cost += static_cast<double>(out.value.numel());
    if ((node->op == OP_mm || node->op == OP_bmm) && node->inputs.size() == 2) {
        const Shape& a = node->inputs[0].value().shape;
        int inner = node->attrs().trans_a ? a.ndim - 2 : a.ndim - 1;
        cost += static_cast<double>(node->outputs[0].value.numel()) * static_cast<double>(a.dims[inner]);
    } else if (node->op == OP_conv2d && node->inputs.size() >= 2) {
        const Shape& w = node->inputs[1].value().shape;
        cost += static_cast<double>(node->outputs[0].value.numel()) * static_cast<double>(w.numel() / std::max<int64_t>(1, w.dims[0]));
    }
    return std::max(cost, 1.0);
}

constexpr double MAX_WORK = 2e8;   // element operations one :gradcheck may spend on evaluations
constexpr double MAX_FUNCTION_CALLS = 1e5;   // calls of a torch.Function's Lua forward (~20 µs each and up)

// What :gradcheck found, per input that received a gradient.
struct InputCheck {
    int input = 0;                  // 0-based
    std::string label;              // "h2h + i2h (#9 add)"
    Shape shape;
    int64_t checked = 0;            // elements compared (all, or a sample)
    int64_t not_finite = 0;         // elements of the sample left out: NaN or ±Inf (a mask's -Inf) has no finite difference
    DType recorded_dtype = DTYPE_F32;
    GradcheckComparison recorded;   // the stop's grad_input
    bool has_rule = false;
    GradcheckComparison rule;       // the rule run again in float64
};

struct Report {
    std::string node;               // "next_h (#10 tanh)"
    std::string math;               // the op's math line, or "its forward and backward"
    std::vector<InputCheck> inputs;
    std::string rule_failed;        // why the float64 rule could not run ("": it ran, or was not needed)
    bool float32 = false;           // some recorded gradient is not float64 (its looser atol applies)
    bool edited = false;            // a grad_input was replaced at a stop
    std::string sample_reason;      // the bound a sample keeps within: "1e+06 evaluations (max_evaluations)"
    int64_t outputs_total = 0;      // float output elements
    int64_t outputs_not_finite = 0; // of those, not finite at the recorded inputs: left out of the sum
    int64_t outputs_not_finite_with_gradient = 0;   // of those, where grad_output is not 0
    bool ok = true;
};

// Which inputs of `node` the stopped group sent a gradient to; an error (thrown) when none.
std::vector<bool> inputs_with_gradient(const Node* node, const BackwardGroup& group) {
    int n_in = node->inputs.size();
    std::vector<bool> wanted(static_cast<size_t>(n_in));
    bool any = false;
    for (int i = 0; i < n_in; ++i) {
        wanted[static_cast<size_t>(i)] = group.grad_inputs[i].defined();
        any = any || group.grad_inputs[i].defined();
    }
    if (!any)
        engine_fail("no gradient goes to any input of %s at this stop (the rule sent none, or grad_input was set to nil): "
                    "nothing to check",
                    node_text(node).c_str());
    return wanted;
}

// grad_output flattened as the numerical columns are (over the float outputs of `first`, one
// evaluation's outputs): the weights of sum(grad_output * output), 0 where no gradient arrived.
// An output element that is not finite at the inputs' own values (a mask's -Inf, a NaN) has no
// finite difference (-Inf - -Inf is NaN): it is left out of the sum, and counted.
struct OutputWeights {
    std::vector<double> weights;
    std::vector<char> used;              // per element: 1 when it is in the sum
    int64_t total = 0;                   // float output elements
    int64_t not_finite = 0;              // of those, left out
    int64_t not_finite_with_gradient = 0;// of those, where grad_output is not 0
};

OutputWeights grad_output_weights(const std::vector<Value>& first, const std::vector<Value>& grad_outputs) {
    OutputWeights w;
    for (size_t j = 0; j < first.size(); ++j) {
        if (!dtype_is_float(first[j].dtype)) continue;
        Value host = value_to_host(first[j]);
        int64_t n = host.numel();
        bool has = j < grad_outputs.size() && grad_outputs[j].storage && grad_outputs[j].numel() == n;
        for (int64_t e = 0; e < n; ++e) {
            double weight = has ? value_get(grad_outputs[j], e) : 0.0;
            bool finite = std::isfinite(value_get(host, e));
            w.weights.push_back(weight);
            w.used.push_back(finite ? 1 : 0);
            ++w.total;
            if (!finite) ++w.not_finite, w.not_finite_with_gradient += weight != 0;
        }
    }
    return w;
}

// The share of the wanted inputs' elements checked: 1 (all), or a sample within the budget (the
// options' max_evaluations, MAX_WORK, and for a torch.Function MAX_FUNCTION_CALLS); the bound
// that applies goes to report.sample_reason.
double sample_share(const Node* node, const std::vector<Value>& inputs, const std::vector<bool>& wanted, bool custom,
                    const CheckOptions& o, Report& report) {
    double per_element = 2 * evaluation_cost(node);
    int64_t total = 0;
    for (size_t i = 0; i < inputs.size(); ++i)
        if (wanted[i]) total += inputs[i].numel();
    double affordable = static_cast<double>(o.max_evaluations) / 2;
    report.sample_reason = number_text(static_cast<double>(o.max_evaluations), 6) + " evaluations (max_evaluations)";
    if (MAX_WORK / per_element < affordable) {
        affordable = MAX_WORK / per_element;
        report.sample_reason = number_text(MAX_WORK, 6) + " element operations of " + node->name();
    }
    if (custom && MAX_FUNCTION_CALLS / 2 < affordable) {
        affordable = MAX_FUNCTION_CALLS / 2;
        report.sample_reason = number_text(MAX_FUNCTION_CALLS, 6) + " calls of " + node->name() + "'s forward";
    }
    return static_cast<double>(total) > affordable ? affordable / static_cast<double>(total) : 1.0;
}

// What a check compares one input with: the function evaluated, the weights of its outputs, and
// the share of elements checked.
struct Numerics {
    const GradcheckEvaluate& evaluate;
    const OutputWeights& weights;
    double share;
};

// Check input `i` (its float64 copy `x`, perturbed in place): the numerical gradient of a sample
// of its finite elements against the recorded grad_input and, when it ran, the float64 rule's.
InputCheck check_input(const Node* node, int i, Value& x, const Numerics& numerics, const Tensor& recorded,
                       const std::vector<Tensor>& rerun, const CheckOptions& o) {
    int64_t numel = x.numel();
    int64_t limit = numerics.share >= 1 ? numel : std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(numel) * numerics.share));
    std::vector<int64_t> sampled = gradcheck_sample(numel, limit), elements;
    for (int64_t k : sampled)
        if (std::isfinite(value_get(x, k))) elements.push_back(k);
    std::vector<double> numeric;
    double largest = 0;
    for (int64_t k : elements) {
        std::vector<double> column = gradcheck_numeric_column(numerics.evaluate, x, k, o.eps);
        const OutputWeights& w = numerics.weights;
        if (column.size() != w.weights.size()) engine_fail("the outputs changed size between evaluations");
        double sum = 0;
        for (size_t e = 0; e < column.size(); ++e)
            if (w.used[e]) sum += w.weights[e] * column[e];
        numeric.push_back(sum);
        largest = std::max(largest, std::fabs(sum));
    }
    InputCheck line;
    line.input = i;
    line.label = edge_text(node->inputs[i]);
    line.shape = x.shape;
    line.checked = static_cast<int64_t>(elements.size());
    line.not_finite = static_cast<int64_t>(sampled.size() - elements.size());
    line.recorded_dtype = recorded.dtype();
    Value recorded_host = value_to_host(recorded.value());
    GradcheckTolerance tolerance = tolerance_for(recorded.dtype(), o, largest);
    line.has_rule = static_cast<size_t>(i) < rerun.size() && rerun[static_cast<size_t>(i)].defined();
    Value rerun_host = line.has_rule ? value_to_host(rerun[static_cast<size_t>(i)].value()) : Value();
    for (size_t p = 0; p < elements.size(); ++p) {
        line.recorded.add(elements[p], value_get(recorded_host, elements[p]), numeric[p], tolerance);
        if (line.has_rule) line.rule.add(elements[p], value_get(rerun_host, elements[p]), numeric[p], o.tolerance);
    }
    return line;
}

// Checks the group of `stop` (refusal() passed). An error (thrown) when it cannot be evaluated.
Report run_check(lua_State* L, const DebugStop& stop, const CheckOptions& o) {
    Report report;
    Node* node = stop.node.get();
    const BackwardGroup& group = stop.pass->group;
    int n_in = node->inputs.size(), n_out = node->outputs.size();
    std::vector<bool> wanted = inputs_with_gradient(node, group);
    std::string refused = node_refusal(node);
    if (!refused.empty()) engine_fail("%s", refused.c_str());
    std::vector<Value> inputs;
    for (const Edge& e : node->inputs) inputs.push_back(copy_for_check(e.value()));
    std::vector<Value> grad_outputs(static_cast<size_t>(n_out));
    for (int j = 0; j < n_out; ++j)
        if (group.grad_outputs[j].defined() && dtype_is_float(group.grad_outputs[j].dtype()))
            grad_outputs[static_cast<size_t>(j)] = copy_for_check(group.grad_outputs[j].value());

    // The function: the op's kernel, or the torch.Function's forward on float64 tensors that share
    // the storages of `inputs` (which the differences perturb in place).
    FunctionCall function;
    bool custom = node->op == OP_function;
    std::vector<Tensor> input_tensors;
    if (custom) {
        for (const Value& v : inputs) input_tensors.push_back(leaf_of(v));
        if (!function.prepare(L, node, input_tensors))
            engine_fail("%s is not a Lua torch.Function: its forward cannot be called again", node->name());
    }
    OpAttrs attrs = attrs_for_check(node);
    GradcheckEvaluate evaluate = [&]() {
        if (!custom) return op_evaluate_untracked(node->op, attrs, inputs);
        NoGradGuard no_grad;
        std::vector<Value> values;
        for (const Tensor& t : function.call()) values.push_back(t.value());
        return values;
    };
    OutputWeights weights = grad_output_weights(evaluate(), grad_outputs);   // the first evaluation: the outputs' layout
    report.outputs_total = weights.total;
    report.outputs_not_finite = weights.not_finite;
    report.outputs_not_finite_with_gradient = weights.not_finite_with_gradient;
    double share = sample_share(node, inputs, wanted, custom, o, report);

    bool all_float64 = true;
    for (int i = 0; i < n_in; ++i)
        if (wanted[static_cast<size_t>(i)]) all_float64 = all_float64 && group.grad_inputs[i].dtype() == DTYPE_F64;
    std::vector<Tensor> rerun;
    if (!all_float64) {   // the rule again in float64 (a float64 rule's record is that already)
        try {
            rerun = rule_in_float64(node, custom ? &function : nullptr, inputs, wanted, grad_outputs);
        } catch (const std::exception& e) {
            report.rule_failed = e.what();
        }
    }
    report.node = node_text(node);
    report.math = custom ? "its forward and backward" : node->info().math;
    report.float32 = !all_float64;
    report.edited = node->edited & EDITED_GRAD;
    Numerics numerics{evaluate, weights, share};
    for (int i = 0; i < n_in; ++i) {
        if (!wanted[static_cast<size_t>(i)]) continue;
        InputCheck line = check_input(node, i, inputs[static_cast<size_t>(i)], numerics, group.grad_inputs[i], rerun, o);
        report.ok = report.ok && line.recorded.ok() && (!line.has_rule || line.rule.ok());
        report.inputs.push_back(line);
    }
    return report;
}

// ============================================================================================
// [SECTION] the report: printed (:gradcheck) or a Lua table (dbg.gradcheck)

// One comparison line: "recorded  float32  max |analytic - numeric| ... worst [7,1] analytic ... ok".
void print_comparison(const char* what, DType dtype, const GradcheckComparison& c, const Shape& shape, const char* note) {
    printf("    %-9s %-8s max |analytic - numeric| %-11s worst %-7s analytic %-11s numeric %-11s %s%s\n", what, dtype_name(dtype),
           number_text(c.max_abs_diff, 6).c_str(), gradcheck_index_text(shape, c.worst).c_str(),
           number_text(c.worst_analytic, 6).c_str(), number_text(c.worst_numeric, 6).c_str(),
           c.ok() ? "ok" : ("MISMATCH (" + std::to_string(c.mismatched) + " of " + std::to_string(c.checked) + " elements)").c_str(),
           note);
}

void print_report(const Report& r, const CheckOptions& o) {
    printf("gradcheck of %s, %s: grad_input against central differences in float64 (eps %s) of sum(grad_output * output)\n",
           r.node.c_str(), r.math.c_str(), number_text(o.eps, 6).c_str());
    for (const InputCheck& line : r.inputs) {
        int64_t numel = line.shape.numel();
        int64_t looked_at = line.checked + line.not_finite;
        std::string sample = looked_at == numel
                                 ? std::to_string(numel) + " element" + (numel == 1 ? "" : "s")
                                 : "a sample of " + std::to_string(looked_at) + " of its " + std::to_string(numel) +
                                       " elements (all would take over " + r.sample_reason + ")";
        if (line.not_finite > 0)
            sample += ", " + std::to_string(line.not_finite) + " of them not finite (NaN or ±Inf, as a mask's -Inf: no finite difference there), skipped";
        printf("  input %d  %s %s  %s, %lld evaluations\n", line.input + 1, line.label.c_str(), line.shape.str().c_str(),
               sample.c_str(), static_cast<long long>(2 * line.checked));
        print_comparison("recorded", line.recorded_dtype, line.recorded, line.shape, r.edited ? "  (grad_input edited at a stop)" : "");
        if (line.has_rule) print_comparison("rule", DTYPE_F64, line.rule, line.shape, "  (run again on float64 copies)");
    }
    if (r.outputs_not_finite > 0)
        printf("  output: %lld of its %lld elements not finite (NaN or ±Inf, as a mask's -Inf: no finite difference there), "
               "left out of sum(grad_output * output)%s\n",
               static_cast<long long>(r.outputs_not_finite), static_cast<long long>(r.outputs_total),
               r.outputs_not_finite_with_gradient == 0
                   ? "; grad_output is 0 at all of them"
                   : ("; grad_output is not 0 at " + std::to_string(r.outputs_not_finite_with_gradient) +
                      " of them: what they send back is not checked").c_str());
    if (!r.rule_failed.empty()) printf("  (the rule could not run again in float64: %s)\n", r.rule_failed.c_str());
    printf("%s (tolerance: atol %s + rtol %s * |numeric|%s)\n",
           r.ok ? "ok: grad_input agrees with finite differences" : "MISMATCH: grad_input differs from finite differences",
           number_text(o.tolerance.atol, 6).c_str(), number_text(o.tolerance.rtol, 6).c_str(),
           r.float32 ? "; float32: atol + 1e-4 * max |numeric|" : "");
}

// {ok, max_abs_diff, worst = {i, j}, analytic, numeric, mismatched, checked, dtype} for one line.
void push_comparison(lua_State* L, const GradcheckComparison& c, const Shape& shape, DType dtype) {
    lua_createtable(L, 0, 8);
    lua_pushboolean(L, c.ok());
    lua_setfield(L, -2, "ok");
    set_number(L, "max_abs_diff", c.max_abs_diff);
    lua_createtable(L, shape.ndim, 0);
    int64_t flat = c.worst, stride = shape.numel();
    for (int d = 0; d < shape.ndim; ++d) {
        stride = shape.dims[d] ? stride / shape.dims[d] : 1;
        int64_t at = stride ? flat / stride : 0;
        flat -= at * stride;
        lua_pushinteger(L, at + 1);
        lua_rawseti(L, -2, d + 1);
    }
    lua_setfield(L, -2, "worst");
    set_number(L, "analytic", c.worst_analytic);
    set_number(L, "numeric", c.worst_numeric);
    lua_pushinteger(L, c.mismatched);
    lua_setfield(L, -2, "mismatched");
    lua_pushinteger(L, c.checked);
    lua_setfield(L, -2, "checked");
    lua_pushstring(L, dtype_name(dtype));
    lua_setfield(L, -2, "dtype");
}

// Runs the check at the current stop; false with *why set when it cannot (refused, or failed).
bool check_current_stop(lua_State* L, const CheckOptions& options, Report& report, std::string* why) {
    const DebugStop* stop = debugger_stop();
    *why = refusal(stop);
    if (!why->empty()) return false;
    int top = lua_gettop(L);
    bool done = true;
    try {
        report = run_check(L, *stop, options);
    } catch (const std::exception& e) {
        *why = e.what();
        done = false;
    }
    lua_settop(L, top);
    lua_gc(L, LUA_GCCOLLECT);   // the tensors the check handed to Lua, and their nodes, go now
    return done;
}

}  // namespace

bool debugger_cmd_gradcheck(lua_State* L, const std::string& args) {
    CheckOptions options;
    if (!parse_options(args, options)) return true;
    Report report;
    std::string why;
    if (!check_current_stop(L, options, report, &why)) fail(why);
    else print_report(report, options);
    fflush(stdout);
    return true;
}

// dbg.gradcheck([{eps =, atol =, rtol =, max_evaluations =}]): :gradcheck's findings as a table,
// {ok, node, inputs = {{input, shape, checked, recorded = {...}, rule = {...} or nil}, ...}}; an
// error where :gradcheck would refuse.
int dbg::lua_gradcheck(lua_State* L) {
    CheckOptions options;
    if (!lua_isnoneornil(L, 1)) {
        luaL_checktype(L, 1, LUA_TTABLE);
        lua_pushnil(L);
        while (lua_next(L, 1)) {
            std::string key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
            double value = lua_isnumber(L, -1) ? lua_tonumber(L, -1) : -1;
            bool known = key == "eps" || key == "atol" || key == "rtol" || key == "max_evaluations";
            if (!known) return luaL_error(L, "dbg.gradcheck: unknown option '%s' (eps, atol, rtol, max_evaluations)", key.c_str());
            if (!(value >= 0) || (key == "max_evaluations" && value < 2))
                return luaL_error(L, "dbg.gradcheck: option %s must be a number > 0", key.c_str());
            std::string refused = key == "eps" ? gradcheck_eps_refusal(value) : "";
            if (!refused.empty()) return luaL_error(L, "dbg.gradcheck: %s", refused.c_str());
            if (key == "eps") options.eps = value;
            else if (key == "atol") options.tolerance.atol = value;
            else if (key == "rtol") options.tolerance.rtol = value;
            else options.max_evaluations = static_cast<int64_t>(value);
            lua_pop(L, 1);
        }
    }
    Report report;
    std::string why;
    if (!check_current_stop(L, options, report, &why)) return luaL_error(L, "dbg.gradcheck: %s", why.c_str());
    lua_createtable(L, 0, 3);
    lua_pushboolean(L, report.ok);
    lua_setfield(L, -2, "ok");
    lua_pushstring(L, report.node.c_str());
    lua_setfield(L, -2, "node");
    lua_createtable(L, static_cast<int>(report.inputs.size()), 0);
    for (size_t k = 0; k < report.inputs.size(); ++k) {
        const InputCheck& line = report.inputs[k];
        lua_createtable(L, 0, 6);
        lua_pushinteger(L, line.input + 1);
        lua_setfield(L, -2, "input");
        lua_pushstring(L, line.label.c_str());
        lua_setfield(L, -2, "name");
        lua_pushinteger(L, line.checked);
        lua_setfield(L, -2, "checked");
        tdlua::set_integer(L, "not_finite", line.not_finite);
        lua_pushinteger(L, line.shape.numel());
        lua_setfield(L, -2, "numel");
        push_comparison(L, line.recorded, line.shape, line.recorded_dtype);
        lua_setfield(L, -2, "recorded");
        if (line.has_rule) {
            push_comparison(L, line.rule, line.shape, DTYPE_F64);
            lua_setfield(L, -2, "rule");
        }
        lua_rawseti(L, -2, static_cast<lua_Integer>(k + 1));
    }
    lua_setfield(L, -2, "inputs");
    tdlua::set_integer(L, "outputs_not_finite", report.outputs_not_finite);
    tdlua::set_integer(L, "outputs_not_finite_with_gradient", report.outputs_not_finite_with_gradient);
    return 1;
}
