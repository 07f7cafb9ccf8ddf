// The blocked channel layout for convolution networks: float32 convolutions that oneDNN runs on
// blocked memory become conv2d_blocked on (N, C/16, H, W, 16) values (kernels/conv_blocked.h),
// with a to_blocked before and a from_blocked after; the conversions then move and cancel so that
// a network stays blocked from its first convolution to its last:
//   - conv2d(x, w) -> from_blocked(conv2d_blocked(to_blocked(x), w)), where oneDNN has a blocked
//     implementation and the conv is not a stem (fewer than 8 input channels: padding them to 16
//     would more than double its work);
//   - to_blocked(from_blocked(v)) -> v;
//   - f(from_blocked(a), ...) -> from_blocked(f(a, ...)) for the elementwise ops that map finite
//     values to finite values (add, sub, mul, maximum, minimum, relu, clamp, leaky_relu, neg, abs,
//     sigmoid, tanh, silu, gelu: the padding lanes stay finite, so the zero weights of a later
//     blocked conv cancel them), when every other operand is blocked of the same shape, or a
//     constant (blocked now, at compile time), or a scalar / all-ones shape;
//   - mean(from_blocked(a), dims H W, keepdim) -> from_blocked(mean(a, dims H W, keepdim))
//     (global average pooling; without keepdim, a reshape follows);
//   - cat(from_blocked(a), from_blocked(b), ..., dim 1) -> from_blocked(cat(a, b, ..., dim 1))
//     when every operand but the last has a multiple of 16 channels; plain operands beside blocked
//     ones are converted, each value once however many blocked ops read it.
// A graph with fewer than two convolutions the layout can take stays plain: a lone conv would pay
// both conversions as separate steps and gain nothing.
// Graph outputs stay NCHW (a from_blocked feeds them). SMELT_BLOCKED_LAYOUT=0 turns the pass off.
// Run after fold_batchnorm (it sees conv2d only) and before dce (which drops what it replaced).
#pragma once

#include "ir/graph.h"

namespace smelt::passes {

bool blocked_layout(ir::Graph& graph);

}  // namespace smelt::passes
