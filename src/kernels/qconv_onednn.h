// The quantized 2-D convolution by oneDNN (Debian libdnnl-dev): a second implementation of
// quantized_conv2d_forward (kernels/quantize.h) that the choice in kernels/qconv.cpp weighs against
// smelt's own on the first call of each shape (docs/quantization.md, "oneDNN's int8 convolution").
//
// It runs only where it computes the same bytes as smelt's kernels, which is what lets the choice
// be made by speed alone:
// - uint8 or int8 activations with one zero point, int8 weights whose zero points are all 0 (oneDNN
//   2.6 has no weight zero points), a uint8 or int8 result (not ConvInteger's int32);
// - a result zero point of 0, or 128 for uint8 (computed as int8 with zero point 0, then the sign
//   bit flipped: clamp(round(v) + 128, 0, 255) is clamp(round(v), -128, 127) + 128). oneDNN adds a
//   result zero point in float before rounding, smelt after: a value within an ulp of a half would
//   round differently;
// - accumulators and biases of at most 2^24 in magnitude (K * 255 * 128 and every bias): oneDNN
//   adds the bias to the accumulator in float, smelt in int32; below 2^24 both are exact, so the
//   one rounding of their sum is the same;
// - a CPU with AVX-512 VNNI (oneDNN's int8 kernels without it halve the weights' scale to avoid
//   vpmaddubsw's saturation, which rounds differently).
// x and y are NCHW; oneDNN reorders them into its own formats (nhwc) around the call, and that
// reorder is part of what the choice measures.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "kernels/quantize.h"
#include "kernels/quantize_params.h"

namespace smelt::kernels {

// One convolution shape oneDNN runs with smelt's exact result: its primitive, and which of the
// two implementations runs the shape, chosen once (kernels/qconv.cpp). The shape includes the
// dtypes, the output scales, the thread count and whether the weight is a constant: what either
// implementation's speed depends on.
struct QConvOneDnn;

enum class QConvChoice : int { Unchosen, Smelt, OneDnn };

// The call's oneDNN convolution, or nullptr where the conditions above do not hold; `r` is the
// call's requantization (make_requant), `bias` its int32 bias or undefined. Cached per shape: a
// lookup after the first call.
std::shared_ptr<QConvOneDnn> qconv_onednn_for(const Tensor& y, const QuantizedTensor& x, const QuantizedTensor& w,
                                              const Tensor& bias, const Requant& r, const QConvGeometry& g,
                                              bool weight_constant);

// Whether oneDNN can run this convolution with smelt's exact result.
bool qconv_onednn_applies(const Tensor& y, const QuantizedTensor& x, const QuantizedTensor& w,
                          const Tensor& bias, const Requant& r, const QConvGeometry& g);

// The shape's choice between smelt and oneDNN, shared by every call of the shape.
std::atomic<QConvChoice>& qconv_onednn_choice(QConvOneDnn& conv);

// Runs it. Arguments as quantized_conv2d_forward. A constant weight's conversion to oneDNN's
// layout is kept (kernels/quantize_params.h kept_packing). oneDNN's own failures are smelt::Errors.
void qconv_onednn_forward(const QConvOneDnn& conv, const Tensor& y, const QuantizedTensor& x,
                          const QuantizedTensor& w, const Tensor& bias, const Requant& r, bool weight_constant);

}  // namespace smelt::kernels
