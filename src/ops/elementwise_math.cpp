// Unary math for float tensors: rounding (floor, ceil, round half to even) and the trigonometric
// and hyperbolic functions with their inverses. Shape rules (float only) and kernels are the
// elementwise table's (ops/elementwise_bind.h, kernels/scalar.h). Rounding has no gradient rule (its
// derivative is zero almost everywhere; like sign, the result carries no history).
#include <cmath>

#include "ops/elementwise_bind.h"
#include "ops/op_util.h"

namespace smelt::ops {
namespace {

// ---- gradient rules (g0, x0: ops/elementwise_bind.h)

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

SMELT_OP_IMPL(floor) = {table_shape<OpId::floor>, table_kernel<OpId::floor>, nullptr, kSaveNothing};
SMELT_OP_IMPL(ceil) = {table_shape<OpId::ceil>, table_kernel<OpId::ceil>, nullptr, kSaveNothing};
SMELT_OP_IMPL(round) = {table_shape<OpId::round>, table_kernel<OpId::round>, nullptr, kSaveNothing};
SMELT_OP_IMPL(sin) = {table_shape<OpId::sin>, table_kernel<OpId::sin>, sin_grad, kSaveInputs};
SMELT_OP_IMPL(cos) = {table_shape<OpId::cos>, table_kernel<OpId::cos>, cos_grad, kSaveInputs};
SMELT_OP_IMPL(tan) = {table_shape<OpId::tan>, table_kernel<OpId::tan>, tan_grad, kSaveOutputs};
SMELT_OP_IMPL(asin) = {table_shape<OpId::asin>, table_kernel<OpId::asin>, asin_grad, kSaveInputs};
SMELT_OP_IMPL(acos) = {table_shape<OpId::acos>, table_kernel<OpId::acos>, acos_grad, kSaveInputs};
SMELT_OP_IMPL(atan) = {table_shape<OpId::atan>, table_kernel<OpId::atan>, atan_grad, kSaveInputs};
SMELT_OP_IMPL(sinh) = {table_shape<OpId::sinh>, table_kernel<OpId::sinh>, sinh_grad, kSaveInputs};
SMELT_OP_IMPL(cosh) = {table_shape<OpId::cosh>, table_kernel<OpId::cosh>, cosh_grad, kSaveInputs};
SMELT_OP_IMPL(asinh) = {table_shape<OpId::asinh>, table_kernel<OpId::asinh>, asinh_grad, kSaveInputs};
SMELT_OP_IMPL(acosh) = {table_shape<OpId::acosh>, table_kernel<OpId::acosh>, acosh_grad, kSaveInputs};
SMELT_OP_IMPL(atanh) = {table_shape<OpId::atanh>, table_kernel<OpId::atanh>, atanh_grad, kSaveInputs};

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
