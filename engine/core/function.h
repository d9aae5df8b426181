// function.h: functions defined outside the engine (a Lua torch.Function) as nodes of the tape.
//
// function_apply records ONE node named after the function (op `function`) and runs it through
// exec_node like any op. The function's own ops run inside that node with grad off; they join its
// group and keep their own source lines (node->inner_nodes). Its backward rule records ONE node
// (op `function_backward`, named "<name>.backward") that runs the function's backward the same
// way. So a debugger can stop at the function as one step or look inside it, and a viewer can draw
// it as one node that opens up.
#pragma once

#include <string>
#include <vector>

#include "tape.h"

namespace td {

struct CustomFunction {
    explicit CustomFunction(std::string function_name)
        : name(std::move(function_name)), backward_name(name + ".backward") {}
    virtual ~CustomFunction() = default;

    // The outputs, computed from `inputs` with ops (grad is off while it runs). At least one.
    virtual std::vector<Tensor> forward(const std::vector<Tensor>& inputs) = 0;
    // One gradient per input of the forward, from one per output. An undefined tensor: no
    // gradient for that input. A result count other than the inputs' is an error (checked here).
    virtual std::vector<Tensor> backward(const std::vector<Tensor>& grad_outputs) = 0;

    // Whether backward reads tensors the forward saved (ctx:save_for_backward): then a second pass
    // through the graph without retain_graph is an error, as for an op that saves its inputs.
    virtual bool saves_tensors() const { return false; }

    const std::string name;
    const std::string backward_name;
};

// Record and run fn on inputs; returns its outputs (Tensor(node, i)), which require grad when an
// input does and grad is on.
std::vector<Tensor> function_apply(const std::shared_ptr<CustomFunction>& fn, const std::vector<Tensor>& inputs);

// Runs a `function` or `function_backward` node: the function's own ops, which set the node's
// outputs. exec_node calls it; these nodes have no kernel on any device (their ops have).
void function_run(Node* node);

}  // namespace td
