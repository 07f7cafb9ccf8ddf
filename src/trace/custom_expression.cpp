#include "trace/custom_expression.h"

#include "tensor/capture.h"
#include "trace/trace.h"

namespace smelt::trace {
namespace {

std::string metas_str(const std::vector<ir::Value*>& values) {
  std::string s;
  for (const ir::Value* v : values) {
    s += (s.empty() ? "" : ", ") + std::string(dtype_name(v->meta.dtype)) + " " + shape_str(v->meta.shape);
  }
  return "(" + s + ")";
}

}  // namespace

std::unique_ptr<ir::Graph> trace_custom_expression(const ops::CustomOpRecord& op, const ir::Node& node) {
  ir::Graph base;
  for (const ir::Value* v : node.inputs) base.add_input(v->meta);
  auto more = [&](const std::vector<Tensor>& inputs, const std::vector<Tensor>&) {
    return op.def.expression(inputs, node.attrs);
  };
  std::unique_ptr<ir::Graph> g;
  // A lifting capture tells the tensors the expression creates (constants) from the ones it
  // captured (tensor/capture.h), checked below while the scope still holds its record.
  detail::CaptureScope capture(/*lift_captured=*/true);
  try {
    g = extend(base, {}, {}, more);
  } catch (const Error& e) {
    throw Error("custom op '" + op.def.name + "': its expression at inputs " + metas_str(node.inputs) +
                ": " + e.what(), e.internal());
  }
  SMELT_CHECK(g->inputs().size() == node.inputs.size())
      << "custom op '" << op.def.name << "': its expression draws random numbers; an expression "
      << "is deterministic (keep randomness in the forward kernel)";
  SMELT_CHECK(g->outputs().size() == node.outputs.size())
      << "custom op '" << op.def.name << "': its expression returned " << g->outputs().size()
      << " tensors at inputs " << metas_str(node.inputs) << ", the shape rule " << node.outputs.size();
  for (size_t k = 0; k < node.outputs.size(); ++k) {
    SMELT_CHECK(g->outputs()[k]->meta == node.outputs[k]->meta)
        << "custom op '" << op.def.name << "': its expression's output " << k << " at inputs "
        << metas_str(node.inputs) << " is " << metas_str({g->outputs()[k]}) << ", the shape rule says "
        << metas_str({node.outputs[k]});
  }
  for (const ir::Value* c : g->constants()) {
    SMELT_CHECK(!c->constant.storage() || !detail::captured_from_outside(c->constant.storage().get()))
        << "custom op '" << op.def.name << "': its expression reads a tensor it captured from outside ("
        << dtype_name(c->meta.dtype) << " " << shape_str(c->meta.shape) << "); compiled, its values "
        << "would be frozen while eager calls read them anew. An expression is a function of its "
        << "inputs and attributes: pass the tensor as an input of the op";
  }
  return g;
}

}  // namespace smelt::trace
