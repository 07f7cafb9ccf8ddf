// Common subexpression elimination: two nodes with the same op, attributes and inputs compute
// the same values, so the later one's uses move to the earlier one (dce removes it); the two
// operands of a commutative op (kCommutative in ops.def) match in either order. Equal small
// constants (same dtype and bits) are merged too. Random ops (dropout) are never merged: two draws differ.
#pragma once

#include "ir/graph.h"

namespace smelt::passes {

bool cse(ir::Graph& graph);

}  // namespace smelt::passes
