// QDQ models (docs/quantization.md "QDQ models"): the float ops that a QDQ ONNX model writes
// between dequantize_linear and quantize_linear, folded into smelt's integer ops, as ONNX Runtime
// runs such a model. A chain
//
//   quantize_linear(rect(conv2d(dequantize_linear(xq, sx, zx), dequantize_linear(Wq, sw, zw)) + bias), sy, zy)
//
// (rect: a relu, clamp(0, c) or max/min pair, optional; bias optional, the reshaped
// dequantize_linear of an int32 constant, or a float constant) becomes
//
//   qlinear_conv2d(xq, sx, zx, Wq, sw, zw, sy, zy, bias as int32)
//
// and quantize_linear(rect(matmul(dequantize_linear(xq..), W) + bias), sy, zy) with W the
// dequantized (or transposed dequantized) int8 constant and the bias along the last dim becomes
// qlinear_matmul. Conditions: per-tensor constant
// parameters for x and y, a constant weight, each float value read by the next op of the chain
// alone, and a rectifier that requantization's saturation can take (quant::rectifier_stays). A
// bias whose dequantize scale is sx * sw (as quantizers write it) is taken as its integers;
// another is rounded to those units.
//
// Not exact: the float chain accumulates the dequantized products in float32 and rounds once at
// the quantize; the integer op accumulates exactly and requantizes in float. An output differs by
// at most one step where the float sum lies within its rounding error of a half step
// (tests/passes/fold_qdq_test.cpp counts them).
//
// Run before fold, which would evaluate the weights' dequantize_linear (the ONNX importer gives
// conv and matmul weights one, onnx/quantized_weights.h) and before expand_quantize.
#pragma once

#include "ir/graph.h"

namespace smelt::passes {

bool fold_qdq(ir::Graph& graph);

}  // namespace smelt::passes
