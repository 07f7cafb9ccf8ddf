// The blocked channel layout (kernels/conv_blocked.h) as ops, for compiled plans: the
// blocked_layout pass (passes/blocked_layout.h) puts convolutions into it and converts at the
// edges of the region. Internal rows: no Tensor methods, no Python bindings.
//
//   to_blocked(x (N, C, H, W); block B)        -> (N, ceil(C / B), H, W, B), zeros in the padding
//   from_blocked(x (N, Cb, H, W, B); channels C) -> (N, C, H, W)
//   conv2d_blocked(x (N, Cb, H, W, B), w (O, C / groups, kH, kW); channels C, conv2d's attributes)
//                                               -> (N, ceil(O / B), Ho, Wo, B), zeros in the padding
//   conv2d_blocked(x (N, C, H, W), w; block B, conv2d's attributes): the same from a plain input
//                                               (a stem: its few channels are not padded)
//   max_pool2d_blocked(x (N, Cb, H, W, B); max_pool2d's attributes) -> (N, Cb, Ho, Wo, B), the
//                                               values of max_pool2d (its indices unused)
//
// The conversions are each other's gradient (the padding carries no gradient). conv2d_blocked has
// and max_pool2d_blocked have no gradient rule: they exist in inference plans only.
#include "kernels/conv_blocked.h"
#include "ops/conv_geometry.h"
#include "ops/op_util.h"

namespace smelt::ops {
namespace {

using kernels::blocks_of;

void check_blocked(const TensorMeta& x, const char* op) {
  check_floating(x, op);
  SMELT_CHECK(x.shape.size() == 5 && x.shape[4] >= 1)
      << op << ": input must be blocked 5-D (N, C/B, H, W, B), got " << shape_str(x.shape);
}

// The real channel count of a blocked value: 1 .. Cb * B, and in the last block.
int64_t channels_of(const Shape& blocked, const Attrs& attrs, const char* op) {
  const int64_t c = attrs.get_int("channels");
  SMELT_CHECK(c >= 1 && blocks_of(c, blocked[4]) == blocked[1])
      << op << ": channels = " << c << " do not fit the blocked input " << shape_str(blocked) << " (valid: "
      << (blocked[1] - 1) * blocked[4] + 1 << " .. " << blocked[1] * blocked[4] << ")";
  return c;
}

Shape plain_shape(const Shape& blocked, int64_t channels) { return {blocked[0], channels, blocked[2], blocked[3]}; }

Attrs conv_attrs_of(const Attrs& a) {
  return {{"stride", a.get_ints("stride")}, {"padding", a.get_ints("padding")},
          {"dilation", a.get_ints("dilation")}, {"groups", a.get_int("groups")}};
}

// ---- to_blocked (x) block
std::vector<TensorMeta> to_blocked_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const char* op = "to_blocked";
  check_floating(in[0], op);
  SMELT_CHECK(in[0].shape.size() == 4) << op << ": input must be 4-D (N, C, H, W), got " << shape_str(in[0].shape);
  const int64_t b = get_int_in(attrs, op, "block", 1, 1024);
  const Shape& s = in[0].shape;
  return {{{s[0], blocks_of(s[1], b), s[2], s[3], b}, in[0].dtype}};
}
void to_blocked_kernel(const std::vector<Tensor>& in, const Attrs&, const std::vector<Tensor>& out) {
  kernels::to_blocked_forward(out[0], in[0].contiguous());
}
std::vector<Tensor> to_blocked_grad(const GradContext& c) {
  return {call1(OpId::from_blocked, {c.grads[0]}, {{"channels", c.inputs[0].shape()[1]}})};
}

// ---- from_blocked (x) channels
std::vector<TensorMeta> from_blocked_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  check_blocked(in[0], "from_blocked");
  return {{plain_shape(in[0].shape, channels_of(in[0].shape, attrs, "from_blocked")), in[0].dtype}};
}
void from_blocked_kernel(const std::vector<Tensor>& in, const Attrs&, const std::vector<Tensor>& out) {
  kernels::from_blocked_forward(out[0], in[0].contiguous());
}
std::vector<Tensor> from_blocked_grad(const GradContext& c) {
  return {call1(OpId::to_blocked, {c.grads[0]}, {{"block", c.inputs[0].shape()[4]}})};
}

