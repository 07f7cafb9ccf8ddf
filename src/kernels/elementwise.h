// The eager elementwise kernel: any row of the elementwise table (kernels/scalar_table.h) over
// strided, broadcast tensors, through the vectorized loops of kernels/loops.h.
#pragma once

#include <vector>

#include "kernels/scalar_table.h"
#include "smelt/tensor.h"

namespace smelt::kernels {

// out = call(in...), inputs broadcast to out's shape; `out` is allocated by the caller with the
// result dtype (scalar_call_result). Errors name the function when a dtype is not accepted.
void elementwise_forward(const ScalarCall& call, const Tensor& out, const std::vector<Tensor>& in);

}  // namespace smelt::kernels
