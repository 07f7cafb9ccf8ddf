// The expression of a user-defined op (OpDefinition::expression, smelt/custom_op.h) traced at a
// node's inputs: what the pass inline_custom splices in place of the node, and what ONNX export
// writes for an op that claims no ONNX domain.
#pragma once

#include <memory>

#include "ir/graph.h"
#include "ops/custom_ops.h"

namespace smelt::trace {

// A graph whose inputs are `node`'s (their metas) and whose outputs are the expression's, checked
// against the node's outputs. Errors name the op: an expression that draws random numbers, that
// returns other metas than the shape rule, or that reads a tensor it captured from outside (its
// values would be frozen into the graph while eager calls read them fresh: pass it as an input).
std::unique_ptr<ir::Graph> trace_custom_expression(const ops::CustomOpRecord& op, const ir::Node& node);

}  // namespace smelt::trace
