#include <cmath>

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

// Naive reference in double over the row-major values.
Tensor softmax_ref(const Tensor& x, int64_t dim, bool log) {
  std::vector<double> v = x.to_vector(), out(v.size());
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t d = 0; d < x.dim(); ++d) (d < dim ? outer : d == dim ? n : inner) *= x.size(d);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      auto at = [&](int64_t k) { return size_t((o * n + k) * inner + j); };
      double m = -INFINITY;
      for (int64_t k = 0; k < n; ++k) m = std::max(m, v[at(k)]);
      double s = 0;
      for (int64_t k = 0; k < n; ++k) s += std::exp(v[at(k)] - m);
      for (int64_t k = 0; k < n; ++k) {
        out[at(k)] = log ? v[at(k)] - m - std::log(s) : std::exp(v[at(k)] - m) / s;
      }
    }
  }
  return from_vector(out, x.shape(), x.dtype());
}

struct Case {
  Shape shape;
  int64_t dim;
};

TEST(Softmax, ForwardMatchesReference) {
  // last dim (row path), middle and first dims (column path), a column block boundary (300 > 256)
  const std::vector<Case> cases = {{{4, 7}, -1}, {{2, 1000}, 1}, {{3, 5, 6}, 1}, {{3, 5, 6}, 0},
                                   {{2, 3, 300}, 1}, {{5, 4, 1}, 1}, {{6}, 0}};
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (const Case& c : cases) {
      Tensor x = normal(c.shape, 0.0, 3.0, dtype);
      const double tol = dtype == DType::Float32 ? 1e-5 : 1e-12;
      EXPECT_TRUE(all_close(softmax(x, c.dim), softmax_ref(x, wrap_dim(c.dim, x.dim(), ""), false), tol, tol))
          << shape_str(c.shape) << " dim " << c.dim;
      EXPECT_TRUE(all_close(log_softmax(x, c.dim), softmax_ref(x, wrap_dim(c.dim, x.dim(), ""), true), tol, tol))
          << shape_str(c.shape) << " dim " << c.dim;
    }
  }
}

TEST(Softmax, NonContiguousInput) {
  Tensor base = randn({6, 5, 4}, DType::Float64);
  Tensor permuted = base.permute({2, 0, 1});          // (4, 6, 5)
  Tensor sliced = base.slice(1, 0, 5, 2);             // (6, 3, 4)
  for (int64_t dim : {0, 1, 2}) {
    EXPECT_TRUE(all_close(softmax(permuted, dim), softmax_ref(permuted.contiguous(), dim, false)));
    EXPECT_TRUE(all_close(log_softmax(sliced, dim), softmax_ref(sliced.contiguous(), dim, true)));
  }
}

TEST(Softmax, LargeLogitsDoNotOverflow) {
  Tensor x = from_vector(std::vector<float>{1000, 1001, 1002, -1000, -1001, -1002}, {2, 3});
  Tensor y = softmax(x, 1), ly = log_softmax(x, 1);
  const double e1 = std::exp(-1.0), e2 = std::exp(-2.0), s = 1 + e1 + e2;
  EXPECT_TRUE(all_close(y, from_vector(std::vector<float>{float(e2 / s), float(e1 / s), float(1 / s),
                                                          float(1 / s), float(e1 / s), float(e2 / s)},
                                       {2, 3})));
  EXPECT_NEAR(ly.to_vector()[2], -std::log(s), 1e-6);
  EXPECT_NEAR(ly.to_vector()[5], -2 - std::log(s), 1e-5);
}

TEST(Softmax, NaNRowStaysNaNOthersUnaffected) {
  Tensor x = from_vector(std::vector<double>{1, NAN, 2, 1, 2, 3}, {2, 3});
  std::vector<double> y = softmax(x, 1).to_vector();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(y[i]));
  EXPECT_NEAR(y[3] + y[4] + y[5], 1.0, 1e-12);
}

TEST(Softmax, ZeroDimAndEmpty) {
  EXPECT_DOUBLE_EQ(softmax(scalar_tensor(3.5, DType::Float64), 0).item(), 1.0);
  EXPECT_DOUBLE_EQ(log_softmax(scalar_tensor(3.5, DType::Float64), -1).item(), 0.0);
  EXPECT_EQ(softmax(zeros({0, 4}), 1).shape(), (Shape{0, 4}));
}

TEST(Softmax, GradcheckEveryDim) {
  for (int64_t dim : {0, 1, 2, -1}) {
    Tensor x = random_leaf({3, 4, 5}, -2, 2, 3);
    EXPECT_TRUE(gradcheck([dim](const std::vector<Tensor>& v) { return softmax(v[0], dim); }, {x}))
        << "dim " << dim;
    EXPECT_TRUE(gradcheck([dim](const std::vector<Tensor>& v) { return log_softmax(v[0], dim); }, {x}))
        << "dim " << dim;
  }
}

TEST(Softmax, GradcheckNonContiguous) {
  Tensor x = random_leaf({4, 3, 5}, -2, 2, 4);
  auto permuted = [](const std::vector<Tensor>& v) { return softmax(v[0].permute({2, 0, 1}), 1); };
  auto sliced = [](const std::vector<Tensor>& v) { return log_softmax(v[0].slice(2, 1, 5, 2), 0); };
  EXPECT_TRUE(gradcheck(permuted, {x}));
  EXPECT_TRUE(gradcheck(sliced, {x}));
}

TEST(Softmax, SecondOrder) {
  Tensor x = random_leaf({3, 4}, -2, 2, 5);
  EXPECT_TRUE(gradgradcheck([](const std::vector<Tensor>& v) { return softmax(v[0], 1); }, {x}));
  EXPECT_TRUE(gradgradcheck([](const std::vector<Tensor>& v) { return log_softmax(v[0], 0); }, {x}));
}

TEST(Softmax, Errors) {
  Tensor x = randn({2, 3});
  expect_error([&] { softmax(x, 2); }, "softmax");
  expect_error([&] { log_softmax(x, -3); }, "log_softmax");
  expect_error([&] { softmax(arange(4), 0); }, "softmax");
  expect_error([&] { log_softmax(arange(4), 0); }, "log_softmax");
}

}  // namespace
}  // namespace smelt
