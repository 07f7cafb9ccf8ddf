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

// The clipped window [begin, end) along one dim for output position o, and the padded-window
// size (clipped to the padded extent) used by count_include_pad.
struct Span {
  int64_t begin, end, padded;
};
Span avg_span(int64_t o, int64_t in, int64_t kernel, int64_t stride, int64_t pad) {
  int64_t start = o * stride - pad;
  int64_t stop = std::min(start + kernel, in + pad);
  return {std::max<int64_t>(start, 0), std::min(stop, in), stop - start};
}

// The taps [begin, end) of a window along one dim whose input index o0 + t * dil lies in [0, n):
// the others fall in the padding, which max pooling skips.
std::pair<int64_t, int64_t> inside_taps(int64_t o0, int64_t taps, int64_t dil, int64_t n) {
  int64_t begin = 0, end = taps;
  while (begin < end && o0 + begin * dil < 0) ++begin;
  while (end > begin && o0 + (end - 1) * dil >= n) --end;
  return {begin, end};
}

// y (P, Ho, Wo) = max over each window of x (P, H, W); idx = the flat input index ih * W + iw of
// the first maximum (the first NaN when the window holds one). Two passes over the window: the
// maximum as a running max (a select the compiler emits without branches) and a NaN flag, then
// the first tap holding it. A branch per tap on which one wins is data-dependent, and its
// mispredictions made a single-pass loop ~10x slower.
template <class T>
void max_forward(const Pool2dWindow& win, int64_t planes, int64_t H, int64_t W, int64_t Ho,
                 int64_t Wo, T* y, int64_t* idx, const T* x) {
  const Pool2dWindow k = win;  // a copy: the stores to y and idx cannot alias it
  parallel_for(planes, plane_grain(Ho * Wo * k.kH * k.kW), [=](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const T* xp = x + p * H * W;
      T* yp = y + p * Ho * Wo;
      int64_t* ip = idx + p * Ho * Wo;
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const int64_t h0 = oh * k.stride_h - k.pad_h;
        const auto [ki0, ki1] = inside_taps(h0, k.kH, k.dil_h, H);
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const int64_t w0 = ow * k.stride_w - k.pad_w;
          const auto [kj0, kj1] = inside_taps(w0, k.kW, k.dil_w, W);
          T best = -std::numeric_limits<T>::infinity();
          bool nan = false;
          for (int64_t ki = ki0; ki < ki1; ++ki) {
            const T* row = xp + (h0 + ki * k.dil_h) * W + w0;
            for (int64_t kj = kj0; kj < kj1; ++kj) {
              const T v = row[kj * k.dil_w];
              best = best < v ? v : best;  // NaN never wins here: the flag records it
              nan |= std::isnan(v);
            }
          }
          int64_t best_at = -1;
          for (int64_t ki = ki0; ki < ki1 && best_at < 0; ++ki) {
            const int64_t row = (h0 + ki * k.dil_h) * W + w0;
            for (int64_t kj = kj0; kj < kj1; ++kj) {
              const T v = xp[row + kj * k.dil_w];
              if (nan ? std::isnan(v) : v == best) {
                best_at = row + kj * k.dil_w;
                break;
              }
            }
          }
          yp[oh * Wo + ow] = best_at >= 0 ? xp[best_at] : best;
          ip[oh * Wo + ow] = best_at;
        }
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

template <class T>
void avg_forward(const Pool2dWindow& k, bool include_pad, int64_t planes, int64_t H, int64_t W,
                 int64_t Ho, int64_t Wo, T* y, const T* x) {
  parallel_for(planes, plane_grain(Ho * Wo * k.kH * k.kW), [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const T* xp = x + p * H * W;
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const Span sh = avg_span(oh, H, k.kH, k.stride_h, k.pad_h);
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const Span sw = avg_span(ow, W, k.kW, k.stride_w, k.pad_w);
          T acc = 0;
          for (int64_t ih = sh.begin; ih < sh.end; ++ih) {
            for (int64_t iw = sw.begin; iw < sw.end; ++iw) acc += xp[ih * W + iw];
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
        const Span sh = avg_span(oh, H, k.kH, k.stride_h, k.pad_h);
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const Span sw = avg_span(ow, W, k.kW, k.stride_w, k.pad_w);
          const int64_t count = include_pad ? sh.padded * sw.padded
                                            : (sh.end - sh.begin) * (sw.end - sw.begin);
          if (count <= 0) continue;
          const T share = dy[(p * Ho + oh) * Wo + ow] / T(count);
          for (int64_t ih = sh.begin; ih < sh.end; ++ih) {
            for (int64_t iw = sw.begin; iw < sw.end; ++iw) dxp[ih * W + iw] += share;
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
  SMELT_DISPATCH_FLOATING(x.dtype(), "max_pool2d", [&] {
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
