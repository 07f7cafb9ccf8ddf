// Small helpers shared by the op family files: shape rules and attribute conventions.
#pragma once

#include <vector>

#include "ops/dispatch.h"
#include "smelt/creation.h"
#include "smelt/ops.h"

namespace smelt::ops {

// Output like input 0.
std::vector<TensorMeta> same_as_first(const std::vector<TensorMeta>& in, const Attrs& attrs);

void check_floating(const TensorMeta& m, const char* op, const char* what = "input");
// float32, float64, int64 or int32: what arithmetic, sums and scans accept.
void check_numeric(const TensorMeta& m, const char* op, const char* what = "input");
void check_dtype(const TensorMeta& m, DType want, const char* op, const char* what);
void check_same_dtype(const TensorMeta& a, const TensorMeta& b, const char* op);

// Class indices (nll_loss's targets, n of them): each in [0, classes) or equal to `ignore`, else
// the op's error naming the flat index and the value. Shared by the eager kernel and the compiled
// kernels' check (codegen::check_indices), so that both say the same.
void check_class_indices(const int64_t* t, int64_t n, int64_t classes, int64_t ignore, const char* op);

// Reduction dims from the "dims" attribute: wrapped, sorted, unique; empty means all dims.
std::vector<int64_t> reduce_dims(const Attrs& attrs, int64_t rank, const char* op);
// Shape after reducing `dims` (kept as size 1 when keepdim).
Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& dims, bool keepdim);

// A gradient of reduced shape re-expanded to `shape`: unsqueezes the reduced dims when they were
// dropped, then expands (a view).
Tensor expand_reduced(const Tensor& g, const Shape& shape, const std::vector<int64_t>& dims,
                      bool keepdim);

// A two-value (h, w) int-list attribute, each value >= min; error names the op and attribute.
std::vector<int64_t> pair_attr(const Attrs& attrs, const char* name, const char* op, int64_t min);

// Whether every dim of s is 1 (a scalar, or a tensor of one element in any rank).
inline bool all_size_one(const Shape& s) {
  for (int64_t n : s) {
    if (n != 1) return false;
  }
  return true;
}

// A contiguous tensor with x's values: x itself when it already is.
Tensor dense(const Tensor& x);

Tensor zero_like_scalar(const Tensor& like);  // a 0-dim zero of like's dtype

}  // namespace smelt::ops
