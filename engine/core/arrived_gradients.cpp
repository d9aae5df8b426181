// arrived_gradients.cpp: the gradient that arrived at each node in the latest backward pass, kept
// for those who look (the viewer's Gradient tab), with the backward nodes that sent it.
//
// backward() frees each gradient once used (rule 11 of docs/design.md). While an observer that looks at
// values is attached (engine_values_watched: the viewer open, a debugger with a breakpoint), it
// notes here each gradient it sends to an output and, at the output's visit, the complete sum.
// The table holds one entry per noted node and drops it when the node dies (node_destroy), so the
// kept gradients are bounded by the nodes something keeps alive (the viewer's window of history),
// and a pass without such an observer adds nothing to it.
#include <unordered_map>

#include "tape.h"

namespace td {

namespace {

// Immortal, as the engine's other singletons.
std::unordered_map<const Node*, std::vector<ArrivedGradient>>& arrived_table() {
    static auto* table = new std::unordered_map<const Node*, std::vector<ArrivedGradient>>();
    return *table;
}

// The entry of `output` of `node`, made on first use; reset when `pass` is a new backward pass.
ArrivedGradient& entry_for_pass(Node* node, int output, const BackwardPass& pass) {
    std::vector<ArrivedGradient>& per_output = arrived_table()[node];
    if (per_output.size() < static_cast<size_t>(node->outputs.size())) per_output.resize(node->outputs.size());
    node->has_arrived_gradients = true;
    ArrivedGradient& a = per_output[static_cast<size_t>(output)];
    if (a.pass != pass.serial) {
        a = ArrivedGradient();
        a.pass = pass.serial;
        a.root_id = pass.root->id;
    }
    return a;
}

GradientSender sender_of(const Tensor& grad, const Node* forward_node) {
    GradientSender s;
    s.node_id = grad.id();
    s.op = grad.node->name();
    s.output = grad.output;
    if (forward_node) {
        s.forward_id = forward_node->id;
        s.forward_op = forward_node->name();
    }
    return s;
}

}  // namespace

void arrived_gradient_sent(Node* target, int output, const Tensor& grad, const Node* forward_node) {
    const BackwardPass* pass = engine_backward_pass();
    if (!pass || !grad.defined() || !engine_values_watched()) return;
    entry_for_pass(target, output, *pass).senders.push_back(sender_of(grad, forward_node));
}

void arrived_gradient_complete(Node* node, int output, const Tensor& grad) {
    const BackwardPass* pass = engine_backward_pass();
    if (!pass || !grad.defined() || !engine_values_watched()) return;
    ArrivedGradient& a = entry_for_pass(node, output, *pass);
    a.value = grad.value();
    a.complete = true;
}

const ArrivedGradient* arrived_gradient(const Node* node, int output) {
    if (!node->has_arrived_gradients) return nullptr;
    auto found = arrived_table().find(node);
    if (found == arrived_table().end() || static_cast<size_t>(output) >= found->second.size()) return nullptr;
    const ArrivedGradient& a = found->second[static_cast<size_t>(output)];
    return a.pass ? &a : nullptr;
}

size_t arrived_gradients_kept() { return arrived_table().size(); }

void arrived_gradients_drop(Node* node) {
    arrived_table().erase(node);
    node->has_arrived_gradients = false;
}

}  // namespace td
