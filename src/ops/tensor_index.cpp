// Tensor::index: Python-style indexing (integers, slices with None bounds, None, Ellipsis) as views.
#include <algorithm>

#include "smelt/ops.h"

namespace smelt {
namespace {

// The dims an index list names (integers and slices; None and Ellipsis name none).
int64_t named_dims(const std::vector<TensorIndex>& indices) {
  int64_t n = 0;
  for (const TensorIndex& i : indices) n += i.is_integer() || i.is_slice();
  return n;
}

// Python's slice bounds on a dim of size n: None is the whole extent on that side, negative
// counts from the end, anything out of range clamps; the result is 0 <= start <= stop <= n.
void slice_bounds(const Slice& s, int64_t n, int64_t* start, int64_t* stop) {
  auto bound = [n](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t b = *v < 0 ? *v + n : *v;
    return std::clamp<int64_t>(b, 0, n);
  };
  *start = bound(s.start, 0);
  *stop = std::max(*start, bound(s.stop, n));
}

}  // namespace

Tensor Tensor::index(const std::vector<TensorIndex>& indices) const {
  checked_impl();
  const int64_t rank = dim();
  const int64_t named = named_dims(indices);
  const int64_t ellipses = std::count_if(indices.begin(), indices.end(),
                                         [](const TensorIndex& i) { return i.is_ellipsis(); });
  SMELT_CHECK(ellipses <= 1) << "index: at most one Ellipsis, got " << ellipses;
  SMELT_CHECK(named <= rank) << "index: too many indices for a tensor of shape "
                             << shape_str(shape()) << ": " << named << " integers or slices for "
                             << rank << " dims";
  Tensor r = *this;
  int64_t d = 0;  // the dim of `r` the next index applies to
  for (size_t k = 0; k < indices.size(); ++k) {
    const TensorIndex& i = indices[k];
    if (i.is_ellipsis()) {
      d += rank - named;  // the dims the Ellipsis stands for stay as they are
    } else if (i.is_none()) {
      r = r.unsqueeze(d);
      ++d;
    } else if (i.is_integer()) {
      const int64_t n = r.size(d), v = i.integer();
      SMELT_CHECK(v >= -n && v < n) << "index: index " << v << " (position " << k
                                    << " of the index list) is out of range for dim " << d
                                    << " of size " << n << " (valid: [" << -n << ", " << n - 1
                                    << "])";
      r = r.select(d, v);  // drops the dim
    } else {
      const Slice& s = i.slice();
      const int64_t step = s.step.value_or(1);
      SMELT_CHECK(step >= 1) << "index: slice step must be positive, got " << step
                             << " (position " << k << " of the index list); PyTorch refuses "
                                "negative steps too";
      int64_t start = 0, stop = 0;
      slice_bounds(s, r.size(d), &start, &stop);
      r = r.slice(d, start, stop, step);
      ++d;
    }
  }
  return r;
}

}  // namespace smelt
