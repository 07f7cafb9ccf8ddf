#include "runtime/schedule_placement.h"

#include <unordered_map>
#include <vector>

#include "ops/custom_ops.h"

namespace smelt::runtime {

namespace {

using Placement = OpDefinition::Placement;

Placement placement_of(const ir::Node& n) {
  if (n.is_group()) return Placement::Anywhere;
  const ops::CustomOpRecord* op = ops::custom_op(n.op);
  return op ? op->def.placement : Placement::Anywhere;
}

std::vector<ir::Node*> current_order(const ir::Graph& graph) {
  std::vector<ir::Node*> order;
  for (const auto& n : graph.nodes()) order.push_back(n.get());
  return order;
}

std::unordered_map<const ir::Node*, size_t> positions(const std::vector<ir::Node*>& order) {
  std::unordered_map<const ir::Node*, size_t> at;
  for (size_t i = 0; i < order.size(); ++i) at[order[i]] = i;
  return at;
}

}  // namespace

int schedule_placement(ir::Graph& graph) {
  std::vector<ir::Node*> early, late;
  for (const auto& n : graph.nodes()) {
    const Placement p = placement_of(*n);
    if (p == Placement::Early) early.push_back(n.get());
    if (p == Placement::Late) late.push_back(n.get());
  }
  int moved = 0;
  // Early ops in order (one may read another's output: it then follows it up).
  for (ir::Node* node : early) {
    const std::vector<ir::Node*> order = current_order(graph);
    const auto at = positions(order);
    size_t first_free = 0;  // the earliest position the node may take
    for (const ir::Value* v : node->inputs) {
      if (v->producer) first_free = std::max(first_free, at.at(v->producer) + 1);
    }
    if (first_free < at.at(node)) {
      graph.move_node(node, order[first_free]);
      ++moved;
    }
  }
  // Late ops from the last (one may feed another: that one has moved down already).
  for (auto it = late.rbegin(); it != late.rend(); ++it) {
    ir::Node* node = *it;
    const std::vector<ir::Node*> order = current_order(graph);
    const auto at = positions(order);
    size_t first_reader = order.size();
    for (const ir::Value* out : node->outputs) {
      for (const ir::Use& use : out->uses) first_reader = std::min(first_reader, at.at(use.node));
    }
    if (first_reader > at.at(node) + 1) {
      graph.move_node(node, first_reader < order.size() ? order[first_reader] : nullptr);
      ++moved;
    }
  }
  return moved;
}

}  // namespace smelt::runtime
