// The raw-pointer core of the reductions: reduce any set of dims of a strided array, reading it
// in place (no permuted copy first), with no Tensor and no threading library so generated kernels
// can #include it. kernels/reduce.cpp adapts it to Tensors and threads it over outputs.
//
// The output is row-major over the kept dims (in their original order). Per output range, one of
// three loops runs, chosen by the memory layout:
//   - the innermost reduced dim is contiguous: each output reduces contiguous runs with the
//     lane-parallel row kernels (kernels/row_reduce.h), combined in order;
//   - the innermost kept dim is contiguous (e.g. a column sum): a block of neighbouring outputs
//     accumulates together, one input row at a time, vectorized across the block;
//   - otherwise element by element.
// The order of accumulation depends only on shape and strides, never on threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/loop_core.h"
#include "kernels/row_reduce.h"

namespace smelt::kernels {

// Kept and reduced dims of an array, each group with size-1 dims dropped and mergeable neighbours
// merged; strides in elements.
struct ReduceGeometry {
  int kept_ndim = 0, reduced_ndim = 0;
  int64_t kept_shape[kMaxDims], kept_stride[kMaxDims];
  int64_t reduced_shape[kMaxDims], reduced_stride[kMaxDims];

  int64_t outer() const {
    int64_t n = 1;
    for (int d = 0; d < kept_ndim; ++d) n *= kept_shape[d];
    return n;
  }
  int64_t reduced() const {
    int64_t n = 1;
    for (int d = 0; d < reduced_ndim; ++d) n *= reduced_shape[d];
    return n;
  }
};

// `is_reduced[d]` marks the reduced dims of an array of `rank` <= kMaxDims dims.
inline ReduceGeometry reduce_geometry(int rank, const int64_t* shape, const int64_t* strides,
                                      const bool* is_reduced) {
  ReduceGeometry g;
  auto push = [](int& n, int64_t* sh, int64_t* st, int64_t size, int64_t stride) {
    if (size == 1) return;
    if (n > 0 && st[n - 1] == stride * size) {  // the previous dim steps over this one exactly
      sh[n - 1] *= size;
      st[n - 1] = stride;
    } else {
      sh[n] = size;
      st[n] = stride;
      ++n;
    }
  };
  for (int d = 0; d < rank; ++d) {
    if (is_reduced[d]) push(g.reduced_ndim, g.reduced_shape, g.reduced_stride, shape[d], strides[d]);
    else push(g.kept_ndim, g.kept_shape, g.kept_stride, shape[d], strides[d]);
  }
  return g;
}

namespace detail {

// Offset (in elements) of the `index`-th position of a row-major walk over (shape, stride).
inline int64_t walk_offset(int ndim, const int64_t* shape, const int64_t* stride, int64_t index) {
  if (ndim == 1) return index * stride[0];
  int64_t off = 0;
  for (int d = ndim - 1; d >= 0; --d) {
    off += (index % shape[d]) * stride[d];
    index /= shape[d];
  }
  return off;
}

// Calls fn(offset) for every position of the row-major walk over the first `ndim` dims.
template <class Fn>
void walk(int ndim, const int64_t* shape, const int64_t* stride, Fn&& fn) {
  if (ndim == 0) return fn(int64_t(0));  // the common case of one run per output: no odometer
  int64_t total = 1;
  for (int d = 0; d < ndim; ++d) total *= shape[d];
  if (total == 0) return;
  int64_t idx[kMaxDims] = {};
  int64_t off = 0;
  for (int64_t i = 0; i < total; ++i) {
    fn(off);
    for (int d = ndim - 1; d >= 0; --d) {
      off += stride[d];
      if (++idx[d] < shape[d]) break;
      off -= idx[d] * stride[d];
      idx[d] = 0;
    }
  }
}

}  // namespace detail

// A reduction: Acc start(); Acc step(Acc, T, o) for one element; Acc row(const T*, n, o) for a
// contiguous run; Acc merge(Acc, Acc) (earlier first); Out finish(Acc, o); o is the output
// being accumulated (for reductions with per-output parameters, such as var's mean).
// out[o] = finish(reduction over the reduced dims at kept position o), for o in [begin, end).
template <class T, class Out, class Op>
void reduce_range(const T* x, const ReduceGeometry& g, Out* out, const Op& op, int64_t begin,
                  int64_t end) {
  using Acc = decltype(op.start());
  const int rn = g.reduced_ndim, kn = g.kept_ndim;
  const bool reduced_run = rn > 0 && g.reduced_stride[rn - 1] == 1;
  const bool kept_run = kn > 0 && g.kept_stride[kn - 1] == 1 && !reduced_run;
  if (reduced_run) {
    // contiguous rows of the innermost reduced dim, walked over the other reduced dims
    const int64_t run = g.reduced_shape[rn - 1];
    for (int64_t o = begin; o < end; ++o) {
      const T* base = x + detail::walk_offset(kn, g.kept_shape, g.kept_stride, o);
      Acc acc = op.start();
      detail::walk(rn - 1, g.reduced_shape, g.reduced_stride,
                   [&](int64_t off) { acc = op.merge(acc, op.row(base + off, run, o)); });
      out[o] = op.finish(acc, o);
    }
  } else if (kept_run) {
    // neighbouring outputs are neighbouring elements: accumulate a block of them per input row
    constexpr int64_t kBlock = 256, kChannelBlock = 16;
    const int64_t row_len = g.kept_shape[kn - 1];
    Acc acc[kBlock];
    for (int64_t o = begin; o < end;) {
      const int64_t n = std::min({kBlock, row_len - o % row_len, end - o});
      const T* base = x + detail::walk_offset(kn, g.kept_shape, g.kept_stride, o);
      for (int64_t j = 0; j < n; ++j) acc[j] = op.start();
      if (n == kChannelBlock) {
        // A pooled blocked activation (N, C/16, H, W, 16): the same steps with a trip count the
        // compiler knows, so they vectorize.
        detail::walk(rn, g.reduced_shape, g.reduced_stride, [&](int64_t off) {
          const T* p = base + off;
          for (int64_t j = 0; j < kChannelBlock; ++j) acc[j] = op.step(acc[j], p[j], o + j);
        });
      } else {
        detail::walk(rn, g.reduced_shape, g.reduced_stride, [&](int64_t off) {
          const T* p = base + off;
          for (int64_t j = 0; j < n; ++j) acc[j] = op.step(acc[j], p[j], o + j);
        });
      }
      for (int64_t j = 0; j < n; ++j) out[o + j] = op.finish(acc[j], o + j);
      o += n;
    }
  } else {
    for (int64_t o = begin; o < end; ++o) {
      const T* base = x + detail::walk_offset(kn, g.kept_shape, g.kept_stride, o);
      Acc acc = op.start();
      detail::walk(rn, g.reduced_shape, g.reduced_stride,
                   [&](int64_t off) { acc = op.step(acc, base[off], o); });
      out[o] = op.finish(acc, o);
    }
  }
}

// ---- the reductions smelt uses

// Sum in RowAcc<T> (double for floats; wrapping unsigned for integers).
template <class T>
struct SumOp {
  using Acc = RowAcc<T>;
  Acc start() const { return Acc(0); }
  Acc step(Acc a, T v, int64_t) const { return a + Acc(v); }
  Acc row(const T* p, int64_t n, int64_t) const { return Acc(row_sum(p, n)); }
  Acc merge(Acc a, Acc b) const { return a + b; }
  T finish(Acc a, int64_t) const { return T(a); }
};

// Mean as sum / count (a division, not a multiply by 1 / count: the same rounding as before).
template <class T>
struct MeanOp : SumOp<T> {
  double count = 1.0;
  T finish(RowAcc<T> a, int64_t) const { return T(double(a) / count); }
};

// The mean in double, for var's first pass.
template <class T>
struct MeanAsDoubleOp : SumOp<T> {
  double count = 1.0;
  double finish(RowAcc<T> a, int64_t) const { return double(a) / count; }
};

// Product: floats multiply in double (one rounding at the end, as the golden data is made);
// integers in wrapping unsigned arithmetic (int64 overflow wraps, as in PyTorch, without UB).
template <class T>
struct ProdOp {
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;
  Acc start() const { return Acc(1); }
  Acc step(Acc a, T v, int64_t) const { return a * Acc(v); }
  Acc row(const T* p, int64_t n, int64_t) const {
    Acc a(1);
    for (int64_t i = 0; i < n; ++i) a *= Acc(p[i]);
    return a;
  }
  Acc merge(Acc a, Acc b) const { return a * b; }
  T finish(Acc a, int64_t) const { return T(a); }
};

// Maximum or minimum; NaN wins (once NaN, stays NaN).
template <class T, bool kMax>
struct ExtremeOp {
  T start() const { return scalar::extreme_identity<T, kMax>(); }
  T step(T a, T v, int64_t) const { return detail::row_pick<T, kMax>(a, v); }
  T row(const T* p, int64_t n, int64_t) const { return detail::row_extreme<T, kMax>(p, n); }
  T merge(T a, T b) const { return detail::row_pick<T, kMax>(a, b); }
  T finish(T a, int64_t) const { return a; }
};

// Sum of squared deviations from a per-output mean, divided by `denom` (IEEE: /0 gives inf or NaN).
template <class T>
struct SquaredDeviationOp {
  const double* mean;  // (outer,)
  double denom;
  double start() const { return 0.0; }
  double step(double a, T v, int64_t o) const {
    const double d = double(v) - mean[o];
    return a + d * d;
  }
  double row(const T* p, int64_t n, int64_t o) const { return row_sum_sq_dev(p, n, mean[o]); }
  double merge(double a, double b) const { return a + b; }
  T finish(double a, int64_t) const { return T(a / denom); }
};

}  // namespace smelt::kernels
