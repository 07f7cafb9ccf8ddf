#include <cmath>

#include "ops/dispatch.h"
#include "ops/second_order.h"
#include "support/check.h"
#include "support/errors.h"

namespace smelt {
namespace {

using testing::all_close;
using testing::expect_error;
using testing::gradcheck;
using testing::gradgradcheck;
using testing::random_leaf;

Tensor ints(const std::vector<int64_t>& v, const Shape& shape) { return from_vector(v, shape); }

// Naive nll over (N, C, S) row-major values; returns per-element losses and the counted number.
std::vector<double> nll_ref(const Tensor& logp, const Tensor& target, int64_t ignore, int64_t* counted) {
  std::vector<double> p = logp.to_vector(), t = target.to_vector(), out(t.size());
  const int64_t n = logp.size(0), c = logp.size(1), s = int64_t(t.size()) / n;
  *counted = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < s; ++j) {
      int64_t k = int64_t(t[size_t(i * s + j)]);
      out[size_t(i * s + j)] = k == ignore ? 0.0 : -p[size_t((i * c + k) * s + j)];
      *counted += k != ignore;
    }
  }
  return out;
}

TEST(NllLoss, ForwardReductionsAndIgnoreIndex) {
  Tensor logp = log_softmax(randn({3, 4}, DType::Float64), 1);
  Tensor target = ints({1, -100, 3}, {3});
  std::vector<double> p = logp.to_vector();
  const double l0 = -p[1], l2 = -p[11];
  EXPECT_TRUE(all_close(nll_loss(logp, target, -100, Reduction::None),
                        from_vector(std::vector<double>{l0, 0.0, l2}, {3})));
  EXPECT_NEAR(nll_loss(logp, target, -100, Reduction::Sum).item(), l0 + l2, 1e-12);
  // mean divides by the 2 counted targets, not by 3
  EXPECT_NEAR(nll_loss(logp, target).item(), (l0 + l2) / 2, 1e-12);
  // an ignore_index inside the class range
  EXPECT_NEAR(nll_loss(logp, ints({1, 3, 3}, {3}), 3).item(), l0, 1e-12);
}

TEST(NllLoss, SpatialMatchesReference) {
  Tensor logp = log_softmax(randn({2, 3, 4, 5}), 1);
  Tensor target = randint(0, 3, {2, 4, 5});
  target.data<int64_t>()[7] = -1;
  int64_t counted;
  std::vector<double> ref = nll_ref(logp, target, -1, &counted);
  EXPECT_TRUE(all_close(nll_loss(logp, target, -1, Reduction::None), from_vector(ref, {2, 4, 5}, DType::Float32)));
  double total = 0;
  for (double v : ref) total += v;
  EXPECT_NEAR(nll_loss(logp, target, -1).item(), total / double(counted), 1e-5);
  EXPECT_NEAR(nll_loss(logp, target, -1, Reduction::Sum).item(), total, 1e-4);
}

TEST(NllLoss, SingleSampleAndAllIgnored) {
  Tensor logp = log_softmax(randn({4}, DType::Float64), 0);
  EXPECT_NEAR(nll_loss(logp, scalar_tensor(2, DType::Int64)).item(), -logp.to_vector()[2], 1e-12);
  EXPECT_EQ(nll_loss(logp, scalar_tensor(2, DType::Int64), -100, Reduction::None).dim(), 0);

  // Nothing counted: mean is NaN (0/0) and the gradient is zero, as in PyTorch.
  Tensor x = random_leaf({2, 3});
  Tensor loss = nll_loss(x, ints({-100, -100}, {2}));
  EXPECT_TRUE(std::isnan(loss.item()));
  loss.backward();
  EXPECT_TRUE(all_close(x.grad(), zeros({2, 3}, DType::Float64)));
}

TEST(NllLoss, Gradcheck) {
  Tensor target = ints({2, -100, 0, 3}, {4});
  for (Reduction r : {Reduction::None, Reduction::Mean, Reduction::Sum}) {
    Tensor x = random_leaf({4, 5}, -3, 0, 11);
    EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& v) { return nll_loss(v[0], target, -100, r); }, {x}));
  }
  // (N, C, d) with the classes in a non-contiguous middle dim of a permuted, sliced input
  Tensor spatial_target = ints({0, 2, 1, -100, 2, 2}, {2, 3});
  Tensor y = random_leaf({2, 4, 3}, -3, 0, 13);
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& v) {
    return nll_loss(v[0].permute({0, 2, 1}).slice(2, 0, 3), spatial_target);
  }, {y}));
}

TEST(NllLoss, SecondOrderIsZeroButConnected) {
  Tensor target = ints({1, 0, -100}, {3});
  Tensor x = random_leaf({3, 4}, -3, 0, 14);
  EXPECT_TRUE(gradgradcheck([&](const std::vector<Tensor>& v) { return nll_loss(v[0], target); }, {x}));
}

