#include "kernels/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/loops.h"
#include "kernels/reduce_core.h"
#include "kernels/row_reduce.h"
#include "kernels/transpose.h"

namespace smelt::kernels {

void copy_strided(const Tensor& dst, const Tensor& src) {
  SMELT_DISPATCH_ALL(src.dtype(), "copy", [&] {
    using T = scalar_t;
    map1<T, T>(dst, src, [](T v) { return v; });
  });
}

Tensor as_rows(const Tensor& x, const std::vector<int64_t>& dims, int64_t* outer, int64_t* reduced) {
  Shape order, shape, strides;
  *outer = 1;
  *reduced = 1;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (!std::binary_search(dims.begin(), dims.end(), d)) {
      order.push_back(d);
      *outer *= x.shape()[d];
    }
  }
  for (int64_t d : dims) {
    order.push_back(d);
    *reduced *= x.shape()[d];
  }
  for (int64_t d : order) {
    shape.push_back(x.shape()[d]);
    strides.push_back(x.strides()[d]);
  }
  Tensor view = make_tensor(x.storage(), shape, strides, x.offset(), x.dtype());
  if (view.is_contiguous()) return view;
  return contiguous_copy(view);  // a permuted copy: normalized, by rows or tiles
}

namespace {

// x's geometry with `dims` reduced, read in place.
ReduceGeometry geometry_of(const Tensor& x, const std::vector<int64_t>& dims) {
  SMELT_CHECK(x.dim() <= kMaxDims) << "reductions support up to " << kMaxDims << " dims, got " << x.dim();
  bool is_reduced[kMaxDims] = {};
  for (int64_t d : dims) is_reduced[d] = true;
  return reduce_geometry(int(x.dim()), x.shape().data(), x.strides().data(), is_reduced);
}

// out[o] for o in [0, outer), threaded over outputs (so the result never depends on threads).
template <class T, class Out, class Op>
void reduce_parallel(const T* x, const ReduceGeometry& g, Out* out, const Op& op) {
  const int64_t outer = g.outer(), reduced = g.reduced();
  parallel_for(outer, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(reduced, 1)),
               [&](int64_t begin, int64_t end) { reduce_range(x, g, out, op, begin, end); });
}

}  // namespace

void reduce_forward(const Tensor& out, const Tensor& x, const std::vector<int64_t>& dims,
                    ReduceKind kind) {
  const ReduceGeometry g = geometry_of(x, dims);
  SMELT_DISPATCH_NUMERIC(x.dtype(), "reduce", [&] {
    using T = scalar_t;
    const T* src = x.strided_data<T>();  // walked by the geometry's strides
    T* dst = out.data<T>();
    switch (kind) {
      case ReduceKind::Sum: reduce_parallel(src, g, dst, SumOp<T>{}); break;
      case ReduceKind::Mean: {
        MeanOp<T> op;
        op.count = double(g.reduced());
        reduce_parallel(src, g, dst, op);
        break;
      }
      case ReduceKind::Max: reduce_parallel(src, g, dst, ExtremeOp<T, true>{}); break;
      case ReduceKind::Min: reduce_parallel(src, g, dst, ExtremeOp<T, false>{}); break;
      case ReduceKind::Prod: reduce_parallel(src, g, dst, ProdOp<T>{}); break;
    }
  });
}

void var_forward(const Tensor& out, const Tensor& x, const std::vector<int64_t>& dims,
                 int64_t correction) {
  const ReduceGeometry g = geometry_of(x, dims);
  SMELT_DISPATCH_FLOATING(x.dtype(), "var", [&] {
    using T = scalar_t;
    const T* src = x.strided_data<T>();
    // two passes: exact enough without Welford's per-element division
    std::vector<double> mean(size_t(g.outer()));
    MeanAsDoubleOp<T> mean_op;
    mean_op.count = double(g.reduced());
    reduce_parallel(src, g, mean.data(), mean_op);
    // ss / max(0, N - correction) in IEEE arithmetic, as PyTorch and NumPy: inf when the
    // denominator is 0, NaN for 0 / 0 (all values equal, or no values)
    const double denom = double(std::max<int64_t>(g.reduced() - correction, 0));
    reduce_parallel(src, g, out.data<T>(), SquaredDeviationOp<T>{mean.data(), denom});
  });
}

void argmax_forward(const Tensor& out, const Tensor& x, int64_t dim) {
  SMELT_DISPATCH_NUMERIC(x.dtype(), "argmax", [&] {
    using T = scalar_t;
    // the other dims, walked in place; `dim` by its stride
    ReduceGeometry g = geometry_of(x, {dim});
    const int64_t n = x.shape()[size_t(dim)], step = x.strides()[size_t(dim)];
    const T* src = x.strided_data<T>();
    int64_t* dst = out.data<int64_t>();
    for (int64_t o = 0; o < g.outer(); ++o) {
      const T* row = src + detail::walk_offset(g.kept_ndim, g.kept_shape, g.kept_stride, o);
      int64_t best = 0;
      for (int64_t i = 1; i < n; ++i) {
        const T best_value = row[best * step], v = row[i * step];
        if (best_value != best_value) break;  // NaN already wins
        if (v > best_value || v != v) best = i;
      }
      dst[o] = best;
    }
  });
}

}  // namespace smelt::kernels
