// Kernels that work along one dim of a tensor, one line at a time: the running sum (cumsum) and
// the k extremes of each line (topk). Inputs are read in place by their strides; outputs are
// contiguous and fully written.
#pragma once

#include <cstdint>

#include "smelt/tensor.h"

namespace smelt::kernels {

// out (x's shape) = running sum of x along `dim`. `exclusive`: each element excludes itself (the
// first is 0); `reverse`: sums run from the end of the line. Floats accumulate in double, int64 in
// wrapping unsigned arithmetic.
void cumsum_forward(const Tensor& out, const Tensor& x, int64_t dim, bool exclusive, bool reverse);

// values, indices (x's shape with `dim` of size k) = the k largest (or smallest) elements of each
// line of x along `dim`, sorted best first. Equal values keep their order (lower index first);
// NaN ranks above every number (first when largest, last when smallest), as in PyTorch.
void topk_forward(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t k,
                  int64_t dim, bool largest);

}  // namespace smelt::kernels
