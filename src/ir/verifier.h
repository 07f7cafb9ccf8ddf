// Checks a graph's invariants; throws smelt::Error listing the first problem found.
//   - every node's arity and attributes are accepted by its op's shape rule, and its output
//     metas equal what the shape rule computes;
//   - nodes are in topological order (every input is a graph input, a constant, or an output of
//     an earlier node): this also rules out cycles;
//   - use lists match the edges exactly (duplicate edges included);
//   - graph outputs are values of this graph.
// Runs after every pass in debug and test builds.
#pragma once

#include "ir/graph.h"

namespace smelt::ir {

void verify(const Graph& g);

}  // namespace smelt::ir
