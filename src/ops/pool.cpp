// 2-D pooling ops on (N, C, H, W) and their gradient ops. Each gradient op is linear in the
// gradient it carries, and its own gradient is the adjoint map, so gradients of any order work:
//
//   max_pool2d(x) -> (y, indices)      dx   = max_pool2d_grad(dy, indices)    scatter-add at indices
//   max_pool2d_grad(dy, indices)       d dy = gather(G, indices) over flattened planes
//   avg_pool2d(x)                      dx   = avg_pool2d_grad(dy)      d dy = avg_pool2d(G)
//   adaptive_avg_pool2d(x)             dx   = adaptive_avg_pool2d_grad(dy)
//                                      d dy = adaptive_avg_pool2d(G)
#include "kernels/conv.h"
#include "kernels/index.h"
#include "kernels/pool.h"
#include "kernels/reduce.h"
#include "ops/op_util.h"

namespace smelt::ops {
namespace {

using kernels::Pool2dWindow;

void check_image(const TensorMeta& x, const char* op, const char* what = "input") {
  check_floating(x, op, what);
  SMELT_CHECK(x.shape.size() == 4) << op << ": " << what << " must be 4-D (N, C, H, W), got "
                                   << shape_str(x.shape);
}

// The window from attributes (dilation only when given) and the output shape for `input`.
Pool2dWindow window_of(const Attrs& attrs, const char* op) {
  const auto kernel = pair_attr(attrs, "kernel", op, 1);
  const auto stride = pair_attr(attrs, "stride", op, 1);
  const auto padding = pair_attr(attrs, "padding", op, 0);
  const auto dilation = attrs.has("dilation") ? pair_attr(attrs, "dilation", op, 1)
                                              : std::vector<int64_t>{1, 1};
  Pool2dWindow w{kernel[0], kernel[1], stride[0], stride[1], padding[0], padding[1],
                 dilation[0], dilation[1]};
  // Every window must hold at least one input pixel (as PyTorch requires).
  SMELT_CHECK(2 * w.pad_h <= w.dil_h * (w.kH - 1) + 1 && 2 * w.pad_w <= w.dil_w * (w.kW - 1) + 1)
      << op << ": padding " << shape_str(padding)
      << " must be at most half the (dilated) kernel size " << shape_str(kernel);
  return w;
}

Shape pooled_shape(const Shape& x, const Pool2dWindow& w, const char* op) {
  const int64_t ho = kernels::conv_output_size(x[2], w.kH, w.stride_h, w.pad_h, w.dil_h);
  const int64_t wo = kernels::conv_output_size(x[3], w.kW, w.stride_w, w.pad_w, w.dil_w);
  SMELT_CHECK(ho >= 1 && wo >= 1) << op << ": the window (" << w.dil_h * (w.kH - 1) + 1 << ", "
                                  << w.dil_w * (w.kW - 1) + 1 << ") is larger than the padded "
                                  << "input " << shape_str(x);
  return {x[0], x[1], ho, wo};
}

const Shape& input_shape_attr(const Attrs& attrs, const char* op) {
  const Shape& s = get_shape_attr(attrs, op, "input_shape");
  SMELT_CHECK(s.size() == 4) << op << ": input_shape must be 4-D (N, C, H, W), got "
                             << shape_str(s);
  return s;
}

void check_same_shape(const Shape& got, const Shape& want, const char* op, const char* what) {
  SMELT_CHECK(got == want) << op << ": " << what << " " << shape_str(got) << " does not match "
                           << shape_str(want);
}

Attrs without(const Attrs& attrs, const char* name) {
  Attrs out;
  for (const auto& [k, v] : attrs.items()) {
    if (k != name) out.set(k, v);
  }
  return out;
}

// ---- max_pool2d (x) -> (values, indices); kernel, stride, padding, dilation
std::vector<TensorMeta> max_pool2d_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  // Also quantized values (uint8, int8): max commutes with dequantizing (docs/quantization.md).
  const bool bytes = in[0].dtype == DType::UInt8 || in[0].dtype == DType::Int8;
  if (!bytes) check_image(in[0], "max_pool2d");
  SMELT_CHECK(in[0].shape.size() == 4) << "max_pool2d: input must be 4-D (N, C, H, W), got " << shape_str(in[0].shape);
  Shape out = pooled_shape(in[0].shape, window_of(attrs, "max_pool2d"), "max_pool2d");
  return {{out, in[0].dtype}, {out, DType::Int64}};
}
// "indices_unused" (set by mark_unused_outputs, never by users): no one reads out[1], which is
// left unwritten; the values-only kernel skips the index bookkeeping.
void max_pool2d_kernel(const std::vector<Tensor>& in, const Attrs& attrs,
                       const std::vector<Tensor>& out) {
  const bool values_only = attrs.get_int("indices_unused", 0) != 0;
  kernels::max_pool2d_forward(window_of(attrs, "max_pool2d"), out[0], values_only ? Tensor() : out[1],
                              dense(in[0]));
}
std::vector<Tensor> max_pool2d_grad_rule(const GradContext& c) {
  return {call1(OpId::max_pool2d_grad, {c.grads[0], c.outputs[1].detach()},
                {{"input_shape", c.inputs[0].shape()}})};
}

// ---- max_pool2d_grad (dy, indices) -> dx; input_shape
std::vector<TensorMeta> max_pool2d_grad_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const char* op = "max_pool2d_grad";
  check_image(in[0], op, "gradient");
  check_dtype(in[1], DType::Int64, op, "indices");
  check_same_shape(in[1].shape, in[0].shape, op, "indices");
  const Shape& x = input_shape_attr(attrs, op);
  SMELT_CHECK(x[0] == in[0].shape[0] && x[1] == in[0].shape[1])
      << op << ": gradient " << shape_str(in[0].shape) << " and input_shape " << shape_str(x)
      << " differ in N or C";
  return {{x, in[0].dtype}};
}
void max_pool2d_grad_kernel(const std::vector<Tensor>& in, const Attrs&,
                            const std::vector<Tensor>& out) {
  // Indices from a graph (a constant, not max_pool2d) may point anywhere: checked before the scatter.
  kernels::check_index_range(in[1], out[0].shape()[2] * out[0].shape()[3], "max_pool2d_grad",
                             "an (H * W) plane of input_shape");
  const Tensor& dx = out[0];
  kernels::max_pool2d_backward(dx, dense(in[0]), dense(in[1]));
}
// The adjoint of scattering dy to the argmax positions is reading G back at them: a gather over
// each flattened (H*W) plane.
std::vector<Tensor> max_pool2d_grad_grad(const GradContext& c) {
  const Tensor& g = c.grads[0];  // (N, C, H, W)
  Tensor indices = c.inputs[1].detach();  // (N, C, Ho, Wo), flat positions in each plane
  const Shape& s = indices.shape();
  Tensor picked = gather(g.reshape({s[0], s[1], -1}), 2, indices.reshape({s[0], s[1], -1}));
  return {picked.reshape(s), Tensor()};
}

