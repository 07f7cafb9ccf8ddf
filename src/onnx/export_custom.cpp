// User-defined ops (smelt/custom_op.h) that claim an ONNX domain: one node of that domain whose op
// type is the op's name, its attributes as ONNX attributes of the same names (the inverse of
// onnx/convert_custom.cpp). build_model imports each such domain at version 1.
#include "onnx/export_builder.h"
#include "ops/custom_ops.h"

namespace smelt::onnx_export {

void export_custom(NodeExport& e) {
  const ops::CustomOpRecord* op = ops::custom_op(e.node.op);
  SMELT_INTERNAL_CHECK(op && !op->def.onnx_domain.empty()) << "export_custom: not an op with an ONNX domain";
  ::onnx::NodeProto* n = e.b.node(op->def.name, e.in, e.out);
  n->set_domain(op->def.onnx_domain);
  for (const auto& [name, value] : e.attrs().items()) {
    if (const auto* i = std::get_if<int64_t>(&value)) set_attr(n, name, *i);
    else if (const auto* f = std::get_if<double>(&value)) set_attr(n, name, *f);
    else if (const auto* l = std::get_if<std::vector<int64_t>>(&value)) set_attr(n, name, *l);
    else if (const auto* s = std::get_if<std::string>(&value)) set_attr(n, name, *s);
    else e.fail("attribute '" + name + "' is a dtype, which the attributes of a custom ONNX node cannot carry");
  }
}

}  // namespace smelt::onnx_export
