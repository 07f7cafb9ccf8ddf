// Normalization kernels: layer norm (statistics per row of the trailing dims) and batch norm
// (statistics per channel over batch and spatial dims). Statistics are accumulated in double
// with two passes (mean, then the sum of squared deviations), so large offsets do not cancel.
//
// Letters: R rows and M normalized elements per row (layer norm); N batch, C channels, S the
// product of the spatial dims (batch norm).
#pragma once

#include <cstdint>

#include "smelt/tensor.h"

namespace smelt::kernels {

// y = (x - mean) * rstd * w + b over rows of the last `normalized_dims` dims.
// x (R, M) any strides; w, b (M); outputs contiguous: y (R, M), mean (R), rstd (R), where
// rstd = 1 / sqrt(biased var + eps).
void layer_norm_forward(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& w, const Tensor& b, int64_t normalized_dims, double eps);

struct BatchNormParams {
  bool training = true;
  double momentum = 0.1;
  double eps = 1e-5;
};

// y = (x - mean_c) * invstd_c * w_c + b_c. Training: mean/invstd from the batch (biased
// variance) and the new running statistics
//   new_running = (1 - momentum) running + momentum batch   (unbiased variance for running_var);
// eval: mean = running_mean, invstd = 1 / sqrt(running_var + eps), new_running = running.
// Pure: the running statistics are only read; the caller writes the new ones back.
// x (N, C, S...) any strides; w, b, running_mean, running_var (C) any strides;
// outputs contiguous: y like x, mean (C), invstd (C), new_running_mean (C), new_running_var (C).
struct BatchNormOutputs {
  Tensor y, mean, invstd, new_running_mean, new_running_var;
};
void batch_norm_forward(const BatchNormOutputs& out, const Tensor& x, const Tensor& w,
                        const Tensor& b, const Tensor& running_mean, const Tensor& running_var,
                        const BatchNormParams& params);

}  // namespace smelt::kernels
