#include "onnx/node_context.h"

#include <map>
#include <mutex>

#include "smelt/creation.h"
#include "smelt/ops.h"

namespace smelt::onnx_import {
namespace {

using ::onnx::AttributeProto;

const char* attr_type_name(int type) {
  switch (type) {
    case AttributeProto::FLOAT: return "float";
    case AttributeProto::INT: return "int";
    case AttributeProto::STRING: return "string";
    case AttributeProto::TENSOR: return "tensor";
    case AttributeProto::GRAPH: return "graph";
    case AttributeProto::SPARSE_TENSOR: return "sparse tensor";
    case AttributeProto::TYPE_PROTO: return "type";
    case AttributeProto::FLOATS: return "floats";
    case AttributeProto::INTS: return "ints";
    case AttributeProto::STRINGS: return "strings";
    case AttributeProto::TENSORS: return "tensors";
    case AttributeProto::GRAPHS: return "graphs";
    case AttributeProto::SPARSE_TENSORS: return "sparse tensors";
    case AttributeProto::TYPE_PROTOS: return "types";
    default: return "undefined";
  }
}

std::map<std::string, Converter>& registry() {
  static std::map<std::string, Converter> r;
  return r;
}

}  // namespace

NodeContext::NodeContext(const ::onnx::NodeProto& node, int64_t opset, std::vector<Tensor> inputs,
                         const std::string& model_dir)
    : node_(node), opset_(opset), inputs_(std::move(inputs)), model_dir_(model_dir) {
  for (const auto& n : node.input()) input_names_.push_back(n);
}

std::string NodeContext::where() const {
  std::string name = node_.name().empty() ? (node_.output_size() ? node_.output(0) : std::string("?")) : node_.name();
  if (name.size() > 80) name = name.substr(0, 80) + "...";
  std::string op = node_.op_type().size() > 60 ? node_.op_type().substr(0, 60) + "..." : node_.op_type();
  return "node '" + name + "' (" + op + ", opset " + std::to_string(opset_) + ")";
}

void NodeContext::unsupported(const std::string& what) const { throw onnx::Unsupported(where() + ": " + what); }
void NodeContext::invalid(const std::string& what) const { throw Error(where() + ": " + what); }

const Tensor& NodeContext::input(size_t i) const {
  if (!has_input(i)) invalid("input " + std::to_string(i) + " is required but missing");
  return inputs_[i];
}

std::vector<int64_t> NodeContext::input_ints(size_t i) const {
  const Tensor& t = input(i);
  if (!is_concrete(t)) need_value(i);
  // ONNX types most of these inputs (axes, K, shapes) int64; some (CumSum's axis) int32 or int64.
  if (!dtype_is_signed_integer(t.dtype())) {
    invalid("input " + std::to_string(i) + " must be int64 or int32, got " + dtype_name(t.dtype()));
  }
  std::vector<int64_t> out(size_t(t.numel()));
  const Tensor c = t.contiguous();
  if (t.dtype() == DType::Int32) {  // widened here: a cast op would be traced, not computed
    const int32_t* p = c.data<int32_t>();
    for (size_t k = 0; k < out.size(); ++k) out[k] = p[k];
  } else if (!out.empty()) {
    std::memcpy(out.data(), c.raw_data(), out.size() * sizeof(int64_t));
  }
  return out;
}

std::vector<double> NodeContext::input_floats(size_t i) const {
  const Tensor& t = input(i);
  if (!is_concrete(t)) need_value(i);
  return t.to_vector();
}

void NodeContext::need_value(size_t i) const {
  throw onnx::ValueDependent(where() + ": input " + std::to_string(i) + " ('" + input_names_[i].substr(0, 80) +
                                 "') must be known when the model is imported (an initializer, a Constant, or "
                                 "computed from them and from shapes): smelt graphs have static shapes, and here "
                                 "it depends on graph input values",
                             input_names_[i]);
}

const AttributeProto* NodeContext::find_attr(const std::string& name, int type) {
  for (const auto& a : node_.attribute()) {
    if (a.name() != name) continue;
    read_.insert(name);
    if (!a.ref_attr_name().empty()) unsupported("attribute '" + name + "' refers to a function attribute");
    if (a.type() != type) {
      invalid("attribute '" + name + "' must be of type " + attr_type_name(type) + ", it is " + attr_type_name(a.type()));
    }
    return &a;
  }
  return nullptr;
}

bool NodeContext::has_attr(const std::string& name) const {
  for (const auto& a : node_.attribute()) {
    if (a.name() == name) return true;
  }
  return false;
}

int64_t NodeContext::attr_int(const std::string& name, std::optional<int64_t> fallback) {
  const AttributeProto* a = find_attr(name, AttributeProto::INT);
  if (a) return a->i();
  if (!fallback) invalid("attribute '" + name + "' (int) is required");
  return *fallback;
}

double NodeContext::attr_float(const std::string& name, std::optional<double> fallback) {
  const AttributeProto* a = find_attr(name, AttributeProto::FLOAT);
  if (a) return a->f();
  if (!fallback) invalid("attribute '" + name + "' (float) is required");
  return *fallback;
}

std::vector<int64_t> NodeContext::attr_ints(const std::string& name, std::optional<std::vector<int64_t>> fallback) {
  const AttributeProto* a = find_attr(name, AttributeProto::INTS);
  if (a) return {a->ints().begin(), a->ints().end()};
  if (!fallback) invalid("attribute '" + name + "' (ints) is required");
  return *fallback;
}

std::vector<double> NodeContext::attr_floats(const std::string& name, std::optional<std::vector<double>> fallback) {
  const AttributeProto* a = find_attr(name, AttributeProto::FLOATS);
  if (a) return {a->floats().begin(), a->floats().end()};
  if (!fallback) invalid("attribute '" + name + "' (floats) is required");
  return *fallback;
}

std::string NodeContext::attr_string(const std::string& name, std::optional<std::string> fallback) {
  const AttributeProto* a = find_attr(name, AttributeProto::STRING);
  if (a) return a->s();
  if (!fallback) invalid("attribute '" + name + "' (string) is required");
  return *fallback;
}

std::vector<std::string> NodeContext::attr_strings(const std::string& name,
                                                  std::optional<std::vector<std::string>> fallback) {
  const AttributeProto* a = find_attr(name, AttributeProto::STRINGS);
  if (a) return {a->strings().begin(), a->strings().end()};
  if (!fallback) invalid("attribute '" + name + "' (strings) is required");
  return *fallback;
}

Tensor NodeContext::attr_tensor(const std::string& name) {
  const AttributeProto* a = find_attr(name, AttributeProto::TENSOR);
  if (!a) invalid("attribute '" + name + "' (tensor) is required");
  return tensor_from_proto(a->t(), model_dir_, where() + " attribute '" + name + "'");
}

void NodeContext::check_all_attrs_read() const {
  for (const auto& a : node_.attribute()) {
    if (!read_.count(a.name())) {
      std::string n = a.name().size() > 60 ? a.name().substr(0, 60) + "..." : a.name();
      unsupported("attribute '" + n + "' (" + attr_type_name(a.type()) + ") is not supported");
    }
  }
}

const Converter* find_converter(const std::string& op_type) {
  static std::once_flag once;
  std::call_once(once, [] {
    register_elementwise_converters();
    register_reduce_converters();
    register_shape_converters();
    register_nn_converters();
    register_index_converters();
    register_resize_converters();
    register_einsum_converter();
    register_recurrent_converters();
    register_quantize_converters();
  });
  auto it = registry().find(op_type);
  return it == registry().end() ? nullptr : &it->second;
}

void register_converter(const std::string& op_type, Converter fn) { registry()[op_type] = std::move(fn); }

bool is_concrete(const Tensor& t) { return t.defined() && bool(t.storage()); }

int64_t normalize_axis(NodeContext& c, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) {
    c.invalid("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank) +
              "; valid: [" + std::to_string(-rank) + ", " + std::to_string(rank - 1) + "]");
  }
  return axis < 0 ? axis + rank : axis;
}

Tensor scalar_of(double v, const Tensor& like) { return scalar_tensor(v, like.dtype()); }

}  // namespace smelt::onnx_import
