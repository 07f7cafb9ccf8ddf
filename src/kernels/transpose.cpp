#include "kernels/transpose.h"

#include <algorithm>
#include <cstring>

#include "base/parallel.h"
#include "kernels/loops.h"

namespace smelt::kernels {

CopyLayout copy_layout(const Shape& shape, const Shape& src_strides) {
  CopyLayout layout;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!layout.shape.empty() && layout.src_strides.back() == src_strides[d] * shape[d]) {
      layout.shape.back() *= shape[d];
      layout.src_strides.back() = src_strides[d];
      continue;
    }
    layout.shape.push_back(shape[d]);
    layout.src_strides.push_back(src_strides[d]);
  }
  const int rank = int(layout.shape.size());
  if (rank > 0 && layout.src_strides.back() == 1) {
    layout.kind = CopyKind::Rows;
  } else {
    for (int d = rank - 2; d >= 0; --d) {
      if (layout.src_strides[d] == 1) {
        layout.kind = CopyKind::Tiled;
        layout.tile_dim = d;
        break;
      }
    }
  }
  return layout;
}

namespace {

// Tiles of kTile x kTile elements: 32 x 32 doubles (8 KiB) read plus written fit in L1.
constexpr int64_t kTile = 32;

// A mixed-radix counter over the dims a copy loop does not handle itself, tracking the source
// and destination offsets (elements) of the current position.
struct OuterIndex {
  int ndim = 0;
  int64_t size[kMaxDims + 1], src_stride[kMaxDims + 1], dst_stride[kMaxDims + 1];
  int64_t idx[kMaxDims + 1];
  int64_t src = 0, dst = 0;

  void add_dim(int64_t n, int64_t s, int64_t d) {
    size[ndim] = n;
    src_stride[ndim] = s;
    dst_stride[ndim] = d;
    ++ndim;
  }
  int64_t count() const {
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= size[d];
    return n;
  }
  void seek(int64_t linear) {
    src = dst = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      idx[d] = linear % size[d];
      linear /= size[d];
      src += idx[d] * src_stride[d];
      dst += idx[d] * dst_stride[d];
    }
  }
  void next() {
    for (int d = ndim - 1; d >= 0; --d) {
      src += src_stride[d];
      dst += dst_stride[d];
      if (++idx[d] < size[d]) return;
      src -= size[d] * src_stride[d];
      dst -= size[d] * dst_stride[d];
      idx[d] = 0;
    }
  }
};

// Runs body(outer) over every position of `outer`, split across threads; `per_item` elements
// are copied at each position.
template <class Body>
void for_each_outer(const OuterIndex& outer, int64_t per_item, const Body& body) {
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(per_item, 1));
  parallel_for(outer.count(), grain, [&](int64_t begin, int64_t end) {
    OuterIndex it = outer;
    it.seek(begin);
    for (int64_t i = begin; i < end; ++i, it.next()) body(it);
  });
}

// Rows: each row of n elements is contiguous in both buffers.
template <class T>
void copy_rows(T* dst, const T* src, const OuterIndex& outer, int64_t n) {
  for_each_outer(outer, n, [&](const OuterIndex& it) {
    T* d = dst + it.dst;
    const T* s = src + it.src;
    if (n >= 16) {
      std::memcpy(d, s, size_t(n) * sizeof(T));
    } else {
      for (int64_t i = 0; i < n; ++i) d[i] = s[i];
    }
  });
}

// Strided: rows of n elements, source stride `ss` along the row.
template <class T>
void copy_strided_rows(T* dst, const T* src, const OuterIndex& outer, int64_t n, int64_t ss) {
  for_each_outer(outer, n, [&](const OuterIndex& it) {
    T* d = dst + it.dst;
    const T* s = src + it.src;
    for (int64_t i = 0; i < n; ++i) d[i] = s[i * ss];
  });
}

