// Online softmax and log_softmax over rows (see kernels/row_kernels.h for the contract).
//
// A row is cut into blocks of `block` elements (a multiple of kLanes, 1 KiB of float for rows up
// to kMinBlock * kMaxBlocks elements). Per block: its maximum (read from memory), then
// exp(x - running maximum) summed into kLanes double accumulators (the block again, from L1).
// When a block raises the running maximum the accumulators are rescaled by
// exp(old - new) first. Element i always goes to accumulator i % kLanes, and the accumulators are
// added in lane order at the end: the sum's rounding depends only on the row's values and length.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/row_kernels.h"
#include "kernels/scalar.h"

namespace smelt::kernels {
namespace {

constexpr int64_t kLanes = 16;       // sum accumulators: one AVX-512 register of float
constexpr int64_t kMaxLanes = 64;    // maximum accumulators: four registers, so consecutive
                                     // vmaxps do not wait on each other
constexpr int64_t kChunk = 256;      // elements summed in T before the sums go to double
constexpr int64_t kMinBlock = 1024;  // elements per block: 4 KiB of float, read twice from L1
constexpr int64_t kMaxBlocks = 256;  // running maxima kept per row; longer rows get longer blocks

// Block length for a row of n: kMinBlock, or longer (a multiple of kChunk) so that the row has at
// most kMaxBlocks blocks.
int64_t block_length(int64_t n) {
  const int64_t per_block = (n + kMaxBlocks - 1) / kMaxBlocks;
  return std::max(kMinBlock, (per_block + kChunk - 1) / kChunk * kChunk);
}

// Maximum of x (n) ignoring NaN (a NaN reaches the result through the sum instead); -inf when
// there is nothing else. std::max(best, x) keeps best when x is NaN: one vmaxps per vector.
template <class T>
T block_max(const T* x, int64_t n) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  T lanes[kMaxLanes];
  for (int64_t l = 0; l < kMaxLanes; ++l) lanes[l] = kNegInf;
  int64_t i = 0;
  for (; i + kMaxLanes <= n; i += kMaxLanes) {
#pragma omp simd
    for (int64_t l = 0; l < kMaxLanes; ++l) lanes[l] = std::max(lanes[l], x[i + l]);
  }
  for (; i < n; ++i) lanes[0] = std::max(lanes[0], x[i]);
  T best = kNegInf;
  for (int64_t l = 0; l < kMaxLanes; ++l) best = std::max(best, lanes[l]);
  return best;
}

// exp(x - shift) over x (n <= kChunk), added to lanes[i % kLanes] and, with kStore, written to
// e (n). The chunk is copied to a local buffer first: with x and e possibly the same memory
// (softmax in place), GCC would otherwise vectorize only the 16-lane inner loop, with an alias
// check per vector and the sums in memory. The partial sums stay in T and in registers over the
// chunk, kChunk / kLanes terms each, non-negative: float loses at most 15 roundings of 2^-24
// there; then they go to double.
template <class T, bool kStore>
[[gnu::noinline]] void exp_sum_chunk(const T* __restrict xs, T* __restrict e, int64_t n, T shift, double* lanes) {
  T part[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) {
      const T v = scalar::exp(T(xs[i + l] - shift));
      if constexpr (kStore) e[i + l] = v;
      part[l] += v;
    }
  }
  // The row's tail: element i still goes to lane i % kLanes (chunks are multiples of kLanes).
  for (int64_t l = 0; i < n; ++i, ++l) {
    const T v = scalar::exp(T(xs[i] - shift));
    if constexpr (kStore) e[i] = v;
    part[l] += v;
  }
  for (int64_t l = 0; l < kLanes; ++l) lanes[l] += double(part[l]);
}

struct RowStats {
  double max;  // the row's maximum, NaN ignored (-inf for an empty or all -inf/NaN row)
  double sum;  // sum of exp(x - max); NaN when x holds a NaN or +inf
};

// One pass over x (n): the maximum and the sum of exp(x - max). With kStore, y (n) receives
// exp(x - running maximum of the block) and block_max_out[k] that running maximum for block k,
// so that y * exp(block_max_out[k] - max) is exp(x - max).
template <class T, bool kStore>
RowStats row_stats(const T* x, T* y, int64_t n, int64_t block, double* block_max_out) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  double lanes[kLanes] = {};
  T m = kNegInf;
  for (int64_t b0 = 0, k = 0; b0 < n; b0 += block, ++k) {
    const int64_t len = std::min(block, n - b0);
    const T bm = block_max(x + b0, len);
    if (bm > m) {
      // exp(-inf) = 0 clears the lanes when the old maximum was -inf (they hold 0 or NaN).
      const double scale = std::exp(double(m) - double(bm));
      for (int64_t l = 0; l < kLanes; ++l) lanes[l] *= scale;
      m = bm;
    }
    // While every element so far is -inf (or NaN), shift by 0: x - m would be -inf - -inf = NaN,
    // and exp(-inf - 0) = 0 is what those elements contribute once a finite maximum turns up.
    const T shift = m == kNegInf ? T(0) : m;
    if constexpr (kStore) block_max_out[k] = double(m);
    for (int64_t c0 = b0; c0 < b0 + len; c0 += kChunk) {
      exp_sum_chunk<T, kStore>(x + c0, kStore ? y + c0 : nullptr, std::min(kChunk, b0 + len - c0),
                               shift, lanes);
    }
  }
  double sum = 0;
  for (int64_t l = 0; l < kLanes; ++l) sum += lanes[l];
  return {double(m), sum};
}

template <class T>
void softmax_row(const T* x, T* y, int64_t n) {
  const int64_t block = block_length(n);
  double block_max[kMaxBlocks];
  const RowStats s = row_stats<T, true>(x, y, n, block, block_max);
  for (int64_t b0 = 0, k = 0; b0 < n; b0 += block, ++k) {
    // exp(block max - max) / sum in double, rounded once: 1 / sum for every block that saw the
    // final maximum. An all -inf row gets exp(-inf + inf) = NaN, as exp(x - max) / sum would.
    const T scale = T(std::exp(block_max[k] - s.max) / s.sum);
    T* yb = y + b0;
    const int64_t len = std::min(block, n - b0);
    for (int64_t i = 0; i < len; ++i) yb[i] *= scale;
  }
}

template <class T>
void log_softmax_row(const T* x, T* y, int64_t n) {
  const RowStats s = row_stats<T, false>(x, nullptr, n, block_length(n), nullptr);
  // (x - max) - log sum, not x - (max + log sum): the sum would round log sum away next to a
  // large max.
  const T m = T(s.max), log_sum = T(std::log(s.sum));
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - m) - log_sum;
}

template <class T>
void softmax_rows_impl(const T* x, T* y, int64_t rows, int64_t cols, int64_t x_row_stride,
                       int64_t y_row_stride, bool log) {
  if (cols == 0) return;
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * x_row_stride;
    T* yr = y + r * y_row_stride;
    if (log) {
      log_softmax_row(xr, yr, cols);
    } else {
      softmax_row(xr, yr, cols);
    }
  }
}

}  // namespace

void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols, int64_t x_row_stride,
                  int64_t y_row_stride, bool log) {
  softmax_rows_impl(x, y, rows, cols, x_row_stride, y_row_stride, log);
}

void softmax_rows(const double* x, double* y, int64_t rows, int64_t cols, int64_t x_row_stride,
                  int64_t y_row_stride, bool log) {
  softmax_rows_impl(x, y, rows, cols, x_row_stride, y_row_stride, log);
}

}  // namespace smelt::kernels
