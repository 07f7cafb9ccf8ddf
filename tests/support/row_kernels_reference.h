// Naive row kernels with the interface of kernels/row_kernels.h: every row computed in double
// with the textbook formulas (max, sum of exp, normalize; mean, variance, normalize) and rounded
// once at the end. Tests compare the optimized kernels with them (test-only: not in libsmelt).
#pragma once

#include <cstdint>

namespace smelt::kernels {

template <class T>
void softmax_rows_reference(const T* x, T* y, int64_t rows, int64_t cols, int64_t x_row_stride,
                            int64_t y_row_stride, bool log);
template <class T>
void layer_norm_rows_reference(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd,
                               int64_t rows, int64_t cols, int64_t x_row_stride,
                               int64_t y_row_stride, double eps);

}  // namespace smelt::kernels
