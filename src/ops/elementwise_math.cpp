// Unary math for float tensors: rounding (floor, ceil, round half to even) and the trigonometric
// and hyperbolic functions with their inverses. Shape rule: same shape and dtype, float only.
// Kernels are the elementwise table's (kernels/scalar.h). Rounding has no gradient rule (its
// derivative is zero almost everywhere; like sign, the result carries no history).
#include <cmath>

#include "ops/elementwise_bind.h"
#include "ops/op_util.h"

namespace smelt::ops {
namespace {

#define FLOAT_ONLY_SHAPE(NAME)                                                                \
  std::vector<TensorMeta> NAME##_shape(const std::vector<TensorMeta>& in, const Attrs& a) {  \
    check_floating(in[0], #NAME);                                                             \
    return same_as_first(in, a);                                                             \
  }
FLOAT_ONLY_SHAPE(floor)
FLOAT_ONLY_SHAPE(ceil)
FLOAT_ONLY_SHAPE(round)
FLOAT_ONLY_SHAPE(sin)
FLOAT_ONLY_SHAPE(cos)
FLOAT_ONLY_SHAPE(tan)
FLOAT_ONLY_SHAPE(asin)
FLOAT_ONLY_SHAPE(acos)
FLOAT_ONLY_SHAPE(atan)
FLOAT_ONLY_SHAPE(sinh)
FLOAT_ONLY_SHAPE(cosh)
FLOAT_ONLY_SHAPE(asinh)
FLOAT_ONLY_SHAPE(acosh)
FLOAT_ONLY_SHAPE(atanh)
#undef FLOAT_ONLY_SHAPE

// ---- gradient rules: x the input, y the output, g dL/dy
Tensor g0(const GradContext& c) { return c.grads[0]; }
Tensor x0(const GradContext& c) { return c.inputs[0]; }

std::vector<Tensor> sin_grad(const GradContext& c) { return {g0(c) * cos(x0(c))}; }
std::vector<Tensor> cos_grad(const GradContext& c) { return {-(g0(c) * sin(x0(c)))}; }
// d tan = 1 + tan^2
std::vector<Tensor> tan_grad(const GradContext& c) {
  Tensor y = c.outputs[0];
  return {g0(c) * (1.0 + y * y)};
}
// d asin = 1 / sqrt(1 - x^2); d acos = -1 / sqrt(1 - x^2)
std::vector<Tensor> asin_grad(const GradContext& c) { return {g0(c) * rsqrt(1.0 - x0(c) * x0(c))}; }
std::vector<Tensor> acos_grad(const GradContext& c) { return {-(g0(c) * rsqrt(1.0 - x0(c) * x0(c)))}; }
std::vector<Tensor> atan_grad(const GradContext& c) { return {g0(c) / (1.0 + x0(c) * x0(c))}; }
std::vector<Tensor> sinh_grad(const GradContext& c) { return {g0(c) * cosh(x0(c))}; }
std::vector<Tensor> cosh_grad(const GradContext& c) { return {g0(c) * sinh(x0(c))}; }
// d asinh = 1 / sqrt(x^2 + 1); d acosh = 1 / sqrt(x^2 - 1); d atanh = 1 / (1 - x^2)
std::vector<Tensor> asinh_grad(const GradContext& c) { return {g0(c) * rsqrt(x0(c) * x0(c) + 1.0)}; }
std::vector<Tensor> acosh_grad(const GradContext& c) { return {g0(c) * rsqrt(x0(c) * x0(c) - 1.0)}; }
std::vector<Tensor> atanh_grad(const GradContext& c) { return {g0(c) / (1.0 - x0(c) * x0(c))}; }

}  // namespace

SMELT_OP_IMPL(floor) = {floor_shape, table_kernel<OpId::floor>, nullptr, kSaveNothing};
SMELT_OP_IMPL(ceil) = {ceil_shape, table_kernel<OpId::ceil>, nullptr, kSaveNothing};
SMELT_OP_IMPL(round) = {round_shape, table_kernel<OpId::round>, nullptr, kSaveNothing};
SMELT_OP_IMPL(sin) = {sin_shape, table_kernel<OpId::sin>, sin_grad, kSaveInputs};
SMELT_OP_IMPL(cos) = {cos_shape, table_kernel<OpId::cos>, cos_grad, kSaveInputs};
SMELT_OP_IMPL(tan) = {tan_shape, table_kernel<OpId::tan>, tan_grad, kSaveOutputs};
SMELT_OP_IMPL(asin) = {asin_shape, table_kernel<OpId::asin>, asin_grad, kSaveInputs};
SMELT_OP_IMPL(acos) = {acos_shape, table_kernel<OpId::acos>, acos_grad, kSaveInputs};
SMELT_OP_IMPL(atan) = {atan_shape, table_kernel<OpId::atan>, atan_grad, kSaveInputs};
SMELT_OP_IMPL(sinh) = {sinh_shape, table_kernel<OpId::sinh>, sinh_grad, kSaveInputs};
SMELT_OP_IMPL(cosh) = {cosh_shape, table_kernel<OpId::cosh>, cosh_grad, kSaveInputs};
SMELT_OP_IMPL(asinh) = {asinh_shape, table_kernel<OpId::asinh>, asinh_grad, kSaveInputs};
SMELT_OP_IMPL(acosh) = {acosh_shape, table_kernel<OpId::acosh>, acosh_grad, kSaveInputs};
SMELT_OP_IMPL(atanh) = {atanh_shape, table_kernel<OpId::atanh>, atanh_grad, kSaveInputs};

}  // namespace smelt::ops

// ---- public API
namespace smelt {

Tensor floor(const Tensor& x) { return ops::call1(ops::OpId::floor, {x}); }
Tensor ceil(const Tensor& x) { return ops::call1(ops::OpId::ceil, {x}); }
Tensor round(const Tensor& x) { return ops::call1(ops::OpId::round, {x}); }
Tensor sin(const Tensor& x) { return ops::call1(ops::OpId::sin, {x}); }
Tensor cos(const Tensor& x) { return ops::call1(ops::OpId::cos, {x}); }
Tensor tan(const Tensor& x) { return ops::call1(ops::OpId::tan, {x}); }
Tensor asin(const Tensor& x) { return ops::call1(ops::OpId::asin, {x}); }
Tensor acos(const Tensor& x) { return ops::call1(ops::OpId::acos, {x}); }
Tensor atan(const Tensor& x) { return ops::call1(ops::OpId::atan, {x}); }
Tensor sinh(const Tensor& x) { return ops::call1(ops::OpId::sinh, {x}); }
Tensor cosh(const Tensor& x) { return ops::call1(ops::OpId::cosh, {x}); }
Tensor asinh(const Tensor& x) { return ops::call1(ops::OpId::asinh, {x}); }
Tensor acosh(const Tensor& x) { return ops::call1(ops::OpId::acosh, {x}); }
Tensor atanh(const Tensor& x) { return ops::call1(ops::OpId::atanh, {x}); }

}  // namespace smelt
