// Lowering: a fusion group's body (an ir::Graph of elementwise, view and reduce ops) to the
// loop-level description of codegen/loop_kernel.h.
//
// Every body value is evaluated at an affine map of the iteration index, so views cost nothing:
// a permute permutes rows of the map, a slice scales and shifts one, a broadcast or expand zeroes
// one, and a load folds the map into one Access of the argument buffer. A reshape of an argument
// is free (arguments are contiguous); a reshape of a computed value is lowered when it only splits
// dims or adds/removes size-1 dims, and refused otherwise (merging dims is not affine).
//
// With reductions (sum, mean, amax, amin; all over the same dims of inputs of the same shape),
// the iteration space is that shape with the reduced dims moved inner. A reduction that reads
// another reduction's result runs in a later stage (softmax: max, then sum, then the store);
// reduced values are read back at the row they belong to (ReductionResult), so a value of the
// reduced shape is only usable through broadcasting against the iteration space. float32 sums and
// means fold in double and round once, as the eager kernels do. sum([double](exp(x - amax(x))))
// with the amax's dims kept is online softmax's denominator: one SumExp reduction of x folded in
// the amax's own stage (softmax and log_softmax take two passes over a row: statistics, then the
// store). A row epilogue (an output of the
// reduced shape) computes from reduction results and constants only: one that reads an argument
// is refused.
//
// Anything else — an op with no lowering, a view the map cannot express, reductions over
// different dims — is `LowerResult::reason`: the caller runs the group node by node instead.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "codegen/loop_kernel.h"
#include "ir/graph.h"

namespace smelt::codegen {

struct LowerResult {
  std::optional<LoopKernel> kernel;
  // Why it could not be lowered (empty on success), e.g. "reshape of a computed value merges dims".
  std::string reason;
  // Kernel arguments: the body's inputs in order, then body constants with more than one element
  // (their tensors in `constants`), then the body's outputs in order.
  std::vector<Tensor> constants;
};

// Lowers `body` (its inputs contiguous buffers, its outputs written contiguous). softmax,
// log_softmax and layer_norm nodes are decomposed into primitives first (see decompose.h).
LowerResult lower(const ir::Graph& body, const std::string& name = "");

struct LowerOptions {
  // 0: the kernel as lower(body, name) makes it. k > 0: the tile form (LoopKernel::tiled), for a
  // contraction's epilogue: the space is the outputs' shape uncollapsed, its last k dims merged
  // into the column dim (k = 1 for matmul's (..., M, N), 2 for conv2d's (N, O, Ho, Wo)), the
  // others the row dims. Refused (reason) with reductions, with fewer than k dims, or when some
  // access does not walk the last k dims as one.
  int tile_col_dims = 0;
  // For a dynamic batch (runtime/shape_fit.h): no choice that depends on an extent's factors
  // (the split of a long 1-D space into blocks), so the kernels lowered at two batch sizes differ
  // only in their integers.
  bool size_generic = false;
};
LowerResult lower(const ir::Graph& body, const std::string& name, const LowerOptions& options);

// How a plan lowers a fusion group (the body, its name, the options): lower() unless the plan's
// options say otherwise (runtime/plan.h PlanOptions::lower: dynamic shapes replay fitted kernels).
using LowerFn = std::function<LowerResult(const ir::Graph& body, const std::string& name, const LowerOptions& options)>;

// The largest power of two B <= max_block dividing `n`, or 1: how a long 1-D elementwise space is
// split into [n / B, B] so the outer loop can run in parallel.
int64_t split_block(int64_t n, int64_t max_block);

}  // namespace smelt::codegen
