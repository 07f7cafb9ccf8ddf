// Fused optimizer updates: each walks a parameter once, reading its gradient and state and
// writing the new parameter and state in place, with no temporaries. Parameters and state
// buffers must be contiguous with the parameter's dtype (float32 or float64); a strided gradient
// is copied to a contiguous one first. Work above kOptimGrain elements is split over threads.
#pragma once

#include <cstdint>

#include "smelt/tensor.h"

namespace smelt::kernels {

inline constexpr int64_t kOptimGrain = 16384;

// PyTorch's SGD for one parameter:
//   g = grad (negated when maximize) + weight_decay * p
//   momentum != 0: buf = g on the first step, else momentum * buf + (1 - dampening) * g;
//                  g = nesterov ? g + momentum * buf : buf
//   p -= lr * g
struct SgdHyper {
  double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false, maximize = false;
};
// param (n), grad (n), momentum_buffer (n) or undefined when momentum == 0.
void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
              bool first_step, const SgdHyper& h);

// PyTorch's Adam / AdamW for one parameter at step `step` (1-based):
//   g = grad (negated when maximize); Adam: g += weight_decay * p; AdamW: p *= 1 - lr *
//   weight_decay m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2;  amsgrad: vmax =
//   max(vmax, v) p -= lr / (1 - beta1^step) * m / (sqrt(v or vmax) / sqrt(1 - beta2^step) + eps)
struct AdamHyper {
  double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool decoupled_weight_decay = false, amsgrad = false, maximize = false;
  int64_t step = 1;
};
// param, grad, exp_avg, exp_avg_sq (n); max_exp_avg_sq (n) when amsgrad, else undefined.
void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
               const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, const AdamHyper& h);

// Sum of squares of all elements, accumulated in double (any strides; float32/float64).
double sum_of_squares(const Tensor& t);

}  // namespace smelt::kernels
