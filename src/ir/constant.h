// Exact views of constant values: their bytes, equality by bits, element tests.
//
// Two constants are the same only when dtype, shape and every element's bits are equal: NaN
// equals a NaN with the same bits, +0 and -0 differ, and int64 values beyond 2^53 stay distinct
// (comparing through double would merge them). Passes that key on constants (cse, simplify's
// rules, fold) use these, never to_vector().
#pragma once

#include <string>

#include "ir/graph.h"

namespace smelt::ir {

// The elements' bytes in row-major order (a non-contiguous tensor is read through its strides).
std::string constant_bytes(const Tensor& t);
// True when `v` is a constant with at least one element and every element equals `value`
// exactly: floating elements by bits after rounding `value` to the dtype (so -0.0 matches only
// -0 and 0.0 only +0), integer and bool elements by value.
bool all_elements_are(const Value* v, double value);
// True when `v` is an integer (or bool) constant none of whose elements is 0: a divisor that the
// eager div cannot refuse.
bool is_integer_constant_without_zeros(const Value* v);
// True when `v` is a float32 constant whose every element is positive and finite: a scale the
// quantized ops cannot refuse.
bool is_positive_finite_constant(const Value* v);
// Whether a quantized op (ops/ops.def, docs/quantization.md) refuses no value of `inputs`: its
// scales are constants that are positive and finite, and an int32 dequantize's zero point is a
// constant 0. False for other ops.
bool quantized_op_cannot_refuse(ops::OpId op, const std::vector<Value*>& inputs);

}  // namespace smelt::ir
