// Elementwise ONNX ops: unary math and activations, binary arithmetic with broadcasting,
// comparisons and logic, casts. Activations smelt has no op for are composed from its ops
// (Selu, Elu, HardSwish, Mish, ...); logic on bools goes through where/eq/ne.
#include <cmath>
#include <limits>

#include "onnx/node_context.h"
#include "smelt/creation.h"
#include "smelt/ops.h"

namespace smelt::onnx_import {
namespace {

using Ts = std::vector<Tensor>;

void need_float(NodeContext& c, const Tensor& x) {
  if (!dtype_is_floating(x.dtype())) c.unsupported(std::string("dtype ") + dtype_name(x.dtype()) + " (supported: float32, float64)");
}

bool is_byte(DType d) { return d == DType::UInt8 || d == DType::Int8; }

// uint8 and int8 arithmetic wraps modulo 256: computed in int64 and cast back (the cast keeps the
// low byte).
template <class F>
Tensor arith(const Tensor& a, const Tensor& b, F f) {
  if (is_byte(a.dtype()) && a.dtype() == b.dtype()) {
    return cast(f(cast(a, DType::Int64), cast(b, DType::Int64)), a.dtype());
  }
  return f(a, b);
}

void unary(const char* name, Tensor (*fn)(const Tensor&), bool floating = true) {
  register_converter(name, [fn, floating](NodeContext& c) -> Ts {
    if (floating) need_float(c, c.input(0));
    return {fn(c.input(0))};
  });
}

template <class F>
void binary(const char* name, F f) {
  register_converter(name, [f](NodeContext& c) -> Ts {
    const Tensor &a = c.input(0), &b = c.input(1);
    if (a.dtype() != b.dtype()) c.invalid(std::string("operands have different dtypes: ") + dtype_name(a.dtype()) + " and " + dtype_name(b.dtype()));
    return {f(c, a, b)};
  });
}

// Min, Max, Sum, Mean: one or more inputs, broadcast together.
template <class F>
void variadic(const char* name, F f, bool mean = false) {
  register_converter(name, [f, mean](NodeContext& c) -> Ts {
    if (c.num_inputs() == 0) c.invalid("needs at least one input");
    Tensor acc = c.input(0);
    for (size_t i = 1; i < c.num_inputs(); ++i) acc = arith(acc, c.input(i), f);
    if (c.num_inputs() == 1) acc = acc + scalar_of(0, acc);  // a fresh value, not an alias of the input
    if (mean) acc = acc / scalar_of(double(c.num_inputs()), acc);
    return {acc};
  });
}

Tensor as_bool_check(NodeContext& c, const Tensor& t) {
  if (t.dtype() != DType::Bool) c.invalid(std::string("operands must be bool, got ") + dtype_name(t.dtype()));
  return t;
}

Tensor true_like(const Tensor& t) { return scalar_tensor(1, DType::Bool); }
Tensor false_like(const Tensor& t) { return scalar_tensor(0, DType::Bool); }

Tensor clip_bound(NodeContext& c, size_t input, const Tensor& x, Tensor (*f)(const Tensor&, const Tensor&)) {
  if (!c.has_input(input)) return x;
  const Tensor& b = c.input(input);
  if (b.numel() != 1) c.invalid("min and max must be scalars");
  return f(x, cast(b.reshape({}), x.dtype()));
}

// x ** y with ONNX's type rules: the result has x's dtype; integers go through float64 (exact
// while results stay below 2^53).
Tensor onnx_pow(const Tensor& x, const Tensor& y) {
  if (dtype_is_floating(x.dtype())) return pow(x, cast(y, x.dtype()));
  return cast(pow(cast(x, DType::Float64), cast(y, DType::Float64)), x.dtype());
}

// Integer Mod: the remainder takes the divisor's sign (fmod=0) or the dividend's (fmod=1).
Tensor int_mod(const Tensor& a, const Tensor& b, bool fmod) {
  Tensor r = a - (a / b) * b;  // C remainder: the dividend's sign
  if (fmod) return r;
  Tensor zero = scalar_of(0, r);
  Tensor wrong_sign = ne(lt(r, zero), lt(b, zero));
  Tensor adjust = where(eq(r, zero), zero.expand(r.shape()), where(wrong_sign, b.expand(r.shape()), zero.expand(r.shape())));
  return r + adjust;
}

}  // namespace

void register_elementwise_converters() {
  unary("Exp", exp);
  unary("Log", log);
  unary("Sqrt", sqrt);
  unary("Erf", erf);
  unary("Sigmoid", sigmoid);
  unary("Tanh", tanh);
  unary("Relu", relu, false);
  unary("Neg", neg, false);
  unary("Abs", abs, false);
  unary("Sign", sign, false);
  unary("Floor", floor);
  unary("Ceil", ceil);
  unary("Round", round);
  unary("Sin", sin);
  unary("Cos", cos);
  unary("Tan", tan);
  unary("Asin", asin);
  unary("Acos", acos);
  unary("Atan", atan);
  unary("Sinh", sinh);
  unary("Cosh", cosh);
  unary("Asinh", asinh);
  unary("Acosh", acosh);
  unary("Atanh", atanh);
  register_converter("Reciprocal", [](NodeContext& c) -> Ts {
    need_float(c, c.input(0));
    return {scalar_of(1, c.input(0)) / c.input(0)};
  });
  register_converter("LeakyRelu", [](NodeContext& c) -> Ts {
    need_float(c, c.input(0));
    return {leaky_relu(c.input(0), c.attr_float("alpha", 0.01))};
  });
  register_converter("Elu", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    need_float(c, x);
    const double alpha = c.attr_float("alpha", 1.0);
    Tensor zero = scalar_of(0, x);
    return {where(gt(x, zero), x, (exp(x) - 1.0) * alpha)};
  });
  register_converter("Celu", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    need_float(c, x);
    const double alpha = c.attr_float("alpha", 1.0);
    Tensor zero = scalar_of(0, x);
    return {maximum(x, zero) + minimum(zero, (exp(x / alpha) - 1.0) * alpha)};
  });
  register_converter("Selu", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    need_float(c, x);
    const double alpha = c.attr_float("alpha", 1.67326319217681884765625);
    const double gamma = c.attr_float("gamma", 1.05070102214813232421875);
    Tensor zero = scalar_of(0, x);
    return {where(gt(x, zero), x * gamma, (exp(x) * alpha - alpha) * gamma)};
  });
  register_converter("HardSigmoid", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    need_float(c, x);
    const double alpha = c.attr_float("alpha", 0.2), beta = c.attr_float("beta", 0.5);
    return {clamp(x * alpha + beta, 0.0, 1.0)};
  });
  register_converter("HardSwish", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    need_float(c, x);
    return {x * clamp(x * (1.0 / 6.0) + 0.5, 0.0, 1.0)};
  });
  register_converter("Softplus", [](NodeContext& c) -> Ts {
    need_float(c, c.input(0));
    // log(1 + e^x); smelt's threshold form returns x past 20, within 2e-9 of it.
    return {softplus(c.input(0), 1.0, 20.0)};
  });
  register_converter("Softsign", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    need_float(c, x);
    return {x / (abs(x) + 1.0)};
  });
  register_converter("Mish", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    need_float(c, x);
    return {x * tanh(softplus(x, 1.0, 20.0))};
  });
  register_converter("ThresholdedRelu", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    need_float(c, x);
    const double alpha = c.attr_float("alpha", 1.0);
    return {where(gt(x, scalar_of(alpha, x)), x, scalar_of(0, x).expand(x.shape()))};
  });
  register_converter("Shrink", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    need_float(c, x);
    const double lambd = c.attr_float("lambd", 0.5), bias = c.attr_float("bias", 0.0);
    Tensor zero = scalar_of(0, x).expand(x.shape());
    return {where(lt(x, scalar_of(-lambd, x)), x + bias, where(gt(x, scalar_of(lambd, x)), x - bias, zero))};
  });
  register_converter("PRelu", [](NodeContext& c) -> Ts {
    const Tensor &x = c.input(0), &slope = c.input(1);
    need_float(c, x);
    return {where(lt(x, scalar_of(0, x)), x * slope, x)};
  });
  register_converter("Clip", [](NodeContext& c) -> Ts {
    const Tensor& x0 = c.input(0);
    // bytes are clipped in int64 (smelt's max/min take no bytes); the bounds are bytes of the
    // same dtype, so the result casts back exactly
    const Tensor x = is_byte(x0.dtype()) ? cast(x0, DType::Int64) : x0;
    Tensor y;
    if (c.opset() < 11) {
      const double lo = c.attr_float("min", -std::numeric_limits<float>::max());
      const double hi = c.attr_float("max", std::numeric_limits<float>::max());
      y = clamp(x, lo, hi);
    } else {
      y = clip_bound(c, 1, x, maximum);
      y = clip_bound(c, 2, y, minimum);
      if (y.same(x)) y = x + scalar_of(0, x);
    }
    return {y.dtype() == x0.dtype() ? y : cast(y, x0.dtype())};
  });
  register_converter("IsNaN", [](NodeContext& c) -> Ts {
    need_float(c, c.input(0));
    return {ne(c.input(0), c.input(0))};
  });
  register_converter("IsInf", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    need_float(c, x);
    const bool pos = c.attr_int("detect_positive", 1) != 0, neg_ = c.attr_int("detect_negative", 1) != 0;
    const double inf = std::numeric_limits<double>::infinity();
    Tensor hits = scalar_tensor(0, DType::Bool).expand(x.shape());
    if (pos) hits = where(eq(x, scalar_of(inf, x)), true_like(x), hits);
    if (neg_) hits = where(eq(x, scalar_of(-inf, x)), true_like(x), hits);
    return {hits.contiguous()};
  });

  binary("Add", [](NodeContext&, const Tensor& a, const Tensor& b) { return arith(a, b, [](auto x, auto y) { return add(x, y); }); });
  binary("Sub", [](NodeContext&, const Tensor& a, const Tensor& b) { return arith(a, b, [](auto x, auto y) { return sub(x, y); }); });
  binary("Mul", [](NodeContext&, const Tensor& a, const Tensor& b) { return arith(a, b, [](auto x, auto y) { return mul(x, y); }); });
  binary("Div", [](NodeContext&, const Tensor& a, const Tensor& b) { return arith(a, b, [](auto x, auto y) { return div(x, y); }); });
  register_converter("Pow", [](NodeContext& c) -> Ts { return {onnx_pow(c.input(0), c.input(1))}; });
  binary("Mod", [](NodeContext& c, const Tensor& a, const Tensor& b) {
    const bool fmod = c.attr_int("fmod", 0) != 0;
    if (dtype_is_floating(a.dtype())) {
      if (!fmod) c.invalid("Mod of floating-point operands needs fmod=1");
      // fmod(a, b) = a - trunc(a / b) b: exact while the quotient is well below 2^24 (float32).
      Tensor q = a / b;
      Tensor trunc = where(lt(q, scalar_of(0, q)), ceil(q), floor(q));
      return a - trunc * b;
    }
    return arith(a, b, [fmod](auto x, auto y) { return int_mod(x, y, fmod); });
  });
  variadic("Max", [](auto x, auto y) { return maximum(x, y); });
  variadic("Min", [](auto x, auto y) { return minimum(x, y); });
  variadic("Sum", [](auto x, auto y) { return add(x, y); });
  variadic("Mean", [](auto x, auto y) { return add(x, y); }, true);

  binary("Equal", [](NodeContext&, const Tensor& a, const Tensor& b) { return eq(a, b); });
  binary("Less", [](NodeContext&, const Tensor& a, const Tensor& b) { return lt(a, b); });
  binary("LessOrEqual", [](NodeContext&, const Tensor& a, const Tensor& b) { return le(a, b); });
  binary("Greater", [](NodeContext&, const Tensor& a, const Tensor& b) { return gt(a, b); });
  binary("GreaterOrEqual", [](NodeContext&, const Tensor& a, const Tensor& b) { return ge(a, b); });
  binary("And", [](NodeContext& c, const Tensor& a, const Tensor& b) {
    return where(as_bool_check(c, a), b, false_like(a));
  });
  binary("Or", [](NodeContext& c, const Tensor& a, const Tensor& b) {
    return where(as_bool_check(c, a), true_like(a), b);
  });
  binary("Xor", [](NodeContext& c, const Tensor& a, const Tensor& b) { return ne(as_bool_check(c, a), b); });
  register_converter("Not", [](NodeContext& c) -> Ts { return {eq(as_bool_check(c, c.input(0)), false_like(c.input(0)))}; });
  register_converter("Where", [](NodeContext& c) -> Ts {
    if (c.input(0).dtype() != DType::Bool) c.invalid("the condition must be bool");
    return {where(c.input(0), c.input(1), c.input(2))};
  });
}

}  // namespace smelt::onnx_import
