// Declarative patterns over the IR and a rewrite driver.
//
// A Pattern matches a value: any value, a constant (optionally one whose elements all equal a
// number), or the output of a given op whose operands match sub-patterns. Patterns may capture
// values by name; a name captured twice must bind the same value (so `sub(x, x)` is expressible).
// Operands of commutative binary ops match in either order. Predicates refine any pattern.
//
// A RewriteRule pairs a pattern with a function that builds the replacement (inserting new nodes
// before the matched node) or returns null to decline. The driver replaces the matched value only
// when the replacement has the same shape and dtype, so a rule cannot change a graph's types.
#pragma once

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace smelt::ir {

struct Match {
  Node* root = nullptr;
  std::unordered_map<std::string, Value*> captures;
  Value* operator[](const std::string& name) const { return captures.at(name); }
};

class Pattern {
 public:
  static Pattern any(std::string capture = "");
  static Pattern constant(std::string capture = "");
  // A constant all of whose elements equal `value` exactly (ir/constant.h: floats by bits, so
  // scalar(-0.0) matches -0 only and scalar(0.0) +0 only; integers by value).
  static Pattern scalar(double value, std::string capture = "");
  static Pattern op(ops::OpId op, std::vector<Pattern> operands, std::string capture = "");

  Pattern&& where(std::function<bool(const Value*)> predicate) &&;
  bool match(Value* v, Match& m) const;

 private:
  enum class Kind { Any, Constant, Op } kind_ = Kind::Any;
  ops::OpId op_{};
  bool has_scalar_ = false;
  double scalar_ = 0;
  std::vector<Pattern> operands_;
  std::string capture_;
  std::vector<std::function<bool(const Value*)>> predicates_;

  bool match_operands(Node* node, Match& m, bool swapped) const;
};

struct RewriteRule {
  const char* name;  // e.g. "add(x, 0) -> x"
  Pattern pattern;
  std::function<Value*(Graph& g, const Match& m)> rewrite;
};

// One sweep over the nodes, applying the first rule that matches each node's first output.
// Returns whether anything changed. Dead nodes are left for dce.
bool apply_rules(Graph& g, const std::vector<RewriteRule>& rules);

// True when `v` is a constant all of whose elements equal `value` exactly (see Pattern::scalar).
bool is_scalar_constant(const Value* v, double value);

}  // namespace smelt::ir
