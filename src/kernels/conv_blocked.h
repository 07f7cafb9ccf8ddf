// The blocked channel layout (NCHW16c-style) and the convolution on it.
//
// A blocked image is (N, Cb, H, W, B): channel c of pixel (h, w) lives at [n, c / B, h, w, c % B],
// with Cb = ceil(C / B) blocks; the lanes past C in the last block are padding. Every producer
// here writes zeros into the padding, and every op that runs on blocked values in a compiled plan
// keeps it finite (passes/blocked_layout.h admits only such ops), because a blocked convolution
// multiplies the padded input lanes by zero weights: 0 * finite adds nothing.
//
// With B = 16 each pixel's block is one AVX-512 vector, which is what oneDNN's direct and
// Winograd convolutions work on: a network that stays blocked from its first convolution to its
// last saves the reorders around every call (kernels/conv_onednn.h).
#pragma once

#include "kernels/conv.h"
#include "kernels/pool.h"

namespace smelt::kernels {

inline int64_t blocks_of(int64_t channels, int64_t block) { return (channels + block - 1) / block; }

// y (N, Cb, H, W, B) <- x (N, C, H, W), zeros in the padding. x and y contiguous, same dtype.
void to_blocked_forward(const Tensor& y, const Tensor& x);
// y (N, C, H, W) <- x (N, Cb, H, W, B), the padding dropped.
void from_blocked_forward(const Tensor& y, const Tensor& x);

// Whether conv2d_blocked_forward runs oneDNN on the blocked memory itself (float32, B = 16,
// built with oneDNN, an implementation for g); otherwise it converts around conv2d_forward.
// `plain_input`: x on NCHW, only y blocked.
bool conv2d_blocked_native(const Conv2dGeometry& g, DType dtype, int64_t block, bool plain_input = false);

// y (N, Ob, Ho, Wo, B) <- conv2d of x (N, Cb, H, W, B), or of x (N, C, H, W) on NCHW, by
// w (O, Cg, kH, kW); g holds the real channel counts. The padding lanes of y are zero before the epilogue, which gets tiles of y
// seen as the matrix (N Ob Ho Wo, B): a per-channel operand (a bias) is then a row vector.
// weight_constant as conv2d_forward (kernels/conv.h).
void conv2d_blocked_forward(const Conv2dGeometry& g, const Tensor& y, const Tensor& x, const Tensor& w,
                            const GemmEpilogue* epilogue = nullptr, bool weight_constant = false);

// max_pool2d's values on blocked images (kernels/pool_blocked.cpp): y (N, Cb, Ho, Wo, B) from
// x (N, Cb, H, W, B), each real lane the bits of max_pool2d_values_forward, the padding zero.
void max_pool2d_blocked_forward(const Pool2dWindow& win, const Tensor& y, const Tensor& x);

}  // namespace smelt::kernels
