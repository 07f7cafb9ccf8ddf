#include "passes/canonicalize.h"

#include <utility>

namespace smelt::passes {
namespace {

// Where an operand sorts: computed and input values first, constants last; ties by id.
std::pair<bool, int> operand_rank(const ir::Value* v) {
  return {v->kind == ir::ValueKind::Constant, v->id};
}

std::vector<ir::RewriteRule> canonical_rules() {
  std::vector<ir::RewriteRule> rules;
  for (int i = 0; i < ops::kOpCount; ++i) {
    auto op = static_cast<ops::OpId>(i);
    const ops::OpInfo& info = ops::op_info(op);
    if (!(info.flags & ops::kCommutative) || info.arity != 2) continue;
    // op(a, b) -> op(b, a)  when b sorts before a (constants last, then by id)
    rules.push_back({"commutative operands in canonical order",
                     ir::Pattern::op(op, {ir::Pattern::any(), ir::Pattern::any()}),
                     [](ir::Graph& g, const ir::Match& m) -> ir::Value* {
                       ir::Node* n = m.root;
                       if (!(operand_rank(n->inputs[1]) < operand_rank(n->inputs[0]))) return nullptr;
                       return g.insert_node(n, n->op, {n->inputs[1], n->inputs[0]}, n->attrs)->outputs[0];
                     }});
  }
  return rules;
}

}  // namespace

const std::vector<ir::RewriteRule>& canonicalize_rules() {
  static const std::vector<ir::RewriteRule> kRules = canonical_rules();
  return kRules;
}

bool canonicalize(ir::Graph& graph) { return ir::apply_rules(graph, canonicalize_rules()); }

}  // namespace smelt::passes
