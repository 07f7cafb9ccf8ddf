// How each elementwise op's attributes bind to its scalar function: the op-side half of the
// elementwise table (kernels/scalar_table.h holds the functions). The eager kernels, and later
// the fused-kernel interpreter and the C++ emitter, ask here which scalar function an op node
// computes and with which parameters, instead of spelling the math themselves.
#pragma once

#include <optional>
#include <vector>

#include "kernels/scalar_table.h"
#include "ops/dispatch.h"

namespace smelt::ops {

// The scalar call op `op` with `attrs` makes on value operands of `dtype`; nullopt for ops that
// are not elementwise (not in the table). Errors (SMELT_CHECK) for attributes that cannot bind,
// e.g. a non-integral clamp bound on an int64 tensor.
std::optional<kernels::ScalarCall> elementwise_scalar_call(OpId op, const Attrs& attrs, DType dtype);

// Validates clamp's bounds for an input of `dtype` (float: any value; int64: integral, or an
// infinity / out-of-range value on the side where it clamps nothing).
void check_clamp_bounds(const Attrs& attrs, DType dtype);

// The shape and dtype rule of every table op, read off its scalar function's row
// (kernels/scalar_table.h): operands of one dtype (where's condition bool) in the row's dtype
// class, the attributes checked by binding them; the result broadcast over the operands
// (NumPy), of the operands' dtype, bool (comparisons) or the cast's target.
// Shorthands of the unary ops' gradient rules: x the input, y the output, g dL/dy.
inline Tensor g0(const GradContext& c) { return c.grads[0]; }
inline Tensor x0(const GradContext& c) { return c.inputs[0]; }
inline Tensor y0(const GradContext& c) { return c.outputs[0]; }

std::vector<TensorMeta> elementwise_shape(OpId op, const std::vector<TensorMeta>& in, const Attrs& attrs);
template <OpId kOp>
std::vector<TensorMeta> table_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  return elementwise_shape(kOp, in, attrs);
}

// The eager kernel of every table op: binds, then runs the generic loop into out[0].
void elementwise_kernel(OpId op, const std::vector<Tensor>& in, const Attrs& attrs,
                        const std::vector<Tensor>& out);
template <OpId kOp>
void table_kernel(const std::vector<Tensor>& in, const Attrs& attrs,
                  const std::vector<Tensor>& out) {
  elementwise_kernel(kOp, in, attrs, out);
}

}  // namespace smelt::ops
