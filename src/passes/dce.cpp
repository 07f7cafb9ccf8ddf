#include "passes/dce.h"

#include <vector>

namespace smelt::passes {

bool dce(ir::Graph& graph) {
  bool changed = false;
  // Walking backwards frees a whole dead chain in one sweep: a node's consumers come after it.
  std::vector<ir::Node*> order;
  for (const auto& n : graph.nodes()) order.push_back(n.get());
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    ir::Node* node = *it;
    bool dead = true;
    for (const ir::Value* out : node->outputs) {
      if (!out->uses.empty() || graph.is_output(out)) { dead = false; break; }
    }
    if (dead && !node->must_run()) {  // a write, or a check that may raise, is an effect unread
      graph.erase_node(node);
      changed = true;
    }
  }
  changed |= graph.erase_unused_constants();
  return changed;
}

}  // namespace smelt::passes
