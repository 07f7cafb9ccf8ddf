// max_pool2d on the blocked channel layout (kernels/conv_blocked.h): each output pixel's block of
// B channels is the lane-wise maximum of its window's blocks, taken in the plain kernel's tap
// order under its rule (a larger value, or the first NaN, wins; kernels/pool_max_values.cpp), so
// every real lane holds the plain max_pool2d's bits. Padding lanes take the max of zeros: zero.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "base/parallel.h"
#include "kernels/conv_blocked.h"
#include "kernels/pool.h"

namespace smelt::kernels {
namespace {

// One pixel's block of 16 lanes as a GCC vector (64 bytes for float: one AVX-512 register).
template <class T>
struct Lanes16 {
  typedef T Vec __attribute__((vector_size(16 * sizeof(T))));
  static Vec load(const T* p) {
    Vec v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  // The plain kernel's rule: a larger value, or the first NaN, wins.
  static Vec take(Vec v, Vec b) { return max_pool_take_block(v, b); }
  // Without NaNs, take is "v if v > b else b": one vmaxps (its operand order keeps b on ties, so
  // the first of equal values, +0 or -0, stays as in the plain kernel).
  static Vec take_ordered(Vec v, Vec b) { return v > b ? v : b; }
  static bool any_nan(Vec v) {
    const auto nan = v != v;
    for (int l = 0; l < 16; ++l) {
      if (nan[l]) return true;
    }
    return false;
  }
};

// B = 16: the window's blocks as vectors (the generic loop below is not vectorized at -O2).
// Each output row is first taken with the ordered max alone, summing its taps alongside: the sum
// is NaN when a tap is (or when infinities of both signs meet), and only then is the row taken
// again under the full rule. The taps run in the plain kernel's order in both passes. Outputs
// whose window lies inside the image run four at a time: their max chains are independent, which
// hides the latency of each.
template <class T>
void pool_rows16(const Pool2dWindow& win, T* y, const T* x, int64_t planes, int64_t H, int64_t W, int64_t Ho,
                 int64_t Wo) {
  using V = Lanes16<T>;
  using Vec = typename V::Vec;
  // The first tap index in [0, k) whose position o*stride - pad + t*dil lies in [0, n), and one
  // past the last.
  auto tap_range = [](int64_t o, int64_t stride, int64_t pad, int64_t dil, int64_t k, int64_t n) {
    int64_t t0 = 0, t1 = k;
    const int64_t base = o * stride - pad;
    while (t0 < k && base + t0 * dil < 0) ++t0;
    while (t1 > t0 && base + (t1 - 1) * dil >= n) --t1;
    return std::pair<int64_t, int64_t>{t0, t1};
  };
  // Outputs [lo, hi) have every tap inside the row.
  const int64_t reach = win.pad_w + W - 1 - (win.kW - 1) * win.dil_w;
  const int64_t lo = std::min(Wo, (win.pad_w + win.stride_w - 1) / win.stride_w);
  const int64_t hi = reach < 0 ? lo : std::clamp(reach / win.stride_w + 1, lo, Wo);
  const int64_t sw = win.stride_w * 16, dw = win.dil_w * 16;
  parallel_for(planes * Ho, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, Wo * 16)), [&](int64_t r0, int64_t r1) {
    const Vec minus_inf = Vec{} - std::numeric_limits<T>::infinity();
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t plane = r / Ho, oh = r % Ho;
      const T* xp = x + plane * H * W * 16;
      T* yr = y + r * Wo * 16;
      // Plain variables, not a structured binding: clang 14 cannot capture a binding in a lambda.
      const std::pair<int64_t, int64_t> rows = tap_range(oh, win.stride_h, win.pad_h, win.dil_h, win.kH, H);
      const int64_t ki0 = rows.first, ki1 = rows.second;
      // Input row ki of the window, at column 0 of output 0's window (may lie left of the row).
      auto row = [&](int64_t ki) { return xp + ((oh * win.stride_h - win.pad_h + ki * win.dil_h) * W - win.pad_w) * 16; };
      Vec sum = Vec{};
      auto window = [&](int64_t ow) {
        const auto [kj0, kj1] = tap_range(ow, win.stride_w, win.pad_w, win.dil_w, win.kW, W);
        Vec best = minus_inf;
        for (int64_t ki = ki0; ki < ki1; ++ki) {
          for (int64_t kj = kj0; kj < kj1; ++kj) {
            const Vec v = V::load(row(ki) + ow * sw + kj * dw);
            best = V::take_ordered(v, best);
            sum += v;
          }
        }
        std::memcpy(yr + ow * 16, &best, sizeof best);
      };
      int64_t ow = 0;
      for (; ow < lo; ++ow) window(ow);
      for (; ow + 4 <= hi; ow += 4) {
        Vec b0 = minus_inf, b1 = minus_inf, b2 = minus_inf, b3 = minus_inf, s0 = Vec{}, s1 = Vec{};
        for (int64_t ki = ki0; ki < ki1; ++ki) {
          const T* p = row(ki) + ow * sw;
          for (int64_t kj = 0; kj < win.kW; ++kj, p += dw) {
            const Vec v0 = V::load(p), v1 = V::load(p + sw), v2 = V::load(p + 2 * sw), v3 = V::load(p + 3 * sw);
            b0 = V::take_ordered(v0, b0);
            b1 = V::take_ordered(v1, b1);
            b2 = V::take_ordered(v2, b2);
            b3 = V::take_ordered(v3, b3);
            s0 += v0 + v1;
            s1 += v2 + v3;
          }
        }
        sum += s0 + s1;
        std::memcpy(yr + ow * 16, &b0, sizeof b0);
        std::memcpy(yr + (ow + 1) * 16, &b1, sizeof b1);
        std::memcpy(yr + (ow + 2) * 16, &b2, sizeof b2);
        std::memcpy(yr + (ow + 3) * 16, &b3, sizeof b3);
      }
      for (; ow < Wo; ++ow) window(ow);
      if (!V::any_nan(sum)) continue;
      for (ow = 0; ow < Wo; ++ow) {
        const auto [kj0, kj1] = tap_range(ow, win.stride_w, win.pad_w, win.dil_w, win.kW, W);
        Vec best = minus_inf;
        for (int64_t ki = ki0; ki < ki1; ++ki) {
          for (int64_t kj = kj0; kj < kj1; ++kj) best = V::take(V::load(row(ki) + ow * sw + kj * dw), best);
        }
        std::memcpy(yr + ow * 16, &best, sizeof best);
      }
    }
  });
}