TEST(NllLoss, Errors) {
  Tensor logp = randn({3, 4});
  expect_error([&] { nll_loss(logp, ints({0, 4, 1}, {3})); }, "nll_loss");  // class out of range
  expect_error([&] { nll_loss(logp, ints({0, -2, 1}, {3})); }, "nll_loss");
  expect_error([&] { nll_loss(logp, zeros({3})); }, "nll_loss");           // float target
  expect_error([&] { nll_loss(logp, ints({0, 1}, {2})); }, "nll_loss");    // batch mismatch
  expect_error([&] { nll_loss(randn({2, 3, 4}), ints({0, 1}, {2})); }, "nll_loss");
  expect_error([&] { nll_loss(arange(6).reshape({2, 3}), ints({0, 1}, {2})); }, "nll_loss");
  expect_error([&] { ops::call(ops::OpId::nll_loss, {logp, ints({0, 1, 2}, {3})},
                               {{"ignore_index", int64_t(-100)}, {"reduction", int64_t(7)}}); },
               "nll_loss");
}

// Label-smoothed cross entropy by its definition, in double, per sample.
double cross_entropy_ref(const std::vector<double>& logits, int64_t target, double smoothing) {
  const double c = double(logits.size());
  double m = -INFINITY, s = 0, total = 0;
  for (double v : logits) m = std::max(m, v);
  for (double v : logits) s += std::exp(v - m);
  const double lse = m + std::log(s);
  for (double v : logits) total += lse - v;
  return (1 - smoothing) * (lse - logits[size_t(target)]) + smoothing / c * total;
}

TEST(CrossEntropy, HandComputedValues) {
  Tensor logits = from_vector(std::vector<double>{1, 2, 3}, {1, 3});
  // log(e + e^2 + e^3) - 1
  EXPECT_NEAR(cross_entropy(logits, ints({0}, {1})).item(), 2.4076059644443806, 1e-12);
  // 0.9 * 2.40760596 + 0.1 * (lse - mean(x)) = 0.9 * 2.40760596 + 0.1 * 1.40760596
  EXPECT_NEAR(cross_entropy(logits, ints({0}, {1}), -100, 0.1).item(), 2.3076059644443806, 1e-12);
  // one sample without a batch dim
  EXPECT_NEAR(cross_entropy(from_vector(std::vector<double>{1, 2, 3}, {3}), scalar_tensor(0, DType::Int64)).item(),
              2.4076059644443806, 1e-12);
}

TEST(CrossEntropy, SmoothingIgnoreAndReductions) {
  Tensor logits = randn({4, 5}, DType::Float64);
  Tensor target = ints({3, -100, 0, 4}, {4});
  std::vector<double> v = logits.to_vector();
  const double s = 0.2;
  std::vector<double> per(4, 0.0);
  for (int i : {0, 2, 3}) {
    std::vector<double> row(v.begin() + i * 5, v.begin() + i * 5 + 5);
    per[size_t(i)] = cross_entropy_ref(row, target.to_vector()[size_t(i)], s);
  }
  EXPECT_TRUE(all_close(cross_entropy(logits, target, -100, s, Reduction::None),
                        from_vector(per, {4}), 1e-10, 1e-12));
  const double total = per[0] + per[2] + per[3];
  EXPECT_NEAR(cross_entropy(logits, target, -100, s, Reduction::Sum).item(), total, 1e-10);
  EXPECT_NEAR(cross_entropy(logits, target, -100, s, Reduction::Mean).item(), total / 3, 1e-10);
}

TEST(CrossEntropy, SpatialMatchesPerPixelDefinition) {
  Tensor logits = randn({2, 3, 2, 2}, DType::Float64);
  Tensor target = ints({0, 2, 1, 1, -100, 0, 2, 2}, {2, 2, 2});
  std::vector<double> v = logits.to_vector(), t = target.to_vector();
  double total = 0;
  int counted = 0;
  for (int n = 0; n < 2; ++n) {
    for (int p = 0; p < 4; ++p) {
      int64_t k = int64_t(t[size_t(n * 4 + p)]);
      if (k == -100) continue;
      std::vector<double> row;
      for (int c = 0; c < 3; ++c) row.push_back(v[size_t((n * 3 + c) * 4 + p)]);
      total += cross_entropy_ref(row, k, 0.3);
      ++counted;
    }
  }
  EXPECT_NEAR(cross_entropy(logits, target, -100, 0.3).item(), total / counted, 1e-10);
}

