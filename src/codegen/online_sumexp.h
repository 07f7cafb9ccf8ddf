// The online softmax pattern of the lowering (codegen/lower.cpp): which sums are the denominator
// of a softmax, so that they fold in one pass with the row's maximum (ReduceOp::SumExp).
#pragma once

#include "ir/graph.h"

namespace smelt::codegen {

// For `sum` = sum([cast float32 -> float64](exp(x - amax(x, dims, keepdim=1)))) over the amax's
// dims, x float32 or float64: returns x and sets *amax; otherwise null. decompose.h writes
// softmax and log_softmax this way; user graphs that spell it out match too.
const ir::Value* online_sumexp_of(const ir::Node& sum, const ir::Node** amax);

}  // namespace smelt::codegen
