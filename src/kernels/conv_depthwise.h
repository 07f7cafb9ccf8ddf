// Depthwise 2-D convolution: groups == C == O, so every channel is its own one-channel
// convolution with its own kH x kW filter. im2col + GEMM would run G GEMMs of one output row
// each; these kernels instead walk each (n, c) plane directly, with the output row as the
// vectorized dimension.
//
// Letters as kernels/conv.h. Each plane is first copied into a zero-padded scratch plane
// P (Hp, Wp) = (H + 2 pad_h, W + 2 pad_w) (skipped when there is no padding), which makes every
// tap an in-bounds read:
//
//   forward      y[n, c, oh, ow]  = sum_{ki, kj} w[c, ki, kj] P[n, c][oh sh + ki dh, ow sw + kj dw]
//   grad input   P_dx[oh sh + ki dh, ow sw + kj dw] += w[c, ki, kj] dy[n, c, oh, ow], dx = crop(P_dx)
//   grad weight  dw[c, ki, kj]    = sum_{n, oh, ow} dy[n, c, oh, ow] P[n, c][oh sh + ki dh, ow sw + kj dw]
//
// 3x3 and 5x5 filters with stride 1 or 2 and no dilation have unrolled, vectorized loops; other
// geometries run the same loops with run-time sizes. Threads split the planes (forward, grad
// input) or the channels (grad weight): every value is summed by one thread in a fixed order, so
// results do not depend on the thread count.
#pragma once

#include "kernels/conv.h"

namespace smelt::kernels {

// True when g is a depthwise convolution these kernels handle (any size, stride, padding,
// dilation; groups == C == O).
bool conv2d_is_depthwise(const Conv2dGeometry& g);

// Preconditions as conv2d_forward and conv2d_is_depthwise(g). The epilogue is called once per
// (n, c) plane: rows [n O + c, n O + c + 1), columns [0, Ho Wo).
void conv2d_depthwise_forward(const Conv2dGeometry& g, const Tensor& y /*(N, C, Ho, Wo)*/,
                              const Tensor& x /*(N, C, H, W)*/, const Tensor& w /*(C, 1, kH, kW)*/,
                              const GemmEpilogue* epilogue = nullptr);
void conv2d_depthwise_backward_input(const Conv2dGeometry& g, const Tensor& dx /*(N, C, H, W)*/,
                                     const Tensor& dy /*(N, C, Ho, Wo)*/, const Tensor& w /*(C, 1, kH, kW)*/);
void conv2d_depthwise_backward_weight(const Conv2dGeometry& g, const Tensor& dw /*(C, 1, kH, kW)*/,
                                      const Tensor& x /*(N, C, H, W)*/, const Tensor& dy /*(N, C, Ho, Wo)*/);

}  // namespace smelt::kernels
