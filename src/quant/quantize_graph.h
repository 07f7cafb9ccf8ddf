// Post-training quantization of a float graph (docs/quantization.md "The quantize pass"):
// calibrate the activations around every quantizable product, then rewrite each product into its
// integer op with requantization as its epilogue, where the float path fuses bias and ReLU.
//
// A quantizable product is a conv2d or matmul of a float32 activation by a float32 constant
// weight (for a matmul also the transpose of one, as a linear layer's weight stays after the
// pipeline); its chain also takes the add of a per-channel constant bias (along a conv's dim 1, a
// matmul's last dim) and then a rectifier (each the only reader of what it follows). It becomes
//
//   xq = quantize_linear(x, sx, zx)                        (shared by the products reading x)
//   yq = qlinear_conv2d / qlinear_matmul(xq, Wq, sy, zy, bias as int32 in sx * sw units)
//   y  = dequantize_linear(yq, sy, zy)
//
// with the weight quantized per output channel, symmetric int8, by its max |w| (no
// saturation), and the activations by calibration (quant/calibration.h). A relu needs no op: its
// output's zero point is 0 and requantization saturates at 0. A dequantize_linear read only by a
// quantize_linear of the same parameters cancels, so consecutive products pass uint8 between them.
// An output that reaches the next product only through concatenations and max poolings takes
// that product's input calibration, so a concatenation's inputs share one scale and the
// pipeline's sink_dequantize makes the concatenation and pooling move bytes.
// Everything else stays float, and the report lists it.
#pragma once

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "quant/calibration.h"

namespace smelt::quant {

// One quantizable product and the chain it heads.
struct QuantizableOp {
  ir::Node* product = nullptr;  // conv2d or matmul
  ir::Node* bias = nullptr;     // add of a per-channel (a matmul: per-column) constant, or null
  ir::Node* relu = nullptr;     // relu, clamp(min 0) or maximum(., 0); or null
  double relu_max = INFINITY;   // its upper bound (a ReLU6: 6), when it has one
  ir::Value* input = nullptr;   // the activation x
  ir::Value* output = nullptr;  // the chain's last value
  Tensor weight;                // the constant weight (a matmul's transposed constant, transposed)
};
std::vector<QuantizableOp> find_quantizable(const ir::Graph& graph);
// The rectifier that alone reads a product's output `y`: relu, clamp(min 0[, max c]), or
// maximum(y, 0) with an optional minimum(., c) after it (a ReLU6 as ONNX's Clip is imported).
// Sets q->relu, q->relu_max (+inf without a bound) and q->output; false when `y` has none. The
// quantize pass and fold_qdq (passes/fold_qdq.h) both fold one into requantization.
bool find_rectifier(ir::Value* y, QuantizableOp* q);

// The bias in the integer accumulator's units (sx * sw[c] for output channel c), rounded and
// saturated to int32.
Tensor bias_as_int32(const Tensor& bias, float sx, const std::vector<float>& sw);
// Why the rectifier of `op` cannot fold into the requantization to `y` ("" when it folds or there
// is none): a relu needs y's zero point at the dtype's minimum, a bound c needs round(c / s) + zp
// at or past the dtype's maximum.
std::string rectifier_stays(const QuantizableOp& op, const QuantParams& y);

// An activation's calibration.
struct CalibratedValue {
  std::string label;  // the value's name, else "%id"
  double min = 0, max = 0, threshold = 0;
  QuantParams params;
};

// Per value id of the calibrated graph (ids survive ir::Graph::clone).
struct Calibration {
  ThresholdOptions options;
  int64_t batches = 0;
  std::map<int, CalibratedValue> values;

  // JSON, to inspect and reuse: {"method", "percentile", "batches", "values": {"<id>": {...}}}
  std::string to_json() const;
  static Calibration from_json(const std::string& text);  // smelt::Error on a malformed file
};

// Observes the input and output of every quantizable op of `graph` over `batches` (each one
// vector of graph inputs), two interpreter passes per batch (quant/calibration.h), and chooses
// each activation's threshold and parameters.
Calibration calibrate(const ir::Graph& graph, const std::vector<std::vector<Tensor>>& batches,
                      const ThresholdOptions& options);

// One product rewritten: where its float result was and where its quantized one is.
struct QuantizedLayer {
  std::string op;          // "conv2d", "matmul" (with "+bias", "+relu" when folded)
  int float_value = 0;     // the chain's output in the calibrated graph (its id)
  int quantized_value = 0; // the integer op's uint8/int8 output in the rewritten graph (its id)
  CalibratedValue output;  // its calibration
};

struct QuantizeReport {
  std::vector<QuantizedLayer> layers;
  int quantized = 0;                         // products rewritten
  std::map<std::string, int> float_ops;      // ops left in float, by name
  std::vector<std::string> skipped;          // products left float, with why
  std::string str() const;
};

// Rewrites `graph` in place with `calibration` (from calibrate() on this graph or a clone of it).
QuantizeReport quantize_graph(ir::Graph& graph, const Calibration& calibration);

}  // namespace smelt::quant
