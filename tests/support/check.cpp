#include "check.h"

#include <cmath>
#include <sstream>

namespace smelt::testing {

::testing::AssertionResult all_close(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (a.shape() != b.shape()) {
    return ::testing::AssertionFailure()
           << "shapes differ: " << shape_str(a.shape()) << " vs " << shape_str(b.shape());
  }
  std::vector<double> x = a.to_vector(), y = b.to_vector();
  double worst = 0;
  size_t worst_at = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i])) {
      if (std::isnan(x[i]) != std::isnan(y[i])) {
        return ::testing::AssertionFailure() << "NaN mismatch at " << i << ": " << x[i] << " vs " << y[i];
      }
      continue;
    }
    if (x[i] == y[i]) continue;  // equal infinities
    double err = std::fabs(x[i] - y[i]) / (atol + rtol * std::fabs(y[i]));
    if (!(err <= worst)) { worst = err; worst_at = i; }
  }
  if (worst > 1.0) {
    return ::testing::AssertionFailure() << "mismatch at flat index " << worst_at << ": " << x[worst_at]
                                         << " vs " << y[worst_at] << " (rtol " << rtol << ", atol "
                                         << atol << ")";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                                     const std::vector<Tensor>& inputs, double eps, double rtol,
                                     double atol) {
  for (const Tensor& t : inputs) {
    if (t.dtype() != DType::Float64 || !t.requires_grad()) {
      return ::testing::AssertionFailure() << "gradcheck inputs must be float64 and require grad";
    }
  }
  Tensor probe = f(inputs);
  // Random weights make every output element matter differently.
  Generator gen(77);
  Tensor w = uniform(probe.shape(), 0.5, 1.5, DType::Float64, &gen);
  auto loss_of = [&](const std::vector<Tensor>& xs) { return sum(f(xs) * w); };

  std::vector<Tensor> analytic = autograd::grad({loss_of(inputs)}, inputs, {}, false, false, true);
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    std::vector<double> numeric(size_t(x.numel()));
    Tensor flat = x.detach().contiguous();
    for (int64_t i = 0; i < x.numel(); ++i) {
      std::vector<Tensor> xs = inputs;
      Tensor plus = flat.clone(), minus = flat.clone();
      plus.data<double>()[i] += eps;
      minus.data<double>()[i] -= eps;
      NoGradGuard guard;
      xs[k] = plus.reshape(x.shape());
      double fp = loss_of(xs).item();
      xs[k] = minus.reshape(x.shape());
      double fm = loss_of(xs).item();
      numeric[size_t(i)] = (fp - fm) / (2 * eps);
    }
    Tensor num = from_vector(numeric, x.shape());
    Tensor ana = analytic[k].defined() ? analytic[k] : zeros(x.shape(), DType::Float64);
    auto r = all_close(ana, num, rtol, atol);
    if (!r) return ::testing::AssertionFailure() << "input " << k << ": analytic vs numeric: " << r.message();
  }
  return ::testing::AssertionSuccess();
}

Tensor random_tensor(const Shape& shape, double low, double high, uint64_t seed) {
  Generator gen(seed);
  return uniform(shape, low, high, DType::Float64, &gen);
}

Tensor random_leaf(const Shape& shape, double low, double high, uint64_t seed) {
  Tensor t = random_tensor(shape, low, high, seed);
  t.set_requires_grad();
  return t;
}

}  // namespace smelt::testing
