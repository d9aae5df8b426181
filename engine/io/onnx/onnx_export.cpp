// onnx_export.cpp: a recorded plan as an ONNX model (onnx_export.h). The walk over the plan's
// steps: which ONNX name holds each value's contents at each step (in-place ops and gradient
// accumulation give a tensor new contents, ONNX names are written once), the graph's inputs,
// initializers and outputs, the tapedeck-domain functions, and ONNX's own checks.
//
// [SECTION] walk      values, in-place writes, views, gradients, steps
// [SECTION] model     inputs, initializers, outputs, functions, checks
#include "onnx_export.h"

#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <map>
#include <set>

#include "backend.h"
#include "file_whole.h"
#include "onnx_builder.h"

namespace td {

namespace {

const char* const FUNCTION_DOMAIN = "tapedeck";

// ============================================================================================
// [SECTION] walk

struct Export {
    const Plan& plan;
    const OnnxExportOptions& options;
    OnnxBuilder main{""};
    onnx::GraphProto graph;
    std::vector<onnx::FunctionProto> functions;
    std::map<std::string, std::string> function_by_body;   // a body's bytes -> its function's name
    std::map<std::string, int> functions_of_op;             // how many variants an op has so far
    std::set<std::string> graph_names;                      // names of inputs, initializers, outputs

    // Per value
    std::vector<std::string> name;     // the ONNX name of its contents when made ("" not yet)
    std::vector<int> made_by;          // the step that made it (-1: from outside)
    std::vector<int> root;             // the value whose bytes it shares, at the end of alias_of
    std::vector<bool> through_view;    // it reaches its root through a view (not only in-place ops)
    std::vector<bool> written;         // a root that an in-place step writes
    std::vector<int> seen_version;     // its root's version when `name` was made (views)
    // Per root value
    std::vector<std::string> current;  // the ONNX name of its contents now
    std::vector<bool> pending;         // an initializer not written yet (written when first read)
    std::vector<int> version;          // writes so far
    // Per grad target
    std::vector<std::string> grad_now;  // its .grad's contents now, "" for nil
    std::vector<bool> grad_known;       // cleared or accumulated by a step: its state is the plan's
    std::vector<bool> grad_changed;
    std::vector<std::string> initial_grad_inputs;
    int step = -1;                      // the step being exported (for messages)
    std::vector<std::string> warnings;