// ---- conv2d_blocked (x, w)
kernels::Conv2dGeometry blocked_geometry(const Shape& x, const Shape& w, const Attrs& attrs) {
  if (x.size() == 4) return conv2d_geometry(x, w, conv_attrs_of(attrs));
  return conv2d_geometry(plain_shape(x, channels_of(x, attrs, "conv2d_blocked")), w, conv_attrs_of(attrs));
}
std::vector<TensorMeta> conv2d_blocked_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const bool plain_input = in[0].shape.size() == 4;
  if (!plain_input) check_blocked(in[0], "conv2d_blocked");
  check_floating(in[0], "conv2d_blocked");
  check_floating(in[1], "conv2d_blocked", "weight");
  SMELT_CHECK(in[0].dtype == in[1].dtype) << "conv2d_blocked: input " << dtype_name(in[0].dtype) << " and weight "
                                          << dtype_name(in[1].dtype) << " differ";
  const kernels::Conv2dGeometry g = blocked_geometry(in[0].shape, in[1].shape, attrs);
  const int64_t b = plain_input ? get_int_in(attrs, "conv2d_blocked", "block", 1, 1024) : in[0].shape[4];
  return {{{g.N, blocks_of(g.O, b), g.Ho, g.Wo, b}, in[0].dtype}};
}
void conv2d_blocked_kernel(const std::vector<Tensor>& in, const Attrs& attrs, const std::vector<Tensor>& out) {
  const bool weight_constant = attrs.get_int("weight_constant", 0) != 0 && in[1].is_contiguous();
  kernels::conv2d_blocked_forward(blocked_geometry(in[0].shape(), in[1].shape(), attrs), out[0], in[0].contiguous(),
                                  in[1].contiguous(), nullptr, weight_constant);
}

// ---- max_pool2d_blocked (x)
std::vector<TensorMeta> max_pool2d_blocked_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  check_blocked(in[0], "max_pool2d_blocked");
  const Shape& x = in[0].shape;
  // max_pool2d's own rule on one plane per lane checks the window and sizes the output.
  const Shape plain = op_impl(OpId::max_pool2d).shape({{{x[0], x[1] * x[4], x[2], x[3]}, in[0].dtype}}, attrs)[0].shape;
  return {{{x[0], x[1], plain[2], plain[3], x[4]}, in[0].dtype}};
}
void max_pool2d_blocked_kernel(const std::vector<Tensor>& in, const Attrs& attrs, const std::vector<Tensor>& out) {
  const auto kernel = pair_attr(attrs, "kernel", "max_pool2d_blocked", 1);
  const auto stride = pair_attr(attrs, "stride", "max_pool2d_blocked", 1);
  const auto padding = pair_attr(attrs, "padding", "max_pool2d_blocked", 0);
  const auto dilation = attrs.has("dilation") ? pair_attr(attrs, "dilation", "max_pool2d_blocked", 1)
                                              : std::vector<int64_t>{1, 1};
  const kernels::Pool2dWindow win{kernel[0], kernel[1], stride[0], stride[1], padding[0], padding[1],
                                  dilation[0], dilation[1]};
  kernels::max_pool2d_blocked_forward(win, out[0], in[0].contiguous());
}

}  // namespace

void conv2d_blocked_with_epilogue(const Tensor& y, const Tensor& x, const Tensor& w, const Attrs& attrs,
                                  const kernels::GemmEpilogue& epilogue) {
  SMELT_INTERNAL_CHECK(y.is_contiguous()) << "conv2d_blocked_with_epilogue: a strided output";
  const bool weight_constant = attrs.get_int("weight_constant", 0) != 0 && w.is_contiguous();
  kernels::conv2d_blocked_forward(blocked_geometry(x.shape(), w.shape(), attrs), y, x.contiguous(), w.contiguous(),
                                  &epilogue, weight_constant);
}

SMELT_OP_IMPL(to_blocked) = {to_blocked_shape, to_blocked_kernel, to_blocked_grad, kSaveInputs};
SMELT_OP_IMPL(from_blocked) = {from_blocked_shape, from_blocked_kernel, from_blocked_grad, kSaveInputs};
SMELT_OP_IMPL(conv2d_blocked) = {conv2d_blocked_shape, conv2d_blocked_kernel, nullptr, kSaveNothing};
SMELT_OP_IMPL(max_pool2d_blocked) = {max_pool2d_blocked_shape, max_pool2d_blocked_kernel, nullptr, kSaveNothing};

}  // namespace smelt::ops
