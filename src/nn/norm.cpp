// BatchNorm2d and LayerNorm.
#include <sstream>

#include "smelt/autograd.h"
#include "smelt/nn.h"

namespace smelt::nn {

BatchNorm2d::BatchNorm2d(int64_t num_features, Options options)
    : num_features(num_features), options(options) {
  SMELT_CHECK(num_features > 0) << "BatchNorm2d: num_features must be positive, got "
                                << num_features;
  SMELT_CHECK(options.eps > 0) << "BatchNorm2d: eps must be positive, got " << options.eps;
  SMELT_CHECK(!options.momentum || (*options.momentum >= 0 && *options.momentum <= 1))
      << "BatchNorm2d: momentum must be in [0, 1], got " << *options.momentum;
  SMELT_CHECK(dtype_is_floating(options.dtype))
      << "BatchNorm2d: dtype must be float32 or float64, got " << dtype_name(options.dtype);
  // Without affine: identity scale and shift, which batch_norm takes as tensors; not learned.
  weight = ones({num_features}, options.dtype);
  bias = zeros({num_features}, options.dtype);
  if (options.affine) {
    register_parameter("weight", weight);
    register_parameter("bias", bias);
  }
  running_mean = zeros({num_features}, options.dtype);
  running_var = ones({num_features}, options.dtype);
  num_batches_tracked = zeros({}, DType::Int64);
  register_buffer("running_mean", running_mean);
  register_buffer("running_var", running_var);
  register_buffer("num_batches_tracked", num_batches_tracked);
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  SMELT_CHECK(x.dim() == 4 && x.size(1) == num_features)
      << "BatchNorm2d: expected input (N, " << num_features << ", H, W), got "
      << shape_str(x.shape());
  // Under trace::trace_module the buffers are symbolic graph inputs: the updates are then new
  // values bound to the buffer slots (graph outputs), not writes into memory.
  const bool symbolic_state = !running_mean.storage();
  double momentum = options.momentum.value_or(0.0);
  if (is_training()) {
    NoGradGuard no_grad;
    if (symbolic_state) {
      SMELT_CHECK(options.momentum)
          << "BatchNorm2d: with momentum = none the running statistics are a cumulative average "
             "whose weight depends on num_batches_tracked's value, which a traced graph does not "
             "know; give a momentum to trace it";
      num_batches_tracked = num_batches_tracked + 1.0;
    } else {
      // Checked before anything is written: a failed trace leaves the statistics as they were.
      SMELT_CHECK(x.storage())
          << "BatchNorm2d: in training mode inside a traced function (smelt::compile, "
             "Graph::trace) its running statistics are tensors held outside the trace, whose "
             "update would happen once, when traced; compile the module with compile_module or "
             "compile_training_step (they make the statistics graph inputs and outputs), or call "
             "eval() first";
      int64_t tracked = int64_t(num_batches_tracked.item()) + 1;
      num_batches_tracked.fill_(double(tracked));
      // Without a momentum the running statistics are the plain average over all batches seen.
      if (!options.momentum) momentum = 1.0 / double(tracked);
    }
  }
  BatchNormResult r = batch_norm_functional(x, running_mean, running_var, weight, bias,
                                            is_training(), momentum, options.eps);
  if (is_training()) {
    if (symbolic_state) {
      running_mean = r.running_mean;
      running_var = r.running_var;
    } else {
      SMELT_CHECK(r.running_mean.storage())
          << "BatchNorm2d: traced in training mode with its buffers as constants, the update of "
             "the running statistics would be lost; trace the module with trace::trace_module, "
             "which makes the buffers graph inputs and their new values graph outputs";
      NoGradGuard no_grad;
      running_mean.copy_(r.running_mean);
      running_var.copy_(r.running_var);
    }
  }
  return r.y;
}

std::string BatchNorm2d::extra_repr() const {
  std::ostringstream s;
  s << num_features << ", eps=" << options.eps << ", momentum=";
  if (options.momentum)
    s << *options.momentum;
  else
    s << "none";
  s << ", affine=" << (options.affine ? "true" : "false");
  return s.str();
}

LayerNorm::LayerNorm(Shape normalized_shape, double eps, bool elementwise_affine, bool with_bias,
                     DType dtype)
    : normalized_shape(std::move(normalized_shape)), eps(eps) {
  SMELT_CHECK(!this->normalized_shape.empty() && shape_numel(this->normalized_shape) > 0)
      << "LayerNorm: normalized_shape must be non-empty with positive sizes, got "
      << shape_str(this->normalized_shape);
  SMELT_CHECK(eps > 0) << "LayerNorm: eps must be positive, got " << eps;
  if (elementwise_affine) {
    weight = ones(this->normalized_shape, dtype);
    register_parameter("weight", weight);
    if (with_bias) {
      bias = zeros(this->normalized_shape, dtype);
      register_parameter("bias", bias);
    }
  }
}

Tensor LayerNorm::forward(const Tensor& x) {
  const int64_t k = int64_t(normalized_shape.size());
  bool fits = x.dim() >= k;
  for (int64_t i = 0; fits && i < k; ++i)
    fits = x.size(x.dim() - k + i) == normalized_shape[size_t(i)];
  SMELT_CHECK(fits) << "LayerNorm: input " << shape_str(x.shape())
                    << " must end with the normalized shape " << shape_str(normalized_shape);
  return layer_norm(x, normalized_shape, weight, bias, eps);
}

std::string LayerNorm::extra_repr() const {
  std::ostringstream s;
  s << shape_str(normalized_shape) << ", eps=" << eps
    << ", elementwise_affine=" << (weight.defined() ? "true" : "false");
  return s.str();
}

}  // namespace smelt::nn