    Export(const Plan& p, const OnnxExportOptions& o) : plan(p), options(o) {}
};

[[noreturn]] void refuse_step(const Export& e, const std::string& why) {
    const PlanStep& s = e.plan.steps[e.step];
    engine_fail("export_onnx: step %d (%s, %s) %s", e.step + 1, op_info(s.op).name, source_loc_str(s.where).c_str(),
                why.c_str());
}

// A name for the graph's inputs, initializers and outputs: `wanted`, or with a suffix when taken.
std::string graph_name(Export& e, std::string wanted) {
    if (wanted.empty()) wanted = "tensor";
    std::string name = wanted;
    for (int k = 2; e.graph_names.count(name); ++k) name = wanted + "_" + std::to_string(k);
    e.graph_names.insert(name);
    return name;
}

std::string captured_name(const Plan& plan, int index) {
    const std::string& lua = plan.captured[index].name;
    return lua.empty() ? "captured_" + std::to_string(index + 1) : lua;
}

std::string target_name(const Plan& plan, int target) {
    const GradTarget& t = plan.grad_targets[target];
    if (t.kind == VALUE_INPUT) return plan.inputs[t.index].name;
    return captured_name(plan, t.index);
}

bool is_grad_root(const Export& e, int r) { return e.plan.values[r].kind == VALUE_GRAD; }
int grad_target_of(const Export& e, int r) { return e.plan.values[r].index; }

void set_type(onnx::ValueInfoProto* info, DType dtype, const Shape& shape) {
    onnx::TypeProto_Tensor* t = info->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx_dtype(dtype));
    onnx::TensorShapeProto* s = t->mutable_shape();   // present for a 0-d tensor too
    for (int i = 0; i < shape.ndim; ++i) s->add_dim()->set_dim_value(shape[i]);
}

// The tensor's .grad when the export runs, as the default of the graph input standing for the
// .grad the plan starts from (a function that accumulates into gradients it did not clear).
std::string initial_grad(Export& e, int target) {
    const GradTarget& t = e.plan.grad_targets[target];
    std::string name = graph_name(e, target_name(e.plan, target) + ".grad_in");
    e.initial_grad_inputs.push_back(name);
    const PlanValue& v = e.plan.values[t.grad_value];
    onnx::ValueInfoProto* in = e.graph.add_input();
    in->set_name(name);
    set_type(in, v.dtype, v.shape);
    if (t.kind == VALUE_CAPTURED) {
        const Tensor& owner = e.plan.captured[t.index].tensor;
        const Tensor& grad = owner.node->outputs[owner.output].grad;
        if (grad.defined()) *e.graph.add_initializer() = onnx_tensor_of(grad.value(), name);
    }
    return name;
}

// A captured tensor (as it is now) or a constant of the plan, as the initializer of its name.
void write_initializer(Export& e, int v) {
    const PlanValue& pv = e.plan.values[v];
    const Value& value = pv.kind == VALUE_CAPTURED ? plan_captured_value(e.plan.captured[pv.index]) : e.plan.constants[pv.index];
    *e.graph.add_initializer() = onnx_tensor_of(value, e.current[v]);
    e.pending[v] = false;
}

// The contents of root value r now.
std::string root_contents(Export& e, int r) {
    if (!is_grad_root(e, r)) {
        if (e.pending[r]) write_initializer(e, r);
        return e.current[r];
    }
    int t = grad_target_of(e, r);
    if (e.grad_now[t].empty()) refuse_step(e, "reads the .grad of " + target_name(e.plan, t) + " where it is nil");
    return e.grad_now[t];
}

std::vector<std::string> emit_step(Export& e, const PlanStep& s, const std::vector<std::string>& inputs);

// The contents of value v now: its root's, or, for a view, the view of its root's contents now
// (made again when the root was written since).
std::string read(Export& e, int v) {
    int r = e.root[v];
    if (v == r || !e.through_view[v]) return root_contents(e, r);
    if (!e.name[v].empty() && e.seen_version[v] == e.version[r]) return e.name[v];
    const PlanStep& s = e.plan.steps[e.made_by[v]];
    e.name[v] = emit_step(e, s, {read(e, e.plan.values[v].alias_of)})[0];
    e.seen_version[v] = e.version[r];
    return e.name[v];
}

// For each element of view w (row-major), the flat row-major index of the root element it is:
// the view steps from the root applied, with the engine's own view kernels, to the indices 0..n-1
// of the root.
Value view_indices(const Export& e, int w) {
    const PlanValue& pv = e.plan.values[w];
    Value indices = value_new(pv.shape, DTYPE_I64, DEVICE_CPU);
    if (e.root[w] == w) {
        for (int64_t i = 0; i < indices.numel(); ++i) indices.data<int64_t>()[i] = i;
        return indices;
    }
    Value base = view_indices(e, pv.alias_of);
    const PlanStep& s = e.plan.steps[e.made_by[w]];
    if (!(op_info(s.op).flags & OPF_VIEW)) return base;   // an in-place op's output: the same elements
    Value view;
    value_share_layout(view, base);
    view.shape = pv.shape;
    view.dtype = DTYPE_I64;
    const Value* ins[] = {&base};
    Value* outs[] = {&view};
    kernel_for(s.op, DEVICE_CPU)(KernelCall{ins, 1, outs, 1, plan_step_attrs(e.plan, s)});
    return value_contiguous(view);
}

// The root's contents with the elements of view w replaced by `contents` (w's new contents).
std::string written_through_view(Export& e, int w, const std::string& contents) {
    int r = e.root[w];
    Value at = view_indices(e, w);
    std::vector<int64_t> indices(at.data<int64_t>(), at.data<int64_t>() + at.numel());
    return e.main.scatter_flat(root_contents(e, r), e.plan.values[r].shape, indices, contents);
}

// An in-place op wrote `contents` into value w (through a view of its root: the root's elements
// that the view shows).
void write(Export& e, int w, std::string contents) {
    int r = e.root[w];
    if (e.through_view[w]) contents = written_through_view(e, w, contents);
    if (is_grad_root(e, r)) {
        int t = grad_target_of(e, r);
        e.grad_now[t] = contents;
        e.grad_known[t] = true;
        e.grad_changed[t] = true;
    } else {
        e.current[r] = contents;
    }
    ++e.version[r];
}

// The step as a call of a tapedeck-domain function (made once per distinct body).
std::vector<std::string> emit_as_function(Export& e, OnnxOpCall& call) {
    OnnxBuilder body("");
    std::vector<std::string> actual = call.in, formal;
    for (size_t i = 0; i < actual.size(); ++i) formal.push_back("in" + std::to_string(i + 1));
    OnnxOpCall inner{body, call.op, call.attrs, formal, call.in_shape, call.in_dtype, call.out_shape, call.out_dtype, {}, call.warnings};
    onnx_op_mapping(call.op).emit(inner);
    onnx::FunctionProto f;
    f.set_domain(FUNCTION_DOMAIN);
    for (const std::string& in : formal) f.add_input(in);
    for (const std::string& out : inner.out) f.add_output(out);
    for (onnx::NodeProto& n : body.nodes()) *f.add_node() = n;
    onnx::OperatorSetIdProto* opset = f.add_opset_import();
    opset->set_domain("");
    opset->set_version(e.options.opset);
    std::string key = op_info(call.op).name + std::string("\n") + f.SerializeAsString();
    auto found = e.function_by_body.find(key);
    std::string name;
    if (found != e.function_by_body.end()) {
        name = found->second;
    } else {
        int variant = ++e.functions_of_op[op_info(call.op).name];
        name = op_info(call.op).name + (variant == 1 ? std::string() : "_" + std::to_string(variant));
        f.set_name(name);
        f.set_doc_string(op_info(call.op).math);
        e.functions.push_back(f);
        e.function_by_body[key] = name;
    }
    return e.main.add(name, actual, static_cast<int>(inner.out.size()), {}, FUNCTION_DOMAIN);
}

// Emits step s, its inputs' contents named `inputs`, into the main graph: its outputs' names.
std::vector<std::string> emit_step(Export& e, const PlanStep& s, const std::vector<std::string>& inputs) {
    const OnnxOpMapping& mapping = onnx_op_mapping(s.op);
    if (!mapping.emit) refuse_step(e, std::string("is not exported: ") + mapping.refusal);
    OnnxOpCall call{e.main, s.op, plan_step_attrs(e.plan, s), inputs, {}, {}, {}, {}, {}, &e.warnings};
    for (int v : s.inputs) {
        call.in_shape.push_back(e.plan.values[v].shape);
        call.in_dtype.push_back(e.plan.values[v].dtype);
    }
    for (int v : s.outputs) {
        call.out_shape.push_back(e.plan.values[v].shape);
        call.out_dtype.push_back(e.plan.values[v].dtype);
    }
    size_t first = e.main.nodes().size();
    std::vector<std::string> outputs;
    try {
        if (onnx_op_is_function(s.op) && !e.options.inline_backward) {
            outputs = emit_as_function(e, call);
        } else {
            mapping.emit(call);
            outputs = call.out;
        }
    } catch (const EngineError& err) {
        refuse_step(e, err.what());
    }
    if (outputs.size() < s.outputs.size()) refuse_step(e, "made fewer outputs than the op has (an exporter bug)");
    e.main.label_from(first, "#" + std::to_string(s.recorded_id) + " " + op_info(s.op).name, source_loc_str(s.where));
    return outputs;
}

void export_kernel_step(Export& e, const PlanStep& s) {
    std::vector<std::string> inputs;
    for (int v : s.inputs) inputs.push_back(read(e, v));
    std::vector<std::string> outputs = emit_step(e, s, inputs);
    bool inplace = op_info(s.op).flags & OPF_INPLACE;
    for (size_t i = 0; i < s.outputs.size(); ++i) {
        int v = s.outputs[i];
        e.made_by[v] = e.step;
        if (inplace && i == 0) write(e, s.inputs[0], outputs[0]);
        e.name[v] = outputs[i];
        e.seen_version[v] = e.version[e.root[v]];
        if (e.root[v] == v) e.current[v] = outputs[i];
    }
}

void export_grad_step(Export& e, const PlanStep& s) {
    int t = s.target;
    if (s.kind == STEP_GRAD_CLEAR) {
        e.grad_now[t].clear();
    } else {   // STEP_GRAD_ACCUMULATE: a copy becomes .grad when it has none
        std::string g = read(e, s.inputs[0]);
        if (!e.grad_known[t])   // the plan adds to whatever .grad holds when called: the model gives this call's
            e.warnings.push_back(target_name(e.plan, t) + ".grad: the function adds to .grad without clearing it (zero_grad); "
                                 "the model's " + target_name(e.plan, t) + ".grad is this call's gradient alone");
        e.grad_now[t] = e.grad_now[t].empty() ? g : e.main.add1("Add", {e.grad_now[t], g});
    }
    e.grad_known[t] = true;
    e.grad_changed[t] = true;
    ++e.version[e.plan.grad_targets[t].grad_value];
}

// The .grad states the plan was recorded with (checked with the inputs, before a run): a .grad
// that was set is a graph input, its default the tensor's .grad now.
void start_grad_states(Export& e) {
    for (const PlanGuard& g : e.plan.guards) {
        if (g.kind != GUARD_GRAD_STATE || e.grad_known[g.target]) continue;
        if (g.defined) e.grad_now[g.target] = initial_grad(e, g.target);
        e.grad_known[g.target] = true;
    }
}

void export_guard_step(Export& e, const PlanStep& s) {
    const PlanGuard& g = e.plan.guards[s.target];
    if (g.kind == GUARD_GRAD_STATE) return;   // start_grad_states
    std::string said = plan_guard_describe(e.plan, s.target);
    if (e.options.strict)
        engine_fail("export_onnx: %s; the model would hold only that branch (strict = true refuses it)", said.c_str());
    e.warnings.push_back("the branch taken when " + said + " is exported as recorded, as torch.jit.trace does");
}

// The per-value and per-target tables, before any name is given.
void prepare(Export& e) {
    const Plan& plan = e.plan;
    size_t n = plan.values.size();
    e.name.assign(n, "");
    e.made_by.assign(n, -1);
    e.root.assign(n, -1);
    e.through_view.assign(n, false);
    e.written.assign(n, false);
    e.seen_version.assign(n, 0);
    e.current.assign(n, "");
    e.version.assign(n, 0);
    e.pending.assign(n, false);
    for (size_t v = 0; v < n; ++v) e.root[v] = plan.values[v].alias_of < 0 ? static_cast<int>(v) : e.root[plan.values[v].alias_of];
    for (const PlanStep& step : plan.steps) {   // which values are views, which roots are written in place
        if (step.kind != STEP_KERNEL || step.outputs.empty()) continue;
        int v = step.outputs[0];
        int parent = plan.values[v].alias_of;
        if (parent >= 0) e.through_view[v] = e.through_view[parent] || (op_info(step.op).flags & OPF_VIEW);
        if (op_info(step.op).flags & OPF_INPLACE) e.written[e.root[step.inputs[0]]] = true;
    }
    size_t targets = plan.grad_targets.size();
    e.grad_now.assign(targets, "");
    e.grad_known.assign(targets, false);
    e.grad_changed.assign(targets, false);
}

void walk_steps(Export& e) {
    const Plan& plan = e.plan;
    start_grad_states(e);
    for (e.step = 0; e.step < static_cast<int>(plan.steps.size()); ++e.step) {
        const PlanStep& s = plan.steps[e.step];
        switch (s.kind) {
        case STEP_KERNEL: export_kernel_step(e, s); break;
        case STEP_GRAD_ACCUMULATE: case STEP_GRAD_CLEAR: export_grad_step(e, s); break;
        case STEP_GUARD: export_guard_step(e, s); break;
        case STEP_FUSED: refuse_step(e, "is a fused step (an exporter bug: export compiles without fusion)");
        case STEP_GROUP_DONE: break;
        }
    }
}

// ============================================================================================
// [SECTION] model

// The graph's inputs (the arguments) and initializers (captured tensors, constants): the roots'
// first contents. A captured tensor the plan changes in place is an input too (its default);
// other initializers are written when a step first reads them (none for what nothing reads).
void add_inputs_and_initializers(Export& e, OnnxExportResult* result) {
    const Plan& plan = e.plan;
    for (size_t v = 0; v < plan.values.size(); ++v) {
        const PlanValue& pv = plan.values[v];
        std::string name;
        if (pv.kind == VALUE_INPUT) {
            name = graph_name(e, plan.inputs[pv.index].name);
            set_type(e.graph.add_input(), pv.dtype, pv.shape);
            e.graph.mutable_input(e.graph.input_size() - 1)->set_name(name);
            result->arguments.push_back(name);
        } else if (pv.kind == VALUE_CAPTURED) {
            name = graph_name(e, captured_name(plan, pv.index));
            result->captured.emplace_back(name, plan.captured[pv.index].tensor);
            e.pending[v] = true;
            if (e.written[v]) {
                set_type(e.graph.add_input(), pv.dtype, pv.shape);
                e.graph.mutable_input(e.graph.input_size() - 1)->set_name(name);
            }
        } else if (pv.kind == VALUE_CONSTANT) {
            name = graph_name(e, "constant_" + std::to_string(pv.index + 1));
            e.pending[v] = true;
        } else {
            continue;
        }
        e.current[v] = name;
        e.name[v] = name;
        if (e.written[v]) write_initializer(e, static_cast<int>(v));
    }
}

void add_output(Export& e, const std::string& contents, const std::string& wanted, DType dtype, const Shape& shape,
                OnnxExportResult* result) {
    std::string name = graph_name(e, wanted);
    e.main.add("Identity", {contents}, 0);
    e.main.nodes().back().add_output(name);
    set_type(e.graph.add_output(), dtype, shape);
    e.graph.mutable_output(e.graph.output_size() - 1)->set_name(name);
    result->outputs.push_back(name);
}

void add_outputs(Export& e, OnnxExportResult* result) {
    const Plan& plan = e.plan;
    for (size_t k = 0; k < plan.outputs.size(); ++k) {
        const PlanOutput& out = plan.outputs[k];
        std::string name = k == 0 ? "output" : "output_" + std::to_string(k + 1);
        const PlanValue& v = plan.values[out.value];
        add_output(e, read(e, out.value), name, v.dtype, v.shape, result);
        if (out.grad_value >= 0) {
            const PlanValue& g = plan.values[out.grad_value];
            add_output(e, read(e, out.grad_value), name + ".grad", g.dtype, g.shape, result);
        }
    }
    for (size_t t = 0; t < plan.grad_targets.size(); ++t) {
        if (!e.grad_changed[t] || e.grad_now[t].empty()) continue;
        const PlanValue& g = plan.values[plan.grad_targets[t].grad_value];
        add_output(e, e.grad_now[t], target_name(plan, static_cast<int>(t)) + ".grad", g.dtype, g.shape, result);
    }
    for (size_t v = 0; v < plan.values.size(); ++v) {
        const PlanValue& pv = plan.values[v];
        if (pv.kind != VALUE_CAPTURED || e.version[v] == 0) continue;
        add_output(e, e.current[v], captured_name(plan, pv.index) + ".new", pv.dtype, pv.shape, result);
    }
}

// Shapes of the values the steps made, for Netron and for strict shape inference to check.
void add_value_infos(Export& e) {
    std::set<std::string> listed;
    for (const onnx::ValueInfoProto& v : e.graph.input()) listed.insert(v.name());
    for (const onnx::ValueInfoProto& v : e.graph.output()) listed.insert(v.name());
    for (size_t v = 0; v < e.plan.values.size(); ++v) {
        const PlanValue& pv = e.plan.values[v];
        if (pv.kind != VALUE_STEP || e.name[v].empty() || listed.count(e.name[v])) continue;
        listed.insert(e.name[v]);
        onnx::ValueInfoProto* info = e.graph.add_value_info();
        info->set_name(e.name[v]);
        set_type(info, pv.dtype, pv.shape);
    }
}

onnx::ModelProto build_model(Export& e, OnnxExportResult* result) {
    prepare(e);
    add_inputs_and_initializers(e, result);
    walk_steps(e);
    add_outputs(e, result);
    for (onnx::NodeProto& n : e.main.nodes()) *e.graph.add_node() = std::move(n);
    add_value_infos(e);
    e.graph.set_name(e.plan.name.empty() ? "tapedeck_plan" : e.plan.name);
    e.graph.set_doc_string("frozen at " + source_loc_str(e.plan.where) + " by tapedeck");

    onnx::ModelProto model;
    model.set_ir_version(8);
    model.set_producer_name(e.options.producer);
    model.set_domain("org.tapedeck");
    onnx::OperatorSetIdProto* opset = model.add_opset_import();
    opset->set_domain("");
    opset->set_version(e.options.opset);
    if (!e.functions.empty()) {
        onnx::OperatorSetIdProto* own = model.add_opset_import();
        own->set_domain(FUNCTION_DOMAIN);
        own->set_version(1);
    }
    for (onnx::FunctionProto& f : e.functions) *model.add_functions() = f;
    *model.mutable_graph() = std::move(e.graph);
    for (const onnx::ValueInfoProto& in : model.graph().input()) result->inputs.push_back(in.name());
    result->nodes = model.graph().node_size();
    result->functions = model.functions_size();
    result->warnings = e.warnings;
    return model;
}

// ONNX's own checker and strict shape inference (they throw onnx::checker::ValidationError or
// onnx::InferenceError, both std::runtime_error).
void check_model(onnx::ModelProto& model) {
    try {
        onnx::checker::check_model(model);
        onnx::ShapeInferenceOptions options{true, 1, false};
        onnx::ModelProto inferred = model;
        onnx::shape_inference::InferShapes(inferred, onnx::OpSchemaRegistry::Instance(), options);
    } catch (const std::exception& err) {
        engine_fail("export_onnx: ONNX's checker rejected the model (an exporter bug): %s", err.what());
    }
}

}  // namespace

std::string onnx_export_bytes(std::shared_ptr<const Plan> recorded, const OnnxExportOptions& options, OnnxExportResult* result) {
    if (options.opset != ONNX_OPSET) engine_fail("export_onnx: opset %d: tapedeck writes opset %d", options.opset, ONNX_OPSET);
    if (recorded->compiled) engine_fail("export_onnx: needs the recorded plan, not a compiled one");
    PlanPasses passes;
    passes.fuse = passes.inplace = passes.reuse = false;
    std::unique_ptr<Plan> plan = plan_compile(recorded, passes);
    Export e(*plan, options);
    OnnxExportResult local;
    if (!result) result = &local;
    onnx::ModelProto model = build_model(e, result);
    check_model(model);
    return model.SerializeAsString();
}

OnnxExportResult onnx_export(std::shared_ptr<const Plan> recorded, const OnnxExportOptions& options, const std::string& path) {
    OnnxExportResult result;
    file_write_whole(path, onnx_export_bytes(std::move(recorded), options, &result), "export_onnx");
    return result;
}

}  // namespace td
