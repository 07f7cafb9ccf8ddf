#include "runtime/schedule_updates.h"

#include <algorithm>
#include <set>
#include <unordered_map>
#include <vector>

namespace smelt::runtime {

namespace {

// The nodes reading `v`, directly or through chains of view ops (which share its memory).
std::set<ir::Node*> readers_of(const ir::Value* v) {
  std::set<ir::Node*> readers;
  std::vector<const ir::Value*> frontier{v};
  while (!frontier.empty()) {
    const ir::Value* x = frontier.back();
    frontier.pop_back();
    for (const ir::Use& use : x->uses) {
      if (!readers.insert(use.node).second) continue;
      if (!use.node->is_group() && ops::is_view_op(use.node->op) && ops::aliases(use.node->op, 0) == 0)
        frontier.push_back(use.node->outputs[0]);
    }
  }
  return readers;
}

// `writer` and every node that reads its outputs, transitively.
std::set<ir::Node*> closure_of(ir::Node* writer) {
  std::set<ir::Node*> nodes{writer};
  std::vector<ir::Node*> frontier{writer};
  while (!frontier.empty()) {
    ir::Node* n = frontier.back();
    frontier.pop_back();
    for (const ir::Value* out : n->outputs) {
      for (const ir::Use& use : out->uses) {
        if (nodes.insert(use.node).second) frontier.push_back(use.node);
      }
    }
  }
  return nodes;
}

}  // namespace

int schedule_updates(ir::Graph& graph) {
  int moved = 0;
  for (const auto& [output, input] : graph.updates()) {
    ir::Node* writer = graph.outputs()[output]->producer;
    if (!writer) continue;  // the output is an input or a constant: the plan copies it
    std::unordered_map<const ir::Node*, size_t> position;
    std::vector<ir::Node*> order;
    for (const auto& n : graph.nodes()) {
      position[n.get()] = order.size();
      order.push_back(n.get());
    }
    const std::set<ir::Node*> moving = closure_of(writer);
    // Every node of `moving` must come after `target`: the other readers of the input, and the
    // producers of what the moving nodes read from outside.
    size_t target = 0;
    bool any = false, stuck = false;
    auto after = [&](const ir::Node* n) {
      target = any ? std::max(target, position.at(n)) : position.at(n);
      any = true;
    };
    for (ir::Node* r : readers_of(graph.inputs()[input])) {
      if (r == writer) continue;
      if (moving.count(r)) stuck = true;  // reads the new value and the old one: no order helps
      after(r);
    }
    if (stuck || !any || target < position.at(writer)) continue;
    for (ir::Node* n : moving) {
      for (const ir::Value* v : n->inputs) {
        if (v->producer && !moving.count(v->producer)) after(v->producer);
      }
    }
    ir::Node* before = target + 1 < order.size() ? order[target + 1] : nullptr;
    for (ir::Node* n : order) {  // in the current order, so the moved nodes keep theirs
      if (moving.count(n) && position.at(n) < target) graph.move_node(n, before);
    }
    ++moved;
  }
  return moved;
}

}  // namespace smelt::runtime
