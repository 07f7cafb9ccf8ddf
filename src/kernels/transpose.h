// Transpose normalization: copying a strided view (a permutation, slice or broadcast of some
// buffer) into contiguous memory at close to copy bandwidth.
//
// Before copying, the layout is normalized in the destination's (row-major) order:
//   - size-1 dims are dropped (they move no data);
//   - dim d merges into dim d-1 when the source walks them in the same order without a gap
//     (stride[d-1] == stride[d] * size[d]): dims that stay adjacent under the permutation;
// and then one of three loops runs:
//   - Rows:      the innermost dim has source stride 1: each row is one contiguous block, copied
//                with memcpy — a permutation that keeps the last dim runs at copy bandwidth;
//   - Tiled:     another dim has source stride 1 (a true transpose of two dims): the copy goes
//                tile by tile, so both the strided reads and the contiguous writes stay in cache;
//   - Strided:   no dim is contiguous in the source (step slices, broadcasts): an element loop.
#pragma once

#include <cstdint>

#include "smelt/tensor.h"

namespace smelt::kernels {

enum class CopyKind { Rows, Tiled, Strided };

// A normalized copy: dims in destination order, sizes > 1, no two adjacent dims mergeable.
struct CopyLayout {
  Shape shape;
  Shape src_strides;   // elements
  CopyKind kind = CopyKind::Strided;
  int tile_dim = -1;   // Tiled: the dim (other than the last) with source stride 1
};

// Normalizes a copy of `shape` read with `src_strides` into row-major order.
CopyLayout copy_layout(const Shape& shape, const Shape& src_strides);

// Copies src (any strides, stride 0 for broadcast dims) into dst: same shape and dtype, dst
// contiguous.
void transpose_copy(const Tensor& dst, const Tensor& src);

// A contiguous copy of x (x itself when it already is contiguous).
Tensor contiguous_copy(const Tensor& x);

}  // namespace smelt::kernels
