#include "kernels/norm.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "kernels/loops.h"
#include "kernels/reduce.h"
#include "kernels/row_kernels.h"
#include "kernels/row_reduce.h"
#include "kernels/row_view.h"

namespace smelt::kernels {
namespace {

Tensor row_major(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor copy = empty(t.shape(), t.dtype());
  copy_strided(copy, t);
  return copy;
}

}  // namespace

void layer_norm_forward(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& w, const Tensor& b, int64_t normalized_dims, double eps) {
  const int64_t split = x.dim() - normalized_dims;
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < x.dim(); ++d) (d < split ? rows : cols) *= x.size(d);
  if (rows == 0) return;
  Tensor xs = x;
  std::optional<int64_t> stride = row_stride(x, split);
  if (!stride) {
    xs = row_major(x);
    stride = cols;
  }
  Tensor ws = row_major(w), bs = row_major(b);
  SMELT_DISPATCH_FLOATING(x.dtype(), "layer_norm", [&] {
    using T = scalar_t;
    const T* px = xs.strided_data<T>();  // rows `stride` apart
    const T* pw = ws.data<T>();
    const T* pb = bs.data<T>();
    T* py = y.data<T>();
    T* pmean = mean.data<T>();
    T* prstd = rstd.data<T>();
    const int64_t xstride = *stride;
    parallel_for(rows, row_grain(cols), [&](int64_t begin, int64_t end) {
      layer_norm_rows(px + begin * xstride, pw, pb, py + begin * cols, pmean + begin,
                      prstd + begin, end - begin, cols, xstride, cols, eps);
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
    const T* pw = w.strided_data<T>();
    const T* pb = b.strided_data<T>();
    const T* prm = running_mean.strided_data<T>();
    const T* prv = running_var.strided_data<T>();
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