// Any B up to 64, lane by lane.
template <class T>
void pool_rows(const Pool2dWindow& win, T* y /*(N Cb, Ho, Wo, B)*/, const T* x /*(N Cb, H, W, B)*/, int64_t planes,
               int64_t H, int64_t W, int64_t Ho, int64_t Wo, int64_t B) {
  const int64_t lanes = B;
  parallel_for(planes * Ho, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, Wo * lanes)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t plane = r / Ho, oh = r % Ho;
      const T* xp = x + plane * H * W * lanes;
      T* yr = y + r * Wo * lanes;
      for (int64_t ow = 0; ow < Wo; ++ow) {
        T best[64];
        for (int64_t l = 0; l < lanes; ++l) best[l] = -std::numeric_limits<T>::infinity();
        for (int64_t ki = 0; ki < win.kH; ++ki) {
          const int64_t ih = oh * win.stride_h - win.pad_h + ki * win.dil_h;
          if (ih < 0 || ih >= H) continue;
          for (int64_t kj = 0; kj < win.kW; ++kj) {
            const int64_t iw = ow * win.stride_w - win.pad_w + kj * win.dil_w;
            if (iw < 0 || iw >= W) continue;
            const T* v = xp + (ih * W + iw) * lanes;
            for (int64_t l = 0; l < lanes; ++l) best[l] = max_pool_take(v[l], best[l]);
          }
        }
        for (int64_t l = 0; l < lanes; ++l) yr[ow * lanes + l] = best[l];
      }
    }
  });
}

template <class T>
void pool_typed(const Pool2dWindow& win, const Tensor& y, const Tensor& x) {
  const Shape &xs = x.shape(), &ys = y.shape();
  const int64_t planes = xs[0] * xs[1], B = xs[4];
  if (B == 16) {
    pool_rows16<T>(win, y.data<T>(), x.data<T>(), planes, xs[2], xs[3], ys[2], ys[3]);
  } else {
    SMELT_INTERNAL_CHECK(B <= 64) << "max_pool2d_blocked: blocks of at most 64 lanes, got " << B;
    pool_rows<T>(win, y.data<T>(), x.data<T>(), planes, xs[2], xs[3], ys[2], ys[3], B);
  }
}

}  // namespace

void max_pool2d_blocked_forward(const Pool2dWindow& win, const Tensor& y, const Tensor& x) {
  if (x.dtype() == DType::Float32) {
    pool_typed<float>(win, y, x);
  } else if (x.dtype() == DType::Float64) {
    pool_typed<double>(win, y, x);
  } else {
    SMELT_INTERNAL_CHECK(false) << "max_pool2d_blocked: floating dtypes only, got " << dtype_name(x.dtype());
  }
}

}  // namespace smelt::kernels
