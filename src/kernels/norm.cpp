#include "kernels/norm.h"

#include <algorithm>
#include <cmath>

#include "kernels/loops.h"
#include "kernels/reduce.h"
#include "kernels/row_reduce.h"

namespace smelt::kernels {
namespace {

Tensor row_major(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor copy = empty(t.shape(), t.dtype());
  copy_strided(copy, t);
  return copy;
}

// y (n) = (x - mean) * rstd * w + b, one row of layer norm. Centered in double: with float32 x
// far from zero, x * rstd - mean * rstd would cancel away most of the significant digits.
template <class T>
void normalize_row(T* y, const T* x, const T* w, const T* b, int64_t n, double mean, double rstd) {
  for (int64_t i = 0; i < n; ++i) y[i] = T((double(x[i]) - mean) * rstd) * w[i] + b[i];
}

}  // namespace

void layer_norm_forward(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& w, const Tensor& b, int64_t normalized_dims, double eps) {
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < x.dim(); ++d) (d < x.dim() - normalized_dims ? rows : cols) *= x.size(d);
  if (rows == 0) return;
  Tensor xs = row_major(x), ws = row_major(w), bs = row_major(b);
  SMELT_DISPATCH_FLOATING(x.dtype(), "layer_norm", [&] {
    using T = scalar_t;
    const T* px = xs.data<T>();
    const T* pw = ws.data<T>();
    const T* pb = bs.data<T>();
    T* py = y.data<T>();
    T* pmean = mean.data<T>();
    T* prstd = rstd.data<T>();
    parallel_for(rows, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(cols, 1)),
                 [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T* row = px + r * cols;
        // An empty row has mean 0/0 = NaN, as PyTorch reports it.
        const double mu = row_sum(row, cols) / double(cols);
        const double var = row_sum_sq_dev(row, cols, mu) / double(cols);
        const double inv = 1.0 / std::sqrt(var + eps);
        pmean[r] = T(mu);
        prstd[r] = T(inv);
        normalize_row(py + r * cols, row, pw, pb, cols, mu, inv);
      }
    });
  });
}

void batch_norm_forward(const BatchNormOutputs& out, const Tensor& x, const Tensor& w,
                        const Tensor& b, const Tensor& running_mean, const Tensor& running_var,
                        const BatchNormParams& params) {
  const int64_t batch = x.size(0), channels = x.size(1);
  const int64_t spatial = channels == 0 ? 0 : x.numel() / std::max<int64_t>(batch * channels, 1);
  const int64_t count = batch * spatial;  // elements per channel
  Tensor xs = row_major(x);
  SMELT_DISPATCH_FLOATING(x.dtype(), "batch_norm", [&] {
    using T = scalar_t;
    const T* px = xs.data<T>();
    T* py = out.y.data<T>();
    T* pmean = out.mean.data<T>();
    T* pinv = out.invstd.data<T>();
    T* pnew_rm = out.new_running_mean.data<T>();
    T* pnew_rv = out.new_running_var.data<T>();
    // Per-channel inputs are read through their strides.
    const T* pw = w.data<T>();
    const T* pb = b.data<T>();
    const T* prm = running_mean.data<T>();
    const T* prv = running_var.data<T>();
    const int64_t sw = w.stride(0), sb = b.stride(0);
    const int64_t srm = running_mean.stride(0), srv = running_var.stride(0);
    parallel_for(channels, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(count, 1)),
                 [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        double mu, inv;
        if (params.training) {
          double total = 0;
          for (int64_t n = 0; n < batch; ++n) total += row_sum(px + (n * channels + c) * spatial, spatial);
          mu = total / double(count);
          double ss = 0;
          for (int64_t n = 0; n < batch; ++n) {
            ss += row_sum_sq_dev(px + (n * channels + c) * spatial, spatial, mu);
          }
          inv = 1.0 / std::sqrt(ss / double(count) + params.eps);
          const double m = params.momentum;
          pnew_rm[c] = T((1.0 - m) * double(prm[c * srm]) + m * mu);
          pnew_rv[c] = T((1.0 - m) * double(prv[c * srv]) + m * ss / double(count - 1));
        } else {
          mu = double(prm[c * srm]);
          inv = 1.0 / std::sqrt(double(prv[c * srv]) + params.eps);
          pnew_rm[c] = prm[c * srm];
          pnew_rv[c] = prv[c * srv];
        }
        pmean[c] = T(mu);
        pinv[c] = T(inv);
        // Centered in double, as in layer norm.
        const double scale = inv * double(pw[c * sw]), shift = double(pb[c * sb]);
        for (int64_t n = 0; n < batch; ++n) {
          const T* xr = px + (n * channels + c) * spatial;
          T* yr = py + (n * channels + c) * spatial;
          for (int64_t s = 0; s < spatial; ++s) yr[s] = T((double(xr[s]) - mu) * scale + shift);
        }
      }
    });
  });
}

}  // namespace smelt::kernels
