// Row kernels: softmax, log_softmax and layer_norm over a range of rows given by raw pointers and
// row strides. The eager ops (kernels/softmax.cpp, kernels/norm.cpp) and compiled plans call the
// same functions, so both paths give the same bits.
//
// Letters: R rows, C elements per row. Row r of x starts at x + r * x_row_stride and its C
// elements are contiguous; likewise y. The functions are serial over their rows: a caller splits
// the rows across threads (parallel_for(R, row_grain(C), ...)). Each row is computed on its own,
// its reductions in a fixed order that depends only on C, so the result does not depend on how
// the rows were split.
//
// y may be x itself (same row stride); no other overlap between outputs and inputs is allowed.
#pragma once

#include <algorithm>
#include <cstdint>

#include "base/parallel.h"

namespace smelt::kernels {

// Rows per parallel chunk: the elementwise minimum grain, counted in elements.
inline int64_t row_grain(int64_t cols) {
  return std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(cols, 1));
}

// y (R, C) = softmax(x (R, C)) along C, or log_softmax when `log`.
// Online: one pass over x finds each block's running maximum and sums exp(x - running max),
// rescaling the sum when the maximum grows; softmax keeps those exponentials in y and a second
// pass (over y, still in cache for rows up to the L2's size) scales them, so exp runs once per
// element; log_softmax's second pass reads x again: y = (x - max) - log(sum). The sums run in T
// over 16 terms per lane, then in double. Special values follow the naive float64 formula: a NaN
// or +inf anywhere makes the row NaN, an all -inf row is NaN, -inf elsewhere gives 0 (or -inf).
void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols, int64_t x_row_stride,
                  int64_t y_row_stride, bool log);
void softmax_rows(const double* x, double* y, int64_t rows, int64_t cols, int64_t x_row_stride,
                  int64_t y_row_stride, bool log);

// y (R, C) = (x - mean) * rstd * w + b per row, rstd = 1 / sqrt(biased variance + eps).
// w, b (C) contiguous, or null for 1 and 0; mean (R), rstd (R) contiguous, or null when not
// wanted. Two passes over x for the statistics (mean, then squared deviations, both summed in
// double: no cancellation for rows far from zero) and one to write y. An empty row (C = 0)
// reports mean and rstd NaN, as PyTorch.
void layer_norm_rows(const float* x, const float* w, const float* b, float* y, float* mean,
                     float* rstd, int64_t rows, int64_t cols, int64_t x_row_stride,
                     int64_t y_row_stride, double eps);
void layer_norm_rows(const double* x, const double* w, const double* b, double* y, double* mean,
                     double* rstd, int64_t rows, int64_t cols, int64_t x_row_stride,
                     int64_t y_row_stride, double eps);

}  // namespace smelt::kernels
