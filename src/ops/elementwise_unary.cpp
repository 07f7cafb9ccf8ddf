// Unary elementwise ops: gradient rules in smelt ops. The shape rules and kernels are the
// elementwise table's (ops/elementwise_bind.h: the scalar function of kernels/scalar.h, its
// dtypes, and how the op's attributes bind to it).
#include <cmath>

#include "ops/elementwise_bind.h"
#include "ops/op_util.h"

namespace smelt::ops {
namespace {

// ---- gradient rules (g0, x0, y0: ops/elementwise_bind.h)

std::vector<Tensor> neg_grad(const GradContext& c) { return {-g0(c)}; }
std::vector<Tensor> exp_grad(const GradContext& c) { return {g0(c) * y0(c)}; }
std::vector<Tensor> log_grad(const GradContext& c) { return {g0(c) / x0(c)}; }
// d sqrt(x) = 1 / (2 sqrt(x))
std::vector<Tensor> sqrt_grad(const GradContext& c) { return {g0(c) * 0.5 / y0(c)}; }
// d x^-1/2 = -1/2 x^-3/2 = -1/2 y^3
std::vector<Tensor> rsqrt_grad(const GradContext& c) {
  Tensor y = y0(c);
  return {g0(c) * (-0.5) * y * y * y};
}
std::vector<Tensor> abs_grad(const GradContext& c) { return {g0(c) * sign(x0(c))}; }
// d erf(x) = 2/sqrt(pi) exp(-x^2)
std::vector<Tensor> erf_grad(const GradContext& c) {
  Tensor x = x0(c);
  return {g0(c) * (2.0 / std::sqrt(M_PI)) * exp(-(x * x))};
}
std::vector<Tensor> relu_grad(const GradContext& c) {
  Tensor x = x0(c);
  return {where(gt(x, zero_like_scalar(x)), g0(c), zero_like_scalar(x))};
}
std::vector<Tensor> leaky_relu_grad(const GradContext& c) {
  Tensor x = x0(c), g = g0(c);
  return {where(gt(x, zero_like_scalar(x)), g, g * c.attrs.get_float("negative_slope"))};
}
// d sigmoid = y (1 - y)
std::vector<Tensor> sigmoid_grad(const GradContext& c) {
  Tensor y = y0(c);
  return {g0(c) * y * (1.0 - y)};
}
// d tanh = 1 - y^2
std::vector<Tensor> tanh_grad(const GradContext& c) {
  Tensor y = y0(c);
  return {g0(c) * (1.0 - y * y)};
}
std::vector<Tensor> gelu_grad(const GradContext& c) {
  Tensor x = x0(c);
  if (c.attrs.get_int("approximate") == 1) {
    // u = k (x + a x^3), t = tanh(u): d = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 a x^2)
    const double k = 0.7978845608028654, a = 0.044715;
    Tensor x2 = x * x;
    Tensor t = tanh(k * (x + a * x2 * x));
    Tensor d = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * (k * (1.0 + 3.0 * a * x2));
    return {g0(c) * d};
  }
  // d x Phi(x) = Phi(x) + x phi(x)
  Tensor cdf = 0.5 * (1.0 + erf(x * M_SQRT1_2));
  Tensor pdf = exp(-0.5 * (x * x)) * (1.0 / std::sqrt(2.0 * M_PI));
  return {g0(c) * (cdf + x * pdf)};
}
// d x s(x) = s (1 + x (1 - s))
std::vector<Tensor> silu_grad(const GradContext& c) {
  Tensor x = x0(c);
  Tensor s = sigmoid(x);
  return {g0(c) * (s * (1.0 + x * (1.0 - s)))};
}
// d softplus = sigmoid(beta x), 1 above the threshold
std::vector<Tensor> softplus_grad(const GradContext& c) {
  Tensor x = x0(c), g = g0(c);
  double beta = c.attrs.get_float("beta"), threshold = c.attrs.get_float("threshold");
  Tensor bx = x * beta;
  return {where(gt(bx, scalar_like(bx, threshold)), g, g * sigmoid(bx))};
}
// Gradient flows where min <= x <= max.
std::vector<Tensor> clamp_grad(const GradContext& c) {
  Tensor x = x0(c), g = g0(c), zero = zero_like_scalar(x);
  if (c.attrs.has("min")) g = where(ge(x, scalar_like(x, c.attrs.get_float("min"))), g, zero);
  if (c.attrs.has("max")) g = where(le(x, scalar_like(x, c.attrs.get_float("max"))), g, zero);
  return {g};
}
std::vector<Tensor> cast_grad(const GradContext& c) {
  if (!dtype_is_floating(c.inputs[0].dtype())) return {Tensor()};
  return {cast(g0(c), c.inputs[0].dtype())};
}

}  // namespace

SMELT_OP_IMPL(neg) = {table_shape<OpId::neg>, table_kernel<OpId::neg>, neg_grad, kSaveNothing};
SMELT_OP_IMPL(exp) = {table_shape<OpId::exp>, table_kernel<OpId::exp>, exp_grad, kSaveOutputs};
SMELT_OP_IMPL(log) = {table_shape<OpId::log>, table_kernel<OpId::log>, log_grad, kSaveInputs};
SMELT_OP_IMPL(sqrt) = {table_shape<OpId::sqrt>, table_kernel<OpId::sqrt>, sqrt_grad, kSaveOutputs};
SMELT_OP_IMPL(rsqrt) = {table_shape<OpId::rsqrt>, table_kernel<OpId::rsqrt>, rsqrt_grad, kSaveOutputs};
SMELT_OP_IMPL(abs) = {table_shape<OpId::abs>, table_kernel<OpId::abs>, abs_grad, kSaveInputs};
SMELT_OP_IMPL(sign) = {table_shape<OpId::sign>, table_kernel<OpId::sign>, nullptr, kSaveNothing};
SMELT_OP_IMPL(erf) = {table_shape<OpId::erf>, table_kernel<OpId::erf>, erf_grad, kSaveInputs};
SMELT_OP_IMPL(relu) = {table_shape<OpId::relu>, table_kernel<OpId::relu>, relu_grad, kSaveInputs};
SMELT_OP_IMPL(leaky_relu) = {table_shape<OpId::leaky_relu>, table_kernel<OpId::leaky_relu>, leaky_relu_grad, kSaveInputs};
SMELT_OP_IMPL(sigmoid) = {table_shape<OpId::sigmoid>, table_kernel<OpId::sigmoid>, sigmoid_grad, kSaveOutputs};
SMELT_OP_IMPL(tanh) = {table_shape<OpId::tanh>, table_kernel<OpId::tanh>, tanh_grad, kSaveOutputs};
SMELT_OP_IMPL(gelu) = {table_shape<OpId::gelu>, table_kernel<OpId::gelu>, gelu_grad, kSaveInputs};
SMELT_OP_IMPL(silu) = {table_shape<OpId::silu>, table_kernel<OpId::silu>, silu_grad, kSaveInputs};
SMELT_OP_IMPL(softplus) = {table_shape<OpId::softplus>, table_kernel<OpId::softplus>, softplus_grad, kSaveInputs};
SMELT_OP_IMPL(clamp) = {table_shape<OpId::clamp>, table_kernel<OpId::clamp>, clamp_grad, kSaveInputs};
SMELT_OP_IMPL(cast) = {table_shape<OpId::cast>, table_kernel<OpId::cast>, cast_grad, kSaveInputs};

}  // namespace smelt::ops

