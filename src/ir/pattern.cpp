#include "ir/pattern.h"

#include "ir/constant.h"

namespace smelt::ir {

bool is_scalar_constant(const Value* v, double value) { return all_elements_are(v, value); }

Pattern Pattern::any(std::string capture) {
  Pattern p;
  p.capture_ = std::move(capture);
  return p;
}

Pattern Pattern::constant(std::string capture) {
  Pattern p;
  p.kind_ = Kind::Constant;
  p.capture_ = std::move(capture);
  return p;
}

Pattern Pattern::scalar(double value, std::string capture) {
  Pattern p = constant(std::move(capture));
  p.has_scalar_ = true;
  p.scalar_ = value;
  return p;
}

Pattern Pattern::op(ops::OpId op, std::vector<Pattern> operands, std::string capture) {
  Pattern p;
  p.kind_ = Kind::Op;
  p.op_ = op;
  p.operands_ = std::move(operands);
  p.capture_ = std::move(capture);
  return p;
}

Pattern&& Pattern::where(std::function<bool(const Value*)> predicate) && {
  predicates_.push_back(std::move(predicate));
  return std::move(*this);
}

bool Pattern::match_operands(Node* node, Match& m, bool swapped) const {
  for (size_t i = 0; i < operands_.size(); ++i) {
    size_t j = swapped ? operands_.size() - 1 - i : i;
    if (!operands_[i].match(node->inputs[j], m)) return false;
  }
  return true;
}

bool Pattern::match(Value* v, Match& m) const {
  switch (kind_) {
    case Kind::Any: break;
    case Kind::Constant:
      if (v->kind != ValueKind::Constant) return false;
      if (has_scalar_ && !is_scalar_constant(v, scalar_)) return false;
      break;
    case Kind::Op: {
      Node* node = v->producer;
      if (!node || node->op != op_ || node->inputs.size() != operands_.size()) return false;
      Match saved = m;
      if (!match_operands(node, m, false)) {
        m = saved;
        bool commutative = (ops::op_info(op_).flags & ops::kCommutative) && operands_.size() == 2;
        if (!commutative || !match_operands(node, m, true)) {
          m = saved;
          return false;
        }
      }
      break;
    }
  }
  for (const auto& pred : predicates_) {
    if (!pred(v)) return false;
  }
  if (!capture_.empty()) {
    auto [it, inserted] = m.captures.emplace(capture_, v);
    if (!inserted && it->second != v) return false;
  }
  return true;
}

bool apply_rules(Graph& g, const std::vector<RewriteRule>& rules) {
  bool changed = false;
  std::vector<Node*> order;
  for (const auto& n : g.nodes()) order.push_back(n.get());
  for (Node* node : order) {
    if (node->outputs.empty()) continue;
    Value* root = node->outputs[0];
    if (root->uses.empty() && !g.is_output(root)) continue;  // dead: dce's job
    for (const RewriteRule& rule : rules) {
      Match m;
      m.root = node;
      if (!rule.pattern.match(root, m)) continue;
      Value* replacement = rule.rewrite(g, m);
      if (!replacement || replacement == root) continue;
      if (!(replacement->meta == root->meta)) continue;  // a rule may not change types
      g.replace_all_uses(root, replacement);
      changed = true;
      break;
    }
  }
  return changed;
}

}  // namespace smelt::ir
