#include "kernels/conv_depthwise.h"

#include <algorithm>
#include <vector>

#include "base/parallel.h"
#include "kernels/loops.h"

namespace smelt::kernels {
namespace {

// Planes per thread chunk: at least this many multiply-adds, so small convolutions stay on one
// thread (a fork-join costs a few microseconds).
constexpr int64_t kMinChunkTaps = 1 << 16;
// Output widths up to this take forward_plane_flat (stride 1): rows shorter than two vectors.
constexpr int64_t kFlatMaxWidth = 16;
// Output values per epilogue call at least (a few planes of a small image; still in L1 / L2).
constexpr int64_t kEpiloguePixels = 2048;
// Independent partial sums per filter tap in the weight gradient: a vector's worth of lanes,
// so the dot products vectorize without reassociating any sum (no -ffast-math needed).
constexpr int kDepthwiseLanes = 16;

// A filter geometry with sizes fixed at compile time (KH > 0: kH = KH, kW = KW, strides SH, SW,
// dilation 1) or read from g at run time (KH == 0).
template <int KH, int KW, int SH, int SW>
struct Taps {
  int64_t kh, kw, sh, sw, dh, dw;
  explicit Taps(const Conv2dGeometry& g)
      : kh(KH ? KH : g.kH), kw(KW ? KW : g.kW), sh(SH ? SH : g.stride_h), sw(SW ? SW : g.stride_w),
        dh(KH ? 1 : g.dil_h), dw(KW ? 1 : g.dil_w) {}
};

// The padded plane: (Hp, Wp) with the input at rows [pad_h, pad_h + H), columns [pad_w, pad_w + W).
struct PaddedPlane {
  int64_t Hp, Wp;
  bool needed;  // false: no padding, the input plane is used as it is
  explicit PaddedPlane(const Conv2dGeometry& g)
      : Hp(g.H + 2 * g.pad_h), Wp(g.W + 2 * g.pad_w), needed(g.pad_h > 0 || g.pad_w > 0) {}
};

// Copies plane x (H, W) into the interior of `buf` (Hp, Wp), whose border stays zero.
template <class T>
void copy_interior(const Conv2dGeometry& g, const PaddedPlane& p, const T* x, T* buf) {
  for (int64_t ih = 0; ih < g.H; ++ih) {
    std::copy(x + ih * g.W, x + (ih + 1) * g.W, buf + (ih + g.pad_h) * p.Wp + g.pad_w);
  }
}

// y (Ho, Wo) from P (., Wp) and one channel's filter w (kH, kW).
template <class T, int KH, int KW, int SH, int SW>
void forward_plane(const Conv2dGeometry& g, const T* __restrict P, int64_t Wp, const T* w, T* __restrict y) {
  const Taps<KH, KW, SH, SW> t(g);
  T wk[KH > 0 ? KH * KW : 1];
  if constexpr (KH > 0) std::copy(w, w + KH * KW, wk);
  const T* taps = KH > 0 ? wk : w;
  for (int64_t oh = 0; oh < g.Ho; ++oh) {
    const T* __restrict top = P + oh * t.sh * Wp;
    T* __restrict out = y + oh * g.Wo;
    for (int64_t ow = 0; ow < g.Wo; ++ow) {
      T acc = T(0);
      for (int64_t ki = 0; ki < t.kh; ++ki) {
        const T* __restrict row = top + ki * t.dh * Wp + ow * t.sw;
        for (int64_t kj = 0; kj < t.kw; ++kj) acc += taps[ki * t.kw + kj] * row[kj * t.dw];
      }
      out[ow] = acc;
    }
  }
}

// forward_plane for narrow planes (7x7, 14x14), stride 1 and a filter size fixed at compile time,
// as one flat loop: output (oh, ow) reads P[(oh + ki) Wp + ow + kj] = P[i + ki Wp + kj] with
// i = oh Wp + ow, so a loop over i = 0 .. (Ho - 1) Wp + Wo computes every output in rows Wp long
// (the columns past Wo are thrown away) and vectorizes over the whole plane instead of rows
// shorter than a vector. Taps are added in forward_plane's order. Reads stay inside P (Hp, Wp):
// the last i reads P[(Ho - 1 + KH - 1) Wp + Wo - 1 + KW - 1], within the padded plane. (With
// stride 2 the thrown-away half costs more than the short rows: measured slower.)
// flat: room for (Ho - 1) Wp + Wo values.
template <class T, int KH, int KW>
void forward_plane_flat(const Conv2dGeometry& g, const T* __restrict P, int64_t Wp, const T* w, T* __restrict flat,
                        T* __restrict y) {
  T wk[KH * KW];
  std::copy(w, w + KH * KW, wk);
  const int64_t n = (g.Ho - 1) * Wp + g.Wo;
  for (int64_t i = 0; i < n; ++i) {
    T acc = T(0);
    for (int ki = 0; ki < KH; ++ki) {
      for (int kj = 0; kj < KW; ++kj) acc += wk[ki * KW + kj] * P[i + ki * Wp + kj];
    }
    flat[i] = acc;
  }
  for (int64_t oh = 0; oh < g.Ho; ++oh) std::copy(flat + oh * Wp, flat + oh * Wp + g.Wo, y + oh * g.Wo);
}

// P_dx (Hp, Wp) += the scatter of dy (Ho, Wo) through one channel's filter w (kH, kW).
template <class T, int KH, int KW, int SH, int SW>
void backward_input_plane(const Conv2dGeometry& g, T* __restrict Pdx, int64_t Wp, const T* w, const T* __restrict dy) {
  const Taps<KH, KW, SH, SW> t(g);
  for (int64_t oh = 0; oh < g.Ho; ++oh) {
    const T* __restrict d = dy + oh * g.Wo;
    for (int64_t ki = 0; ki < t.kh; ++ki) {
      for (int64_t kj = 0; kj < t.kw; ++kj) {
        const T wv = w[ki * t.kw + kj];
        T* __restrict row = Pdx + (oh * t.sh + ki * t.dh) * Wp + kj * t.dw;
        for (int64_t ow = 0; ow < g.Wo; ++ow) row[ow * t.sw] += wv * d[ow];
      }
    }
  }
}

// lanes[tap][l] += the products of dy (Ho, Wo) with P's values under tap, column ow = l mod kDepthwiseLanes.
template <class T, int KH, int KW, int SH, int SW>
void backward_weight_plane(const Conv2dGeometry& g, const T* __restrict P, int64_t Wp, const T* __restrict dy,
                           T* __restrict lanes) {
  const Taps<KH, KW, SH, SW> t(g);
  const int64_t full = g.Wo / kDepthwiseLanes * kDepthwiseLanes;
  for (int64_t ki = 0; ki < t.kh; ++ki) {
    for (int64_t kj = 0; kj < t.kw; ++kj) {
      T* __restrict acc = lanes + (ki * t.kw + kj) * kDepthwiseLanes;
      for (int64_t oh = 0; oh < g.Ho; ++oh) {
        const T* __restrict d = dy + oh * g.Wo;
        const T* __restrict row = P + (oh * t.sh + ki * t.dh) * Wp + kj * t.dw;
        for (int64_t ow0 = 0; ow0 < full; ow0 += kDepthwiseLanes) {
          for (int l = 0; l < kDepthwiseLanes; ++l) acc[l] += d[ow0 + l] * row[(ow0 + l) * t.sw];
        }
        for (int64_t ow = full; ow < g.Wo; ++ow) acc[ow - full] += d[ow] * row[ow * t.sw];
      }
    }
  }
}

// Calls fn.template operator()<KH, KW, SH, SW>() with the specialization for g.
template <class F>
void dispatch_taps(const Conv2dGeometry& g, const F& fn) {
  const bool plain = g.dil_h == 1 && g.dil_w == 1 && g.kH == g.kW && g.stride_h == g.stride_w;
  const int64_t code = plain ? g.kH * 10 + g.stride_h : 0;
  switch (code) {
    case 31: return fn.template operator()<3, 3, 1, 1>();
    case 32: return fn.template operator()<3, 3, 2, 2>();
    case 51: return fn.template operator()<5, 5, 1, 1>();
    case 52: return fn.template operator()<5, 5, 2, 2>();
    default: return fn.template operator()<0, 0, 0, 0>();
  }
}

int64_t plane_grain(const Conv2dGeometry& g) {
  return std::max<int64_t>(1, kMinChunkTaps / std::max<int64_t>(1, g.Ho * g.Wo * g.kH * g.kW));
}

template <class T>
void depthwise_forward(const Conv2dGeometry& g, T* y, const T* x, const T* w, const GemmEpilogue* epilogue) {
  const PaddedPlane p(g);
  const int64_t HW = g.H * g.W, HoWo = g.Ho * g.Wo, taps = g.kH * g.kW;
  dispatch_taps(g, [&]<int KH, int KW, int SH, int SW>() {
    parallel_for(g.N * g.C, plane_grain(g), [&](int64_t begin, int64_t end) {
      std::vector<T> buf(p.needed ? size_t(p.Hp * p.Wp) : 0);
      std::vector<T> flat(g.Wo <= kFlatMaxWidth ? size_t(g.Ho * (p.needed ? p.Wp : g.W)) : 0);
      int64_t pending = begin;  // planes computed but not yet handed to the epilogue
      for (int64_t plane = begin; plane < end; ++plane) {
        const int64_t c = plane % g.C;
        const T* P = x + plane * HW;
        if (p.needed) {
          copy_interior(g, p, P, buf.data());
          P = buf.data();
        }
        const int64_t Wp = p.needed ? p.Wp : g.W;
        if constexpr (KH > 0 && SH == 1 && SW == 1) {
          if (g.Wo <= kFlatMaxWidth) {
            forward_plane_flat<T, KH, KW>(g, P, Wp, w + c * taps, flat.data(), y + plane * HoWo);
          } else {
            forward_plane<T, KH, KW, SH, SW>(g, P, Wp, w + c * taps, y + plane * HoWo);
          }
        } else {
          forward_plane<T, KH, KW, SH, SW>(g, P, Wp, w + c * taps, y + plane * HoWo);
        }
        // Small planes (7x7 with 960 channels) go to the epilogue several at a time: one call per
        // plane would cost about as much as the plane. plane = n C + c = n O + c.
        if (epilogue && ((plane + 1 - pending) * HoWo >= kEpiloguePixels || plane + 1 == end)) {
          (*epilogue)(pending, plane + 1, 0, HoWo);
          pending = plane + 1;
        }
      }
    });
  });
}

template <class T>
void depthwise_backward_input(const Conv2dGeometry& g, T* dx, const T* dy, const T* w) {
  const PaddedPlane p(g);
  const int64_t HW = g.H * g.W, HoWo = g.Ho * g.Wo, taps = g.kH * g.kW;
  dispatch_taps(g, [&]<int KH, int KW, int SH, int SW>() {
    parallel_for(g.N * g.C, plane_grain(g), [&](int64_t begin, int64_t end) {
      std::vector<T> buf(size_t(p.Hp * p.Wp));
      for (int64_t plane = begin; plane < end; ++plane) {
        std::fill(buf.begin(), buf.end(), T(0));
        backward_input_plane<T, KH, KW, SH, SW>(g, buf.data(), p.Wp, w + (plane % g.C) * taps, dy + plane * HoWo);
        T* out = dx + plane * HW;
        for (int64_t ih = 0; ih < g.H; ++ih) {
          const T* src = buf.data() + (ih + g.pad_h) * p.Wp + g.pad_w;
          std::copy(src, src + g.W, out + ih * g.W);
        }
      }
    });
  });
}

template <class T>
void depthwise_backward_weight(const Conv2dGeometry& g, T* dw, const T* x, const T* dy) {
  const PaddedPlane p(g);
  const int64_t HW = g.H * g.W, HoWo = g.Ho * g.Wo, taps = g.kH * g.kW;
  const int64_t grain = std::max<int64_t>(1, plane_grain(g) / std::max<int64_t>(1, g.N));
  dispatch_taps(g, [&]<int KH, int KW, int SH, int SW>() {
    parallel_for(g.C, grain, [&](int64_t begin, int64_t end) {
      std::vector<T> buf(p.needed ? size_t(p.Hp * p.Wp) : 0);
      std::vector<T> lanes(size_t(taps * kDepthwiseLanes));
      for (int64_t c = begin; c < end; ++c) {
        std::fill(lanes.begin(), lanes.end(), T(0));
        for (int64_t n = 0; n < g.N; ++n) {
          const T* P = x + (n * g.C + c) * HW;
          if (p.needed) {
            copy_interior(g, p, P, buf.data());
            P = buf.data();
          }
          backward_weight_plane<T, KH, KW, SH, SW>(g, P, p.needed ? p.Wp : g.W, dy + (n * g.C + c) * HoWo,
                                                   lanes.data());
        }
        for (int64_t tap = 0; tap < taps; ++tap) {
          T sum = T(0);
          for (int l = 0; l < kDepthwiseLanes; ++l) sum += lanes[size_t(tap * kDepthwiseLanes + l)];
          dw[c * taps + tap] = sum;
        }
      }
    });
  });
}

}  // namespace

bool conv2d_is_depthwise(const Conv2dGeometry& g) { return g.groups == g.C && g.O == g.C && g.C >= 1; }

void conv2d_depthwise_forward(const Conv2dGeometry& g, const Tensor& y, const Tensor& x, const Tensor& w,
                              const GemmEpilogue* epilogue) {
  SMELT_DISPATCH_FLOATING(x.dtype(), "conv2d (depthwise)", [&] {
    depthwise_forward<scalar_t>(g, y.data<scalar_t>(), x.data<scalar_t>(), w.data<scalar_t>(), epilogue);
  });
}

void conv2d_depthwise_backward_input(const Conv2dGeometry& g, const Tensor& dx, const Tensor& dy, const Tensor& w) {
  SMELT_DISPATCH_FLOATING(dy.dtype(), "conv2d_grad_input (depthwise)", [&] {
    depthwise_backward_input<scalar_t>(g, dx.data<scalar_t>(), dy.data<scalar_t>(), w.data<scalar_t>());
  });
}

void conv2d_depthwise_backward_weight(const Conv2dGeometry& g, const Tensor& dw, const Tensor& x, const Tensor& dy) {
  SMELT_DISPATCH_FLOATING(x.dtype(), "conv2d_grad_weight (depthwise)", [&] {
    depthwise_backward_weight<scalar_t>(g, dw.data<scalar_t>(), x.data<scalar_t>(), dy.data<scalar_t>());
  });
}

}  // namespace smelt::kernels
