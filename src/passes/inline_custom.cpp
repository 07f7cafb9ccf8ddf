#include "passes/inline_custom.h"

#include <unordered_map>

#include "ops/custom_ops.h"
#include "trace/custom_expression.h"

namespace smelt::passes {
namespace {

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
    std::vector<ir::Value*> outs = splice(graph, node, *trace::trace_custom_expression(op, *node));
    for (size_t k = 0; k < outs.size(); ++k) graph.replace_all_uses(node->outputs[k], outs[k]);
    graph.erase_node(node);
  }
  return !targets.empty();
}

}  // namespace smelt::passes
