// Scans of a convolution's operands for the oneDNN paths (kernels/conv_onednn.cpp): whether every
// value is moderate (Winograd, and bias/clamp as oneDNN post-ops, are taken only then) or finite
// (oneDNN skips the taps in the zero padding that smelt's reference multiplies). Private to
// kernels/.
#pragma once

#include <cstdint>

#include "smelt/tensor.h"

namespace smelt::kernels {

// Winograd mixes every element of an input tile into every output of the tile: one inf or NaN
// would make NaN of outputs whose receptive field never held it, and huge values can overflow in
// the transforms where the direct sum does not. So Winograd runs only on moderate operands (every
// |v| <= 2^40, NaN and inf excluded): there C * 9 products of 2^80 and the transforms' growth
// (below 2^20) stay far from float's range, and both algorithms give finite results that differ
// only in rounding. Anything else takes the direct algorithm, whose special-value semantics are
// those of the other implementations. The post-ops use the same bound.
inline constexpr float kWinogradMaxMagnitude = 0x1p40f;

// Every |p[i]| <= kWinogradMaxMagnitude (NaN and the infinities are not), i < n.
bool all_moderate(const float* p, int64_t n);
// The same over threads, for a conv's input (on every call's path).
bool all_moderate_parallel(const float* p, int64_t n);
// No NaN and no infinity among p[0..n).
bool all_finite(const float* p, int64_t n);

// What a scan of a weight found: every |v| <= kWinogradMaxMagnitude, every v finite.
struct WeightScan {
  bool moderate;
  bool finite;
};
// all_moderate and all_finite of w (float32, contiguous); for a constant weight remembered per
// (memory, storage version), so that a plan's weights are scanned once.
WeightScan weight_scan(const Tensor& w, bool weight_constant);

}  // namespace smelt::kernels
