// softmax and log_softmax along one dim.
#include "kernels/softmax.h"
#include "ops/op_util.h"

namespace smelt::ops {
namespace {

std::vector<TensorMeta> softmax_rule(const std::vector<TensorMeta>& in, const Attrs& attrs,
                                     const char* op) {
  check_floating(in[0], op);
  wrap_dim(attrs.get_int("dim"), int64_t(in[0].shape.size()), op);
  return {in[0]};
}

std::vector<TensorMeta> softmax_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  return softmax_rule(in, attrs, "softmax");
}
std::vector<TensorMeta> log_softmax_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  return softmax_rule(in, attrs, "log_softmax");
}

void softmax_run(const std::vector<Tensor>& in, const Attrs& attrs, const std::vector<Tensor>& out,
                 bool log) {
  const Tensor& x = in[0];
  kernels::softmax_forward(out[0], x, wrap_dim(attrs.get_int("dim"), x.dim(), "softmax"), log);
}

void softmax_kernel(const std::vector<Tensor>& in, const Attrs& attrs,
                    const std::vector<Tensor>& out) {
  softmax_run(in, attrs, out, false);
}
void log_softmax_kernel(const std::vector<Tensor>& in, const Attrs& attrs,
                        const std::vector<Tensor>& out) {
  softmax_run(in, attrs, out, true);
}

// The reduction dims of the rule: {dim}, or none for a 0-dim tensor.
std::vector<int64_t> softmax_dims(const GradContext& c) {
  const Tensor& y = c.outputs[0];
  if (y.dim() == 0) return {};
  return {wrap_dim(c.attrs.get_int("dim"), y.dim(), "softmax")};
}

// dx = y (g - sum(g y, dim))
std::vector<Tensor> softmax_grad(const GradContext& c) {
  const Tensor& y = c.outputs[0];
  const Tensor& g = c.grads[0];
  return {y * (g - sum(g * y, softmax_dims(c), /*keepdim=*/true))};
}

// dx = g - exp(y) sum(g, dim)
std::vector<Tensor> log_softmax_grad(const GradContext& c) {
  const Tensor& y = c.outputs[0];
  const Tensor& g = c.grads[0];
  return {g - exp(y) * sum(g, softmax_dims(c), /*keepdim=*/true)};
}

}  // namespace

SMELT_OP_IMPL(softmax) = {softmax_shape, softmax_kernel, softmax_grad, kSaveOutputs};
SMELT_OP_IMPL(log_softmax) = {log_softmax_shape, log_softmax_kernel, log_softmax_grad, kSaveOutputs};

}  // namespace smelt::ops

namespace smelt {

Tensor softmax(const Tensor& x, int64_t dim) {
  return ops::call1(ops::OpId::softmax, {x}, {{"dim", dim}});
}
Tensor log_softmax(const Tensor& x, int64_t dim) {
  return ops::call1(ops::OpId::log_softmax, {x}, {{"dim", dim}});
}

}  // namespace smelt