// ---- public API
namespace smelt {
using ops::Attrs;
using ops::call1;
using ops::OpId;

Tensor neg(const Tensor& x) { return call1(OpId::neg, {x}); }
Tensor exp(const Tensor& x) { return call1(OpId::exp, {x}); }
Tensor log(const Tensor& x) { return call1(OpId::log, {x}); }
Tensor sqrt(const Tensor& x) { return call1(OpId::sqrt, {x}); }
Tensor rsqrt(const Tensor& x) { return call1(OpId::rsqrt, {x}); }
Tensor abs(const Tensor& x) { return call1(OpId::abs, {x}); }
Tensor sign(const Tensor& x) { return call1(OpId::sign, {x}); }
Tensor erf(const Tensor& x) { return call1(OpId::erf, {x}); }
Tensor relu(const Tensor& x) { return call1(OpId::relu, {x}); }
Tensor leaky_relu(const Tensor& x, double slope) {
  return call1(OpId::leaky_relu, {x}, {{"negative_slope", slope}});
}
Tensor sigmoid(const Tensor& x) { return call1(OpId::sigmoid, {x}); }
Tensor tanh(const Tensor& x) { return call1(OpId::tanh, {x}); }
Tensor gelu(const Tensor& x, GeluApprox approximate) {
  return call1(OpId::gelu, {x}, {{"approximate", int64_t(approximate == GeluApprox::Tanh)}});
}
Tensor silu(const Tensor& x) { return call1(OpId::silu, {x}); }
Tensor softplus(const Tensor& x, double beta, double threshold) {
  return call1(OpId::softplus, {x}, {{"beta", beta}, {"threshold", threshold}});
}
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  Attrs attrs;
  if (min) attrs.set("min", *min);
  if (max) attrs.set("max", *max);
  return call1(OpId::clamp, {x}, attrs);
}
Tensor cast(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  return call1(OpId::cast, {x}, {{"dtype", dtype}});
}

}  // namespace smelt
