// Reductions of one contiguous row, shared by the reduce, softmax and norm kernels. Each keeps
// kRowLanes independent accumulators so the compiler vectorizes the loop without reassociating
// floating-point sums; floating rows accumulate in double, so float32 rows of many elements keep
// their accuracy.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/scalar.h"

namespace smelt::kernels {

inline constexpr int kRowLanes = 16;

// The sum's type: double for floating rows; integer rows sum in their own type, wrapping around in
// two's complement on overflow (as PyTorch and NumPy), never undefined.
template <class T>
using RowSum = std::conditional_t<std::is_floating_point_v<T>, double, T>;
// What the lanes accumulate in: integers in their unsigned type, where wrapping is defined.
template <class T>
using RowAcc = typename std::conditional_t<std::is_floating_point_v<T>, std::type_identity<double>,
                                           std::make_unsigned<T>>::type;

// Sum of x (n).
template <class T>
RowSum<T> row_sum(const T* x, int64_t n) {
  using Acc = RowAcc<T>;
  Acc lanes[kRowLanes] = {};
  int64_t i = 0;
  for (; i + kRowLanes <= n; i += kRowLanes) {
    for (int l = 0; l < kRowLanes; ++l) lanes[l] += Acc(x[i + l]);
  }
  Acc total = 0;
  for (; i < n; ++i) total += Acc(x[i]);
  for (int l = 0; l < kRowLanes; ++l) total += lanes[l];
  return RowSum<T>(total);
}

// Sum of (x - mean)^2 over x (n), in double.
template <class T>
double row_sum_sq_dev(const T* x, int64_t n, double mean) {
  double lanes[kRowLanes] = {};
  int64_t i = 0;
  for (; i + kRowLanes <= n; i += kRowLanes) {
    for (int l = 0; l < kRowLanes; ++l) {
      const double d = double(x[i + l]) - mean;
      lanes[l] += d * d;
    }
  }
  double total = 0;
  for (; i < n; ++i) total += (double(x[i]) - mean) * (double(x[i]) - mean);
  for (int l = 0; l < kRowLanes; ++l) total += lanes[l];
  return total;
}

namespace detail {

// `candidate` if it beats `best` or is NaN; once NaN, a lane stays NaN (nothing beats NaN). Of
// -0 and +0, +0 beats for the maximum and -0 for the minimum, as scalar::maximum / minimum order
// them: the result of a row then does not depend on the order it is read in (a row holding both
// zeros gave the first one met, so -0 or +0 by layout, and another sign than a fused kernel's
// fold; fuzz --compile seeds 2405, 238251).
template <class T, bool kMax>
inline T row_pick(T best, T candidate) {
  bool beats = kMax ? candidate > best : candidate < best;
  if constexpr (std::is_floating_point_v<T>) {
    // Taking an equal candidate changes nothing but a zero's sign (equal non-zero floats have the
    // same bits), so this only asks whether `best` is the zero that loses; as fast as before.
    beats |= candidate == best && (kMax ? std::signbit(best) : !std::signbit(best));
  }
  return beats || candidate != candidate ? candidate : best;
}

template <class T, bool kMax>
T row_extreme(const T* x, int64_t n) {
  const T start = scalar::extreme_identity<T, kMax>();
  T lanes[kRowLanes];
  for (int l = 0; l < kRowLanes; ++l) lanes[l] = start;
  int64_t i = 0;
  for (; i + kRowLanes <= n; i += kRowLanes) {
    for (int l = 0; l < kRowLanes; ++l) lanes[l] = row_pick<T, kMax>(lanes[l], x[i + l]);
  }
  T best = start;
  for (; i < n; ++i) best = row_pick<T, kMax>(best, x[i]);
  for (int l = 0; l < kRowLanes; ++l) best = row_pick<T, kMax>(best, lanes[l]);
  return best;
}

}  // namespace detail

}  // namespace smelt::kernels
