// Checks a graph's invariants; throws smelt::Error listing the first problem found.
//   - every node's arity and attributes are accepted by its op's shape rule, and its output
//     metas equal what the shape rule computes;
//   - nodes are in topological order (every input is a graph input, a constant, or an output of
//     an earlier node): this also rules out cycles;
//   - use lists match the edges exactly (duplicate edges included);
//   - graph outputs are values of this graph.
//   - each value's output mark counts how often the graph returns it;
//   - a group node's body verifies, and its inputs and outputs match the node's in number and meta.
// Runs after every pass unless PassOptions::verify is off; linear in the size of the graph.
#pragma once

#include "ir/graph.h"

namespace smelt::ir {

void verify(const Graph& g);

}  // namespace smelt::ir
