#include "kernels/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/loops.h"
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

void reduce_forward(const Tensor& out, const Tensor& x, const std::vector<int64_t>& dims,
                    ReduceKind kind) {
  int64_t outer, reduced;
  Tensor rows = as_rows(x, dims, &outer, &reduced);
  SMELT_DISPATCH_NUMERIC(x.dtype(), "reduce", [&] {
    using T = scalar_t;
    const T* src = rows.data<T>();
    T* dst = out.data<T>();
    parallel_for(outer, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(reduced, 1)),
                 [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) {
        const T* row = src + o * reduced;
        switch (kind) {
          case ReduceKind::Sum: dst[o] = T(row_sum(row, reduced)); break;
          case ReduceKind::Mean: dst[o] = T(double(row_sum(row, reduced)) / double(reduced)); break;
          case ReduceKind::Max: dst[o] = row_max(row, reduced); break;
          case ReduceKind::Min: dst[o] = row_min(row, reduced); break;
        }
      }
    });
  });
}

void var_forward(const Tensor& out, const Tensor& x, const std::vector<int64_t>& dims,
                 int64_t correction) {
  int64_t outer, reduced;
  Tensor rows = as_rows(x, dims, &outer, &reduced);
  SMELT_DISPATCH_FLOATING(x.dtype(), "var", [&] {
    using T = scalar_t;
    const T* src = rows.data<T>();
    T* dst = out.data<T>();
    const double denom = double(std::max<int64_t>(reduced - correction, 0));
    parallel_for(outer, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(reduced, 1)),
                 [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) {
        const T* row = src + o * reduced;
        double mean = double(row_sum(row, reduced)) / double(reduced);
        // two passes: exact enough without Welford's per-element division
        const double ss = row_sum_sq_dev(row, reduced, mean);
        // ss / max(0, N - correction) in IEEE arithmetic, as PyTorch and NumPy: inf when the
        // denominator is 0, NaN for 0 / 0 (all values equal, or no values)
        dst[o] = T(ss / denom);
      }
    });
  });
}

void argmax_forward(const Tensor& out, const Tensor& x, int64_t dim) {
  int64_t outer, reduced;
  Tensor rows = as_rows(x, {dim}, &outer, &reduced);
  SMELT_DISPATCH_NUMERIC(x.dtype(), "argmax", [&] {
    using T = scalar_t;
    const T* src = rows.data<T>();
    int64_t* dst = out.data<int64_t>();
    for (int64_t o = 0; o < outer; ++o) {
      const T* row = src + o * reduced;
      int64_t best = 0;
      for (int64_t i = 1; i < reduced; ++i) {
        if (row[best] != row[best]) break;  // NaN already wins
        if (row[i] > row[best] || row[i] != row[i]) best = i;
      }
      dst[o] = best;
    }
  });
}

}  // namespace smelt::kernels
