// Algebraic simplification: local identities (x + 0, x * 1, neg(neg(x)), permute of permute,
// no-op reshapes, dropout in eval mode, ...) as a table of rewrite rules, applied by the pattern
// driver. Every rule keeps the value's shape and dtype and its IEEE results, except where the
// table says otherwise (signed zero; the double reciprocal). Rules only redirect uses: run dce
// after it. Runs best after canonicalize (constants on the right) and fold.
#pragma once

#include <vector>

#include "ir/graph.h"
#include "ir/pattern.h"

namespace smelt::passes {

const std::vector<ir::RewriteRule>& simplify_rules();
bool simplify(ir::Graph& graph);

}  // namespace smelt::passes
