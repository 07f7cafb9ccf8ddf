// The row ops (softmax, log_softmax, layer_norm) written out in primitives, so that lowering
// handles them like any other reduce-then-elementwise pattern: one kernel per row with its
// prologue and epilogue fused, instead of a fixed kernel that stops fusion at its edges.
#pragma once

#include <memory>

#include "ir/graph.h"

namespace smelt::codegen {

// A copy of `graph` with every softmax, log_softmax and layer_norm node replaced by the eager
// kernels' arithmetic (T is the input's dtype; "double" is a cast to float64 when T is float32):
//   softmax(x, d)      m = amax(x, d, keepdim); e = exp(x - m); s = sum(double(e), d, keepdim);
//                      y = e * T(1 / s)
//   log_softmax(x, d)  m, e, s as above;        y = (x - m) - T(log(s))
//   layer_norm(x, w, b; ndim, eps)  over the last ndim dims, statistics kept as dims of size 1:
//                      mu = mean(double(x)); c = double(x) - mu; rstd = rsqrt(mean(c * c) + eps);
//                      y = T(c * rstd) * w + b; outputs (y, T(mu), T(rstd))
// The same values up to the order of the double additions (the eager kernels sum in lanes).
std::unique_ptr<ir::Graph> decompose_row_ops(const ir::Graph& graph);

// Whether `graph` holds a node decompose_row_ops rewrites.
bool has_row_ops(const ir::Graph& graph);

}  // namespace smelt::codegen
