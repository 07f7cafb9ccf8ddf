// Gradient clipping by total norm.
#include <cmath>

#include "kernels/optim.h"
#include "smelt/autograd.h"
#include "smelt/ops.h"
#include "smelt/optim.h"

namespace smelt::optim {

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm,
                       bool error_if_nonfinite) {
  SMELT_CHECK(max_norm >= 0) << "clip_grad_norm_: max_norm must be >= 0, got " << max_norm;
  double sum_sq = 0.0;
  for (const Tensor& p : params) {
    if (p.defined() && p.grad().defined()) sum_sq += kernels::sum_of_squares(p.grad());
  }
  const double total = std::sqrt(sum_sq);
  SMELT_CHECK(!error_if_nonfinite || std::isfinite(total))
      << "clip_grad_norm_: the total gradient norm is " << total
      << "; some gradient holds NaN or infinity";
  const double coef = max_norm / (total + 1e-6);
  if (coef >= 1.0 || !std::isfinite(total)) return total;
  NoGradGuard no_grad;
  for (const Tensor& p : params) {
    if (!p.defined() || !p.grad().defined()) continue;
    // A new tensor, not an in-place scale: a gradient may be a broadcast view sharing memory.
    Tensor(p).set_grad(p.grad() * coef);
  }
  return total;
}

}  // namespace smelt::optim
