// Dequantize after max pooling and concatenation, not before, so that they move bytes (a quarter
// of float's) and the dequantize fuses with what follows (passes/expand_quantize.h) or cancels:
// - max_pool2d(dequantize_linear(q, s, z)) becomes dequantize_linear(max_pool2d(q), s, z);
// - cat(dequantize_linear(q1, s, z), dequantize_linear(q2, s, z), ...) with every input
//   dequantized from the same dtype with the same per-tensor constants becomes
//   dequantize_linear(cat(q1, q2, ...), s, z) (elementwise with one s and z: exact);
// - quantize_linear(dequantize_linear(q, s, z), s, z), with q of the quantize's dtype, is q:
//   (q - z) * s / s rounds back to q - z (|q - z| <= 255, far below float32's 2^24), so a
//   concatenation whose inputs and output share a scale passes bytes from producer to consumer.
//
// Exact: with a positive finite per-tensor scale, dequantizing is non-decreasing, so the max of
// the dequantized window is the dequantized max of the window. Only when every window holds a
// tap inside the image (dilation 1, padding below the kernel: a window of padding alone would be
// -inf in float but the dtype's lowest in bytes), and the pooling's indices are unread (ties
// after dequantizing, where a huge scale makes two levels inf, could pick another index).
//
// Needs nothing before it; run before expand_quantize (which writes dequantize out).
#pragma once

#include "ir/graph.h"

namespace smelt::passes {

bool sink_dequantize(ir::Graph& graph);

// The third rule alone (the quantize pass, quant/quantize_graph.h, runs it too).
bool cancel_requantize(ir::Graph& graph);

}  // namespace smelt::passes
