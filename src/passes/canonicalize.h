// Canonicalization: one spelling per computation, so cse finds more duplicates and simplify's
// rules need only one operand order. Commutative binary ops (add, mul, maximum, minimum, eq, ne)
// get their operands in a canonical order: non-constants before constants (add(2, x) ->
// add(x, 2)), and otherwise by increasing value id (add(%b, %a) -> add(%a, %b)). IEEE add and mul
// are exactly commutative, so values do not change. Run dce after it.
#pragma once

#include <vector>

#include "ir/graph.h"
#include "ir/pattern.h"

namespace smelt::passes {

const std::vector<ir::RewriteRule>& canonicalize_rules();
bool canonicalize(ir::Graph& graph);

}  // namespace smelt::passes
