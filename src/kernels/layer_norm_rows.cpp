// Layer norm over rows (see kernels/row_kernels.h for the contract).
//
// Statistics in double, two passes (mean, then squared deviations): one pass of E[x^2] - E[x]^2
// would cancel for rows far from zero. kRowLanes accumulators in a fixed element-to-lane order
// (kernels/row_reduce.h) keep the sums vectorized and the same for every thread split.
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/row_kernels.h"

namespace smelt::kernels {
namespace {

// Independent double accumulators, element i in lane i % kNormLanes: eight AVX-512 registers, so that
// consecutive additions do not wait on each other's latency.
constexpr int64_t kNormLanes = 64;

// lanes[0] + ... + lanes[kNormLanes - 1] as a tree of halves: six dependent vector additions, where
// adding the lanes one after the other was a chain of 64 dependent scalar additions (~250 cycles,
// twice per row: a fifth of the row's time at 1024 columns, which the next pass waits for).
inline double sum_lanes(double* lanes) {
  for (int64_t half = kNormLanes / 2; half >= 1; half /= 2) {
    for (int64_t l = 0; l < half; ++l) lanes[l] += lanes[l + half];
  }
  return lanes[0];
}

// Sum of x (n) in double.
template <class T>
double sum_row(const T* x, int64_t n) {
  double lanes[kNormLanes] = {};
  int64_t i = 0;
  for (; i + kNormLanes <= n; i += kNormLanes) {
#pragma omp simd
    for (int64_t l = 0; l < kNormLanes; ++l) lanes[l] += double(x[i + l]);
  }
  for (int64_t l = 0; i < n; ++i, ++l) lanes[l] += double(x[i]);
  return sum_lanes(lanes);
}

// Sum of (x - mean)^2 over x (n) in double.
template <class T>
double sum_sq_dev_row(const T* x, int64_t n, double mean) {
  double lanes[kNormLanes] = {};
  int64_t i = 0;
  for (; i + kNormLanes <= n; i += kNormLanes) {
#pragma omp simd
    for (int64_t l = 0; l < kNormLanes; ++l) {
      const double d = double(x[i + l]) - mean;
      lanes[l] += d * d;
    }
  }
  for (int64_t l = 0; i < n; ++i, ++l) {
    const double d = double(x[i]) - mean;
    lanes[l] += d * d;
  }
  return sum_lanes(lanes);
}

// Mean and variance of a float row in one pass: sums of d = x - k and d^2 in double, k = x[0],
// then var = (S2 - S1^2 / n) / n. The subtraction cancels at most log2(n + 1) bits: every
// |x[i] - mean| <= sqrt(n var), so (k - mean)^2 <= n var. With float data (24 bits) in double
// (53 bits) and n <= kOnePassMaxCols, that leaves the statistics as accurate as two passes to far
// below float's rounding, for two thirds of the arithmetic and one read of the row less.
constexpr int64_t kOnePassMaxCols = 4096;

struct RowMoments {
  double mean, var;
};

inline RowMoments one_pass_moments(const float* x, int64_t n) {
  const double k = double(x[0]);
  double s1[kNormLanes] = {}, s2[kNormLanes] = {};
  int64_t i = 0;
  for (; i + kNormLanes <= n; i += kNormLanes) {
#pragma omp simd
    for (int64_t l = 0; l < kNormLanes; ++l) {
      const double d = double(x[i + l]) - k;
      s1[l] += d;
      s2[l] += d * d;
    }
  }
  for (int64_t l = 0; i < n; ++i, ++l) {
    const double d = double(x[i]) - k;
    s1[l] += d;
    s2[l] += d * d;
  }
  const double sum = sum_lanes(s1), sum_sq = sum_lanes(s2), count = double(n);
  const double var = (sum_sq - sum * (sum / count)) / count;
  return {k + sum / count, var < 0.0 ? 0.0 : var};  // rounding may leave -tiny; NaN stays NaN
}

// y (n) = (x - mean) * rstd * w + b. kFast: in T, with the mean as hi + lo (hi = T(mean),
// lo = T(mean - hi)): (x - hi) - lo keeps the digits that x - T(mean) would lose when the mean is
// far larger than the spread, without converting every element to double; the caller makes sure
// x - hi cannot overflow. Otherwise in double, as the naive formula.
template <class T, bool kFast, bool kWeight, bool kBias>
void normalize_row(T* y, const T* x, const T* w, const T* b, int64_t n, double mean, double rstd) {
  const T mean_hi = T(mean), mean_lo = T(mean - double(mean_hi)), rstd_t = T(rstd);
  for (int64_t i = 0; i < n; ++i) {
    T v;
    if constexpr (kFast) {
      v = ((x[i] - mean_hi) - mean_lo) * rstd_t;
    } else {
      v = T((double(x[i]) - mean) * rstd);
    }
    if constexpr (kWeight) v *= w[i];
    if constexpr (kBias) v += b[i];
    y[i] = v;
  }
}

template <class T, bool kFast>
void normalize_row(T* y, const T* x, const T* w, const T* b, int64_t n, double mean, double rstd) {
  if (w && b) {
    normalize_row<T, kFast, true, true>(y, x, w, b, n, mean, rstd);
  } else if (w) {
    normalize_row<T, kFast, true, false>(y, x, w, b, n, mean, rstd);
  } else if (b) {
    normalize_row<T, kFast, false, true>(y, x, w, b, n, mean, rstd);
  } else {
    normalize_row<T, kFast, false, false>(y, x, w, b, n, mean, rstd);
  }
}

template <class T>
void layer_norm_rows_impl(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd,
                          int64_t rows, int64_t cols, int64_t x_row_stride, int64_t y_row_stride,
                          double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * x_row_stride;
    // An empty row has mean 0/0 = NaN. Rows with inf or NaN (their one-pass statistics are not
    // finite) take the two passes, so that their mean and variance come out as the naive formula's.
    RowMoments mo{0.0, std::numeric_limits<double>::quiet_NaN()};
    if constexpr (std::is_same_v<T, float>) {
      if (cols > 0 && cols <= kOnePassMaxCols) mo = one_pass_moments(xr, cols);
    }
    if (!std::isfinite(mo.mean) || !std::isfinite(mo.var)) {
      mo.mean = sum_row(xr, cols) / double(cols);
      mo.var = sum_sq_dev_row(xr, cols, mo.mean) / double(cols);
    }
    const double mu = mo.mean, var = mo.var;
    const double inv = 1.0 / std::sqrt(var + eps);
    if (mean) mean[r] = T(mu);
    if (rstd) rstd[r] = T(inv);
    T* yr = y + r * y_row_stride;
    // Every |x - mean| <= sqrt(cols * var), so below this bound x - T(mean) cannot overflow T
    // (false for NaN or inf statistics, which take the double path as the naive formula does).
    const double reach = std::fabs(mu) + std::sqrt(double(cols) * var);
    if (reach < double(std::numeric_limits<T>::max()) / 4) {
      normalize_row<T, true>(yr, xr, w, b, cols, mu, inv);
    } else {
      normalize_row<T, false>(yr, xr, w, b, cols, mu, inv);
    }
  }
}

}  // namespace

void layer_norm_rows(const float* x, const float* w, const float* b, float* y, float* mean,
                     float* rstd, int64_t rows, int64_t cols, int64_t x_row_stride,
                     int64_t y_row_stride, double eps) {
  layer_norm_rows_impl(x, w, b, y, mean, rstd, rows, cols, x_row_stride, y_row_stride, eps);
}

void layer_norm_rows(const double* x, const double* w, const double* b, double* y, double* mean,
                     double* rstd, int64_t rows, int64_t cols, int64_t x_row_stride,
                     int64_t y_row_stride, double eps) {
  layer_norm_rows_impl(x, w, b, y, mean, rstd, rows, cols, x_row_stride, y_row_stride, eps);
}

}  // namespace smelt::kernels
