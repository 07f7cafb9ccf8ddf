// The kernels of quantized inference on tensors (docs/quantization.md): quantize, dequantize,
// and the integer matmul and convolution, each either requantized (the QLinear ops) or returning
// int32 accumulators (the Integer ops). Values are uint8 or int8, scales float32, zero points
// of the values' dtype; the integer products run on kernels/qgemm.h.
//
// Rounding is half to even and results saturate to the output dtype, as ONNX specifies. Scales
// must be positive and finite (an error otherwise: a zero scale would divide by zero).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "smelt/tensor.h"

namespace smelt::kernels {

// The value at index i of a per-tensor (one value) or per-index parameter list.
template <class T>
T param_at(const std::vector<T>& v, int64_t i) {
  return v.size() == 1 ? v[0] : v[size_t(i)];
}

// y = saturate(round(x / scale) + zero_point), y of zero_point's dtype. `scale` and `zero_point`
// have one element (per tensor) or one per index of x's dim `axis`. NaN quantizes to the zero
// point (the value 0), +-inf saturate.
void quantize_linear_forward(const Tensor& y, const Tensor& x, const Tensor& scale,
                             const Tensor& zero_point, int64_t axis);
// y = float32(q - zero_point) * scale; q uint8, int8 or int32 (whose zero point must be 0).
void dequantize_linear_forward(const Tensor& y, const Tensor& q, const Tensor& scale,
                               const Tensor& zero_point, int64_t axis);

// The quantization of one operand: values, their scale and zero point (one element, or per row
// of a matmul's A, per column of its B, per output channel of a conv weight).
struct QuantizedTensor {
  Tensor values;
  Tensor scale;       // undefined for the Integer ops
  Tensor zero_point;
};

// a (..., M, K) times b (..., K, N), batch dims broadcast as matmul does, plus `bias` (N) int32 in
// the accumulator's scale (or undefined). `y` (..., M, N) is int32 (accumulators; y_scale
// undefined), or uint8/int8 requantized with y_scale/y_zero_point.
// `weight_constant` (ops/constant_weight.h): b's memory never changes while it lives, so its packed
// form is kept between calls; otherwise b is packed on every call.
void quantized_matmul_forward(const Tensor& y, const QuantizedTensor& a, const QuantizedTensor& b,
                              const Tensor& bias, const Tensor& y_scale, const Tensor& y_zero_point,
                              bool weight_constant = false);

// A 2-D convolution's geometry with ONNX's asymmetric padding.
struct QConvGeometry {
  int64_t stride[2] = {1, 1};
  int64_t pad_begin[2] = {0, 0}, pad_end[2] = {0, 0};
  int64_t dilation[2] = {1, 1};
  int64_t groups = 1;
};
// Makes the choice between smelt's and oneDNN's quantized convolution (kernels/qconv.cpp) measure
// each shape afresh instead of reading the tuning file's record, and record the new measurement
// (`smelt tune`); off again with false. Choices this process already made stay.
void qconv_remeasure_choices(bool on);
// The measurements made since the last call, one line each: "shape -> smelt|onednn (times)".
std::vector<std::string> qconv_take_measurements();

// The output extent of one spatial dim (0 when no window fits).
int64_t qconv_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad_begin,
                          int64_t pad_end, int64_t dilation);

// x (N, C, H, W) convolved with w (O, C / groups, kH, kW); y (N, O, Ho, Wo) int32 or requantized
// as quantized_matmul_forward. `bias` (O) int32 in the accumulator's scale, or undefined. Padding
// reads x's zero point (the value 0).
void quantized_conv2d_forward(const Tensor& y, const QuantizedTensor& x, const QuantizedTensor& w,
                              const Tensor& bias, const Tensor& y_scale,
                              const Tensor& y_zero_point, const QConvGeometry& g,
                              bool weight_constant = false);

}  // namespace smelt::kernels
