// Transpose normalization in the IR: every permute becomes the smallest permute that moves the
// same data, without adding nodes.
//   - permute by the identity -> its input; a permute that moves only size-1 dims (the element
//     order is unchanged) -> a reshape, which is a view everywhere and fuses as plain indexing;
//   - a permute whose dims merge (size-1 dims dropped; dims that stay adjacent and in order under
//     the permutation grouped into one) -> reshape, a lower-rank permute, reshape. Only where
//     both reshapes come for free: the input is a reshape used only here (the new reshape
//     replaces it) and every use is a reshape (each reads the smaller permute directly). Elsewhere
//     the two extra nodes would buy nothing: the copy kernel (kernels/transpose.h) performs the
//     same normalization when the permute is materialized.
//   - reshape(reshape(x)) -> reshape(x) and a reshape to its input's shape -> the input, so the
//     reshapes this pass introduces stay canonical.
// A rewritten permute is never rewritten again (its dims no longer merge), so the pass reaches a
// fixed point. It touches only permutes next to reshapes, never those next to elementwise ops or
// other permutes that transpose_sink moves and cancels. Needs nothing before it; run dce after.
#pragma once

#include "ir/graph.h"

namespace smelt::passes {

bool transpose_normalize(ir::Graph& graph);

}  // namespace smelt::passes
