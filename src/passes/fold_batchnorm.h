// Batch-norm folding for inference graphs: a batch_norm in eval mode (training=0) whose weight,
// bias and running statistics are constants, applied to the output of a contraction with a
// constant weight, folds into that weight:
//   conv2d(x, W) [+ b] -> batch_norm        =>  conv2d(x, W * s) + ((b - mean) * s + beta)
//   matmul(x, W) [+ b] -> batch_norm (N, C) =>  matmul(x, W * s) + ((b - mean) * s + beta)
// with s = gamma / sqrt(running_var + eps) per output channel (conv2d: dim 0 of W (O, C/g, kH,
// kW); matmul: the columns of W (in, out), x 2-D so that the features are batch_norm's channels).
// Folded values are computed in float64, once, at compile time. A weight may reach the
// contraction through views of a constant (e.g. linear's permute of W). The rewrite happens only
// when the contraction (and the bias add) feed nothing but the batch norm, and the batch norm's
// batch statistics (mean, invstd) are unused, so no work is duplicated; readers of its new
// running statistics (in eval mode the running statistics themselves) then read its inputs.
// Any other eval-mode batch norm with constant parameters and unused batch statistics becomes a
// per-channel scale and shift, x * s + t with s = gamma / sqrt(running_var + eps) and
// t = beta - running_mean * s (float64, once): two pointwise ops that fuse with their neighbours
// (DenseNet's batch norms after a concat, a UNet's after a pooling) where an op step ran alone.
// Both rewrites round differently from the eager kernel (one float64 evaluation per element).
//
// Parameters are graph inputs, not constants: an inference graph must be traced with its
// parameters captured as constants (frozen) for this pass to fire. The op names are looked up in
// the op table at run time; an op table without batch_norm leaves every graph unchanged.
// Needs nothing before it (constant folding first lets it see more constants); run dce after it.
#pragma once

#include "ir/graph.h"

namespace smelt::passes {

bool fold_batchnorm(ir::Graph& graph);

}  // namespace smelt::passes