// ---- avg_pool2d (x); kernel, stride, padding, count_include_pad, dilation (optional)
std::vector<TensorMeta> avg_pool2d_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  attrs.get_int("count_include_pad");
  check_image(in[0], "avg_pool2d");
  return {{pooled_shape(in[0].shape, window_of(attrs, "avg_pool2d"), "avg_pool2d"),
           in[0].dtype}};
}
void avg_pool2d_kernel(const std::vector<Tensor>& in, const Attrs& attrs,
                       const std::vector<Tensor>& out) {
  const Tensor& y = out[0];
  kernels::avg_pool2d_forward(window_of(attrs, "avg_pool2d"), attrs.get_int("count_include_pad") != 0,
                              y, dense(in[0]));
}
std::vector<Tensor> avg_pool2d_grad_rule(const GradContext& c) {
  Attrs attrs = c.attrs;
  attrs.set("input_shape", c.inputs[0].shape());
  return {call1(OpId::avg_pool2d_grad, {c.grads[0]}, attrs)};
}

// ---- avg_pool2d_grad (dy); input_shape + avg_pool2d's attributes
std::vector<TensorMeta> avg_pool2d_grad_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const char* op = "avg_pool2d_grad";
  attrs.get_int("count_include_pad");
  check_image(in[0], op, "gradient");
  const Shape& x = input_shape_attr(attrs, op);
  check_same_shape(in[0].shape, pooled_shape(x, window_of(attrs, op), op), op, "gradient");
  return {{x, in[0].dtype}};
}
void avg_pool2d_grad_kernel(const std::vector<Tensor>& in, const Attrs& attrs,
                            const std::vector<Tensor>& out) {
  const Tensor& dx = out[0];
  kernels::avg_pool2d_backward(window_of(attrs, "avg_pool2d_grad"),
                               attrs.get_int("count_include_pad") != 0, dx, dense(in[0]));
}
std::vector<Tensor> avg_pool2d_grad_grad(const GradContext& c) {
  return {call1(OpId::avg_pool2d, {c.grads[0]}, without(c.attrs, "input_shape"))};
}