TEST(CrossEntropy, GradcheckAndSecondOrder) {
  Tensor target = ints({3, -100, 0, 4}, {4});
  for (Reduction r : {Reduction::None, Reduction::Mean, Reduction::Sum}) {
    for (double s : {0.0, 0.25}) {
      Tensor x = random_leaf({4, 5}, -2, 2, 21);
      auto f = [&](const std::vector<Tensor>& v) { return cross_entropy(v[0], target, -100, s, r); };
      EXPECT_TRUE(gradcheck(f, {x})) << "smoothing " << s;
      EXPECT_TRUE(gradgradcheck(f, {x})) << "smoothing " << s;
    }
  }
  // classes in the middle of a permuted (non-contiguous) input
  Tensor spatial_target = ints({0, 2, 1, 1, -100, 0}, {2, 3});
  Tensor x = random_leaf({2, 3, 3}, -2, 2, 22);
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& v) {
    return cross_entropy(v[0].permute({0, 2, 1}), spatial_target, -100, 0.1);
  }, {x}));
}

TEST(CrossEntropy, Errors) {
  Tensor logits = randn({3, 4});
  expect_error([&] { cross_entropy(logits, zeros({3})); }, "cross_entropy");
  expect_error([&] { cross_entropy(logits, ints({0, 1}, {2})); }, "cross_entropy");
  expect_error([&] { cross_entropy(logits, ints({0, 1, 2}, {3}), -100, 1.5); }, "cross_entropy");
  expect_error([&] { cross_entropy(logits, ints({0, 9, 2}, {3})); }, "nll_loss");
}

TEST(MseLoss, ValuesGradAndErrors) {
  Tensor a = from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2});
  Tensor b = from_vector(std::vector<double>{1, 0, 5, 1}, {2, 2});
  EXPECT_NEAR(mse_loss(a, b).item(), (0 + 4 + 4 + 9) / 4.0, 1e-12);
  EXPECT_NEAR(mse_loss(a, b, Reduction::Sum).item(), 17.0, 1e-12);
  EXPECT_TRUE(all_close(mse_loss(a, b, Reduction::None), from_vector(std::vector<double>{0, 4, 4, 9}, {2, 2})));
  Tensor x = random_leaf({3, 4}, -1, 1, 31), y = random_leaf({4, 3}, -1, 1, 32);
  auto f = [](const std::vector<Tensor>& v) { return mse_loss(v[0], v[1].t()); };
  EXPECT_TRUE(gradcheck(f, {x, y}));
  EXPECT_TRUE(gradgradcheck(f, {x, y}));
  expect_error([&] { mse_loss(randn({3, 1}), randn({3})); }, "mse_loss");
  expect_error([&] { mse_loss(randn({3}), randn({3}, DType::Float64)); }, "mse_loss");
}

TEST(BceWithLogits, ValuesStabilityAndGradient) {
  Tensor x = from_vector(std::vector<double>{-2, -0.5, 0, 0.7, 3}, {5});
  Tensor t = from_vector(std::vector<double>{0, 1, 0.3, 1, 0}, {5});
  std::vector<double> xv = x.to_vector(), tv = t.to_vector(), ref;
  for (size_t i = 0; i < xv.size(); ++i) {
    double p = 1 / (1 + std::exp(-xv[i]));
    ref.push_back(-(tv[i] * std::log(p) + (1 - tv[i]) * std::log(1 - p)));
  }
  EXPECT_TRUE(all_close(binary_cross_entropy_with_logits(x, t, Reduction::None), from_vector(ref, {5}), 1e-12, 1e-12));

  // Large logits: no overflow, the loss is the margin.
  Tensor big = from_vector(std::vector<float>{100, -100, 100, -100}, {4});
  Tensor big_t = from_vector(std::vector<float>{0, 1, 1, 0}, {4});
  EXPECT_TRUE(all_close(binary_cross_entropy_with_logits(big, big_t, Reduction::None),
                        from_vector(std::vector<float>{100, 100, 0, 0}, {4}), 1e-6, 1e-6));

  // The gradient is sigmoid(x) - t, also exactly at x = 0.
  Tensor z = zeros({3}, DType::Float64);
  z.set_requires_grad();
  Tensor zt = from_vector(std::vector<double>{0, 1, 0.25}, {3});
  binary_cross_entropy_with_logits(z, zt, Reduction::Sum).backward();
  EXPECT_TRUE(all_close(z.grad(), from_vector(std::vector<double>{0.5, -0.5, 0.25}, {3}), 1e-12, 1e-12));

  Tensor a = random_leaf({2, 3}, -4, 4, 41), b = random_leaf({2, 3}, 0, 1, 42);
  auto f = [](const std::vector<Tensor>& v) { return binary_cross_entropy_with_logits(v[0], v[1]); };
  EXPECT_TRUE(gradcheck(f, {a, b}));
  EXPECT_TRUE(gradgradcheck(f, {a, b}));
  expect_error([&] { binary_cross_entropy_with_logits(randn({2, 3}), randn({3})); },
               "binary_cross_entropy_with_logits");
}

}  // namespace
}  // namespace smelt
