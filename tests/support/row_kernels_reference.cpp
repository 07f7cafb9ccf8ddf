// Naive row kernels in double: the textbook formulas, one element at a time, for tests to compare
// the optimized kernels with (kernels/row_kernels.h).
#include "support/row_kernels_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace smelt::kernels {

template <class T>
void softmax_rows_reference(const T* x, T* y, int64_t rows, int64_t cols, int64_t x_row_stride,
                            int64_t y_row_stride, bool log) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * x_row_stride;
    T* yr = y + r * y_row_stride;
    // NaN is skipped by the maximum (std::max keeps its first argument) and poisons the sum.
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < cols; ++i) m = std::max(m, double(xr[i]));
    double s = 0;
    for (int64_t i = 0; i < cols; ++i) s += std::exp(double(xr[i]) - m);
    for (int64_t i = 0; i < cols; ++i) {
      const double d = double(xr[i]) - m;
      yr[i] = T(log ? d - std::log(s) : std::exp(d) / s);
    }
  }
}

template <class T>
void layer_norm_rows_reference(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd,
                               int64_t rows, int64_t cols, int64_t x_row_stride,
                               int64_t y_row_stride, double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * x_row_stride;
    T* yr = y + r * y_row_stride;
    double mu = 0;
    for (int64_t i = 0; i < cols; ++i) mu += double(xr[i]);
    mu /= double(cols);
    double var = 0;
    for (int64_t i = 0; i < cols; ++i) var += (double(xr[i]) - mu) * (double(xr[i]) - mu);
    var /= double(cols);
    const double inv = 1.0 / std::sqrt(var + eps);
    if (mean) mean[r] = T(mu);
    if (rstd) rstd[r] = T(inv);
    for (int64_t i = 0; i < cols; ++i) {
      const double v = (double(xr[i]) - mu) * inv * (w ? double(w[i]) : 1.0) + (b ? double(b[i]) : 0.0);
      yr[i] = T(v);
    }
  }
}

template void softmax_rows_reference<float>(const float*, float*, int64_t, int64_t, int64_t,
                                            int64_t, bool);
template void softmax_rows_reference<double>(const double*, double*, int64_t, int64_t, int64_t,
                                             int64_t, bool);
template void layer_norm_rows_reference<float>(const float*, const float*, const float*, float*,
                                               float*, float*, int64_t, int64_t, int64_t, int64_t,
                                               double);
template void layer_norm_rows_reference<double>(const double*, const double*, const double*,
                                                double*, double*, double*, int64_t, int64_t,
                                                int64_t, int64_t, double);

}  // namespace smelt::kernels
