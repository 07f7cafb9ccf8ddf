#include "check.h"

#include <cmath>
#include <cstring>
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

::testing::AssertionResult same_bits(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
    return ::testing::AssertionFailure() << "got " << dtype_name(got.dtype()) << " " << shape_str(got.shape())
                                         << ", want " << dtype_name(want.dtype()) << " " << shape_str(want.shape());
  }
  const Tensor a = got.contiguous(), b = want.contiguous();
  const auto* pa = static_cast<const unsigned char*>(a.raw_data());
  const auto* pb = static_cast<const unsigned char*>(b.raw_data());
  const size_t size = dtype_size(got.dtype());
  for (int64_t i = 0; i < a.numel(); ++i) {
    const size_t at = size_t(i) * size;
    if (std::memcmp(pa + at, pb + at, size) == 0) continue;
    if (got.dtype() == DType::Float32) {
      float x, y;
      std::memcpy(&x, pa + at, 4);
      std::memcpy(&y, pb + at, 4);
      if (std::isnan(x) && std::isnan(y)) continue;
    } else if (got.dtype() == DType::Float64) {
      double x, y;
      std::memcpy(&x, pa + at, 8);
      std::memcpy(&y, pb + at, 8);
      if (std::isnan(x) && std::isnan(y)) continue;
    }
    return ::testing::AssertionFailure() << "element " << i << " of " << shape_str(got.shape()) << ": got "
                                         << a.flatten().select(0, i).item() << ", want "
                                         << b.flatten().select(0, i).item();
  }
  return ::testing::AssertionSuccess();
}

Tensor special_values(const Shape& shape, uint64_t seed, int every, DType dtype) {
  std::vector<double> v = random_tensor(shape, -3, 3, seed).to_vector();
  const double specials[] = {std::nan(""), INFINITY, -INFINITY, 0.0, -0.0, 1e-41};
  for (size_t i = 0; i < v.size(); i += size_t(every)) v[i] = specials[(i / size_t(every)) % 6];
  return from_vector(v, shape, DType::Float64).to(dtype);
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
