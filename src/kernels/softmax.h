// Softmax and log-softmax along one dim.
//
// x is seen as (outer, n, inner) around the softmax dim of size n. inner == 1 (the last dim, or
// only size-1 dims after it) takes the row path: the row kernels of kernels/row_kernels.h, rows in
// parallel, reading x in place when its rows are unit-stride and a fixed stride apart. inner > 1
// takes the column path: blocks of adjacent inner positions are reduced together along the
// strided dim, so the inner loops stay unit-stride.
#pragma once

#include <cstdint>

#include "smelt/tensor.h"

namespace smelt::kernels {

// y = softmax(x, dim), or log_softmax when `log`; y is contiguous and of x's shape and dtype,
// x may have any strides (copied to row-major first when neither path can read it in place); a
// 0-dim x is one row of one element.
void softmax_forward(const Tensor& y, const Tensor& x, int64_t dim, bool log);

}  // namespace smelt::kernels
