// conv2d and its two gradient ops. All three are bilinear, so each one's gradient is written with
// the other two (and itself), which gives gradients of any order:
//
//   y  = conv2d(x, w)                 dx = conv2d_grad_input(dy, w)   dw = conv2d_grad_weight(x, dy)
//   dx = conv2d_grad_input(dy, w)     d dy = conv2d(G, w)             d w = conv2d_grad_weight(G, dy)
//   dw = conv2d_grad_weight(x, dy)    d x = conv2d_grad_input(dy, G)  d dy = conv2d(x, G)
//
// (G: the gradient arriving at the op's output.) Attributes: stride, padding, dilation (2 ints
// each), groups; the gradient ops also carry input_shape / weight_shape, since several input
// sizes give the same output size when the stride does not divide evenly.
#include <algorithm>

#include "kernels/conv.h"
#include "kernels/reduce.h"
#include "ops/contraction_tiles.h"
#include "ops/conv_geometry.h"
#include "ops/op_util.h"

namespace smelt::ops {
namespace {

using kernels::Conv2dGeometry;

// Checks x (N, C, H, W) and w (O, C / groups, kH, kW) against the attributes and derives the
// output size.
Conv2dGeometry geometry(const Shape& x, const Shape& w, const Attrs& attrs, const char* op) {
  SMELT_CHECK(x.size() == 4) << op << ": input must be 4-D (N, C, H, W), got " << shape_str(x);
  SMELT_CHECK(w.size() == 4) << op << ": weight must be 4-D (O, C/groups, kH, kW), got "
                             << shape_str(w);
  const auto stride = pair_attr(attrs, "stride", op, 1);
  const auto padding = pair_attr(attrs, "padding", op, 0);
  const auto dilation = pair_attr(attrs, "dilation", op, 1);
  const int64_t groups = attrs.get_int("groups");
  SMELT_CHECK(groups >= 1) << op << ": groups must be >= 1, got " << groups;
  Conv2dGeometry g;
  g.N = x[0], g.C = x[1], g.H = x[2], g.W = x[3];
  g.O = w[0], g.kH = w[2], g.kW = w[3];
  g.stride_h = stride[0], g.stride_w = stride[1], g.pad_h = padding[0], g.pad_w = padding[1];
  g.dil_h = dilation[0], g.dil_w = dilation[1], g.groups = groups;
  SMELT_CHECK(g.C % groups == 0 && g.O % groups == 0)
      << op << ": groups = " << groups << " must divide both the input channels (" << g.C
      << ") and the output channels (" << g.O << ")";
  SMELT_CHECK(w[1] == g.C / groups)
      << op << ": weight " << shape_str(w) << " expects " << w[1] * groups
      << " input channels (dim 1 = C / groups), but the input " << shape_str(x) << " has " << g.C;
  SMELT_CHECK(g.kH >= 1 && g.kW >= 1) << op << ": kernel size must be >= 1, got " << shape_str(w);
  // Bounded so that the output-size arithmetic cannot overflow.
  SMELT_CHECK(std::max({g.H, g.W, g.kH, g.kW}) < (int64_t(1) << 31))
      << op << ": spatial sizes must be below 2^31, got input " << shape_str(x) << " and weight " << shape_str(w);
  g.Ho = kernels::conv_output_size(g.H, g.kH, g.stride_h, g.pad_h, g.dil_h);
  g.Wo = kernels::conv_output_size(g.W, g.kW, g.stride_w, g.pad_w, g.dil_w);
  SMELT_CHECK(g.Ho >= 1 && g.Wo >= 1)
      << op << ": the dilated kernel (" << g.dil_h * (g.kH - 1) + 1 << ", "
      << g.dil_w * (g.kW - 1) + 1 << ") is larger than the padded input (" << g.H + 2 * g.pad_h
      << ", " << g.W + 2 * g.pad_w << ")";
  return g;
}

Shape output_shape(const Conv2dGeometry& g) { return {g.N, g.O, g.Ho, g.Wo}; }

void check_operands(const TensorMeta& a, const TensorMeta& b, const char* op) {
  check_floating(a, op);
  check_same_dtype(a, b, op);
}

void check_grad_output(const TensorMeta& dy, const Conv2dGeometry& g, const char* op) {
  SMELT_CHECK(dy.shape == output_shape(g))
      << op << ": output gradient " << shape_str(dy.shape) << " does not match the convolution's "
      << "output " << shape_str(output_shape(g));
}

Attrs conv_attrs(const Attrs& a) {
  return {{"stride", a.get_ints("stride")}, {"padding", a.get_ints("padding")},
          {"dilation", a.get_ints("dilation")}, {"groups", a.get_int("groups")}};
}
Attrs with_shape(const Attrs& a, const char* name, const Shape& shape) {
  Attrs out = conv_attrs(a);
  out.set(name, shape);
  return out;
}

// A compiled plan marks a conv step whose weight is one of its constants ("weight_constant",
// runtime/plan_build.cpp); the promise covers w itself only, not a contiguous copy of it.
bool weight_constant(const Attrs& attrs, const Tensor& w) {
  return attrs.get_int("weight_constant", 0) != 0 && w.is_contiguous();
}

// ---- conv2d (x, w)
std::vector<TensorMeta> conv2d_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  check_operands(in[0], in[1], "conv2d");
  return {{output_shape(geometry(in[0].shape, in[1].shape, attrs, "conv2d")), in[0].dtype}};
}
void conv2d_kernel(const std::vector<Tensor>& in, const Attrs& attrs,
                   const std::vector<Tensor>& out) {
  const Tensor& y = out[0];
  kernels::conv2d_forward(geometry(in[0].shape(), in[1].shape(), attrs, "conv2d"), y,
                          dense(in[0]), dense(in[1]), nullptr, weight_constant(attrs, in[1]));
}
std::vector<Tensor> conv2d_grad(const GradContext& c) {
  const Tensor &x = c.inputs[0], &w = c.inputs[1], &g = c.grads[0];
  Tensor dx, dw;
  if (c.needs(0)) dx = call1(OpId::conv2d_grad_input, {g, w}, with_shape(c.attrs, "input_shape", x.shape()));
  if (c.needs(1)) dw = call1(OpId::conv2d_grad_weight, {x, g}, with_shape(c.attrs, "weight_shape", w.shape()));
  return {dx, dw};
}

// ---- conv2d_grad_input (dy, w) -> dx of input_shape
std::vector<TensorMeta> grad_input_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const char* op = "conv2d_grad_input";
  check_operands(in[0], in[1], op);
  const Shape& x_shape = get_shape_attr(attrs, op, "input_shape");
  check_grad_output(in[0], geometry(x_shape, in[1].shape, attrs, op), op);
  return {{x_shape, in[0].dtype}};
}
void grad_input_kernel(const std::vector<Tensor>& in, const Attrs& attrs,
                       const std::vector<Tensor>& out) {
  const Tensor& dx = out[0];
  const Conv2dGeometry g = geometry(dx.shape(), in[1].shape(), attrs, "conv2d_grad_input");
  kernels::conv2d_backward_input(g, dx, dense(in[0]), dense(in[1]));
}
std::vector<Tensor> grad_input_grad(const GradContext& c) {
  const Tensor &dy = c.inputs[0], &w = c.inputs[1], &g = c.grads[0];
  Tensor d_dy, d_w;
  if (c.needs(0)) d_dy = call1(OpId::conv2d, {g, w}, conv_attrs(c.attrs));
  if (c.needs(1)) d_w = call1(OpId::conv2d_grad_weight, {g, dy}, with_shape(c.attrs, "weight_shape", w.shape()));
  return {d_dy, d_w};
}

