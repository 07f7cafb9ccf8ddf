// The quantized form of a QDQ model's weights (docs/quantization.md "QDQ models"). The importer
// evaluates a DequantizeLinear of integer initializers during import, as every node of known
// inputs (converters that need values, Pad's constant or Resize's scales, get them). It records
// each such dequantized weight here; after the trace, the weight operand of a conv2d or matmul
// that is one of them (or, for a matmul, its 2-D transpose, a Gemm's) reads a dequantize_linear
// node of the integers instead of the float constant, so that the pass fold_qdq sees them. Where
// fold_qdq folds nothing, fold evaluates the node again (or the plan hoists it).
#pragma once

#include <vector>

#include "ir/graph.h"

namespace smelt::onnx_import {

struct DequantizedWeight {
  Tensor value;                    // the float tensor the converter returned
  Tensor q, scale, zero_point;     // DequantizeLinear's operands
  int64_t axis = 1;
};

void restore_quantized_weights(ir::Graph& graph, const std::vector<DequantizedWeight>& weights);

}  // namespace smelt::onnx_import
