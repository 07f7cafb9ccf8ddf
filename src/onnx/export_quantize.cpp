// Export of the quantized ops (docs/quantization.md) as ONNX's own: QuantizeLinear,
// DequantizeLinear, QLinearMatMul, MatMulInteger, QLinearConv and ConvInteger (smelt's
// semantics are theirs, so every node maps one to one; a QDQ model round-trips).
#include "onnx/export_builder.h"

namespace smelt::onnx_export {
namespace {

// Per-tensor parameters are 0-dim or (1) in smelt; ONNX's axis is read only for 1-D ones of
// more than one element, and must be in range: a per-tensor node gets none.
void quant_axis(::onnx::NodeProto* n, const NodeExport& e) {
  if (shape_numel(e.in_meta(1).shape) != 1) set_attr(n, "axis", e.attrs().get_int("axis", 1));
}

void qconv_attrs(::onnx::NodeProto* n, const ops::Attrs& a, const Shape& w) {
  set_attr(n, "kernel_shape", std::vector<int64_t>{w[2], w[3]});
  set_attr(n, "strides", a.get_ints("stride"));
  set_attr(n, "pads", a.get_ints("padding"));  // (top, left, bottom, right): ONNX's order
  set_attr(n, "dilations", a.get_ints("dilation"));
  set_attr(n, "group", a.get_int("groups"));
}

}  // namespace

void export_quantize(NodeExport& e) {
  Builder& b = e.b;
  switch (e.node.op) {
    case ops::OpId::quantize_linear:
      quant_axis(b.node("QuantizeLinear", e.in, {e.out[0]}), e);
      return;
    case ops::OpId::dequantize_linear:
      quant_axis(b.node("DequantizeLinear", e.in, {e.out[0]}), e);
      return;
    case ops::OpId::qlinear_matmul:
      b.node("QLinearMatMul", e.in, {e.out[0]});
      return;
    case ops::OpId::matmul_integer:
      b.node("MatMulInteger", e.in, {e.out[0]});
      return;
    case ops::OpId::qlinear_conv2d: {
      std::vector<std::string> in = e.in;
      if (shape_numel(e.in_meta(8).shape) == 0) in.pop_back();  // no bias
      qconv_attrs(b.node("QLinearConv", in, {e.out[0]}), e.attrs(), e.in_meta(3).shape);
      return;
    }
    case ops::OpId::conv2d_integer:
      qconv_attrs(b.node("ConvInteger", e.in, {e.out[0]}), e.attrs(), e.in_meta(1).shape);
      return;
    default:
      e.fail("internal: not a quantized op");
  }
}

}  // namespace smelt::onnx_export
