// Which input of an op is a weight that its kernel may keep converted or packed between calls
// when the caller marks it constant (attribute "weight_constant" = 1): a compiled plan marks the
// steps whose weight is one of its constants, the IR interpreter the nodes whose weight is a graph
// constant. The caller promises that memory never changes while the tensor lives (kernels/conv.h,
// kernels/quantize.h); anything else is converted afresh on every call.
#pragma once

#include "ops/op_table.h"

namespace smelt::ops {

// The weight's input index, or -1 for ops that keep nothing.
inline int constant_weight_input(OpId op) {
  switch (op) {
    case OpId::conv2d: case OpId::conv2d_blocked: case OpId::matmul_integer: case OpId::conv2d_integer:
      return 1;
    case OpId::qlinear_matmul: case OpId::qlinear_conv2d:
      return 3;
    default:
      return -1;
  }
}

}  // namespace smelt::ops
