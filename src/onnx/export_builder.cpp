// The builder the op exporters write through: unique names, nodes, constant initializers.
#include "onnx/export_builder.h"

#include "smelt/creation.h"

namespace smelt::onnx_export {

std::string Builder::fresh(const std::string& hint) {
  const std::string base = hint.empty() ? "t" : hint;
  if (used_.insert(base).second) return base;
  for (size_t k = 1;; ++k) {
    std::string name = base + "_" + std::to_string(k);
    if (used_.insert(name).second) return name;
  }
}

::onnx::NodeProto* Builder::node(const std::string& op_type, const std::vector<std::string>& inputs,
                                 std::vector<std::string> outputs) {
  ::onnx::NodeProto* n = graph_->add_node();
  n->set_op_type(op_type);
  n->set_name(fresh(op_type));
  for (const auto& i : inputs) n->add_input(i);
  for (auto& o : outputs) {
    if (o.empty()) o = fresh(op_type + "_out");
    n->add_output(o);
  }
  return n;
}

std::string Builder::op(const std::string& op_type, const std::vector<std::string>& inputs) {
  return node(op_type, inputs)->output(0);
}

std::string Builder::tensor(const Tensor& value, const std::string& hint) {
  const std::string name = fresh(hint);
  *graph_->add_initializer() = onnx_import::tensor_to_proto(value, name);
  return name;
}

std::string Builder::ints(const std::vector<int64_t>& values, const std::string& hint) {
  return tensor(from_vector(values, {int64_t(values.size())}, DType::Int64), hint);
}

std::string Builder::int_scalar(int64_t value, const std::string& hint) {
  return tensor(scalar_tensor(value, DType::Int64), hint);
}

std::string Builder::scalar(double value, DType dtype, const std::string& hint) {
  return tensor(scalar_tensor(value, dtype), hint);
}

void set_attr(::onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(v);
}

void set_attr(::onnx::NodeProto* n, const std::string& name, double v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::FLOAT);
  a->set_f(float(v));
}

void set_attr(::onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

void set_attr(::onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::STRING);
  a->set_s(v);
}

void NodeExport::fail(const std::string& why) const {
  const ir::Value* first = node.outputs.empty() ? nullptr : node.outputs[0];
  throw Error("onnx export: node " + (first ? "%" + std::to_string(first->id) : std::string("?")) + " (" +
              node.name() + "): " + why);
}

void NodeExport::require_unused_from(size_t k, const std::string& what) const {
  for (size_t i = k; i < out_used.size(); ++i) {
    if (out_used[i]) fail("output " + std::to_string(i) + " (" + what + ") is used, and has no ONNX form");
  }
}

}  // namespace smelt::onnx_export
