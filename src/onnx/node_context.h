// What a converter sees of one ONNX node: its inputs as tensors (symbolic graph values while
// importing, or concrete when known at import time), its attributes with typed, checked reads,
// and its opset. Converters build their results with smelt ops, so the same code records IR
// nodes for symbolic inputs and computes values for concrete ones.
//
// Every attribute a converter reads is marked; an attribute the node sets that its converter never
// read is an onnx::Unsupported error naming it (so a new ONNX attribute is never silently
// ignored).
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "onnx/proto.h"
#include "ops/op_table.h"

namespace smelt::onnx_import {

class NodeContext {
 public:
  NodeContext(const ::onnx::NodeProto& node, int64_t opset, std::vector<Tensor> inputs,
              const std::string& model_dir);

  int64_t opset() const { return opset_; }
  const std::string& op() const { return node_.op_type(); }
  const ::onnx::NodeProto& proto() const { return node_; }
  // "node 'name' (Op, opset N)", for messages.
  std::string where() const;

  // ---- inputs (an empty name in the model is a missing optional input)
  size_t num_inputs() const { return inputs_.size(); }
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i].defined(); }
  const Tensor& input(size_t i) const;  // error when missing
  // An input whose values the converter needs (a shape, axes, pads): it must be known at import
  // time (an initializer, a Constant, or computed from those and from shapes).
  std::vector<int64_t> input_ints(size_t i) const;
  std::vector<double> input_floats(size_t i) const;
  const std::vector<std::string>& input_names() const { return input_names_; }
  size_t num_outputs() const { return size_t(node_.output_size()); }

  // ---- attributes
  bool has_attr(const std::string& name) const;
  int64_t attr_int(const std::string& name, std::optional<int64_t> fallback = std::nullopt);
  double attr_float(const std::string& name, std::optional<double> fallback = std::nullopt);
  std::vector<int64_t> attr_ints(const std::string& name, std::optional<std::vector<int64_t>> fallback = std::nullopt);
  std::vector<double> attr_floats(const std::string& name, std::optional<std::vector<double>> fallback = std::nullopt);
  std::string attr_string(const std::string& name, std::optional<std::string> fallback = std::nullopt);
  std::vector<std::string> attr_strings(
      const std::string& name, std::optional<std::vector<std::string>> fallback = std::nullopt);
  Tensor attr_tensor(const std::string& name);

  // onnx::Unsupported: "<where>: <what>".
  [[noreturn]] void unsupported(const std::string& what) const;
  // smelt::Error: "<where>: <what>" (the model is invalid).
  [[noreturn]] void invalid(const std::string& what) const;
  // onnx::ValueDependent: input i's values are needed but depend on graph inputs.
  [[noreturn]] void need_value(size_t i) const;
  // Throws for attributes the node sets that the converter never read.
  void check_all_attrs_read() const;

 private:
  const ::onnx::AttributeProto* find_attr(const std::string& name, int type);
  const ::onnx::NodeProto& node_;
  int64_t opset_;
  std::vector<Tensor> inputs_;
  std::vector<std::string> input_names_;
  const std::string& model_dir_;
  std::set<std::string> read_;
};

// A converter returns one tensor per node output (it may return fewer when trailing optional
// outputs are not supported; an output the model uses and the converter did not make is an error).
using Converter = std::function<std::vector<Tensor>(NodeContext&)>;

// The converter of an op (default domain), or null.
const Converter* find_converter(const std::string& op_type);
// Registration, one call per family file (convert_*.cpp).
void register_converter(const std::string& op_type, Converter fn);
void register_elementwise_converters();
void register_reduce_converters();
void register_shape_converters();
void register_nn_converters();
void register_index_converters();
void register_resize_converters();
void register_einsum_converter();
void register_recurrent_converters();
void register_quantize_converters();
// A node of a custom domain that a user-defined op claims (OpDefinition::onnx_domain): its inputs
// and attributes passed as they are to the op registered as `op` (convert_custom.cpp).
std::vector<Tensor> convert_registered_op(NodeContext& c, ops::OpId op);

// Helpers shared by the families.
bool is_concrete(const Tensor& t);                     // has data (not a symbolic graph value)
int64_t normalize_axis(NodeContext& c, int64_t axis, int64_t rank);  // [-rank, rank) -> [0, rank)
Tensor scalar_of(double v, const Tensor& like);         // a 0-dim constant of like's dtype

}  // namespace smelt::onnx_import
