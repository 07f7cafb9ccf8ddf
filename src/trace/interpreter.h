// Runs any Graph node by node with the eager kernels (no autograd, no tracing): the reference
// every pass and every generated kernel is compared against.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace smelt::trace {

// `inputs` match graph.inputs() in order (shapes and dtypes are checked); returns the outputs.
std::vector<Tensor> interpret(const ir::Graph& graph, const std::vector<Tensor>& inputs);

}  // namespace smelt::trace
