// Elementwise ops -> ONNX. Most are one ONNX op of the same name and meaning; the rest are small
// fixed patterns: gelu (ONNX has none before opset 20), silu, rsqrt, ne, and softplus with its
// beta and threshold.
#include <cmath>

#include "onnx/export_builder.h"

namespace smelt::onnx_export {
namespace {

using ops::OpId;

// Ops that are one ONNX op with the same inputs and no attributes.
const char* direct_name(OpId op) {
  switch (op) {
    case OpId::neg: return "Neg";
    case OpId::exp: return "Exp";
    case OpId::log: return "Log";
    case OpId::sqrt: return "Sqrt";
    case OpId::abs: return "Abs";
    case OpId::sign: return "Sign";
    case OpId::erf: return "Erf";
    case OpId::relu: return "Relu";
    case OpId::sigmoid: return "Sigmoid";
    case OpId::tanh: return "Tanh";
    case OpId::floor: return "Floor";
    case OpId::ceil: return "Ceil";
    case OpId::round: return "Round";  // both round half to even
    case OpId::sin: return "Sin";
    case OpId::cos: return "Cos";
    case OpId::tan: return "Tan";
    case OpId::asin: return "Asin";
    case OpId::acos: return "Acos";
    case OpId::atan: return "Atan";
    case OpId::sinh: return "Sinh";
    case OpId::cosh: return "Cosh";
    case OpId::asinh: return "Asinh";
    case OpId::acosh: return "Acosh";
    case OpId::atanh: return "Atanh";
    case OpId::add: return "Add";
    case OpId::sub: return "Sub";
    case OpId::mul: return "Mul";
    case OpId::div: return "Div";  // integer division truncates in both
    case OpId::pow: return "Pow";
    case OpId::maximum: return "Max";
    case OpId::minimum: return "Min";
    case OpId::eq: return "Equal";
    case OpId::lt: return "Less";
    case OpId::le: return "LessOrEqual";
    case OpId::gt: return "Greater";
    case OpId::ge: return "GreaterOrEqual";
    case OpId::where: return "Where";
    default: return nullptr;
  }
}

// 0.5 x (1 + erf(x / sqrt 2)), or the tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
void gelu(NodeExport& e, const std::string& x, DType t) {
  Builder& b = e.b;
  std::string inner;
  if (e.attrs().get_int("approximate") == 1) {
    std::string cube = b.op("Mul", {b.op("Mul", {x, x}), x});
    std::string u = b.op("Add", {x, b.op("Mul", {cube, b.scalar(0.044715, t, "gelu_c")})});
    inner = b.op("Tanh", {b.op("Mul", {u, b.scalar(0.7978845608028654, t, "gelu_k")})});
  } else {
    inner = b.op("Erf", {b.op("Mul", {x, b.scalar(M_SQRT1_2, t, "gelu_rsqrt2")})});
  }
  std::string half_x = b.op("Mul", {x, b.scalar(0.5, t, "half")});
  b.node("Mul", {half_x, b.op("Add", {inner, b.scalar(1.0, t, "one")})}, {e.out[0]});
}

// log(1 + exp(beta x)) / beta, x itself where beta x > threshold.
void softplus(NodeExport& e, const std::string& x, DType t) {
  Builder& b = e.b;
  const double beta = e.attrs().get_float("beta"), threshold = e.attrs().get_float("threshold");
  const std::string bx = beta == 1.0 ? x : b.op("Mul", {x, b.scalar(beta, t, "beta")});
  if (std::isinf(threshold) && threshold > 0 && beta == 1.0) {
    b.node("Softplus", {bx}, {e.out[0]});
    return;
  }
  std::string sp = b.op("Softplus", {bx});
  if (beta != 1.0) sp = b.op("Div", {sp, b.scalar(beta, t, "beta")});
  const std::string linear = b.op("Greater", {bx, b.scalar(threshold, t, "threshold")});
  b.node("Where", {linear, x, sp}, {e.out[0]});
}

}  // namespace

void export_elementwise(NodeExport& e) {
  Builder& b = e.b;
  const OpId op = e.node.op;
  const DType t = e.in_meta(0).dtype;
  if (const char* name = direct_name(op)) {
    b.node(name, e.in, {e.out[0]});
    return;
  }
  const std::string& x = e.in[0];
  switch (op) {
    case OpId::rsqrt:  // 1 / sqrt(x), as smelt computes it
      b.node("Reciprocal", {b.op("Sqrt", {x})}, {e.out[0]});
      return;
    case OpId::leaky_relu:
      set_attr(b.node("LeakyRelu", {x}, {e.out[0]}), "alpha", e.attrs().get_float("negative_slope"));
      return;
    case OpId::gelu:
      gelu(e, x, t);
      return;
    case OpId::silu:
      b.node("Mul", {x, b.op("Sigmoid", {x})}, {e.out[0]});
      return;
    case OpId::softplus:
      softplus(e, x, t);
      return;
    case OpId::clamp: {
      // Clip's bounds are optional scalar inputs of x's dtype; an absent attribute is no bound.
      const std::string lo = e.attrs().has("min") ? b.scalar(e.attrs().get_float("min"), t, "min") : "";
      const std::string hi = e.attrs().has("max") ? b.scalar(e.attrs().get_float("max"), t, "max") : "";
      b.node("Clip", {x, lo, hi}, {e.out[0]});
      return;
    }
    case OpId::cast:
      set_attr(b.node("Cast", {x}, {e.out[0]}), "to", int64_t(onnx_import::dtype_to_onnx(e.out_meta(0).dtype)));
      return;
    case OpId::ne:
      b.node("Not", {b.op("Equal", e.in)}, {e.out[0]});
      return;
    default:
      e.fail("internal: not an elementwise op");
  }
}

}  // namespace smelt::onnx_export
