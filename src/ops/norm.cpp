// layer_norm and batch_norm. Both return their statistics as extra outputs: the gradient rules
// read them instead of recomputing, and a second-order backward differentiates through them
// (so each rule also takes the gradients flowing into the statistics).
#include "kernels/norm.h"
#include "smelt/autograd.h"
#include "ops/op_util.h"

namespace smelt::ops {
namespace {

void check_param(const TensorMeta& p, const TensorMeta& x, const Shape& want, const char* op,
                 const char* what) {
  SMELT_CHECK(p.shape == want) << op << ": " << what << " must have shape " << shape_str(want)
                               << " for input " << shape_str(x.shape) << ", got "
                               << shape_str(p.shape);
  SMELT_CHECK(p.dtype == x.dtype) << op << ": " << what << " must have the input's dtype "
                                  << dtype_name(x.dtype) << ", got " << dtype_name(p.dtype);
}

// ---- layer_norm: (x, w, b) -> (y, mean, rstd); attrs ndim, eps

std::vector<TensorMeta> layer_norm_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const TensorMeta& x = in[0];
  check_floating(x, "layer_norm");
  const int64_t rank = int64_t(x.shape.size()), ndim = attrs.get_int("ndim");
  SMELT_CHECK(ndim >= 1 && ndim <= rank)
      << "layer_norm: the normalized shape must cover 1 to " << rank << " trailing dims of input "
      << shape_str(x.shape) << ", got " << ndim << " dims";
  const Shape normalized(x.shape.end() - ndim, x.shape.end());
  check_param(in[1], x, normalized, "layer_norm", "weight");
  check_param(in[2], x, normalized, "layer_norm", "bias");
  SMELT_CHECK(attrs.get_float("eps") >= 0) << "layer_norm: eps must be >= 0, got "
                                           << attrs.get_float("eps");
  Shape stats(x.shape.begin(), x.shape.end() - ndim);
  stats.resize(size_t(rank), 1);
  return {x, {stats, x.dtype}, {stats, x.dtype}};
}

void layer_norm_kernel(const std::vector<Tensor>& in, const Attrs& attrs,
                       const std::vector<Tensor>& out) {
  kernels::layer_norm_forward(out[0], out[1], out[2], in[0], in[1], in[2], attrs.get_int("ndim"),
                              attrs.get_float("eps"));
}

// The shared backward of both norms, per group of M elements with statistics mu, istd
// (broadcastable to x): xhat = (x - mu) istd, gxhat = gy w,
//   dx = istd (gxhat - mean(gxhat) - xhat mean(gxhat xhat))    through y
//      + g_mean / M - xhat istd^2 g_istd / M                    through the statistics
Tensor norm_input_grad(const Tensor& xhat, const Tensor& gxhat, const Tensor& istd,
                       const Tensor& g_mean, const Tensor& g_istd,
                       const std::vector<int64_t>& dims, double count) {
  Tensor a = mean(gxhat, dims, /*keepdim=*/true);
  Tensor b = mean(gxhat * xhat, dims, /*keepdim=*/true);
  Tensor group_scale = istd * b + g_istd * istd * istd / count;
  Tensor group_shift = g_mean / count - istd * a;
  return istd * gxhat - xhat * group_scale + group_shift;
}

std::vector<Tensor> layer_norm_grad(const GradContext& c) {
  const Tensor& x = c.inputs[0];
  const Tensor& w = c.inputs[1];
  const Tensor &mu = c.outputs[1], &rstd = c.outputs[2];
  const Tensor& gy = c.grads[0];
  const int64_t ndim = c.attrs.get_int("ndim");
  std::vector<int64_t> dims;
  double count = 1;
  for (int64_t d = x.dim() - ndim; d < x.dim(); ++d) {
    dims.push_back(d);
    count *= double(x.size(d));
  }
  Tensor xhat = (x - mu) * rstd;
  std::vector<Tensor> grads(3);
  if (c.needs(0)) grads[0] = norm_input_grad(xhat, gy * w, rstd, c.grads[1], c.grads[2], dims, count);
  if (c.needs(1)) grads[1] = gy * xhat;  // summed over the leading dims by the engine
  if (c.needs(2)) grads[2] = gy;
  return grads;
}

// ---- batch_norm: (x, w, b, running_mean, running_var)
//        -> (y, mean, invstd, new_running_mean, new_running_var); attrs training, momentum, eps
// Functional: the running statistics are inputs and their updated values outputs (equal to the
// inputs in eval mode), so a traced training step shows the update and no pass sees a hidden
// write. Eager callers (smelt::batch_norm, nn::BatchNorm2d) copy the new values back.

std::vector<TensorMeta> batch_norm_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const TensorMeta& x = in[0];
  check_floating(x, "batch_norm");
  SMELT_CHECK(x.shape.size() >= 2) << "batch_norm: input must be (N, C, ...) with at least 2 dims, got "
                                   << shape_str(x.shape);
  const Shape channels{x.shape[1]};
  check_param(in[1], x, channels, "batch_norm", "weight");
  check_param(in[2], x, channels, "batch_norm", "bias");
  check_param(in[3], x, channels, "batch_norm", "running_mean");
  check_param(in[4], x, channels, "batch_norm", "running_var");
  const int64_t per_channel = x.shape[1] == 0 ? 0 : shape_numel(x.shape) / x.shape[1];
  SMELT_CHECK(!attrs.get_int("training") || per_channel > 1)
      << "batch_norm: training needs more than 1 value per channel to estimate a variance, got "
         "input "
      << shape_str(x.shape);
  attrs.get_float("momentum");
  SMELT_CHECK(attrs.get_float("eps") >= 0) << "batch_norm: eps must be >= 0, got "
                                           << attrs.get_float("eps");
  const TensorMeta stats{channels, x.dtype};
  return {x, stats, stats, stats, stats};
}

