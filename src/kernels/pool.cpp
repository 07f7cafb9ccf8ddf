#include "kernels/pool.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "base/parallel.h"
#include "kernels/loops.h"

namespace smelt::kernels {
namespace {

// Planes per thread chunk: enough output elements to pay for a fork.
int64_t plane_grain(int64_t elements_per_plane) {
  return std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(elements_per_plane, 1));
}

// The taps along one dim for output position o: tap t reads position origin + t dil; taps
// [begin, end) land inside the input, and `padded` counts the taps inside the padded extent
// [-pad, in + pad) (count_include_pad's divisor, as PyTorch clips it).
struct Span {
  int64_t begin, end, padded, origin;
};
Span avg_span(int64_t o, int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dil) {
  const int64_t origin = o * stride - pad;
  // The number of taps t in [0, kernel) with origin + t dil < limit.
  auto taps_below = [&](int64_t limit) {
    return limit <= origin ? 0 : std::min(kernel, (limit - origin + dil - 1) / dil);
  };
  const int64_t begin = origin >= 0 ? 0 : std::min(kernel, (-origin + dil - 1) / dil);
  return {begin, std::max(begin, taps_below(in)), taps_below(in + pad), origin};
}

// One output row: taps in window order (ki, then kj), each swept across the row so the inner
// loop over ow vectorizes; the first tap that is larger (or the first NaN) wins, exactly as a
// scalar walk of each window would pick. Out-of-image taps are skipped (no padding value).
template <class T>
void max_forward_row(const Pool2dWindow& k, int64_t H, int64_t W, int64_t Wo, int64_t oh, const T* __restrict xp,
                     T* __restrict best, int64_t* __restrict best_at) {
  for (int64_t ow = 0; ow < Wo; ++ow) best[ow] = lowest_value<T>(), best_at[ow] = -1;
  for (int64_t ki = 0; ki < k.kH; ++ki) {
    const int64_t ih = oh * k.stride_h - k.pad_h + ki * k.dil_h;
    if (ih < 0 || ih >= H) continue;
    for (int64_t kj = 0; kj < k.kW; ++kj) {
      // Output columns whose tap kj reads inside the row: iw = ow stride + offset in [0, W).
      const int64_t offset = kj * k.dil_w - k.pad_w;
      const int64_t lo = offset >= 0 ? 0 : (-offset + k.stride_w - 1) / k.stride_w;
      const int64_t hi = W - offset <= 0 ? 0 : std::min(Wo, (W - offset + k.stride_w - 1) / k.stride_w);
      const T* __restrict row = xp + ih * W + offset;
      const int64_t base = ih * W + offset;
      for (int64_t ow = lo; ow < hi; ++ow) {
        const T v = row[ow * k.stride_w];
        const T b = best[ow];
        // NaN wins (and stays): the max of a window holding NaN is NaN.
        const bool take = best_at[ow] < 0 || v > b || (v != v && b == b);
        best[ow] = take ? v : b;
        best_at[ow] = take ? base + ow * k.stride_w : best_at[ow];
      }
    }
  }
}

template <class T>
void max_forward(const Pool2dWindow& win, int64_t planes, int64_t H, int64_t W, int64_t Ho,
                 int64_t Wo, T* y, int64_t* idx, const T* x) {
  const Pool2dWindow k = win;  // a copy: the stores to y and idx cannot alias it
  parallel_for(planes, plane_grain(Ho * Wo * k.kH * k.kW), [=](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      for (int64_t oh = 0; oh < Ho; ++oh) {
        max_forward_row(k, H, W, Wo, oh, x + p * H * W, y + (p * Ho + oh) * Wo, idx + (p * Ho + oh) * Wo);
      }
    }
  });
}

template <class T>
void max_backward(int64_t planes, int64_t HW, int64_t HoWo, T* dx, const T* dy, const int64_t* idx) {
  parallel_for(planes, plane_grain(HoWo + HW), [&](int64_t begin, int64_t end) {
    std::fill(dx + begin * HW, dx + end * HW, T(0));
    for (int64_t p = begin; p < end; ++p) {
      for (int64_t o = 0; o < HoWo; ++o) {
        const int64_t at = idx[p * HoWo + o];
        if (at >= 0) dx[p * HW + at] += dy[p * HoWo + o];
      }
    }
  });
}

