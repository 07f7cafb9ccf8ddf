// The row ops (softmax, log_softmax, layer_norm) written out in primitives, so that lowering
// handles them like any other reduce-then-elementwise pattern: one kernel per row with its
// prologue and epilogue fused, instead of a fixed kernel that stops fusion at its edges.
#pragma once

#include <memory>

#include "ir/graph.h"

namespace smelt::codegen {

// A copy of `graph` with every softmax, log_softmax and layer_norm node replaced by:
//   softmax(x, d)      m = amax(x, d, keepdim); e = exp(x - m); y = e / sum(e, d, keepdim)
//   log_softmax(x, d)  m, e as above;           y = (x - m) - log(sum(e, d, keepdim))
//   layer_norm(x, w, b; ndim, eps)  over the last ndim dims, statistics kept as dims of size 1:
//                      mu = mean(x); c = x - mu; rstd = rsqrt(mean(c * c) + eps);
//                      y = c * rstd * w + b; outputs (y, mu, rstd)
// The same values up to rounding (the eager kernels accumulate in other orders and precisions).
std::unique_ptr<ir::Graph> decompose_row_ops(const ir::Graph& graph);

// Whether `graph` holds a node decompose_row_ops rewrites.
bool has_row_ops(const ir::Graph& graph);

}  // namespace smelt::codegen
