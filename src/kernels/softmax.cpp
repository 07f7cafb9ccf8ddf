#include "kernels/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "kernels/loops.h"
#include "kernels/reduce.h"
#include "kernels/row_kernels.h"
#include "kernels/row_view.h"
#include "kernels/scalar.h"

namespace smelt::kernels {
namespace {

// The column path reduces this many adjacent inner positions at once (stack buffers).
constexpr int64_t kColumnBlock = 256;

// A block of `width` adjacent columns: x and y point at element (o, 0, j0) of an
// (outer, n, inner) array; column j is x[k * inner + j] for k in [0, n).
template <class T>
void softmax_columns(const T* x, T* y, int64_t n, int64_t inner, int64_t width, bool log) {
  T m[kColumnBlock];
  double s[kColumnBlock];
  for (int64_t j = 0; j < width; ++j) { m[j] = -std::numeric_limits<T>::infinity(); s[j] = 0; }
  for (int64_t k = 0; k < n; ++k) {
    const T* xk = x + k * inner;
    for (int64_t j = 0; j < width; ++j) m[j] = xk[j] > m[j] ? xk[j] : m[j];
  }
  for (int64_t k = 0; k < n; ++k) {
    const T* xk = x + k * inner;
    T* yk = y + k * inner;
    for (int64_t j = 0; j < width; ++j) {
      yk[j] = scalar::exp_nonpositive(T(xk[j] - m[j]));  // x <= its column's maximum
      s[j] += double(yk[j]);
    }
  }
  if (log) {
    T log_s[kColumnBlock];
    for (int64_t j = 0; j < width; ++j) log_s[j] = T(std::log(s[j]));
    for (int64_t k = 0; k < n; ++k) {
      const T* xk = x + k * inner;
      T* yk = y + k * inner;
      for (int64_t j = 0; j < width; ++j) yk[j] = (xk[j] - m[j]) - log_s[j];
    }
  } else {
    T inv[kColumnBlock];
    for (int64_t j = 0; j < width; ++j) inv[j] = T(1.0 / s[j]);
    for (int64_t k = 0; k < n; ++k) {
      T* yk = y + k * inner;
      for (int64_t j = 0; j < width; ++j) yk[j] *= inv[j];
    }
  }
}

// The row path: x seen as (outer, n) rows, read in place when its layout allows.
void softmax_row_path(const Tensor& y, const Tensor& x, int64_t dim, int64_t outer, int64_t n,
                      bool log) {
  Tensor src = x;
  std::optional<int64_t> stride = row_stride(x, dim);
  if (!stride) {
    src = empty(x.shape(), x.dtype());
    copy_strided(src, x);
    stride = n;
  }
  SMELT_DISPATCH_FLOATING(x.dtype(), (log ? "log_softmax" : "softmax"), [&] {
    using T = scalar_t;
    const T* px = src.strided_data<T>();  // rows `xs` apart
    T* py = y.data<T>();
    const int64_t xs = *stride;
    parallel_for(outer, row_grain(n), [&](int64_t begin, int64_t end) {
      softmax_rows(px + begin * xs, py + begin * n, end - begin, n, xs, n, log);
    });
  });
}

}  // namespace

void softmax_forward(const Tensor& y, const Tensor& x, int64_t dim, bool log) {
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < dim) outer *= x.size(d);
    else if (d == dim) n = x.size(d);
    else inner *= x.size(d);
  }
  if (outer * n * inner == 0) return;
  if (inner == 1) {
    softmax_row_path(y, x, x.dim() == 0 ? 0 : dim, outer, n, log);
    return;
  }
  Tensor src = x;
  if (!x.is_contiguous()) {
    src = empty(x.shape(), x.dtype());
    copy_strided(src, x);
  }
  SMELT_DISPATCH_FLOATING(x.dtype(), (log ? "log_softmax" : "softmax"), [&] {
    using T = scalar_t;
    const T* px = src.data<T>();
    T* py = y.data<T>();
    const int64_t blocks = (inner + kColumnBlock - 1) / kColumnBlock;
    const int64_t work_per_task = n * std::min(inner, kColumnBlock);
    parallel_for(outer * blocks, std::max<int64_t>(1, kParallelGrain / work_per_task),
                 [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t o = t / blocks, j0 = (t % blocks) * kColumnBlock;
        const int64_t at = o * n * inner + j0;
        softmax_columns(px + at, py + at, n, inner, std::min(kColumnBlock, inner - j0), log);
      }
    });
  });
}

}  // namespace smelt::kernels
