// max_pool2d on the blocked channel layout (kernels/conv_blocked.h): each output pixel's block of
// B channels is the lane-wise maximum of its window's blocks, taken in the plain kernel's tap
// order under its rule (a larger value, or the first NaN, wins; kernels/pool_max_values.cpp), so
// every real lane holds the plain max_pool2d's bits. Padding lanes take the max of zeros: zero.
#include <cmath>
#include <cstring>
#include <limits>

#include "base/parallel.h"
#include "kernels/conv_blocked.h"

namespace smelt::kernels {
namespace {

template <class T>
inline T take(T v, T best) {
  return (v > best || (v != v && best == best)) ? v : best;
}

// One pixel's block of 16 lanes as a GCC vector (64 bytes for float: one AVX-512 register).
template <class T>
struct Lanes16 {
  typedef T Vec __attribute__((vector_size(16 * sizeof(T))));
  static Vec load(const T* p) {
    Vec v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static Vec take(Vec v, Vec b) { return ((v > b) | ((v != v) & (b == b))) ? v : b; }
};

// B = 16: the window's blocks as vectors (the generic loop below is not vectorized at -O2).
template <class T>
void pool_rows16(const Pool2dWindow& win, T* y, const T* x, int64_t planes, int64_t H, int64_t W, int64_t Ho,
                 int64_t Wo) {
  using V = Lanes16<T>;
  parallel_for(planes * Ho, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, Wo * 16)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t plane = r / Ho, oh = r % Ho;
      const T* xp = x + plane * H * W * 16;
      T* yr = y + r * Wo * 16;
      for (int64_t ow = 0; ow < Wo; ++ow) {
        typename V::Vec best = typename V::Vec{} - std::numeric_limits<T>::infinity();
        for (int64_t ki = 0; ki < win.kH; ++ki) {
          const int64_t ih = oh * win.stride_h - win.pad_h + ki * win.dil_h;
          if (ih < 0 || ih >= H) continue;
          for (int64_t kj = 0; kj < win.kW; ++kj) {
            const int64_t iw = ow * win.stride_w - win.pad_w + kj * win.dil_w;
            if (iw >= 0 && iw < W) best = V::take(V::load(xp + (ih * W + iw) * 16), best);
          }
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
            for (int64_t l = 0; l < lanes; ++l) best[l] = take(v[l], best[l]);
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
