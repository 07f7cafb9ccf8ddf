// Seeing a Tensor as rows for the row kernels (kernels/row_kernels.h) without copying it.
#pragma once

#include <cstdint>
#include <optional>

#include "smelt/tensor.h"

namespace smelt::kernels {

// x as R rows (the dims before `split`) of C contiguous elements (the dims from `split` on): the
// distance between rows, or nullopt when x is not laid out that way (the caller copies x to
// row-major first). Size-1 dims are ignored; a row stride of 0 (an expanded input) is allowed.
inline std::optional<int64_t> row_stride(const Tensor& x, int64_t split) {
  int64_t expected = 1;  // the stride the next non-trivial dim must have, from the last dim back
  for (int64_t d = x.dim() - 1; d >= split; --d) {
    if (x.size(d) == 1) continue;
    if (x.stride(d) != expected) return std::nullopt;
    expected *= x.size(d);
  }
  std::optional<int64_t> row;  // stride of the innermost non-trivial row dim
  for (int64_t d = split - 1; d >= 0; --d) {
    if (x.size(d) == 1) continue;
    if (!row) {
      row = x.stride(d);
    } else if (x.stride(d) != expected) {
      return std::nullopt;
    }
    expected = x.stride(d) * x.size(d);
  }
  return row ? *row : expected;  // one row: any stride will do
}

}  // namespace smelt::kernels
