// onnx_export.h: a frozen function's plan written as an ONNX model, for the engines that run
// static graphs at scale (ONNX Runtime, TensorRT, Triton Inference Server). docs/onnx.md.
//
//   plan (recorded)  -> compiled with dce, cse and fold only (not fused, not in place, no reuse)
//                    -> one ONNX node (or a few) per step, through the mapping table (onnx_ops.cpp)
//                    -> ModelProto (onnx.proto, Debian's libonnx-dev), checked by ONNX's own
//                       checker and shape inference before it is written
//
// What the model holds:
//   inputs        the frozen function's tensor arguments, named after its Lua parameters
//   initializers  the captured tensors (parameters, optimizer state) as they are at export, and
//                 the plan's constants. A captured tensor the plan changes in place (a training
//                 step's update) is also a graph input, its initializer the default, so the next
//                 step can feed the updated one back
//   outputs       the returned tensors ("output", "output_2", ...), then each gradient the plan
//                 leaves in a .grad ("<name>.grad") and each captured tensor it changed in place
//                 ("<name>.new")
// Backward ops are ordinary ops; the named ones (tanh_backward, conv2d_backward_input, ...) go out
// as model-local functions in the "tapedeck" domain, or inlined (OnnxExportOptions).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ops.h"
#include "plan.h"

namespace td {

constexpr int ONNX_OPSET = 17;   // the one opset written (IR version 8)

struct OnnxExportOptions {
    int opset = ONNX_OPSET;
    bool inline_backward = false;   // named backward ops as plain nodes (else tapedeck-domain functions)
    bool strict = false;            // a value guard (a branch the Lua code took on a tensor value) refuses
    std::string producer = "tapedeck";
};

struct OnnxExportResult {
    std::vector<std::string> warnings;   // one per value guard exported as the branch it recorded, ...
    std::vector<std::string> inputs, outputs;   // the graph's input and output names, in order
    std::vector<std::string> arguments;         // the inputs standing for the function's arguments, in order
    // The captured tensors by their ONNX names (initializers; "<name>.grad" and "<name>.new" are
    // their gradient and updated value when the model has them).
    std::vector<std::pair<std::string, Tensor>> captured;
    int nodes = 0;                        // nodes in the main graph
    int functions = 0;                    // tapedeck-domain functions
};

// Writes `recorded` (a recorded plan: Frozen's cache entry, or plan_load's) as an ONNX model at
// `path`. Raises EngineError naming export_onnx when a step cannot be exported (the op, its line
// and why), when strict and the plan has a value guard, or when ONNX's checker rejects the model.
OnnxExportResult onnx_export(std::shared_ptr<const Plan> recorded, const OnnxExportOptions& options, const std::string& path);
// The same, the model's bytes in memory.
std::string onnx_export_bytes(std::shared_ptr<const Plan> recorded, const OnnxExportOptions& options, OnnxExportResult* result);

// ---------------------------------------------------------------------------------------------
// The mapping table (onnx_ops.cpp): one entry per op of ops.def. An op maps (emit is set) or is
// refused with the reason (refusal is set); test_onnx_table checks that every op has one of them.

struct OnnxOpCall;   // onnx_ops.cpp
using OnnxEmit = void (*)(OnnxOpCall&);

struct OnnxOpMapping {
    OnnxEmit emit = nullptr;
    const char* onnx = "";        // the ONNX ops it becomes, for docs/onnx.md's table
    const char* refusal = "";     // why it is not exported ("" when it maps)
};

const OnnxOpMapping& onnx_op_mapping(OpId op);
// Whether `op` goes out as a tapedeck-domain function unless inlined: the named backward ops.
bool onnx_op_is_function(OpId op);

}  // namespace td
