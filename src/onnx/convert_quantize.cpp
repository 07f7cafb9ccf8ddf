// ONNX's quantization ops (docs/quantization.md): QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear, QLinearMatMul, MatMulInteger, QLinearConv and ConvInteger, onto smelt's
// quantized ops (smelt/quantize.h). A missing zero point is 0 of the values' dtype.
#include "onnx/node_context.h"
#include "onnx/window.h"
#include "smelt/creation.h"
#include "smelt/ops.h"
#include "smelt/quantize.h"

namespace smelt::onnx_import {
namespace {

using Ts = std::vector<Tensor>;

bool is_quantized(DType d) { return d == DType::UInt8 || d == DType::Int8; }

const Tensor& quantized_input(NodeContext& c, size_t i, const char* what) {
  const Tensor& t = c.input(i);
  if (!is_quantized(t.dtype())) c.unsupported(std::string(what) + " of dtype " + dtype_name(t.dtype()));
  return t;
}

// Input i, or a zero of `dtype` when the model leaves it out.
Tensor zero_point_or_zero(NodeContext& c, size_t i, DType dtype) {
  return c.has_input(i) ? c.input(i) : zeros({}, dtype);
}

// A matmul's operands of rank 1 made rank 2 as NumPy does; `squeeze` says which dims to drop.
struct MatmulOperands {
  Tensor a, b;
  bool a_vector = false, b_vector = false;
};
MatmulOperands as_matrices(const Tensor& a, const Tensor& b) {
  MatmulOperands m{a, b, a.dim() == 1, b.dim() == 1};
  if (m.a_vector) m.a = a.unsqueeze(0);
  if (m.b_vector) m.b = b.unsqueeze(1);
  return m;
}
Tensor drop_vector_dims(Tensor y, const MatmulOperands& m) {
  if (m.b_vector) y = y.squeeze(-1);
  if (m.a_vector) y = y.squeeze(m.b_vector ? -1 : -2);
  return y;
}

QConvOptions conv_options(NodeContext& c, const Tensor& x, const Tensor& w) {
  check_ranks(c, x, w);
  std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
  if (c.has_attr("kernel_shape")) kernel = c.attr_ints("kernel_shape");
  const Window win = read_window(c, x, kernel, false);
  QConvOptions o;
  o.stride = win.stride;
  o.dilation = win.dilation;
  o.padding = {win.pad_begin[0], win.pad_begin[1], win.pad_end[0], win.pad_end[1]};
  o.groups = c.attr_int("group", 1);
  return o;
}

Tensor dynamic_quantize(const Tensor& x, Tensor* scale_out, Tensor* zero_point_out) {
  // The range always holds 0, so that 0 is exact; an all-zero x gets scale 1 (any scale
  // represents it; ONNX's formula would divide by 0).
  const Tensor lo = minimum(amin(x, {}, false), zeros({}, x.dtype()));
  const Tensor hi = maximum(amax(x, {}, false), zeros({}, x.dtype()));
  Tensor scale = (hi - lo) / 255.0;
  scale = where(eq(scale, zeros({}, x.dtype())), ones({}, x.dtype()), scale);
  const Tensor zp = cast(clamp(round(neg(lo) / scale), 0.0, 255.0), DType::UInt8);
  *scale_out = cast(scale, DType::Float32);
  *zero_point_out = zp;
  return quantize_linear(x, *scale_out, zp, 1);
}

}  // namespace

void register_quantize_converters() {
  register_converter("QuantizeLinear", [](NodeContext& c) -> Ts {
    const Tensor zp = zero_point_or_zero(c, 2, DType::UInt8);
    if (!is_quantized(zp.dtype())) c.unsupported(std::string("a zero point of dtype ") + dtype_name(zp.dtype()));
    if (c.opset() >= 19 && c.has_attr("saturate")) c.attr_int("saturate");  // float8 only
    const Tensor& x = c.input(0);
    const int64_t axis = c.input(1).numel() == 1 ? 1 : normalize_axis(c, c.attr_int("axis", 1), x.dim());
    if (c.has_attr("axis")) c.attr_int("axis");
    return {quantize_linear(x, c.input(1), zp, axis)};
  });
  register_converter("DequantizeLinear", [](NodeContext& c) -> Ts {
    const Tensor& q = c.input(0);
    if (!is_quantized(q.dtype()) && q.dtype() != DType::Int32) {
      c.unsupported(std::string("values of dtype ") + dtype_name(q.dtype()));
    }
    const Tensor zp = zero_point_or_zero(c, 2, q.dtype());
    const int64_t axis = c.input(1).numel() == 1 ? 1 : normalize_axis(c, c.attr_int("axis", 1), q.dim());
    if (c.has_attr("axis")) c.attr_int("axis");
    return {dequantize_linear(q, c.input(1), zp, axis)};
  });
  register_converter("DynamicQuantizeLinear", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    if (x.dtype() != DType::Float32) c.unsupported(std::string("input of dtype ") + dtype_name(x.dtype()));
    Tensor scale, zp;
    Tensor y = dynamic_quantize(x, &scale, &zp);
    return {y, scale, zp};
  });
  register_converter("QLinearMatMul", [](NodeContext& c) -> Ts {
    const MatmulOperands m = as_matrices(quantized_input(c, 0, "a"), quantized_input(c, 3, "b"));
    const Tensor y = qlinear_matmul({m.a, c.input(1), c.input(2)}, {m.b, c.input(4), c.input(5)}, c.input(6),
                                   c.input(7));
    return {drop_vector_dims(y, m)};
  });
  register_converter("MatMulInteger", [](NodeContext& c) -> Ts {
    const Tensor &a = quantized_input(c, 0, "A"), &b = quantized_input(c, 1, "B");
    const MatmulOperands m = as_matrices(a, b);
    const Tensor y = matmul_integer(m.a, m.b, zero_point_or_zero(c, 2, a.dtype()), zero_point_or_zero(c, 3, b.dtype()));
    return {drop_vector_dims(y, m)};
  });
  register_converter("QLinearConv", [](NodeContext& c) -> Ts {
    const Tensor &x0 = quantized_input(c, 0, "x"), &w0 = quantized_input(c, 3, "w");
    const Tensor x = to_2d(x0), w = to_2d(w0);
    const QConvOptions o = conv_options(c, x0, w0);
    const Tensor bias = c.has_input(8) ? c.input(8) : Tensor();
    const Tensor y = qlinear_conv2d({x, c.input(1), c.input(2)}, {w, c.input(4), c.input(5)}, c.input(6),
                                    c.input(7), bias, o);
    return {from_2d(y, x0.dim())};
  });
  register_converter("ConvInteger", [](NodeContext& c) -> Ts {
    const Tensor &x0 = quantized_input(c, 0, "x"), &w0 = quantized_input(c, 1, "w");
    const QConvOptions o = conv_options(c, x0, w0);
    const Tensor y = conv2d_integer(to_2d(x0), to_2d(w0), zero_point_or_zero(c, 2, x0.dtype()),
                                    zero_point_or_zero(c, 3, w0.dtype()), o);
    return {from_2d(y, x0.dim())};
  });
}

}  // namespace smelt::onnx_import
