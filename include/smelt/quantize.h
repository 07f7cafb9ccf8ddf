// Quantized inference (docs/quantization.md): the ops of ONNX's quantization, on uint8/int8
// values with float32 scales and zero points of the values' dtype. A value v stands for
// (v - zero_point) * scale. Scales must be positive and finite; rounding is half to even and
// results saturate. None of these ops is differentiable.
#pragma once

#include <cstdint>
#include <vector>

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

// requantize(a @ b) with y's scale and zero point (y of y_zero_point's dtype); a (..., M, K) and
// b (..., K, N), batch dims broadcast. a's parameters: one, or per row (M); b's: one, or per
// column (N).
Tensor qlinear_matmul(const QTensor& a, const QTensor& b, const Tensor& y_scale, const Tensor& y_zero_point);
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

}  // namespace smelt
