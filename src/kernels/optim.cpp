#include "kernels/optim.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/parallel.h"
#include "kernels/loops.h"
#include "kernels/reduce.h"
#include "kernels/scalar.h"

namespace smelt::kernels {

namespace {

// The gradient as a contiguous tensor (a copy only when it is strided, e.g. an expanded view).
Tensor contiguous_grad(const Tensor& grad) {
  if (grad.is_contiguous()) return grad;
  Tensor copy = empty(grad.shape(), grad.dtype());
  copy_strided(copy, grad);
  return copy;
}

void check_operand(const Tensor& t, const Tensor& param, const char* op, const char* what) {
  SMELT_CHECK(t.defined() && t.is_contiguous() && t.dtype() == param.dtype() &&
              t.shape() == param.shape())
      << op << ": " << what << " must be a contiguous " << dtype_name(param.dtype())
      << " tensor of shape " << shape_str(param.shape()) << ", got "
      << (t.defined() ? std::string(dtype_name(t.dtype())) + " " + shape_str(t.shape()) +
                            (t.is_contiguous() ? "" : " (strided)")
                      : std::string("an undefined tensor"));
}

void check_param(const Tensor& param, const Tensor& grad, const char* op) {
  SMELT_CHECK(param.defined() && dtype_is_floating(param.dtype()) && param.is_contiguous())
      << op << ": parameters must be contiguous float32/float64 tensors";
  SMELT_CHECK(grad.defined() && grad.dtype() == param.dtype() && grad.shape() == param.shape())
      << op << ": the gradient " << shape_str(grad.shape()) << " " << dtype_name(grad.dtype())
      << " does not match its parameter " << shape_str(param.shape()) << " "
      << dtype_name(param.dtype());
}

template <class T>
void sgd_loop(T* p, const T* g, T* buf, int64_t n, bool first, const SgdHyper& h) {
  const T lr = T(h.lr), wd = T(h.weight_decay), mom = T(h.momentum);
  const T keep = T(1 - h.dampening), sign = h.maximize ? T(-1) : T(1);
  parallel_for(n, kOptimGrain, [&](int64_t begin, int64_t end) {
    if (!buf) {
      for (int64_t i = begin; i < end; ++i) p[i] -= lr * (sign * g[i] + wd * p[i]);
    } else if (first) {
      for (int64_t i = begin; i < end; ++i) {
        T d = sign * g[i] + wd * p[i];
        buf[i] = d;
        p[i] -= lr * (h.nesterov ? d + mom * d : d);
      }
    } else {
      for (int64_t i = begin; i < end; ++i) {
        T d = sign * g[i] + wd * p[i];
        T b = mom * buf[i] + keep * d;
        buf[i] = b;
        p[i] -= lr * (h.nesterov ? d + mom * b : b);
      }
    }
  });
}

template <class T>
void adam_loop(T* p, const T* g, T* m, T* v, T* vmax, int64_t n, const AdamHyper& h) {
  const double bias1 = 1.0 - std::pow(h.beta1, double(h.step));
  const double bias2_sqrt = std::sqrt(1.0 - std::pow(h.beta2, double(h.step)));
  const T step_size = T(h.lr / bias1), inv_bias2_sqrt = T(1.0 / bias2_sqrt), eps = T(h.eps);
  const T b1 = T(h.beta1), b2 = T(h.beta2), one_b1 = T(1 - h.beta1), one_b2 = T(1 - h.beta2);
  const T sign = h.maximize ? T(-1) : T(1);
  // Adam folds weight decay into the gradient; AdamW shrinks the parameter instead.
  const T coupled_wd = h.decoupled_weight_decay ? T(0) : T(h.weight_decay);
  const T shrink = h.decoupled_weight_decay ? T(1 - h.lr * h.weight_decay) : T(1);
  parallel_for(n, kOptimGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      T pi = p[i];
      T gi = sign * g[i] + coupled_wd * pi;
      pi *= shrink;
      T mi = b1 * m[i] + one_b1 * gi;
      T vi = b2 * v[i] + one_b2 * gi * gi;
      m[i] = mi;
      v[i] = vi;
      if (vmax) {  // the elementwise maximum's definition: NaN propagates, as torch.maximum in PyTorch's AMSGrad
        vi = scalar::maximum(vmax[i], vi);
        vmax[i] = vi;
      }
      p[i] = pi - step_size * mi / (std::sqrt(vi) * inv_bias2_sqrt + eps);
    }
  });
}

template <class T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.raw_data()) : nullptr;
}

}  // namespace

void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
              bool first_step, const SgdHyper& h) {
  check_param(param, grad, "SGD");
  if (momentum_buffer.defined()) check_operand(momentum_buffer, param, "SGD", "momentum_buffer");
  Tensor g = contiguous_grad(grad);
  SMELT_DISPATCH_FLOATING(param.dtype(), "SGD", [&] {
    using T = scalar_t;
    sgd_loop<T>(param.data<T>(), g.data<T>(), data_or_null<T>(momentum_buffer), param.numel(),
                first_step, h);
  });
  param.storage()->bump_version();
  if (momentum_buffer.defined()) momentum_buffer.storage()->bump_version();
}

void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
               const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, const AdamHyper& h) {
  const char* op = h.decoupled_weight_decay ? "AdamW" : "Adam";
  check_param(param, grad, op);
  check_operand(exp_avg, param, op, "exp_avg");
  check_operand(exp_avg_sq, param, op, "exp_avg_sq");
  SMELT_INTERNAL_CHECK(max_exp_avg_sq.defined() == h.amsgrad)
      << op << ": max_exp_avg_sq must be given exactly when amsgrad is on";
  if (h.amsgrad) check_operand(max_exp_avg_sq, param, op, "max_exp_avg_sq");
  SMELT_INTERNAL_CHECK(h.step >= 1) << op << ": step must be >= 1, got " << h.step;
  Tensor g = contiguous_grad(grad);
  SMELT_DISPATCH_FLOATING(param.dtype(), op, [&] {
    using T = scalar_t;
    adam_loop<T>(param.data<T>(), g.data<T>(), exp_avg.data<T>(), exp_avg_sq.data<T>(),
                 data_or_null<T>(max_exp_avg_sq), param.numel(), h);
  });
  for (const Tensor* t : {&param, &exp_avg, &exp_avg_sq, &max_exp_avg_sq}) {
    if (t->defined()) t->storage()->bump_version();
  }
}

double sum_of_squares(const Tensor& t) {
  Tensor c = contiguous_grad(t);
  const int64_t n = c.numel();
  return SMELT_DISPATCH_FLOATING(c.dtype(), "sum_of_squares", [&]() -> double {
    using T = scalar_t;
    const T* x = c.data<T>();
    const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(num_threads(), n / kOptimGrain));
    std::vector<double> partial(size_t(chunks), 0.0);
    // Per-chunk partial sums in double, added in chunk order (no atomics, no races).
    parallel_for(chunks, 1, [&](int64_t cb, int64_t ce) {
      for (int64_t c_i = cb; c_i < ce; ++c_i) {
        double acc = 0.0;
        for (int64_t i = n * c_i / chunks; i < n * (c_i + 1) / chunks; ++i)
          acc += double(x[i]) * double(x[i]);
        partial[size_t(c_i)] = acc;
      }
    });
    double total = 0.0;
    for (double s : partial) total += s;
    return total;
  });
}

}  // namespace smelt::kernels
