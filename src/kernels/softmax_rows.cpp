// Online softmax and log_softmax over rows (see kernels/row_kernels.h for the contract).
//
// A row is cut into blocks of `block` elements (4 KiB of float for rows up to kMinBlock *
// kMaxBlocks elements). Per block: its maximum (read from memory), then exp(x - running maximum)
// summed into kSoftmaxLanes accumulators (the block again, from L1). When a block raises the running
// maximum the accumulators are rescaled by exp(old - new) first. The maximum of the next block
// (in this row or the next) is taken in the same loop as this block's exp, so reading it from
// memory overlaps the arithmetic. Element i always goes to accumulator i % kSoftmaxLanes, and the
// accumulators are added in a fixed order (a tree of halves) at the end: the sum's rounding
// depends only on the row's values and length, and the maxima do not depend on the order they
// were found in, so a row's result does not depend on which rows share its call.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/row_kernels.h"
#include "kernels/scalar.h"

namespace smelt::kernels {
namespace {

constexpr int64_t kSoftmaxLanes = 16;       // sum accumulators: one AVX-512 register of float
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

// v if it is greater than m, else m: a NaN v is ignored (it reaches the result through the sum
// instead). Written as a select of bit patterns, which GCC vectorizes inside the exp loop below
// (a `?:` on the values there stops it). Zero comes out as +0 from canonical_max, so which of ±0
// a block's maximum is never depends on how its elements were visited.
template <class T>
inline T max_ignoring_nan(T m, T v) {
  return m < v ? v : m;  // one vmaxps(v, m) (x86's max returns its second operand on NaN)
}

// The maximum of lanes (count, a power of two; modified) as a tree of halves: log2(count) vector
// steps instead of a chain of count dependent selects (~4 cycles each, per row). The same value
// as any other order: no lane holds NaN (max_ignoring_nan never keeps one), and ±0 is made +0.
template <class T>
T canonical_max(T* lanes, int64_t count) {
  for (int64_t half = count / 2; half >= 1; half /= 2) {
    for (int64_t l = 0; l < half; ++l) lanes[l] = max_ignoring_nan(lanes[l], lanes[l + half]);
  }
  return lanes[0] == T(0) ? T(0) : lanes[0];
}

// Maximum of x (n), ignoring NaN; -inf when there is nothing else.
template <class T>
T block_max(const T* x, int64_t n) {
  T lanes[kMaxLanes];
  for (int64_t l = 0; l < kMaxLanes; ++l) lanes[l] = -std::numeric_limits<T>::infinity();
  int64_t i = 0;
  for (; i + kMaxLanes <= n; i += kMaxLanes) {
#pragma omp simd
    for (int64_t l = 0; l < kMaxLanes; ++l) lanes[l] = std::max(lanes[l], x[i + l]);
  }
  for (; i < n; ++i) lanes[0] = std::max(lanes[0], x[i]);
  return canonical_max(lanes, kMaxLanes);
}

// exp(x - shift) over x (n <= kChunk), added to lanes[i % kSoftmaxLanes] and, with kStore, written to
// e (n). With kLook, also the maxima of `next` (n elements of the block to come) into
// next_max[i % kSoftmaxLanes]: the next block's first read from memory overlaps this block's exp.
// The partial sums stay in T and in registers over the chunk, kChunk / kSoftmaxLanes terms each,
// non-negative (float loses at most 15 roundings of 2^-24 there); then they go to double.
// Out of line with __restrict pointers: so GCC vectorizes the whole body 16 wide with the
// accumulators in registers (inlined, or with x and e possibly equal, it vectorizes only the
// 16-lane inner loop and keeps the sums in memory). e == x (in place) goes through a scratch
// chunk, so the pointers really never overlap.
template <class T, bool kStore, bool kLook>
[[gnu::noinline]] void exp_sum_chunk_impl(const T* __restrict x, T* __restrict e, int64_t n,
                                          T shift, double* __restrict lanes,
                                          const T* __restrict next, T* __restrict next_max) {
  T part[kSoftmaxLanes] = {}, look[kSoftmaxLanes];
  if constexpr (kLook) std::memcpy(look, next_max, sizeof look);
  int64_t i = 0;
  for (; i + kSoftmaxLanes <= n; i += kSoftmaxLanes) {
    for (int64_t l = 0; l < kSoftmaxLanes; ++l) {
      const T v = scalar::exp_nonpositive(T(x[i + l] - shift));
      if constexpr (kStore) e[i + l] = v;
      part[l] += v;
      if constexpr (kLook) look[l] = max_ignoring_nan(look[l], next[i + l]);
    }
  }
  // The row's tail: element i still goes to lane i % kSoftmaxLanes (chunks are multiples of kSoftmaxLanes).
  for (int64_t l = 0; i < n; ++i, ++l) {
    const T v = scalar::exp_nonpositive(T(x[i] - shift));
    if constexpr (kStore) e[i] = v;
    part[l] += v;
    if constexpr (kLook) look[l] = max_ignoring_nan(look[l], next[i]);
  }
  for (int64_t l = 0; l < kSoftmaxLanes; ++l) lanes[l] += double(part[l]);
  if constexpr (kLook) std::memcpy(next_max, look, sizeof look);
}

template <class T, bool kStore, bool kLook>
void exp_sum_chunk(const T* x, T* e, int64_t n, T shift, double* lanes, const T* next,
                   T* next_max) {
  if (kStore && e == x) {
    T scratch[kChunk];
    exp_sum_chunk_impl<T, kStore, kLook>(x, scratch, n, shift, lanes, next, next_max);
    std::memcpy(e, scratch, sizeof(T) * size_t(n));
  } else {
    exp_sum_chunk_impl<T, kStore, kLook>(x, e, n, shift, lanes, next, next_max);
  }
}

struct RowStats {
  double max;  // the row's maximum, NaN ignored (-inf for an empty or all -inf/NaN row)
  double sum;  // sum of exp(x - max); NaN when x holds a NaN or +inf
};

// One pass over x (n): the maximum and the sum of exp(x - max). first_max is the maximum of the
// row's first block; next_row, when not null, the row after this one, whose first block's
// maximum is found on the way and left in first_max. With kStore, y (n) receives
// exp(x - running maximum of the block) and block_max_out[k] that running maximum for block k,
// so that y * exp(block_max_out[k] - max) is exp(x - max).
template <class T, bool kStore>
RowStats row_stats(const T* x, T* y, int64_t n, int64_t block, double* block_max_out,
                   T& first_max, const T* next_row) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  double lanes[kSoftmaxLanes] = {};
  T m = kNegInf, bm = first_max;
  for (int64_t b0 = 0, k = 0; b0 < n; b0 += block, ++k) {
    const int64_t len = std::min(block, n - b0);
    if (bm > m) {
      // exp(-inf) = 0 clears the lanes when the old maximum was -inf (they hold 0 or NaN).
      const double scale = std::exp(double(m) - double(bm));
      for (int64_t l = 0; l < kSoftmaxLanes; ++l) lanes[l] *= scale;
      m = bm;
    }
    // While every element so far is -inf (or NaN), shift by 0: x - m would be -inf - -inf = NaN,
    // and exp(-inf - 0) = 0 is what those elements contribute once a finite maximum turns up.
    const T shift = m == kNegInf ? T(0) : m;
    if constexpr (kStore) block_max_out[k] = double(m);
    // The block after this one: later in the row, or the next row's first.
    const T* next = b0 + len < n ? x + b0 + len : next_row;
    const int64_t next_len = b0 + len < n ? std::min(block, n - b0 - len) : std::min(block, n);
    if (next && next_len == len) {
      T look[kSoftmaxLanes];
      for (int64_t l = 0; l < kSoftmaxLanes; ++l) look[l] = kNegInf;
      for (int64_t c0 = 0; c0 < len; c0 += kChunk) {
        exp_sum_chunk<T, kStore, true>(x + b0 + c0, kStore ? y + b0 + c0 : nullptr,
                                       std::min(kChunk, len - c0), shift, lanes, next + c0, look);
      }
      bm = canonical_max(look, kSoftmaxLanes);
    } else {
      for (int64_t c0 = 0; c0 < len; c0 += kChunk) {
        exp_sum_chunk<T, kStore, false>(x + b0 + c0, kStore ? y + b0 + c0 : nullptr,
                                        std::min(kChunk, len - c0), shift, lanes, nullptr, nullptr);
      }
      if (next) bm = block_max(next, next_len);
    }
  }
  first_max = bm;
  // The lanes added as a tree of halves: four dependent vector additions instead of a chain of 16.
  for (int64_t half = kSoftmaxLanes / 2; half >= 1; half /= 2) {
    for (int64_t l = 0; l < half; ++l) lanes[l] += lanes[l + half];
  }
  return {double(m), lanes[0]};
}

template <class T>
void softmax_rows_impl(const T* x, T* y, int64_t rows, int64_t cols, int64_t x_row_stride,
                       int64_t y_row_stride, bool log) {
  if (cols == 0 || rows == 0) return;
  const int64_t block = block_length(cols);
  T first_max = block_max(x, std::min(block, cols));
  double block_max_of[kMaxBlocks];
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * x_row_stride;
    T* yr = y + r * y_row_stride;
    const T* next_row = r + 1 < rows ? xr + x_row_stride : nullptr;
    if (log) {
      const RowStats s = row_stats<T, false>(xr, nullptr, cols, block, nullptr, first_max, next_row);
      // (x - max) - log sum, not x - (max + log sum): the sum would round log sum away next to
      // a large max.
      const T m = T(s.max), log_sum = T(std::log(s.sum));
      for (int64_t i = 0; i < cols; ++i) yr[i] = (xr[i] - m) - log_sum;
    } else {
      const RowStats s = row_stats<T, true>(xr, yr, cols, block, block_max_of, first_max, next_row);
      for (int64_t b0 = 0, k = 0; b0 < cols; b0 += block, ++k) {
        // exp(block max - max) / sum in double, rounded once: 1 / sum for every block that saw
        // the final maximum. An all -inf row gets exp(-inf + inf) = NaN, as exp(x - max) / sum.
        const T scale = T(std::exp(block_max_of[k] - s.max) / s.sum);
        T* yb = yr + b0;
        const int64_t len = std::min(block, cols - b0);
        for (int64_t i = 0; i < len; ++i) yb[i] *= scale;
      }
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