// ---- conv2d_grad_weight (x, dy) -> dw of weight_shape
std::vector<TensorMeta> grad_weight_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const char* op = "conv2d_grad_weight";
  check_operands(in[0], in[1], op);
  const Shape& w_shape = get_shape_attr(attrs, op, "weight_shape");
  check_grad_output(in[1], geometry(in[0].shape, w_shape, attrs, op), op);
  return {{w_shape, in[0].dtype}};
}
void grad_weight_kernel(const std::vector<Tensor>& in, const Attrs& attrs,
                        const std::vector<Tensor>& out) {
  const Tensor& dw = out[0];
  const Conv2dGeometry g = geometry(in[0].shape(), dw.shape(), attrs, "conv2d_grad_weight");
  kernels::conv2d_backward_weight(g, dw, dense(in[0]), dense(in[1]));
}
std::vector<Tensor> grad_weight_grad(const GradContext& c) {
  const Tensor &x = c.inputs[0], &dy = c.inputs[1], &g = c.grads[0];
  Tensor d_x, d_dy;
  if (c.needs(0)) d_x = call1(OpId::conv2d_grad_input, {dy, g}, with_shape(c.attrs, "input_shape", x.shape()));
  if (c.needs(1)) d_dy = call1(OpId::conv2d, {x, g}, conv_attrs(c.attrs));
  return {d_x, d_dy};
}

}  // namespace

kernels::Conv2dGeometry conv2d_geometry(const Shape& x, const Shape& w, const Attrs& attrs) {
  return geometry(x, w, attrs, "conv2d");
}

void conv2d_with_epilogue(const Tensor& y, const Tensor& x, const Tensor& w, const Attrs& attrs,
                          const kernels::GemmEpilogue& epilogue) {
  SMELT_INTERNAL_CHECK(y.is_contiguous()) << "conv2d_with_epilogue: a strided output";
  kernels::conv2d_forward(geometry(x.shape(), w.shape(), attrs, "conv2d"), y, dense(x), dense(w), &epilogue,
                          weight_constant(attrs, w));
}

SMELT_OP_IMPL(conv2d) = {conv2d_shape, conv2d_kernel, conv2d_grad, kSaveInputs};
SMELT_OP_IMPL(conv2d_grad_input) = {grad_input_shape, grad_input_kernel, grad_input_grad, kSaveInputs};
SMELT_OP_IMPL(conv2d_grad_weight) = {grad_weight_shape, grad_weight_kernel, grad_weight_grad, kSaveInputs};

}  // namespace smelt::ops

namespace smelt {

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, IntOr2 stride, IntOr2 padding,
              IntOr2 dilation, int64_t groups) {
  Tensor y = ops::call1(ops::OpId::conv2d, {x, w},
                        {{"stride", stride.pair()}, {"padding", padding.pair()},
                         {"dilation", dilation.pair()}, {"groups", groups}});
  if (!bias.defined()) return y;
  SMELT_CHECK(bias.dim() == 1 && bias.size(0) == w.size(0))
      << "conv2d: bias must be (O) = (" << w.size(0) << "), got " << shape_str(bias.shape());
  return y + bias.reshape({1, w.size(0), 1, 1});
}

}  // namespace smelt
