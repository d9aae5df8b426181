// plan_describe.cpp: freeze, for people — plan_describe (:plan) and the names of values and
// guards (plan.h says the contract).
#include "plan.h"
#include "plan_internal.h"

#include <algorithm>
#include <cstdio>

namespace td {

std::string plan_bytes_text(size_t bytes) {
    char buffer[32];
    if (bytes < 1024) snprintf(buffer, sizeof buffer, "%zu B", bytes);
    else if (bytes < (1u << 20)) snprintf(buffer, sizeof buffer, "%.1f KiB", bytes / 1024.0);
    else snprintf(buffer, sizeof buffer, "%.2f MiB", bytes / (1024.0 * 1024.0));
    return buffer;
}

namespace {

std::string number_str(double x) {
    char buffer[32];
    snprintf(buffer, sizeof buffer, "%.6g", x);
    return buffer;
}

std::string target_name(const Plan& plan, int t) {
    const GradTarget& target = plan.grad_targets[t];
    if (target.kind == VALUE_INPUT) return plan.inputs[target.index].name;
    const PlanCaptured& c = plan.captured[target.index];
    return c.name.empty() ? "#" + std::to_string(c.tensor.id()) : c.name;
}

std::string op_with_attrs(OpId op, const OpAttrs& attrs) {
    std::string a = op_describe_attrs(op, attrs);
    return std::string(op_info(op).name) + (a.empty() ? "" : "(" + a + ")");
}

std::string value_list(const Plan& plan, const ValueIds& values) {
    std::string s;
    for (int v : values) s += (s.empty() ? "" : ", ") + plan_value_name(plan, v);
    return s;
}

}  // namespace

std::string plan_value_name(const Plan& plan, int v) {
    const PlanValue& pv = plan.values[v];
    switch (pv.kind) {
        case VALUE_INPUT: return plan.inputs[pv.index].name;
        case VALUE_CAPTURED: {
            const PlanCaptured& c = plan.captured[pv.index];
            return c.name.empty() ? "#" + std::to_string(c.tensor.id()) : c.name;
        }
        case VALUE_GRAD: return target_name(plan, pv.index) + ".grad";
        case VALUE_CONSTANT: return "const#" + std::to_string(pv.recorded_id);
        case VALUE_STEP: break;
    }
    int output = 0;   // a second output of the same node is "#12.2"
    for (int u = v - 1; u >= 0 && plan.values[u].recorded_id == pv.recorded_id && plan.values[u].kind == VALUE_STEP; --u)
        ++output;
    return "#" + std::to_string(pv.recorded_id) + (output ? "." + std::to_string(output + 1) : "");
}

std::string plan_guard_describe(const Plan& plan, int guard) {
    const PlanGuard& g = plan.guards[guard];
    std::string where = " (" + source_loc_str(g.where) + ")";
    switch (g.kind) {
        case GUARD_VALUES: {
            std::string values;
            for (size_t i = 0; i < g.expected.size() && i < 4; ++i) values += (i ? ", " : "") + number_str(g.expected[i]);
            if (g.expected.size() > 4) values += ", ...";
            // "loss:item() read 2": the call as written names the tensor; a bare "item()" does not
            std::string from = g.text.find(':') == std::string::npos ? " from " + plan_value_name(plan, g.value) : "";
            return g.text + " read " + (g.expected.size() == 1 ? values : "{" + values + "}") + from + where;
        }
        case GUARD_COMPARE: return g.text + " was " + (g.truth ? "true" : "false") + where;
        case GUARD_GRAD_STATE:
            return target_name(plan, g.target) + ".grad was " + (g.defined ? "a tensor" : "nil") + " when recorded" + where;
    }
    return "?";
}

bool plan_guard_reads_value(const Plan& plan, int guard) {
    GuardKind kind = plan.guards[guard].kind;
    return kind == GUARD_VALUES || kind == GUARD_COMPARE;
}

std::string plan_guard_advice(const Plan& plan, int guard) {
    const PlanGuard& g = plan.guards[guard];
    if (g.kind == GUARD_VALUES) return "return the tensor, or read " + g.text + " outside the frozen function";
    if (g.kind == GUARD_COMPARE)
        return "compare outside the frozen function, or keep the computation in tensors (no Lua `if` on a tensor's value)";
    return "";
}

PlanGraphStats plan_graph_stats(const Plan& plan) {
    PlanGraphStats st;
    if (!plan.exec) return st;
    for (const GraphSegment& g : plan.exec->segments) {
        ++st.segments;
        st.steps += static_cast<int>(g.end - g.begin);
        st.captured += g.graph != nullptr;
        st.refused += g.refused;
    }
    return st;
}

namespace {

// The plan's first lines: its name, inputs and captured tensors.
std::string describe_header(const Plan& plan) {
    std::string s;
    char line[512];
    snprintf(line, sizeof line, "plan %s: frozen at %s; %d nodes recorded, autograd %s\n", plan.name.c_str(),
             source_loc_str(plan.where).c_str(), plan.stats.recorded_nodes, plan.grad_mode ? "on" : "off");
    s += line;
    s += "  inputs:  ";
    if (plan.inputs.empty()) s += "(none)";
    for (const PlanInput& in : plan.inputs)
        s += in.name + " " + dtype_name(in.dtype) + " " + in.shape.str() + (in.requires_grad ? " requires_grad" : "") + "   ";
    s += "\n  captured:";
    if (plan.captured.empty()) s += " (none)";
    for (size_t c = 0; c < plan.captured.size(); ++c) {
        const Value& v = plan_captured_value(plan.captured[c]);
        std::string name = plan.captured[c].name.empty() ? "#" + std::to_string(plan.captured[c].tensor.id()) : plan.captured[c].name;
        s += " " + name + " " + dtype_name(v.dtype) + " " + v.shape.str() + "  ";
    }
    return s + "\n";
}

std::string describe_passes(const Plan& plan) {
    const PlanPasses& p = plan.passes;
    const PlanStats& st = plan.stats;
    auto onoff = [](bool on) { return on ? "on " : "off"; };
    char line[512];
    snprintf(line, sizeof line,
             "  passes:  dce %s (%d dead)   cse %s (%d common)   fold %s (%d folded)   fuse %s (%d ops in %d groups)\n"
             "           inplace %s (%d gradients, %d buffers)   reuse %s\n",
             onoff(p.dce), st.dead, onoff(p.cse), st.common, onoff(p.fold), st.folded, onoff(p.fuse), st.fused_ops,
             st.fused_groups, onoff(p.inplace), st.grads_in_place, st.inplace, onoff(p.reuse));
    return line;
}

// A fused step's ops: "t1=mul(x, y); add(t1, b)".
std::string fused_ops_text(const Plan& plan, const PlanStep& s) {
    std::string what;
    int n_in = static_cast<int>(s.inputs.size());
    for (size_t j = 0; j < s.fused.size(); ++j) {
        const FusedOp& op = s.fused[j];
        int arity = elementwise_math(op.op) ? elementwise_math(op.op)->arity : 1;
        std::string args;
        for (int a = 0; a < arity; ++a) {
            int r = op.operands[a];
            args += (a ? ", " : "") + (r < n_in ? plan_value_name(plan, s.inputs[r]) : "t" + std::to_string(r - n_in + 1));
        }
        what += (j ? "; " : " ") + std::string(j + 1 == s.fused.size() ? "" : "t" + std::to_string(j + 1) + "=") +
                op_with_attrs(op.op, plan.attrs[op.attrs]) + "(" + args + ")";
    }
    return what;
}

// What a step does, said for people.
std::string step_what(const Plan& plan, const PlanStep& s) {
    switch (s.kind) {
        case STEP_KERNEL: {
            std::string what = value_list(plan, s.outputs) + " = " + op_with_attrs(s.op, plan_step_attrs(plan, s)) + "(" +
                               value_list(plan, s.inputs) + ")";
            if (s.into_grad >= 0) what += "  -> " + target_name(plan, s.into_grad) + ".grad (+= when it exists)";
            return what;
        }
        case STEP_FUSED: return value_list(plan, s.outputs) + " = fused(" + value_list(plan, s.inputs) + "):" + fused_ops_text(plan, s);
        case STEP_GRAD_ACCUMULATE:
            return target_name(plan, s.target) + ".grad += " + plan_value_name(plan, s.inputs[0]) + "  (a copy when nil)";
        case STEP_GRAD_CLEAR: return target_name(plan, s.target) + ".grad = nil";
        case STEP_GUARD: return "guard " + std::to_string(s.target + 1) + ": " + plan_guard_describe(plan, s.target);
        case STEP_GROUP_DONE: return "backward group of #" + std::to_string(s.recorded_group) + " done";
    }
    return "";
}

// One line of the step list: number, phase, where its result's bytes are, shape, what it does.
std::string describe_step(const Plan& plan, const std::vector<int>& roots, size_t k) {
    const PlanStep& s = plan.steps[k];
    std::string shape, buffer;
    if (!s.outputs.empty()) {
        int v = s.outputs[0];
        shape = plan.values[v].shape.str();
        if (plan.value_buffer[v] >= 0) buffer = "buf" + std::to_string(plan.value_buffer[v]);
        else if (plan.value_per_call[roots[v]]) buffer = "new";
        else if (s.into_grad >= 0) buffer = "grad";
        else if (plan.values[v].alias_of >= 0) buffer = "view";
    }
    char line[512];
    snprintf(line, sizeof line, "  %4zu  %-9s %-6s %-14s %s\n", k + 1, s.phase == PHASE_BACKWARD ? "backward" : "forward",
             buffer.c_str(), shape.c_str(), (step_what(plan, s) + "   " + source_loc_str(s.where)).c_str());
    return line;
}

// The plan's last lines: guards, outputs, memory, and the device of a GPU plan.
std::string describe_footer(const Plan& plan) {
    const PlanStats& st = plan.stats;
    std::string s;
    char line[512];
    snprintf(line, sizeof line, "  guards:  input shapes, dtypes, devices, requires_grad, autograd mode; %zu recorded:\n",
             plan.guards.size());
    s += line;
    for (size_t g = 0; g < plan.guards.size(); ++g)
        s += "    " + std::to_string(g + 1) + ". " + plan_guard_describe(plan, static_cast<int>(g)) + "\n";
    s += "  outputs: ";
    if (plan.outputs.empty()) s += "(none)";
    for (const PlanOutput& o : plan.outputs) s += plan_value_name(plan, o.value) + " " + plan.values[o.value].shape.str() + "  ";
    s += "\n";
    snprintf(line, sizeof line,
             "  memory:  %d buffers, %s (%s with one per value); up to %s new per call; eager peak %s\n", st.buffers,
             plan_bytes_text(st.buffer_bytes).c_str(), plan_bytes_text(st.unshared_bytes).c_str(), plan_bytes_text(st.per_call_bytes).c_str(),
             plan_bytes_text(st.eager_peak_bytes).c_str());
    s += line;
    if (plan.device != DEVICE_CPU) {   // the steps run on the GPU (no fusion there: docs/cuda.md)
        s += std::string("  device:  ") + device_name(plan.device) + " (its buffers are there; no fused loops)";
        PlanGraphStats graphs = plan_graph_stats(plan);
        if (plan.exec)
            s += "; CUDA graphs: " + std::to_string(graphs.segments) + " runs of " + std::to_string(graphs.steps) +
                 " steps, " + std::to_string(graphs.captured) + " captured, " + std::to_string(graphs.refused) +
                 " step by step";
        s += "\n";
    }
    return s;
}

}  // namespace

std::string plan_describe(const Plan& plan) {
    std::string s = describe_header(plan);
    if (!plan.compiled) return s + "  (recorded, not compiled)\n";
    s += describe_passes(plan);
    s += "  steps (" + std::to_string(plan.steps.size()) + "):\n";
    std::vector<int> roots = plan_value_roots(plan);
    for (size_t k = 0; k < plan.steps.size(); ++k) s += describe_step(plan, roots, k);
    return s + describe_footer(plan);
}

std::string plan_step_text(const Plan& plan, const PlanStep& s) { return step_what(plan, s); }

namespace {

// A kernel step's floating-point operations: products counted exactly (2 per multiply-add), any
// other op one per element of its largest operand.
double kernel_flops(const Plan& plan, const PlanStep& s) {
    auto shape = [&](int v) -> const Shape& { return plan.values[v].shape; };
    auto numel = [&](int v) { return static_cast<double>(shape(v).numel()); };
    double out = s.outputs.empty() ? 0 : numel(s.outputs[0]);
    const OpAttrs& at = plan_step_attrs(plan, s);
    switch (s.op) {
        case OP_mm: return 2 * out * static_cast<double>(shape(s.inputs[0]).dims[at.trans_a ? 0 : 1]);
        case OP_bmm: return 2 * out * static_cast<double>(shape(s.inputs[0]).dims[at.trans_a ? 1 : 2]);
        case OP_conv2d: return 2 * out * numel(s.inputs[1]) / static_cast<double>(shape(s.inputs[1]).dims[0]);
        case OP_conv2d_backward_input: return 2 * numel(s.inputs[0]) * numel(s.inputs[1]) / static_cast<double>(shape(s.inputs[1]).dims[0]);
        case OP_conv2d_backward_weight: return 2 * numel(s.inputs[0]) * out / static_cast<double>(shape(s.outputs[0]).dims[0]);
        case OP_lstm: return 2 * numel(s.inputs[0]) * static_cast<double>(shape(s.inputs[1]).dims[1]);
        case OP_lstm_backward: return 4 * out * static_cast<double>(shape(s.inputs[1]).dims[1]);
        default: break;
    }
    if (op_info(s.op).flags & OPF_VIEW) return 0;
    double largest = out;
    for (int v : s.inputs) largest = std::max(largest, numel(v));
    return largest;
}

}  // namespace

double plan_flops(const Plan& plan) {
    double flops = 0;
    for (const PlanStep& s : plan.steps) {
        if (s.kind == STEP_KERNEL) flops += kernel_flops(plan, s);
        else if (s.kind == STEP_FUSED) flops += static_cast<double>(s.fused.size() * plan.values[s.outputs[0]].shape.numel());
        else if (s.kind == STEP_GRAD_ACCUMULATE) flops += static_cast<double>(plan.values[s.inputs[0]].shape.numel());
    }
    return flops;
}

}  // namespace td
