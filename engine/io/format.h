// format.h: tensors and tapes as text, for tostring(), the REPL and the debugger.
#pragma once

#include <string>
#include <vector>

#include "tape.h"

namespace td {

// The values the way PyTorch prints them: "[[ 0.1234, -1.5000],\n [...]]" with a shared width,
// 4 decimals (or scientific notation when magnitudes differ a lot, or "300." for whole numbers),
// and "..." summaries past 1,000 elements. `indent` is the column the first bracket sits at.
// A value on another device is read through one host copy (value_to_host).
std::string value_format(const Value& value, int indent);

// tostring(t): "tensor([...], size=[2,3], dtype=float64, grad_fn=<mul #3>)"; a tensor not on the
// CPU says so as ", device=cuda" before the dtype.
std::string tensor_format(const Tensor& t);

// The nodes as a table, one per line: id, op, phase, input ids, output shapes, file:line. Rows
// whose id is in `marked` start with "=>" (the debugger's current node); edited nodes say so.
std::string graph_format_table(const NodeList& nodes, const std::vector<int64_t>& marked = {});

// A number in `significant` digits, printf's %g ("0.1235", "1e+30", "nan"): the debugger's banners
// and reports, the animation's panels.
std::string number_text(double x, int significant = 4);

// Every live node on the tape, in id order.
NodeList tape_nodes();

}  // namespace td
