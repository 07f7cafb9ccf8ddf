// What an op's exporter sees while a smelt graph becomes an ONNX GraphProto: the IR node, the
// ONNX names of its inputs and outputs, and a builder that appends ONNX nodes and constant
// initializers with unique names. One exporter per op family file (export_*.cpp); the driver
// (export.cpp) walks the graph in order and calls the exporter of each node's op.
#pragma once

#include <string>
#include <unordered_set>
#include <vector>

#include "ir/graph.h"
#include "onnx/proto.h"

namespace smelt::onnx_export {

// Appends to one GraphProto; names every tensor uniquely.
class Builder {
 public:
  Builder(::onnx::GraphProto* graph, int64_t opset, bool qdq = false) : graph_(graph), opset_(opset), qdq_(qdq) {}

  int64_t opset() const { return opset_; }
  // Integer products in the QDQ form (onnx::ExportOptions::quantized_as_qdq).
  bool qdq() const { return qdq_; }
  // `hint` when not used yet, else `hint_K` for the first free K.
  std::string fresh(const std::string& hint);

  // Appends node `op_type` reading `inputs` ("" for a missing optional input) and writing
  // `outputs` (a fresh name for each empty one).
  ::onnx::NodeProto* node(const std::string& op_type, const std::vector<std::string>& inputs,
                          std::vector<std::string> outputs = {""});
  // One fresh output: node(...) and its name.
  std::string op(const std::string& op_type, const std::vector<std::string>& inputs);

  // Constants as initializers (small ones: shapes, axes, scalars).
  std::string ints(const std::vector<int64_t>& values, const std::string& hint = "ints");
  std::string int_scalar(int64_t value, const std::string& hint = "int");
  std::string scalar(double value, DType dtype, const std::string& hint = "scalar");  // 0-dim
  std::string tensor(const Tensor& value, const std::string& hint);

 private:
  ::onnx::GraphProto* graph_;
  int64_t opset_;
  bool qdq_ = false;
  std::unordered_set<std::string> used_;
};

// Attributes of an ONNX node.
void set_attr(::onnx::NodeProto* n, const std::string& name, int64_t v);
void set_attr(::onnx::NodeProto* n, const std::string& name, double v);
void set_attr(::onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v);
void set_attr(::onnx::NodeProto* n, const std::string& name, const std::string& v);

// One IR node being exported.
struct NodeExport {
  const ir::Node& node;
  Builder& b;
  std::vector<std::string> in;   // ONNX names of the node's inputs
  std::vector<std::string> out;  // ONNX names the node's outputs must get
  std::vector<bool> out_used;    // whether output k is read (by a node or as a graph output)

  const ops::Attrs& attrs() const { return node.attrs; }
  const ops::TensorMeta& in_meta(size_t i) const { return node.inputs[i]->meta; }
  const ops::TensorMeta& out_meta(size_t k) const { return node.outputs[k]->meta; }
  // smelt::Error naming the node and op: "onnx export: node %7 (op): <why>".
  [[noreturn]] void fail(const std::string& why) const;
  // Outputs past the first that the exporter cannot produce must be unused.
  void require_unused_from(size_t k, const std::string& what) const;
};

// The exporters of the op families: each writes ONNX nodes computing every used output of e.node
// into e.out. export.cpp's table says which family exports which op.
void export_elementwise(NodeExport& e);  // export_elementwise.cpp
void export_reduce(NodeExport& e);       // export_reduce.cpp: reductions, softmax, losses, scans
void export_movement(NodeExport& e);     // export_movement.cpp: views, joins, indexing
void export_nn(NodeExport& e);           // export_nn.cpp: contractions, pooling, normalization
void export_custom(NodeExport& e);       // export_custom.cpp: user-defined ops with an ONNX domain
void export_quantize(NodeExport& e);     // export_quantize.cpp: quantize, dequantize, integer products

}  // namespace smelt::onnx_export
