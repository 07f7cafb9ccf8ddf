#include "kernels/scan.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>
#include <vector>

#include "kernels/loops.h"

namespace smelt::kernels {
namespace {

// x seen as (outer, n, inner) lines along `dim`: the offset (in elements) of line (o, i) and the
// stride of `dim`. Outer and inner positions are decomposed by x's own shape and strides.
struct Lines {
  int64_t outer = 1, n = 1, inner = 1, step = 0;
  std::vector<int64_t> shape, strides;  // x's, with `dim` set to size 1
  int64_t offset(int64_t o, int64_t i) const {
    int64_t flat = o * inner + i, off = 0;  // flat index over the shape with dim of size 1
    for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
      off += (flat % shape[d]) * strides[d];
      flat /= shape[d];
    }
    return off;
  }
};

Lines lines_of(const Tensor& x, int64_t dim) {
  Lines l;
  l.shape = x.shape();
  l.strides = x.strides();
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < dim) l.outer *= x.size(d);
    if (d > dim) l.inner *= x.size(d);
  }
  if (x.dim() > 0) {
    l.n = x.size(dim);
    l.step = x.strides()[size_t(dim)];
    l.shape[size_t(dim)] = 1;
  }
  return l;
}

// NaN counts as greater than every number (and equal to itself).
template <class T>
bool ranks_above(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return !std::isnan(b);
    if (std::isnan(b)) return false;
  }
  return a > b;
}

}  // namespace

void cumsum_forward(const Tensor& out, const Tensor& x, int64_t dim, bool exclusive, bool reverse) {
  SMELT_DISPATCH_NUMERIC(x.dtype(), "cumsum", [&] {
    using T = scalar_t;
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;
    const Lines l = lines_of(x, dim);
    const T* src = x.strided_data<T>();
    T* dst = out.data<T>();  // contiguous: line (o, i) element j at (o * n + j) * inner + i
    for (int64_t o = 0; o < l.outer; ++o) {
      for (int64_t i = 0; i < l.inner; ++i) {
        const T* line = src + l.offset(o, i);
        Acc acc(0);
        for (int64_t t = 0; t < l.n; ++t) {
          const int64_t j = reverse ? l.n - 1 - t : t;
          const Acc v = Acc(line[j * l.step]);
          if (!exclusive) acc += v;
          dst[(o * l.n + j) * l.inner + i] = T(acc);
          if (exclusive) acc += v;
        }
      }
    }
  });
}

void topk_forward(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t k,
                  int64_t dim, bool largest) {
  SMELT_DISPATCH_NUMERIC(x.dtype(), "topk", [&] {
    using T = scalar_t;
    const Lines l = lines_of(x, dim);
    const T* src = x.strided_data<T>();
    T* vdst = values.data<T>();
    int64_t* idst = indices.data<int64_t>();
    std::vector<int64_t> order(size_t(l.n));
    for (int64_t o = 0; o < l.outer; ++o) {
      for (int64_t i = 0; i < l.inner; ++i) {
        const T* line = src + l.offset(o, i);
        std::iota(order.begin(), order.end(), int64_t(0));
        // A strict total order (ties broken by index), so the result does not depend on the sort.
        auto before = [&](int64_t a, int64_t b) {
          const T va = line[a * l.step], vb = line[b * l.step];
          if (largest ? ranks_above(va, vb) : ranks_above(vb, va)) return true;
          if (largest ? ranks_above(vb, va) : ranks_above(va, vb)) return false;
          return a < b;
        };
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        for (int64_t j = 0; j < k; ++j) {
          const int64_t at = (o * k + j) * l.inner + i;
          vdst[at] = line[order[size_t(j)] * l.step];
          idst[at] = order[size_t(j)];
        }
      }
    }
  });
}

}  // namespace smelt::kernels
