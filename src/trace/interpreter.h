// Runs any Graph node by node with the eager kernels (no autograd, no tracing): the reference
// every pass and every generated kernel is compared against.
#pragma once

#include <functional>
#include <vector>

#include "ir/graph.h"

namespace smelt::trace {

// `inputs` match graph.inputs() in order (shapes and dtypes are checked); returns the outputs.
std::vector<Tensor> interpret(const ir::Graph& graph, const std::vector<Tensor>& inputs);

// interpret, calling visit(node, inputs, outputs) after each node (a group's body nodes, then
// the group); a visit that returns false stops the run, whose result is then empty. How
// calibration observes every value (quant/observe.h).
using NodeVisit =
    std::function<bool(const ir::Node&, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outs)>;
std::vector<Tensor> interpret(const ir::Graph& graph, const std::vector<Tensor>& inputs, const NodeVisit& visit);

// interpret, stopping at the first node that returns a NaN or an infinity from finite floating
// operands: "log %12 (output 0, f32[4,8])", or "" when none does. How a compiled training step
// whose gradients were not finite names the op (include/smelt/monitor.h).
std::string first_non_finite(const ir::Graph& graph, const std::vector<Tensor>& inputs);

}  // namespace smelt::trace
