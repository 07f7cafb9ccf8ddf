// Quantize and dequantize written out in elementwise primitives, so that fusion merges them into
// the float ops between quantized ones (a residual add and its ReLU, a hard-swish): one kernel
// that reads uint8 and writes uint8, instead of a dequantize pass, the float op, and a quantize
// pass, each through memory (docs/quantization.md "Float ops between quantized ones").
//
// A per-tensor quantize_linear / dequantize_linear (one scale, one zero point, both constants,
// the scale positive and finite) becomes, with z the zero point and [lo, hi] its dtype's range:
//   dequantize_linear(q, s, z)  =>  (float32(q) - float32(z)) * s
//   quantize_linear(x, s, z)    =>  Q(int32(clamp(round(x / s), lo - z, hi - z)) + z)
//                                   (z = 0: Q(clamp(round(x / s), lo, hi)); a relu before it is
//                                   dropped when lo - z = 0, the clamp's bound being the same)
// the same bits as the ops' kernels (kernels/quantize.h): float32(q) and the subtraction are
// exact; round is half to even, as nearbyint; the clamp saturates ±inf; a NaN stays NaN through
// the clamp and the float -> int32 cast makes it 0 (kernels/scalar.h), so it lands on the zero
// point, as the op's NaN does; the final cast of a value within the dtype's range is exact.
// Per-axis parameters (a weight's, folded as constants anyway) and scales the op would refuse
// keep the op, so that its error is still raised.
//
// Needs nothing before it; run after fold (a quantized constant is folded either way).
#pragma once

#include "ir/graph.h"

namespace smelt::passes {

bool expand_quantize(ir::Graph& graph);

}  // namespace smelt::passes
