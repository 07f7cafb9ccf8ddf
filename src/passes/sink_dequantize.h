// Dequantize after max pooling, not before: max_pool2d(dequantize_linear(q, s, z)) becomes
// dequantize_linear(max_pool2d(q), s, z), so the pooling reads and writes uint8 (a quarter of the
// bytes) and the dequantize fuses with what follows (passes/expand_quantize.h).
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

}  // namespace smelt::passes
