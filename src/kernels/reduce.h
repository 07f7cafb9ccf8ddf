// Reduction kernels over any set of dims, reading the input in place by its strides (the loops
// are kernels/reduce_core.h's), threaded over outputs. `as_rows` remains for kernels that want an
// (outer, reduced) row-major matrix (softmax, norms).
#pragma once

#include <vector>

#include "smelt/tensor.h"

namespace smelt::kernels {

// x viewed (or copied) as a contiguous (outer, reduced) matrix; `dims` sorted and unique.
Tensor as_rows(const Tensor& x, const std::vector<int64_t>& dims, int64_t* outer, int64_t* reduced);

// Copies src into dst (same shape, same dtype, any strides).
void copy_strided(const Tensor& dst, const Tensor& src);

enum class ReduceKind { Sum, Mean, Max, Min, Prod };

// out (outer,) = reduce over dims of x; `out` is allocated by the caller (keepdim or not).
void reduce_forward(const Tensor& out, const Tensor& x, const std::vector<int64_t>& dims,
                    ReduceKind kind);
// Variance over dims with `correction` (1 = Bessel).
void var_forward(const Tensor& out, const Tensor& x, const std::vector<int64_t>& dims,
                 int64_t correction);
// Index of the maximum along `dim` (first one on ties; NaN counts as the maximum).
void argmax_forward(const Tensor& out, const Tensor& x, int64_t dim);

}  // namespace smelt::kernels