void batch_norm_kernel(const std::vector<Tensor>& in, const Attrs& attrs,
                       const std::vector<Tensor>& out) {
  kernels::BatchNormOutputs o{out[0], out[1], out[2], out[3], out[4]};
  kernels::BatchNormParams params{attrs.get_int("training") != 0, attrs.get_float("momentum"),
                                  attrs.get_float("eps")};
  kernels::batch_norm_forward(o, in[0], in[1], in[2], in[3], in[4], params);
}

// Training differentiates through the batch statistics; eval is an affine map with constant
// (running) statistics, which get no gradient. The new running statistics carry no gradient
// either (PyTorch updates them under no_grad): gradients flowing into outputs 3 and 4 are dropped.
std::vector<Tensor> batch_norm_grad(const GradContext& c) {
  const Tensor& x = c.inputs[0];
  const Tensor& gy = c.grads[0];
  Shape per_channel(size_t(x.dim()), 1);
  per_channel[1] = x.size(1);
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.dim(); ++d) if (d != 1) dims.push_back(d);
  const double count = double(x.numel()) / double(std::max<int64_t>(x.size(1), 1));
  Tensor w = c.inputs[1].reshape(per_channel);
  Tensor mu = c.outputs[1].reshape(per_channel), istd = c.outputs[2].reshape(per_channel);
  Tensor xhat = (x - mu) * istd;
  std::vector<Tensor> grads(3);
  if (c.needs(0)) {
    grads[0] = c.attrs.get_int("training")
                   ? norm_input_grad(xhat, gy * w, istd, c.grads[1].reshape(per_channel),
                                     c.grads[2].reshape(per_channel), dims, count)
                   : gy * (w * istd);
  }
  if (c.needs(1)) grads[1] = sum(gy * xhat, dims);
  if (c.needs(2)) grads[2] = sum(gy, dims);
  return grads;
}

}  // namespace