// Every window inside the image (no padding, no dilation, no partial window at the far edges):
// each output row is summed tap by tap over whole rows, in the same order per output as the
// general loop (rows of the window outer, columns inner), so the bits are the same, and the
// inner loop over outputs vectorizes.
template <class T>
bool avg_forward_full_windows(const Pool2dWindow& k, int64_t planes, int64_t H, int64_t W, int64_t Ho,
                              int64_t Wo, T* y, const T* x) {
  if (k.pad_h || k.pad_w || k.dil_h != 1 || k.dil_w != 1 || Ho == 0 || Wo == 0) return false;
  if ((Ho - 1) * k.stride_h + k.kH > H || (Wo - 1) * k.stride_w + k.kW > W) return false;
  const T count = T(k.kH * k.kW);
  const int64_t sw = k.stride_w;
  parallel_for(planes, plane_grain(Ho * Wo * k.kH * k.kW), [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const T* xp = x + p * H * W;
      for (int64_t oh = 0; oh < Ho; ++oh) {
        T* out = y + (p * Ho + oh) * Wo;
        std::fill(out, out + Wo, T(0));
        for (int64_t i = 0; i < k.kH; ++i) {
          const T* row = xp + (oh * k.stride_h + i) * W;
          for (int64_t j = 0; j < k.kW; ++j) {
            for (int64_t ow = 0; ow < Wo; ++ow) out[ow] += row[ow * sw + j];
          }
        }
        for (int64_t ow = 0; ow < Wo; ++ow) out[ow] = out[ow] / count;
      }
    }
  });
  return true;
}

template <class T>
void avg_forward(const Pool2dWindow& k, bool include_pad, int64_t planes, int64_t H, int64_t W,
                 int64_t Ho, int64_t Wo, T* y, const T* x) {
  if (avg_forward_full_windows(k, planes, H, W, Ho, Wo, y, x)) return;
  parallel_for(planes, plane_grain(Ho * Wo * k.kH * k.kW), [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const T* xp = x + p * H * W;
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const Span sh = avg_span(oh, H, k.kH, k.stride_h, k.pad_h, k.dil_h);
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const Span sw = avg_span(ow, W, k.kW, k.stride_w, k.pad_w, k.dil_w);
          T acc = 0;
          for (int64_t i = sh.begin; i < sh.end; ++i) {
            const T* row = xp + (sh.origin + i * k.dil_h) * W + sw.origin;
            for (int64_t j = sw.begin; j < sw.end; ++j) acc += row[j * k.dil_w];
          }
          const int64_t count = include_pad ? sh.padded * sw.padded
                                            : (sh.end - sh.begin) * (sw.end - sw.begin);
          y[(p * Ho + oh) * Wo + ow] = count > 0 ? acc / T(count) : T(0);
        }
      }
    }
  });
}

template <class T>
void avg_backward(const Pool2dWindow& k, bool include_pad, int64_t planes, int64_t H, int64_t W,
                  int64_t Ho, int64_t Wo, T* dx, const T* dy) {
  parallel_for(planes, plane_grain(Ho * Wo * k.kH * k.kW), [&](int64_t begin, int64_t end) {
    std::fill(dx + begin * H * W, dx + end * H * W, T(0));
    for (int64_t p = begin; p < end; ++p) {
      T* dxp = dx + p * H * W;
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const Span sh = avg_span(oh, H, k.kH, k.stride_h, k.pad_h, k.dil_h);
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const Span sw = avg_span(ow, W, k.kW, k.stride_w, k.pad_w, k.dil_w);
          const int64_t count = include_pad ? sh.padded * sw.padded
                                            : (sh.end - sh.begin) * (sw.end - sw.begin);
          if (count <= 0) continue;
          const T share = dy[(p * Ho + oh) * Wo + ow] / T(count);
          for (int64_t i = sh.begin; i < sh.end; ++i) {
            T* row = dxp + (sh.origin + i * k.dil_h) * W + sw.origin;
            for (int64_t j = sw.begin; j < sw.end; ++j) row[j * k.dil_w] += share;
          }
        }
      }
    }
  });
}

int64_t bin_begin(int64_t o, int64_t in, int64_t out) { return o * in / out; }
int64_t bin_end(int64_t o, int64_t in, int64_t out) { return ((o + 1) * in + out - 1) / out; }

template <class T>
void adaptive_forward(int64_t planes, int64_t H, int64_t W, int64_t Ho, int64_t Wo, T* y,
                      const T* x) {
  parallel_for(planes, plane_grain(H * W), [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const T* xp = x + p * H * W;
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const int64_t h0 = bin_begin(oh, H, Ho), h1 = bin_end(oh, H, Ho);
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const int64_t w0 = bin_begin(ow, W, Wo), w1 = bin_end(ow, W, Wo);
          T acc = 0;
          for (int64_t ih = h0; ih < h1; ++ih) {
            for (int64_t iw = w0; iw < w1; ++iw) acc += xp[ih * W + iw];
          }
          y[(p * Ho + oh) * Wo + ow] = acc / T((h1 - h0) * (w1 - w0));
        }
      }
    }
  });
}

