// Convolutions with few taps per output (R = C kH kW <= kDirectMaxTaps, groups 1): a network's stem
// (3 channels, 3x3, stride 2). An im2col GEMM spends its time packing for such a short K, and
// oneDNN converts y from its blocked layout; here each output row is one small product
//
//   y[n, :, oh, :] (O, Wo) = w (O, R) @ col (R, Wo),   col: im2col of output row oh (in L1)
//
// with kOutBlock channels x L output columns of accumulators in vector registers (L = 64 bytes of
// T, GCC vector types): per tap r one load of col[r] and kOutBlock multiply-adds with broadcast
// weights. Each
// output sums its taps in (c, ki, kj) order, zeros at padded positions (as im2col). Threads take
// output rows; the epilogue gets each finished row band (all O channels of one output row).
#include "kernels/conv_direct.h"

#include <algorithm>
#include <vector>

#include "base/parallel.h"
#include "kernels/loops.h"

namespace smelt::kernels {
namespace {

// Output channels per register block: 8 accumulators and a column vector in registers.
constexpr int kOutBlock = 8;

template <class T>
struct Lanes {
  static constexpr int64_t L = 64 / int64_t(sizeof(T));
  typedef T Vec __attribute__((vector_size(64)));
};

// col (R, Wpad): the taps of output row oh of image x (C, H, W); zero where they fall in padding.
template <class T>
void row_columns(const Conv2dGeometry& g, const T* x, int64_t oh, int64_t Wpad, T* col) {
  int64_t r = 0;
  for (int64_t c = 0; c < g.C; ++c) {
    for (int64_t ki = 0; ki < g.kH; ++ki) {
      const int64_t ih = oh * g.stride_h - g.pad_h + ki * g.dil_h;
      for (int64_t kj = 0; kj < g.kW; ++kj, ++r) {
        T* out = col + r * Wpad;
        if (ih < 0 || ih >= g.H) {
          std::fill(out, out + g.Wo, T(0));
          continue;
        }
        const T* in = x + (c * g.H + ih) * g.W;
        const int64_t offset = kj * g.dil_w - g.pad_w, s = g.stride_w;  // iw = ow s + offset
        // Columns [lo, hi) read inside the row: a plain strided copy there, zeros around it.
        const int64_t lo = std::min(g.Wo, offset >= 0 ? 0 : (-offset + s - 1) / s);
        const int64_t hi = std::clamp(g.W - offset <= 0 ? 0 : (g.W - offset + s - 1) / s, lo, g.Wo);
        std::fill(out, out + lo, T(0));
        if (s == 1) {
          std::copy(in + lo + offset, in + hi + offset, out + lo);
        } else if (s == 2) {
          for (int64_t ow = lo; ow < hi; ++ow) out[ow] = in[2 * ow + offset];
        } else {
          for (int64_t ow = lo; ow < hi; ++ow) out[ow] = in[ow * s + offset];
        }
        std::fill(out + hi, out + g.Wo, T(0));
      }
    }
  }
}

// Output columns [ow, ow + L) of channels [o0, o0 + OB) at one output row, from col (R, Wpad):
// OB accumulators that stay in registers (every index below is a compile-time constant once the
// loops over b are unrolled). y_row: channel o0's output row; `n` columns are stored.
template <class T, int OB>
void row_block(int64_t R, const T* col, int64_t Wpad, const T* w, int64_t o0, int64_t ow, int64_t n, T* y_row,
               int64_t HoWo) {
  using V = typename Lanes<T>::Vec;
  typedef T Unaligned __attribute__((vector_size(64), aligned(sizeof(T))));
  V acc[OB];
#pragma GCC unroll 16
  for (int b = 0; b < OB; ++b) acc[b] = V{};
  const T* wo = w + o0 * R;
  for (int64_t r = 0; r < R; ++r) {
    const V v = *reinterpret_cast<const Unaligned*>(col + r * Wpad + ow);
#pragma GCC unroll 16
    for (int b = 0; b < OB; ++b) acc[b] += wo[b * R + r] * v;
  }
#pragma GCC unroll 16
  for (int b = 0; b < OB; ++b) {
    T* out = y_row + b * HoWo + ow;
    if (n == Lanes<T>::L) {
      *reinterpret_cast<Unaligned*>(out) = acc[b];
    } else {
      for (int64_t l = 0; l < n; ++l) out[l] = acc[b][l];
    }
  }
}

// Channels [o0, o0 + ob) of output row oh (y_row: channel o0's row) from col (R, Wpad).
template <class T>
void row_product(const Conv2dGeometry& g, int64_t R, const T* col, int64_t Wpad, const T* w, int64_t o0, int64_t ob,
                 T* y_row, int64_t HoWo) {
  constexpr int64_t L = Lanes<T>::L;
  for (int64_t ow = 0; ow < g.Wo; ow += L) {
    const int64_t n = std::min(L, g.Wo - ow);
    if (ob == kOutBlock) {
      row_block<T, kOutBlock>(R, col, Wpad, w, o0, ow, n, y_row, HoWo);
    } else {
      for (int64_t b = 0; b < ob; ++b) row_block<T, 1>(R, col, Wpad, w, o0 + b, ow, n, y_row + b * HoWo, HoWo);
    }
  }
}

template <class T>
void direct_forward(const Conv2dGeometry& g, T* y, const T* x, const T* w, const GemmEpilogue* epilogue) {
  const int64_t R = g.C * g.kH * g.kW, HoWo = g.Ho * g.Wo;
  const int64_t L = Lanes<T>::L, Wpad = (g.Wo + L - 1) / L * L;
  const int64_t row_flops = 2 * g.O * R * g.Wo;
  const int64_t grain = std::max<int64_t>(1, kParallelGrain * 8 / std::max<int64_t>(1, row_flops));
  parallel_for(g.N * g.Ho, grain, [&](int64_t begin, int64_t end) {
    std::vector<T> col(size_t(R * Wpad), T(0));  // the lanes past Wo stay zero
    for (int64_t row = begin; row < end; ++row) {
      const int64_t n = row / g.Ho, oh = row % g.Ho;
      row_columns(g, x + n * g.C * g.H * g.W, oh, Wpad, col.data());
      for (int64_t o0 = 0; o0 < g.O; o0 += kOutBlock) {
        row_product(g, R, col.data(), Wpad, w, o0, std::min<int64_t>(kOutBlock, g.O - o0),
                    y + (n * g.O + o0) * HoWo + oh * g.Wo, HoWo);
      }
      if (epilogue) (*epilogue)(n * g.O, (n + 1) * g.O, oh * g.Wo, (oh + 1) * g.Wo);
    }
  });
}

}  // namespace

bool conv2d_direct_supports(const Conv2dGeometry& g) {
  return g.groups == 1 && g.C >= 1 && g.C * g.kH * g.kW <= kDirectMaxTaps;
}

void conv2d_direct_forward(const Conv2dGeometry& g, const Tensor& y, const Tensor& x, const Tensor& w,
                           const GemmEpilogue* epilogue) {
  SMELT_DISPATCH_FLOATING(x.dtype(), "conv2d (direct)", [&] {
    direct_forward<scalar_t>(g, y.data<scalar_t>(), x.data<scalar_t>(), w.data<scalar_t>(), epilogue);
  });
}

}  // namespace smelt::kernels
