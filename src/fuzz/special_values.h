// The values that break numeric code, for the fuzzers to draw: NaN (both signs), ±inf, ±0,
// subnormals, the smallest and largest finite magnitudes, magnitudes near them (1e±30 in float32,
// 1e±300 in float64), powers of two (which simplify's division rule keys on), float values at
// the int64 boundaries (±2^63, what a cast saturates at), and for int64 INT64_MIN / INT64_MAX,
// their neighbours and integers beyond 2^53 (which a trip through double would change).
//
// A passes bug that only such a value shows (x + 0 -> x at x = -0, CSE merging 2^53 with
// 2^53 + 1, x * 0 -> 0 at x = inf) is invisible to inputs drawn from [-2, 2]; so every constant
// and input the graph fuzzer makes is drawn here, each element special with some probability.
#pragma once

#include <cstdint>
#include <random>

#include "smelt/tensor.h"

namespace smelt::fuzz {

// How a tensor's elements are drawn: uniform in [low, high] (integers for int64; 0 or 1 for
// bool), or with probability `special` one of the special values of the dtype.
struct ElementDraw {
  double low = -2;
  double high = 2;
  double special = 0;
};

// One special value of a floating dtype (Float32 values are exactly representable in float).
double special_float(DType dtype, std::mt19937_64& rng);
// One special int64 value.
int64_t special_int64(std::mt19937_64& rng);

// A tensor of `shape` and `dtype` (a floating dtype, Int64, Int32, UInt8, Int8 or Bool), elements
// drawn by `draw`. Int64 elements are exact (built from int64_t, never through double). UInt8 and
// Int8 (quantized values) take any byte, whatever low and high say; their specials are the
// dtype's ends.
Tensor random_tensor(const Shape& shape, DType dtype, const ElementDraw& draw, std::mt19937_64& rng);

}  // namespace smelt::fuzz
