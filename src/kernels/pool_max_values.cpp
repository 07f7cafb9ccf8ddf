// max_pool2d without indices: what a graph runner calls when no one reads them (an inference
// graph, ONNX MaxPool without its Indices output). The same values bit for bit as
// max_pool2d_forward (kernels/pool.cpp): each output takes its window's taps in the same (ki, kj)
// order under the same rule (a larger value, or the first NaN, wins). Starting from -inf instead of
// "no tap yet" changes nothing: the first in-image tap replaces -inf unless it is -inf itself (the
// same bits), and NaN replaces any number.
//
// Output columns whose windows lie inside the row go L at a time (L = 64 bytes of T) in GCC vector
// types: with column stride 1 one load per tap, with stride 2 two loads and a shuffle.
// A block may read past the row into the next one (its extra lanes are dropped), never past the
// tensor; the last blocks of the tensor and the columns next to a padded edge go one at a time.
// Results collect in a row buffer with a block of slack, then are copied out.
#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "base/parallel.h"
#include "kernels/loops.h"
#include "kernels/pool.h"

namespace smelt::kernels {
namespace {

template <class T>
struct Block {
  static constexpr int64_t L = 64 / int64_t(sizeof(T));
  typedef T Vec __attribute__((vector_size(64)));

  static Vec load(const T* p) {
    Vec v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  // Elements p[0], p[s], ..., p[(L - 1) s] for s = 1 or 2 (reads p[0 .. s L)).
  template <int S>
  static Vec load_strided(const T* p) {
    if constexpr (S == 1) {
      return load(p);
    } else {
      return even_lanes(load(p), load(p + L), std::make_index_sequence<size_t(L)>{});
    }
  }
  // Lanes 0, 2, 4, ... of the pair (a, b): __builtin_shufflevector takes constant lane numbers,
  // in GCC (12 and later) and in clang alike.
  template <size_t... I>
  static Vec even_lanes(Vec a, Vec b, std::index_sequence<I...>) {
    return __builtin_shufflevector(a, b, int(2 * I)...);
  }
};

struct Geometry {
  Pool2dWindow k;
  int64_t H, W, Ho, Wo;
};

// One output row `oh` of plane xp (H, W) into acc (Wo and a block of slack). `readable`: how many
// elements from xp on belong to the tensor; `rows`: room for kH row offsets.
//
// A block keeps each column's taps in window order although it takes each input row's kW taps
// first: "a larger value or the first NaN wins" picks the first maximum of a sequence, and that
// choice may be made over consecutive parts first (it is associative), so the rows' maxima are
// independent (instruction-level parallelism) and are then combined in row order.
template <class T, int KW, int SW>
void row_values(const Geometry& g, int64_t oh, const T* xp, int64_t readable, int64_t* rows, T* __restrict acc) {
  using B = Block<T>;
  const Pool2dWindow& k = g.k;
  const int64_t sw = SW > 0 ? SW : k.stride_w, kw = KW > 0 ? KW : k.kW, dw = k.dil_w, pw = k.pad_w;
  const T lowest = lowest_value<T>();
  // Column ow's taps read iw = ow sw - pw + kj dw: all inside [0, W) for ow in [lo, hi).
  const int64_t lo = std::min(g.Wo, (pw + sw - 1) / sw);
  const int64_t room = g.W - 1 - ((kw - 1) * dw - pw);
  const int64_t hi = std::max(lo, std::min(g.Wo, room < 0 ? 0 : room / sw + 1));
  int64_t n = 0;  // rows[0, n): offsets ih W of the window's rows inside the plane, in order
  for (int64_t ki = 0; ki < k.kH; ++ki) {
    const int64_t ih = oh * k.stride_h - k.pad_h + ki * k.dil_h;
    if (ih >= 0 && ih < g.H) rows[n++] = ih * g.W;
  }
  int64_t ow = lo;
  if constexpr (SW > 0) {
    // The block at ow reads xp[rows[r] + ow SW - pw + kj dw + i] for i < SW L.
    const int64_t reach = n > 0 ? rows[n - 1] - pw + (kw - 1) * dw + SW * B::L : 0;
    for (; n > 0 && ow < hi && reach + ow * SW <= readable; ow += B::L) {
      typename B::Vec best = lowest - typename B::Vec{};
      for (int64_t r = 0; r < n; ++r) {
        const T* at = xp + rows[r] + ow * SW - pw;
        typename B::Vec m = B::template load_strided<SW>(at);
        for (int64_t kj = 1; kj < kw; ++kj) m = max_pool_take_block(B::template load_strided<SW>(at + kj * dw), m);
        best = max_pool_take_block(m, best);
      }
      std::memcpy(acc + ow, &best, sizeof best);  // lanes past hi: columns done below, or slack
    }
  }
  for (; ow < hi; ++ow) {
    T b = lowest;
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t kj = 0; kj < kw; ++kj) b = max_pool_take(xp[rows[r] + ow * sw - pw + kj * dw], b);
    }
    acc[ow] = b;
  }
  auto edge = [&](int64_t col) {
    T b = lowest;
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t kj = 0; kj < kw; ++kj) {
        const int64_t iw = col * sw - pw + kj * dw;
        if (iw >= 0 && iw < g.W) b = max_pool_take(xp[rows[r] + iw], b);
      }
    }
    acc[col] = b;
  };
  for (int64_t col = 0; col < lo; ++col) edge(col);
  for (int64_t col = hi; col < g.Wo; ++col) edge(col);
}

template <class T, int KW, int SW>
void values(const Geometry& g, int64_t planes, T* y, const T* x) {
  const int64_t HW = g.H * g.W, total = planes * HW;
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(g.Ho * g.Wo * g.k.kH * g.k.kW, 1));
  parallel_for(planes, grain, [&](int64_t begin, int64_t end) {
    std::vector<T> acc(size_t(g.Wo + Block<T>::L));  // a block stored at any ow < Wo fits
    std::vector<int64_t> rows(size_t(g.k.kH));
    for (int64_t p = begin; p < end; ++p) {
      for (int64_t oh = 0; oh < g.Ho; ++oh) {
        row_values<T, KW, SW>(g, oh, x + p * HW, total - p * HW, rows.data(), acc.data());
        std::copy(acc.begin(), acc.begin() + g.Wo, y + (p * g.Ho + oh) * g.Wo);
      }
    }
  });
}

}  // namespace

void max_pool2d_values_forward(const Pool2dWindow& win, const Tensor& y, const Tensor& x) {
  const Geometry g{win, x.size(2), x.size(3), y.size(2), y.size(3)};
  const int64_t planes = x.size(0) * x.size(1);
  SMELT_DISPATCH_FLOATING_OR_BYTES(x.dtype(), "max_pool2d", [&] {
    scalar_t* out = y.data<scalar_t>();
    const scalar_t* in = x.data<scalar_t>();
    // Specialized: the 3x3 windows of CNNs (stride 1 or 2), 2x2 stride 2; blocks for any window
    // with column stride 1 or 2.
    switch (win.kW * 10 + win.stride_w) {
      case 32: return values<scalar_t, 3, 2>(g, planes, out, in);
      case 31: return values<scalar_t, 3, 1>(g, planes, out, in);
      case 22: return values<scalar_t, 2, 2>(g, planes, out, in);
      default: break;
    }
    if (win.stride_w == 1) return values<scalar_t, 0, 1>(g, planes, out, in);
    if (win.stride_w == 2) return values<scalar_t, 0, 2>(g, planes, out, in);
    values<scalar_t, 0, 0>(g, planes, out, in);
  });
}

}  // namespace smelt::kernels