// ---- adaptive_avg_pool2d (x); output_size
std::vector<TensorMeta> adaptive_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const char* op = "adaptive_avg_pool2d";
  check_image(in[0], op);
  const auto size = pair_attr(attrs, "output_size", op, 1);
  const Shape& x = in[0].shape;
  SMELT_CHECK(x[2] >= 1 && x[3] >= 1) << op << ": input " << shape_str(x) << " has an empty plane";
  return {{{x[0], x[1], size[0], size[1]}, in[0].dtype}};
}
void adaptive_kernel(const std::vector<Tensor>& in, const Attrs&, const std::vector<Tensor>& out) {
  const Tensor& y = out[0];
  kernels::adaptive_avg_pool2d_forward(y, dense(in[0]));
}
std::vector<Tensor> adaptive_grad_rule(const GradContext& c) {
  return {call1(OpId::adaptive_avg_pool2d_grad, {c.grads[0]},
                {{"input_shape", c.inputs[0].shape()}})};
}

// ---- adaptive_avg_pool2d_grad (dy); input_shape
std::vector<TensorMeta> adaptive_grad_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const char* op = "adaptive_avg_pool2d_grad";
  check_image(in[0], op, "gradient");
  const Shape& x = input_shape_attr(attrs, op);
  SMELT_CHECK(x[0] == in[0].shape[0] && x[1] == in[0].shape[1] && x[2] >= 1 && x[3] >= 1)
      << op << ": gradient " << shape_str(in[0].shape) << " does not fit input_shape "
      << shape_str(x);
  return {{x, in[0].dtype}};
}
void adaptive_grad_kernel(const std::vector<Tensor>& in, const Attrs&,
                          const std::vector<Tensor>& out) {
  const Tensor& dx = out[0];
  kernels::adaptive_avg_pool2d_backward(dx, dense(in[0]));
}
std::vector<Tensor> adaptive_grad_grad(const GradContext& c) {
  const Tensor& dy = c.inputs[0];
  return {call1(OpId::adaptive_avg_pool2d, {c.grads[0]},
                {{"output_size", std::vector<int64_t>{dy.size(2), dy.size(3)}}})};
}

}  // namespace

bool mark_unused_outputs(OpId op, const std::vector<bool>& used, Attrs* attrs) {
  if (op == OpId::max_pool2d && used.size() == 2 && !used[1]) {
    attrs->set("indices_unused", int64_t(1));
    return true;
  }
  return false;
}

SMELT_OP_IMPL(max_pool2d) = {max_pool2d_shape, max_pool2d_kernel, max_pool2d_grad_rule, kSaveOutputs};
SMELT_OP_IMPL(max_pool2d_grad) = {max_pool2d_grad_shape, max_pool2d_grad_kernel,
                                  max_pool2d_grad_grad, kSaveInputs};
SMELT_OP_IMPL(avg_pool2d) = {avg_pool2d_shape, avg_pool2d_kernel, avg_pool2d_grad_rule, kSaveNothing};
SMELT_OP_IMPL(avg_pool2d_grad) = {avg_pool2d_grad_shape, avg_pool2d_grad_kernel,
                                  avg_pool2d_grad_grad, kSaveNothing};
SMELT_OP_IMPL(adaptive_avg_pool2d) = {adaptive_shape, adaptive_kernel, adaptive_grad_rule,
                                      kSaveNothing};
SMELT_OP_IMPL(adaptive_avg_pool2d_grad) = {adaptive_grad_shape, adaptive_grad_kernel,
                                           adaptive_grad_grad, kSaveNothing};

}  // namespace smelt::ops

namespace smelt {

Tensor max_pool2d(const Tensor& x, IntOr2 kernel, IntOr2 stride, IntOr2 padding, IntOr2 dilation) {
  if (stride.empty()) stride = kernel;
  return ops::call(ops::OpId::max_pool2d, {x},
                   {{"kernel", kernel.pair()}, {"stride", stride.pair()}, {"padding", padding.pair()},
                    {"dilation", dilation.pair()}})[0];
}

Tensor avg_pool2d(const Tensor& x, IntOr2 kernel, IntOr2 stride, IntOr2 padding,
                  bool count_include_pad, IntOr2 dilation) {
  if (stride.empty()) stride = kernel;
  ops::Attrs attrs{{"kernel", kernel.pair()}, {"stride", stride.pair()}, {"padding", padding.pair()},
                   {"count_include_pad", int64_t(count_include_pad)}};
  // Undilated pools keep the attributes they always had (graphs, caches and exports see no change).
  const std::vector<int64_t> d = dilation.pair();
  if (d != std::vector<int64_t>{1, 1}) attrs.set("dilation", d);
  return ops::call1(ops::OpId::avg_pool2d, {x}, attrs);
}

Tensor adaptive_avg_pool2d(const Tensor& x, IntOr2 output_size) {
  return ops::call1(ops::OpId::adaptive_avg_pool2d, {x}, {{"output_size", output_size.pair()}});
}

}  // namespace smelt
