#include "passes/inline_custom.h"

#include <unordered_map>

#include "ops/custom_ops.h"
#include "trace/trace.h"

namespace smelt::passes {
namespace {

std::string metas_str(const std::vector<ir::Value*>& values) {
  std::string s;
  for (const ir::Value* v : values) {
    s += (s.empty() ? "" : ", ") + std::string(dtype_name(v->meta.dtype)) + " " + shape_str(v->meta.shape);
  }
  return "(" + s + ")";
}

// The expression of `op` traced at `node`'s inputs: a graph whose inputs are the node's.
std::unique_ptr<ir::Graph> trace_expression(const ops::CustomOpRecord& op, const ir::Node& node) {
  ir::Graph base;
  for (const ir::Value* v : node.inputs) base.add_input(v->meta);
  auto more = [&](const std::vector<Tensor>& inputs, const std::vector<Tensor>&) {
    return op.def.expression(inputs, node.attrs);
  };
  std::unique_ptr<ir::Graph> g;
  try {
    g = trace::extend(base, {}, {}, more);
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
  return g;
}

// Copies `body`'s nodes into `graph` before `node`, its inputs being node's; returns the values
// that stand for body's outputs.
std::vector<ir::Value*> splice(ir::Graph& graph, ir::Node* node, const ir::Graph& body) {
  std::unordered_map<const ir::Value*, ir::Value*> map;
  for (size_t i = 0; i < body.inputs().size(); ++i) map[body.inputs()[i]] = node->inputs[i];
  for (const ir::Value* c : body.constants()) map[c] = graph.add_constant(c->constant);
  for (const auto& n : body.nodes()) {
    SMELT_INTERNAL_CHECK(!n->is_group()) << "a traced expression holds a group";
    std::vector<ir::Value*> inputs;
    for (const ir::Value* v : n->inputs) inputs.push_back(map.at(v));
    ir::Node* copy = graph.insert_node(node, n->op, inputs, n->attrs);
    for (size_t k = 0; k < n->outputs.size(); ++k) map[n->outputs[k]] = copy->outputs[k];
  }
  std::vector<ir::Value*> outs;
  for (const ir::Value* v : body.outputs()) outs.push_back(map.at(v));
  return outs;
}

}  // namespace

bool inline_custom(ir::Graph& graph) {
  std::vector<ir::Node*> targets;
  for (const auto& n : graph.nodes()) {
    const ops::CustomOpRecord* op = ops::custom_op(n->op);
    if (op && op->def.expression) targets.push_back(n.get());
  }
  for (ir::Node* node : targets) {
    const ops::CustomOpRecord& op = *ops::custom_op(node->op);
    std::vector<ir::Value*> outs = splice(graph, node, *trace_expression(op, *node));
    for (size_t k = 0; k < outs.size(); ++k) graph.replace_all_uses(node->outputs[k], outs[k]);
    graph.erase_node(node);
  }
  return !targets.empty();
}

}  // namespace smelt::passes
