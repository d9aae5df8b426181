// function.cpp: custom functions (function.h) as the `function` and `function_backward` ops.
#include "function.h"


namespace td {

namespace {

// While a custom function runs: its ops join `node`'s group with their own lines, grad is off,
// and everything is restored however it ends.
struct InnerCallScope {
    RecordingContext saved_context = engine_recording();
    bool saved_grad_mode = grad_enabled();

    explicit InnerCallScope(Node* node) {
        engine_recording().group_node = node;
        engine_recording().inner_call = true;
        set_grad_enabled(false);
    }
    ~InnerCallScope() {
        engine_recording() = saved_context;
        set_grad_enabled(saved_grad_mode);
    }
};

void run_forward(Node* node) {
    std::vector<Tensor> inputs;
    for (const Edge& e : node->inputs) inputs.emplace_back(e.node(), e.output);
    std::vector<Tensor> results;
    {
        InnerCallScope scope(node);
        results = node->custom()->forward(inputs);
    }
    const char* name = node->custom()->name.c_str();
    if (results.empty()) engine_fail("%s: forward returned no tensor", name);
    node->outputs.resize(static_cast<int>(results.size()));
    for (size_t i = 0; i < results.size(); ++i) {
        if (!results[i].defined()) engine_fail("%s: forward result %zu is not a tensor", name, i + 1);
        Output& out = node->outputs[static_cast<int>(i)];
        out.value = results[i].value();   // shares the storage: no copy
        out.requires_grad = node->tracks_grad && dtype_is_float(out.value.dtype);
    }
}

// `forward_node` is the group being differentiated (autograd's current group node).
void run_backward(Node* node, Node* forward_node) {
    std::vector<Tensor> grad_outputs;
    for (const Edge& e : node->inputs) grad_outputs.emplace_back(e.node(), e.output);
    std::vector<Tensor> grads;
    {
        InnerCallScope scope(node);
        grads = node->custom()->backward(grad_outputs);
    }
    const char* name = node->custom()->name.c_str();
    int n_inputs = forward_node->inputs.size();
    if (static_cast<int>(grads.size()) != n_inputs)
        engine_fail("%s: backward returned %zu gradient%s for %d input%s", name, grads.size(),
                    grads.size() == 1 ? "" : "s", n_inputs, n_inputs == 1 ? "" : "s");
    std::vector<int>& gradient_inputs = node->group_records_made().gradient_inputs;
    gradient_inputs.clear();
    for (int i = 0; i < n_inputs; ++i) {
        if (!grads[i].defined()) continue;
        const Shape& want = forward_node->inputs[i].value().shape;
        if (grads[i].shape() != want)
            engine_fail("%s: backward returned a gradient of shape %s for input %d, which has shape %s", name,
                        grads[i].shape().str().c_str(), i + 1, want.str().c_str());
        gradient_inputs.push_back(i);
    }
    node->outputs.resize(static_cast<int>(gradient_inputs.size()));
    for (size_t k = 0; k < gradient_inputs.size(); ++k)
        node->outputs[static_cast<int>(k)].value = grads[gradient_inputs[k]].value();
}

// A custom node holds its inputs while it runs (the function reads them as tensors); one that
// takes no part in autograd lets go afterwards, so no-grad loops do not chain nodes together.
void release_inputs_unless_tracked(Node* node) {
    if (node->tracks_grad) return;
    for (Edge& e : node->inputs) e.release_node();
}

}  // namespace

void shape_custom(ShapeCall& c) { c.n_outputs = 0; }   // the function itself says, when it runs

void function_run(Node* node) {
    if (!node->custom()) engine_fail("%s: runs only through a custom function", node->info().name);
    if (node->op == OP_function) run_forward(node);
    else run_backward(node, engine_recording().group_node);
}

void backward_function(BackwardCall& c) {
    Node* node = c.node;
    std::vector<Tensor> grad_outputs(node->outputs.size());
    std::vector<const Tensor*> inputs;
    for (int i = 0; i < node->outputs.size(); ++i) {
        const Value& v = node->outputs[i].value;
        grad_outputs[i] = c.grad_output[i].defined() ? c.grad_output[i] : ops::create(OP_zeros, v.shape, v.dtype, 0, v.device());
        inputs.push_back(&grad_outputs[i]);
    }
    Tensor grads = op_call(OP_function_backward, inputs.data(), static_cast<int>(inputs.size()), OpAttrs(),
                           &node->custom());
    release_inputs_unless_tracked(grads.node.get());
    std::vector<int> input_of_output = grads.node->group_records_made().gradient_inputs;
    for (size_t k = 0; k < input_of_output.size(); ++k)
        c.grad_input[input_of_output[k]] = Tensor(grads.node.get(), static_cast<int>(k));
}

std::vector<Tensor> function_apply(const std::shared_ptr<CustomFunction>& fn, const std::vector<Tensor>& inputs) {
    std::vector<const Tensor*> pointers;
    for (const Tensor& t : inputs) pointers.push_back(&t);
    Tensor first = op_call(OP_function, pointers.data(), static_cast<int>(pointers.size()), OpAttrs(), &fn);
    release_inputs_unless_tracked(first.node.get());
    std::vector<Tensor> outputs;
    for (int i = 0; i < first.node->outputs.size(); ++i) outputs.emplace_back(first.node.get(), i);
    return outputs;
}

}  // namespace td
