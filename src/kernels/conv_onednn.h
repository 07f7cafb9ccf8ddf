// conv2d forward by oneDNN (Debian libdnnl-dev), one of the implementations the tuner weighs
// (kernels/conv_select.h). Built only when CMake finds oneDNN (SMELT_HAVE_ONEDNN); otherwise
// conv2d_onednn_supports is always false.
//
// oneDNN picks its own memory formats (format "any": blocked channels such as nChw16c, and its
// blocked weight layout), so each call reorders x and w from smelt's NCHW / OIHW into them and
// the result back to NCHW; those reorders are part of what the tuner measures. Primitives are
// created once per geometry and kept (creating one costs about a millisecond). oneDNN threads
// with the same OpenMP runtime as smelt.
#pragma once

#include "kernels/conv.h"

namespace smelt::kernels {

// float32 only; false when built without oneDNN or when oneDNN has no implementation.
// `winograd`: oneDNN's Winograd convolution (3x3, stride 1, no dilation, groups 1, and only where
// oneDNN implements it: AVX-512). It computes each 4x4 (or 2x2) output tile from transformed
// input and weight tiles: about 2.25-4x fewer multiplications than the direct sum, rounded
// differently (tests/kernels/conv_winograd_test.cpp bounds the error).
// `layout`: Blocked, x and y in the blocked layout (N, C/16, H, W, 16) of kernels/conv_blocked.h,
// which is oneDNN's nChw16c: no conversion of x or y around the call; PlainToBlocked, x on NCHW
// and y blocked (a stem on RGB, whose 3 channels would be padded to 16).
inline constexpr int64_t kOneDnnBlock = 16;
enum class ConvLayout : uint8_t { Plain, Blocked, PlainToBlocked };
bool conv2d_onednn_supports(const Conv2dGeometry& g, DType dtype, bool winograd = false,
                            ConvLayout layout = ConvLayout::Plain);
// oneDNN skips the taps that fall in the zero padding, where smelt's reference (im2col + GEMM)
// multiplies them: 0 * inf is NaN there, nothing in oneDNN. Whether that cannot matter for w: no
// padding, or every weight finite (a constant's scan is remembered per storage version). Callers
// run another implementation otherwise.
bool conv2d_onednn_exact(const Conv2dGeometry& g, const Tensor& w, bool weight_constant);

// The epilogue is called on the NCHW result, one image's channels at a time in groups of rows
// (blocked: on (N Ob Ho Wo, 16), pixels' channel blocks in groups of rows; the lanes past O of the
// last block are zero, before the epilogue and when it runs as oneDNN post-ops alike).
// w converted to oneDNN's layout is kept, keyed by its memory, in a cache that holds a reference
// to w (so the memory cannot be freed and reused by another tensor while cached) and converts
// again when w's storage version changed (an in-place smelt op); at most kWeightCacheBytes, the
// oldest entries dropped first, and entries that only the cache still holds dropped at the next
// conversion. Kept for weight_constant (kernels/conv.h) and for calls on memory smelt allocated
// (eager calls, and a compiled plan's inputs and arena) outside an UnversionedWritesScope. Writes
// through raw pointers (Tensor::data, a NumPy view of a smelt tensor, a plan's generated kernels
// writing its arena) leave the version alone: a kept weight that is not constant is used only
// while w's bytes equal a copy taken when it was converted (one read of w per call, much cheaper
// than a conversion: a Winograd weight transform); a constant is trusted.
void conv2d_onednn_forward(const Conv2dGeometry& g, const Tensor& y /*(N, O, Ho, Wo)*/, const Tensor& x /*(N, C, H, W)*/,
                           const Tensor& w /*(O, Cg, kH, kW)*/, const GemmEpilogue* epilogue = nullptr,
                           bool weight_constant = false, bool winograd = false,
                           ConvLayout layout = ConvLayout::Plain);

// How many times a weight was converted to oneDNN's layout (kept ones: cache misses), for tests
// and statistics; 0 without oneDNN.
uint64_t onednn_weight_conversions();
// How many convolutions ran with a residual add as a post-op (EpilogueAsPostOps::residual taken),
// since the process started: what tests read to see the post-op path taken, not only offered.
uint64_t onednn_residual_post_ops();

// "oneDNN 2.6.3", or "" when built without it.
const char* onednn_version();

}  // namespace smelt::kernels
