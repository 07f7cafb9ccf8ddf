// Quantized inference (docs/quantization.md): the ops of ONNX's quantization, on uint8/int8
// values with float32 scales and zero points of the values' dtype. A value v stands for
// (v - zero_point) * scale. Scales must be positive and finite; rounding is half to even and
// results saturate. None of these ops is differentiable.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "smelt/graph.h"
#include "smelt/tensor.h"

namespace smelt {

// y = saturate(round(x / scale) + zero_point), of zero_point's dtype (uint8 or int8). `scale`
// and `zero_point` hold one value, or one per index of x's dim `axis` (per-channel). NaN becomes
// the zero point (the value 0).
Tensor quantize_linear(const Tensor& x, const Tensor& scale, const Tensor& zero_point, int64_t axis = 1);
// y = float32(q - zero_point) * scale; q uint8, int8 or int32 (zero point 0).
Tensor dequantize_linear(const Tensor& q, const Tensor& scale, const Tensor& zero_point, int64_t axis = 1);

// A quantized operand: values with their scale and zero point.
struct QTensor {
  Tensor values, scale, zero_point;
};

// requantize(a @ b + bias) with y's scale and zero point (y of y_zero_point's dtype); a (..., M, K)
// and b (..., K, N), batch dims broadcast. a's parameters: one, or per row (M); b's: one, or per
// column (N). bias: (N) int32 in a_scale * b_scale units, or undefined (ONNX's QLinearMatMul has
// none; a linear layer's is folded here as a convolution's is).
Tensor qlinear_matmul(const QTensor& a, const QTensor& b, const Tensor& y_scale, const Tensor& y_zero_point,
                      const Tensor& bias = Tensor());
// (a - a_zero_point) @ (b - b_zero_point) in int32.
Tensor matmul_integer(const Tensor& a, const Tensor& b, const Tensor& a_zero_point, const Tensor& b_zero_point);

struct QConvOptions {
  std::vector<int64_t> stride{1, 1};
  std::vector<int64_t> padding{0, 0, 0, 0};  // top, left, bottom, right
  std::vector<int64_t> dilation{1, 1};
  int64_t groups = 1;
};
// requantize(conv2d(x, w) + bias): x (N, C, H, W), w (O, C / groups, kH, kW) with one or per
// output channel parameters, bias (O) int32 in x_scale * w_scale units (optional). Padding is x's
// zero point.
Tensor qlinear_conv2d(const QTensor& x, const QTensor& w, const Tensor& y_scale, const Tensor& y_zero_point,
                      const Tensor& bias = Tensor(), const QConvOptions& options = {});
// conv2d(x - x_zero_point, w - w_zero_point) in int32.
Tensor conv2d_integer(const Tensor& x, const Tensor& w, const Tensor& x_zero_point, const Tensor& w_zero_point,
                      const QConvOptions& options = {});

// ---- Post-training INT8 quantization (docs/quantization.md "Use it")

// How an activation's saturating threshold is chosen from its calibration histogram.
enum class CalibrationMethod : uint8_t { Max, Percentile, Entropy, Mse };
// "max", "percentile", "entropy", "mse"; smelt::Error listing them otherwise.
CalibrationMethod calibration_method(const std::string& name);

struct QuantizeOptions {
  CalibrationMethod method = CalibrationMethod::Entropy;
  double percentile = 99.99;     // for Percentile, in (0, 100]
  std::string calibration_json;  // a calibration saved before (QuantizeResult::calibration_json):
                                 // used instead of calibrating; the batches then only measure SQNR
};

// One quantized product (a convolution with its bias and rectifier, or a matmul).
struct QuantizedLayerReport {
  std::string value;  // the float value it replaced, as the text form names it ("%12", or its name)
  std::string op;     // "conv2d+bias+relu", "matmul", ...
  double min = 0, max = 0, threshold = 0;  // the calibrated range and saturating threshold
  float scale = 1;
  int32_t zero_point = 0;
  double sqnr_db = 0;  // its dequantized output against the float graph's, over the batches
};

struct QuantizeResult {
  Graph graph;  // the quantized graph: run() it, compile it, or save it with onnx::save
  std::vector<QuantizedLayerReport> layers;
  std::map<std::string, int> float_ops;  // ops left in float, by name
  std::vector<std::string> skipped;      // products left in float, with why
  std::string calibration_json;          // to inspect, edit and reuse (QuantizeOptions)
  std::string report() const;            // the table `smelt quantize` prints
};

// Quantizes a float graph: the default passes without the blocked layout (folding batch norms
// into constant weights), then every conv2d / matmul of a float32 activation by a constant weight
// becomes an integer op, calibrated on `batches` (each one vector of the graph's inputs; two
// interpreter passes over them). `graph` is not changed.
QuantizeResult quantize(const Graph& graph, const std::vector<std::vector<Tensor>>& batches,
                        const QuantizeOptions& options = {});
// The same with batches from an iterator: `next_batch` returns the next one, or nullopt at the
// end (they are read once and kept for the two passes).
QuantizeResult quantize(const Graph& graph, const std::function<std::optional<std::vector<Tensor>>()>& next_batch,
                        const QuantizeOptions& options = {});
// A function of tensors traced at the first batch's shapes, the tensors it captures (a module's
// parameters: call eval() first) as constants, then quantized as above.
QuantizeResult quantize(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                        const std::vector<std::vector<Tensor>>& batches, const QuantizeOptions& options = {});

}  // namespace smelt
