// A node of a custom domain that a user-defined op claims (OpDefinition::onnx_domain): the op is
// called with the node's inputs and its attributes as smelt attributes of the same names (ints,
// floats, int lists, strings; a float list or a tensor has no smelt attribute type).
#include "onnx/node_context.h"
#include "ops/dispatch.h"

namespace smelt::onnx_import {

std::vector<Tensor> convert_registered_op(NodeContext& c, ops::OpId op) {
  using ::onnx::AttributeProto;
  Attrs attrs;
  for (const AttributeProto& a : c.proto().attribute()) {
    const std::string& name = a.name();
    switch (a.type()) {
      case AttributeProto::INT: attrs.set(name, c.attr_int(name)); break;
      case AttributeProto::FLOAT: attrs.set(name, c.attr_float(name)); break;
      case AttributeProto::INTS: attrs.set(name, c.attr_ints(name)); break;
      case AttributeProto::STRING: attrs.set(name, c.attr_string(name)); break;
      default:
        c.unsupported("attribute '" + name + "' is not an int, float, int list or string, the " +
                      "attribute types a user-defined op takes");
    }
  }
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < c.num_inputs(); ++i) inputs.push_back(c.input(i));  // none may be omitted
  return ops::call(op, inputs, attrs);
}

}  // namespace smelt::onnx_import