// Tiled: a (rows, cols) block per outer position where the source is column-major
// (rows have source stride 1, cols source stride `col_stride`) and the destination row-major
// (`row_stride` between rows). `outer` includes the tile-row index as its innermost dim.
template <class T>
void copy_tiled(T* dst, const T* src, const OuterIndex& outer, int64_t rows, int64_t cols,
                int64_t col_stride, int64_t row_stride) {
  const int tile_row_dim = outer.ndim - 1;
  for_each_outer(outer, kTile * cols, [&](const OuterIndex& it) {
    const int64_t r0 = it.idx[tile_row_dim] * kTile;
    const int64_t nr = std::min(kTile, rows - r0);
    T* d = dst + it.dst;
    const T* s = src + it.src;
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t nc = std::min(kTile, cols - c0);
      for (int64_t r = 0; r < nr; ++r) {
        T* drow = d + r * row_stride + c0;
        const T* scol = s + r + c0 * col_stride;
        for (int64_t c = 0; c < nc; ++c) drow[c] = scol[c * col_stride];
      }
    }
  });
}

template <class T>
void copy_with_layout(T* dst, const T* src, const CopyLayout& layout) {
  const int rank = int(layout.shape.size());
  if (rank == 0) {
    dst[0] = src[0];
    return;
  }
  Shape dst_strides = contiguous_strides(layout.shape);
  OuterIndex outer;
  const int last = rank - 1;
  for (int d = 0; d < last; ++d) {
    if (d == layout.tile_dim) continue;
    outer.add_dim(layout.shape[d], layout.src_strides[d], dst_strides[d]);
  }
  const int64_t n = layout.shape[last];
  switch (layout.kind) {
    case CopyKind::Rows: copy_rows(dst, src, outer, n); break;
    case CopyKind::Strided: copy_strided_rows(dst, src, outer, n, layout.src_strides[last]); break;
    case CopyKind::Tiled: {
      const int64_t rows = layout.shape[layout.tile_dim];
      const int64_t row_stride = dst_strides[layout.tile_dim];
      outer.add_dim((rows + kTile - 1) / kTile, kTile, kTile * row_stride);
      copy_tiled(dst, src, outer, rows, n, layout.src_strides[last], row_stride);
      break;
    }
  }
}

}  // namespace

void transpose_copy(const Tensor& dst, const Tensor& src) {
  if (src.numel() == 0) return;
  SMELT_INTERNAL_CHECK(dst.shape() == src.shape() && dst.dtype() == src.dtype() && dst.is_contiguous())
      << "transpose_copy: dst must be contiguous with src's shape and dtype";
  SMELT_CHECK(src.dim() <= kMaxDims) << "contiguous: copies support up to " << kMaxDims
                                     << " dims, got " << src.dim();
  CopyLayout layout = copy_layout(src.shape(), src.strides());
  // Only the element size matters for a copy: move bytes as unsigned integers of that size.
  switch (dtype_size(src.dtype())) {
    case 1:
      copy_with_layout(static_cast<uint8_t*>(dst.raw_data()), static_cast<const uint8_t*>(src.raw_data()), layout);
      break;
    case 2:
      copy_with_layout(static_cast<uint16_t*>(dst.raw_data()), static_cast<const uint16_t*>(src.raw_data()), layout);
      break;
    case 4:
      copy_with_layout(static_cast<uint32_t*>(dst.raw_data()), static_cast<const uint32_t*>(src.raw_data()), layout);
      break;
    case 8:
      copy_with_layout(static_cast<uint64_t*>(dst.raw_data()), static_cast<const uint64_t*>(src.raw_data()), layout);
      break;
    default:
      SMELT_INTERNAL_CHECK(false) << "transpose_copy: unexpected element size " << dtype_size(src.dtype());
  }
}

Tensor contiguous_copy(const Tensor& x) {
  Tensor y = empty(x.shape(), x.dtype());
  transpose_copy(y, x);
  return y;
}

}  // namespace smelt::kernels
