// Distances in ulps between float32 results and float64 references, and the references of the
// float32 transcendental functions of kernels/scalar.h, written so that they stay accurate where
// the float32 results are tiny. Shared by tests/kernels/scalar_math_test.cpp (a strided sweep in
// CI) and bench/scalar_ulp_sweep.cpp (every finite float, outside CI). Header-only.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace smelt::testing {

// Floats mapped to integers in value order, so that the distance between two is in ulps (one ulp
// of a subnormal is the smallest subnormal).
inline int64_t ordered(float x) {
  int32_t i;
  std::memcpy(&i, &x, sizeof i);
  return i < 0 ? -int64_t(i & 0x7fffffff) : int64_t(i);
}

// ulps between `got` and the float nearest to `ref`; NaN and inf must match exactly.
inline int64_t ulp_error(float got, double ref) {
  const float want = float(ref);
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got) ? 0 : INT64_MAX;
  if (std::isinf(want) || std::isinf(got)) return want == got ? 0 : INT64_MAX;
  const int64_t d = ordered(got) - ordered(want);
  return d < 0 ? -d : d;
}

inline double sigmoid_ref(double x) { return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x)); }
// x times a CDF tends to -0 as x -> -inf (where the formula would give -inf * 0 = NaN)
inline double silu_ref(double x) { return std::isinf(x) && x < 0 ? -0.0 : x * sigmoid_ref(x); }
inline double gelu_erf_ref(double x) {
  if (std::isinf(x) && x < 0) return -0.0;
  return x < 0 ? 0.5 * x * std::erfc(-x * M_SQRT1_2) : 0.5 * x * (1 + std::erf(x * M_SQRT1_2));
}
// 0.5 x (1 + tanh(u)) = x sigmoid(2u)
inline double gelu_tanh_ref(double x) {
  if (std::isinf(x) && x < 0) return -0.0;
  return x * sigmoid_ref(2 * 0.7978845608028654 * (x + 0.044715 * x * x * x));
}
inline double softplus_ref(double x) { return x > 20 ? x : std::log1p(std::exp(x)); }

}  // namespace smelt::testing
