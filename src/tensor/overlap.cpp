#include "tensor/overlap.h"

#include <algorithm>
#include <cstdlib>
#include <utility>
#include <vector>

namespace smelt {

namespace {

// Byte range [lo, hi) that `t`'s elements occupy; empty (lo == hi) for a zero-element tensor.
std::pair<intptr_t, intptr_t> byte_range(const Tensor& t) {
  const intptr_t base = reinterpret_cast<intptr_t>(t.storage()->data());
  const intptr_t esize = intptr_t(dtype_size(t.dtype()));
  if (t.numel() == 0) return {base, base};
  intptr_t lo = t.offset(), hi = t.offset();
  for (int64_t d = 0; d < t.dim(); ++d) {
    const intptr_t span = intptr_t(t.shape()[d] - 1) * intptr_t(t.strides()[d]);
    (span < 0 ? lo : hi) += span;
  }
  return {base + lo * esize, base + (hi + 1) * esize};
}

}  // namespace

bool has_internal_overlap(const Tensor& t) {
  // Sorted by |stride|, each dim must step past everything the smaller dims can reach; then
  // every index maps to its own address (a mixed-radix number).
  std::vector<std::pair<int64_t, int64_t>> dims;  // (|stride|, size)
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.shape()[d] == 0) return false;  // no elements at all
    if (t.shape()[d] > 1) dims.emplace_back(std::llabs(t.strides()[d]), t.shape()[d]);
  }
  std::sort(dims.begin(), dims.end());
  int64_t reach = 0;  // largest offset the smaller dims reach
  for (const auto& [stride, size] : dims) {
    if (stride <= reach) return true;
    reach += stride * (size - 1);
  }
  return false;
}

MemOverlap mem_overlap(const Tensor& dst, const Tensor& src) {
  if (!dst.storage() || !src.storage() || dst.storage() != src.storage()) return MemOverlap::None;
  if (dst.numel() == 0 || src.numel() == 0) return MemOverlap::None;
  auto [dlo, dhi] = byte_range(dst);
  auto [slo, shi] = byte_range(src);
  if (dhi <= slo || shi <= dlo) return MemOverlap::None;
  // Same layout after broadcasting src to dst's shape: a broadcast dim of src has stride 0 where
  // dst (free of internal overlap) does not, so it never matches.
  if (src.dtype() == dst.dtype() && src.offset() == dst.offset() && src.dim() <= dst.dim()) {
    const int64_t lead = dst.dim() - src.dim();
    bool same = true;
    for (int64_t d = 0; d < dst.dim() && same; ++d) {
      if (dst.shape()[d] == 1) continue;  // a size-1 dim's stride never matters
      const bool broadcast = d < lead || src.shape()[d - lead] == 1;
      same = !broadcast && src.strides()[d - lead] == dst.strides()[d];
    }
    if (same) return MemOverlap::Same;
  }
  return MemOverlap::Partial;
}

}  // namespace smelt
