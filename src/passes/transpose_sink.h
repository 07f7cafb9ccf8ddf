// Transpose sinking: permutes move towards the graph's outputs, through elementwise ops, until
// two meet and cancel.
//   - permute(permute(x, p), q) -> permute(x, p then q); a permute by the identity -> its input;
//   - f(permute(x, p)) -> permute(f(x), p) for an elementwise f, when the permute has no other
//     use (moving it must not leave a second copy behind);
//   - f(permute(a, p), permute(b, p)) -> permute(f(a, b), p): every operand carries the same
//     permutation, or is a constant (permuted once now, at compile time, by the inverse), or has
//     only size-1 dims (broadcasts the same either way); at least one operand permute goes away;
//   - permute(matmul(a, b), swap of the last two dims) -> matmul(b^T, a^T) when an operand is a
//     transpose used only there (it cancels): the one move upwards, through a contraction, never
//     undone (sinking moves through elementwise ops only) and never adding a permute.
// One direction only (downwards), and the number of permutes never grows, so the pass reaches a
// fixed point and cannot ping-pong with itself or with transpose_normalize (which touches only
// permutes next to reshapes). Elementwise ops then run in their inputs' own layout and the
// remaining permutes gather at contractions, reductions and outputs. Needs nothing before it;
// run dce after it.
#pragma once

#include "ir/graph.h"

namespace smelt::passes {

bool transpose_sink(ir::Graph& graph);

}  // namespace smelt::passes
