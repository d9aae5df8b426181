// onnx_builder.h: writing ONNX nodes (onnx_export.cpp's walk, onnx_ops.cpp's per-op mappings).
// The protobuf classes are ONNX's own (onnx/onnx_pb.h from libonnx-dev): nothing here encodes
// protobuf by hand.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "onnx_export.h"
#include "tensor.h"

namespace td {

// The ONNX element type of a dtype.
int onnx_dtype(DType dtype);

// A list of nodes being written: the main graph's, or a function body's. Every name it makes
// starts with its prefix and is unique in the list; constants are Constant nodes (a function body
// cannot read the graph's initializers).
class OnnxBuilder {
public:
    explicit OnnxBuilder(std::string prefix) : prefix_(std::move(prefix)) {}

    std::string fresh(const std::string& hint);   // a new, unused name
    // One node of `op_type` (ai.onnx unless `domain`) with `n_outputs` fresh outputs.
    std::vector<std::string> add(const std::string& op_type, const std::vector<std::string>& inputs, int n_outputs,
                                 std::vector<onnx::AttributeProto> attrs = {}, const std::string& domain = "");
    std::string add1(const std::string& op_type, const std::vector<std::string>& inputs,
                     std::vector<onnx::AttributeProto> attrs = {}) {
        return add(op_type, inputs, 1, std::move(attrs))[0];
    }
    // Constants: a number of `dtype` with `shape` (0-d by default; every element = value), int64 lists.
    std::string scalar(double value, DType dtype);
    std::string filled(double value, DType dtype, const Shape& shape);
    std::string values(const std::vector<double>& values, DType dtype, const Shape& shape);
    std::string ints(const std::vector<int64_t>& values);   // 1-d int64 (axes, shapes, pads)
    std::string int_scalar(int64_t value);                   // 0-d int64
    std::string cast(const std::string& x, DType from, DType to);   // x itself when from == to
    // x (of `shape`) with its flat row-major elements at `indices` replaced by the elements of
    // `updates` in order: ScatterND over the flat elements (region writes, writes through views).
    std::string scatter_flat(const std::string& x, const Shape& shape, const std::vector<int64_t>& indices,
                             const std::string& updates);

    std::vector<onnx::NodeProto>& nodes() { return nodes_; }
    // Stamps the nodes added from `first` on with a name and the Lua line they came from (Netron
    // shows both).
    void label_from(size_t first, const std::string& name, const std::string& where);

private:
    std::string prefix_;
    int next_ = 0;
    std::vector<onnx::NodeProto> nodes_;
};

onnx::AttributeProto onnx_attr_int(const char* name, int64_t value);
onnx::AttributeProto onnx_attr_ints(const char* name, const std::vector<int64_t>& values);
onnx::AttributeProto onnx_attr_float(const char* name, double value);
onnx::AttributeProto onnx_attr_string(const char* name, const std::string& value);
onnx::AttributeProto onnx_attr_tensor(const char* name, const onnx::TensorProto& value);

// A tensor's elements as a TensorProto (raw little-endian data), read through the host boundary.
onnx::TensorProto onnx_tensor_of(const Value& value, const std::string& name);

// What an op's mapping sees: the step's input names (already in the graph), their shapes and
// dtypes, the attributes, and the shapes and dtypes its outputs must have. It fills `out`, one
// name per output (in-place ops: the new contents of the written tensor).
struct OnnxOpCall {
    OnnxBuilder& b;
    OpId op;
    const OpAttrs& attrs;
    std::vector<std::string> in;
    std::vector<Shape> in_shape;
    std::vector<DType> in_dtype;
    std::vector<Shape> out_shape;
    std::vector<DType> out_dtype;
    std::vector<std::string> out;
    std::vector<std::string>* warnings = nullptr;
};

}  // namespace td