SMELT_OP_IMPL(layer_norm) = {layer_norm_shape, layer_norm_kernel, layer_norm_grad, kSaveBoth,
                             1u << 2 /* bias is never read */};
// The rule never reads bias or the running statistics: they are saved as metas, so the caller
// may write the new running statistics back (and the next training step update them again)
// before this backward runs.
SMELT_OP_IMPL(batch_norm) = {batch_norm_shape, batch_norm_kernel, batch_norm_grad, kSaveBoth,
                             (1u << 2) | (1u << 3) | (1u << 4)};

}  // namespace smelt::ops

namespace smelt {

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  SMELT_CHECK(x.defined()) << "layer_norm: input is an undefined tensor";
  const int64_t ndim = int64_t(normalized_shape.size());
  SMELT_CHECK(ndim >= 1 && ndim <= x.dim() &&
              Shape(x.shape().end() - ndim, x.shape().end()) == normalized_shape)
      << "layer_norm: normalized_shape " << shape_str(normalized_shape)
      << " must be non-empty and equal the trailing dims of input " << shape_str(x.shape());
  // Absent parameters are the identity affine map: same math, one code path.
  Tensor w = weight.defined() ? weight : ones(normalized_shape, x.dtype());
  Tensor b = bias.defined() ? bias : zeros(normalized_shape, x.dtype());
  return ops::call(ops::OpId::layer_norm, {x, w, b}, {{"ndim", ndim}, {"eps", eps}})[0];
}

BatchNormResult batch_norm_functional(const Tensor& x, const Tensor& running_mean,
                                      const Tensor& running_var, const Tensor& weight,
                                      const Tensor& bias, bool training, double momentum,
                                      double eps) {
  SMELT_CHECK(x.defined() && x.dim() >= 2)
      << "batch_norm: input must be a (N, C, ...) tensor with at least 2 dims, got "
      << (x.defined() ? shape_str(x.shape()) : std::string("an undefined tensor"));
  SMELT_CHECK(running_mean.defined() == running_var.defined())
      << "batch_norm: give both running_mean and running_var, or neither";
  SMELT_CHECK(training || running_mean.defined())
      << "batch_norm: eval mode (training = false) normalizes with running_mean and running_var; "
         "both must be given";
  const Shape channels{x.size(1)};
  Tensor rm = running_mean, rv = running_var;
  if (!rm.defined()) {  // no running statistics kept: update throw-away ones
    rm = zeros(channels, x.dtype());
    rv = ones(channels, x.dtype());
  } else if (training) {
    SMELT_CHECK(!rm.requires_grad() && !rv.requires_grad())
        << "batch_norm: running_mean and running_var are state updated by training and must not "
           "require grad";
  }
  Tensor w = weight.defined() ? weight : ones(channels, x.dtype());
  Tensor b = bias.defined() ? bias : zeros(channels, x.dtype());
  ops::Attrs attrs{{"training", int64_t(training)}, {"momentum", momentum}, {"eps", eps}};
  std::vector<Tensor> out = ops::call(ops::OpId::batch_norm, {x, w, b, rm, rv}, attrs);
  return {out[0], out[3], out[4]};
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  BatchNormResult r =
      batch_norm_functional(x, running_mean, running_var, weight, bias, training, momentum, eps);
  if (training && running_mean.defined()) {
    // The op is pure; the in-place update of the caller's statistics happens here, in eager code.
    SMELT_CHECK(running_mean.storage() && running_var.storage() && r.running_mean.storage())
        << "batch_norm: in training the running statistics are updated in place, which a traced "
           "graph cannot express; trace nn::BatchNorm2d with trace::trace_module (its buffers "
           "become graph inputs and the new statistics graph outputs), or call "
           "batch_norm_functional and keep the returned statistics";
    NoGradGuard no_grad;
    Tensor rm = running_mean, rv = running_var;  // handles on the caller's storage
    rm.copy_(r.running_mean);
    rv.copy_(r.running_var);
  }
  return r.y;
}

}  // namespace smelt
