// Memory overlap between tensor views, for in-place writes.
//
// An in-place op writes tensor `dst` while reading operands. Two hazards:
//  - internal overlap: several elements of `dst` share one address (an expanded dim, stride 0,
//    or strides that interleave); the result would depend on the order of the writes, and
//    parallel loops race. Every in-place write refuses such a `dst`.
//  - partial overlap: an operand reads memory that `dst` writes, in another layout (x.add_(x.t()),
//    x.add_(x[0])); elements read after they were overwritten give wrong answers. In-place ops
//    read such an operand through a copy made first.
// An operand with exactly the layout of `dst` (x.add_(x)) is safe: each element is read before
// the write to that same element.
#pragma once

#include "smelt/tensor.h"

namespace smelt {

// True when two elements of `t` may share one address. Exact for the layouts views create
// (stride 0 in a dim of size > 1, or strides that leave no room for the inner dims);
// conservative (true) for hand-made layouts it cannot prove disjoint.
bool has_internal_overlap(const Tensor& t);

enum class MemOverlap {
  None,     // no element of `src` lies in memory that `dst` writes
  Same,     // `src` broadcast to `dst`'s shape reads each element exactly where `dst` writes it
  Partial,  // anything else that may share an address
};

// How `src` (broadcastable to dst's shape) overlaps `dst`'s memory.
MemOverlap mem_overlap(const Tensor& dst, const Tensor& src);

}  // namespace smelt
