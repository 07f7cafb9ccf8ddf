// Export of the quantized ops (docs/quantization.md) as ONNX's own: QuantizeLinear,
// DequantizeLinear, QLinearMatMul, MatMulInteger, QLinearConv and ConvInteger (smelt's
// semantics are theirs, so every node maps one to one; a QDQ model round-trips). The integer
// products go out in the QDQ form instead where asked (ExportOptions::quantized_as_qdq), and a
// qlinear_matmul with a bias always (QLinearMatMul has none).
#include "onnx/export_builder.h"
#include "smelt/creation.h"

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

// DequantizeLinear of the operand whose values, scale and zero point are inputs i, i + 1, i + 2;
// along `axis` when its scale has more than one element.
std::string dequantized(NodeExport& e, size_t i, int64_t axis) {
  ::onnx::NodeProto* n = e.b.node("DequantizeLinear", {e.in[i], e.in[i + 1], e.in[i + 2]});
  if (shape_numel(e.in_meta(i + 1).shape) != 1) set_attr(n, "axis", axis);
  return n->output(0);
}

// The int32 bias dequantized: its scale is x_scale * w_scale (per output channel), in float32 as
// quantizers compute it, from the constant scales.
std::string dequantized_bias(NodeExport& e, size_t x_scale, size_t w_scale) {
  const ir::Value* sx = e.node.inputs[x_scale];
  const ir::Value* sw = e.node.inputs[w_scale];
  if (sx->kind != ir::ValueKind::Constant || sw->kind != ir::ValueKind::Constant || shape_numel(sx->meta.shape) != 1) {
    e.fail("a bias in the QDQ form needs constant scales, the input's per tensor");
  }
  const float s = float(sx->constant.to_vector()[0]);
  std::vector<float> scale;
  for (double w : sw->constant.to_vector()) scale.push_back(s * float(w));
  const std::string scale_name = scale.size() == 1 ? e.b.scalar(scale[0], DType::Float32, "bias_scale")
                                                   : e.b.tensor(from_vector(scale, {int64_t(scale.size())}), "bias_scale");
  ::onnx::NodeProto* n = e.b.node("DequantizeLinear", {e.in[8], scale_name});
  if (scale.size() != 1) set_attr(n, "axis", int64_t(0));
  return n->output(0);
}

// qlinear_conv2d / qlinear_matmul as DequantizeLinear (input, weight, bias) -> Conv / MatMul (+ Add)
// -> QuantizeLinear.
void export_qdq_product(NodeExport& e) {
  const bool conv = e.node.op == ops::OpId::qlinear_conv2d;
  const bool bias = shape_numel(e.in_meta(8).shape) != 0;
  const int64_t a_rank = int64_t(e.in_meta(0).shape.size()), b_rank = int64_t(e.in_meta(3).shape.size());
  // a's parameters per row (the rows of its last two dims), b's per column; a conv's weight per
  // output channel
  const std::string x = dequantized(e, 0, conv ? 1 : a_rank - 2);
  const std::string w = dequantized(e, 3, conv ? 0 : b_rank - 1);
  std::string y;
  if (conv) {
    std::vector<std::string> in = {x, w};
    if (bias) in.push_back(dequantized_bias(e, 1, 4));
    ::onnx::NodeProto* c = e.b.node("Conv", in);
    qconv_attrs(c, e.attrs(), e.in_meta(3).shape);
    y = c->output(0);
  } else {
    y = e.b.op("MatMul", {x, w});
    if (bias) y = e.b.op("Add", {y, dequantized_bias(e, 1, 4)});
  }
  e.b.node("QuantizeLinear", {y, e.in[6], e.in[7]}, {e.out[0]});
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
    case ops::OpId::qlinear_matmul: {
      if (b.qdq() || shape_numel(e.in_meta(8).shape) != 0) return export_qdq_product(e);
      std::vector<std::string> in = e.in;
      in.pop_back();  // the empty bias
      b.node("QLinearMatMul", in, {e.out[0]});
      return;
    }
    case ops::OpId::matmul_integer:
      b.node("MatMulInteger", e.in, {e.out[0]});
      return;
    case ops::OpId::qlinear_conv2d: {
      if (b.qdq()) return export_qdq_product(e);
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