template <class T>
void adaptive_backward(int64_t planes, int64_t H, int64_t W, int64_t Ho, int64_t Wo, T* dx,
                       const T* dy) {
  parallel_for(planes, plane_grain(H * W), [&](int64_t begin, int64_t end) {
    std::fill(dx + begin * H * W, dx + end * H * W, T(0));
    for (int64_t p = begin; p < end; ++p) {
      T* dxp = dx + p * H * W;
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const int64_t h0 = bin_begin(oh, H, Ho), h1 = bin_end(oh, H, Ho);
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const int64_t w0 = bin_begin(ow, W, Wo), w1 = bin_end(ow, W, Wo);
          const T share = dy[(p * Ho + oh) * Wo + ow] / T((h1 - h0) * (w1 - w0));
          for (int64_t ih = h0; ih < h1; ++ih) {
            for (int64_t iw = w0; iw < w1; ++iw) dxp[ih * W + iw] += share;
          }
        }
      }
    }
  });
}

struct Planes {
  int64_t count, H, W, Ho, Wo;
};
Planes planes_of(const Tensor& input, const Tensor& output) {
  return {input.size(0) * input.size(1), input.size(2), input.size(3), output.size(2),
          output.size(3)};
}

}  // namespace

void max_pool2d_forward(const Pool2dWindow& win, const Tensor& y, const Tensor& indices,
                        const Tensor& x) {
  const Planes p = planes_of(x, y);
  if (!indices.defined()) return max_pool2d_values_forward(win, y, x);
  SMELT_DISPATCH_FLOATING_OR_BYTES(x.dtype(), "max_pool2d", [&] {
    max_forward<scalar_t>(win, p.count, p.H, p.W, p.Ho, p.Wo, y.data<scalar_t>(),
                          indices.data<int64_t>(), x.data<scalar_t>());
  });
}

void max_pool2d_backward(const Tensor& dx, const Tensor& dy, const Tensor& indices) {
  const Planes p = planes_of(dx, dy);
  SMELT_DISPATCH_FLOATING(dy.dtype(), "max_pool2d_grad", [&] {
    max_backward<scalar_t>(p.count, p.H * p.W, p.Ho * p.Wo, dx.data<scalar_t>(),
                           dy.data<scalar_t>(), indices.data<int64_t>());
  });
}

void avg_pool2d_forward(const Pool2dWindow& win, bool count_include_pad, const Tensor& y,
                        const Tensor& x) {
  const Planes p = planes_of(x, y);
  SMELT_DISPATCH_FLOATING(x.dtype(), "avg_pool2d", [&] {
    avg_forward<scalar_t>(win, count_include_pad, p.count, p.H, p.W, p.Ho, p.Wo,
                          y.data<scalar_t>(), x.data<scalar_t>());
  });
}

void avg_pool2d_backward(const Pool2dWindow& win, bool count_include_pad, const Tensor& dx,
                         const Tensor& dy) {
  const Planes p = planes_of(dx, dy);
  SMELT_DISPATCH_FLOATING(dy.dtype(), "avg_pool2d_grad", [&] {
    avg_backward<scalar_t>(win, count_include_pad, p.count, p.H, p.W, p.Ho, p.Wo,
                           dx.data<scalar_t>(), dy.data<scalar_t>());
  });
}

void adaptive_avg_pool2d_forward(const Tensor& y, const Tensor& x) {
  const Planes p = planes_of(x, y);
  SMELT_DISPATCH_FLOATING(x.dtype(), "adaptive_avg_pool2d", [&] {
    adaptive_forward<scalar_t>(p.count, p.H, p.W, p.Ho, p.Wo, y.data<scalar_t>(),
                               x.data<scalar_t>());
  });
}

void adaptive_avg_pool2d_backward(const Tensor& dx, const Tensor& dy) {
  const Planes p = planes_of(dx, dy);
  SMELT_DISPATCH_FLOATING(dy.dtype(), "adaptive_avg_pool2d_grad", [&] {
    adaptive_backward<scalar_t>(p.count, p.H, p.W, p.Ho, p.Wo, dx.data<scalar_t>(),
                                dy.data<scalar_t>());
  });
}

}  // namespace smelt::kernels
