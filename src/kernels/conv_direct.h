// Direct convolution for few taps per output (kernels/conv_direct.cpp): a network's stem.
#pragma once

#include "kernels/conv.h"

namespace smelt::kernels {

// Taps per output (C kH kW) up to which the direct kernel applies (a 3-channel 3x3 stem has 27).
inline constexpr int64_t kDirectMaxTaps = 32;

// groups == 1 and C kH kW <= kDirectMaxTaps.
bool conv2d_direct_supports(const Conv2dGeometry& g);

// As conv2d_forward (kernels/conv.h); the epilogue gets one output row of every channel at a time.
void conv2d_direct_forward(const Conv2dGeometry& g, const Tensor& y /*(N, O, Ho, Wo)*/,
                           const Tensor& x /*(N, C, H, W)*/, const Tensor& w /*(O, C, kH, kW)*/,
                           const GemmEpilogue* epilogue = nullptr);

}  // namespace smelt::kernels
