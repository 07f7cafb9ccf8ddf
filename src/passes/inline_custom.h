// Inlining user-defined ops (smelt/custom_op.h): each node of a registered op that has an
// expression is replaced by the expression's ops, traced at the node's input shapes, so the
// passes after it optimize them and fusion puts them in the kernels around them (an elementwise
// expression fuses like a built-in elementwise op). Ops without an expression stay as they are:
// opaque steps that run the op's kernel. An expression whose outputs differ from the op's shape
// rule, or that draws random numbers, is an error naming the op.
#pragma once

#include "ir/graph.h"

namespace smelt::passes {

bool inline_custom(ir::Graph& graph);

}  // namespace smelt::passes
