// prod's edges: zeros in the gradient (one and several per output, where out / x is wrong), NaN,
// ±inf, empty and size-1 dims, int64 wrap-around, second-order gradients.
#include <cmath>
#include <limits>

#include "ops/reference.h"

namespace smelt {
namespace {

using testing::gradcheck;
using testing::grad_of;

// d prod / d x_i as the product of the other elements, by brute force over a row.
std::vector<double> others_product(const std::vector<double>& row) {
  std::vector<double> g;
  for (size_t i = 0; i < row.size(); ++i) {
    double p = 1;
    for (size_t j = 0; j < row.size(); ++j) {
      if (j != i) p *= row[j];
    }
    g.push_back(p);
  }
  return g;
}

TEST(Prod, GradientAtZerosIsTheProductOfTheOthers) {
  // rows with no zero, one zero, two zeros, all zeros, and a lone zero
  const std::vector<std::vector<double>> rows = {
      {2, -3, 0.5, 4}, {2, 0, 0.5, 4}, {0, -3, 0, 4}, {0, 0, 0, 0}, {-0.0, 1, 1, 1}};
  for (const auto& row : rows) {
    Tensor x = from_vector(row, {1, 4}, DType::Float64).set_requires_grad();
    prod(x, {1}).sum().backward();
    std::vector<double> want = others_product(row), got = x.grad().to_vector();
    for (size_t i = 0; i < row.size(); ++i)
      EXPECT_EQ(got[i], want[i]) << "row starting " << row[0] << ", " << row[1] << " i " << i;
  }
  // and finite differences through a zero (prod is polynomial: central differences are exact
  // up to rounding)
  Tensor z = from_vector(std::vector<double>{0.7, 0, -1.2, 0.3, 0, 0, 1.1, 0.9, -0.4}, {3, 3},
                         DType::Float64).set_requires_grad();
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& v) { return prod(v[0], {1}, true); }, {z}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& v) { return prod(v[0]); }, {z}));
}

TEST(Prod, SecondOrderGradcheck) {
  auto f = [](const std::vector<Tensor>& v) {
    return grad_of([](const Tensor& x) { return sum(prod(x, {0}) * prod(x, {1}, true).sum()); }, v[0]);
  };
  EXPECT_TRUE(gradcheck(f, {testing::random_leaf({3, 3}, 0.5, 1.5, 5)}));
}

TEST(Prod, NaNAndInfinity) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  Tensor x = from_vector(std::vector<double>{1, nan, 2, inf, -2, 3, inf, 0, 1}, {3, 3});
  std::vector<double> y = prod(x, {1}).to_vector();
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], -inf);
  EXPECT_TRUE(std::isnan(y[2]));  // inf * 0, as IEEE and PyTorch
  // NaN flows into every gradient of its row (PyTorch: out / x = NaN), not into other rows
  Tensor leaf = from_vector(std::vector<double>{1, nan, 2, 3, 4, 5}, {2, 3}).set_requires_grad();
  prod(leaf, {1}).sum().backward();
  std::vector<double> g = leaf.grad().to_vector();
  EXPECT_TRUE(std::isnan(g[0]) && std::isnan(g[2]));
  EXPECT_EQ(g[3], 20);
  EXPECT_EQ(g[5], 12);
}

TEST(Prod, EmptyAndSizeOneDims) {
  EXPECT_EQ(prod(zeros({3, 0})).item(), 1);  // the product of nothing
  EXPECT_EQ(prod(zeros({3, 0}), {1}).to_vector(), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(prod(zeros({0, 4}), {1}).shape(), (Shape{0}));
  Tensor one = from_vector(std::vector<double>{-2.5}, {1, 1, 1});
  EXPECT_EQ(prod(one, {1}, true).to_vector(), (std::vector<double>{-2.5}));
  EXPECT_EQ(prod(scalar_tensor(4.0)).item(), 4);
  Tensor leaf = zeros({2, 0}, DType::Float64).set_requires_grad();
  prod(leaf, {1}).sum().backward();
  EXPECT_EQ(leaf.grad().shape(), (Shape{2, 0}));
}

TEST(Prod, Int64IsExactAndWraps) {
  const int64_t big = int64_t(1) << 62;
  Tensor x = from_vector(std::vector<int64_t>{big, 2, 1, 3'000'000'007, 3'000'000'019, -1}, {2, 3});
  Tensor y = prod(x, {1});
  ASSERT_EQ(y.dtype(), DType::Int64);
  EXPECT_EQ(y.data<int64_t>()[0], std::numeric_limits<int64_t>::min());  // 2^63 wraps
  // 3000000007 * 3000000019 = 9000000078000000133 > 2^63 - 1: wraps modulo 2^64
  const uint64_t want = uint64_t(3'000'000'007) * uint64_t(3'000'000'019) * uint64_t(-1);
  EXPECT_EQ(y.data<int64_t>()[1], int64_t(want));
  EXPECT_EQ(prod(arange(1.0, 21.0)).data<int64_t>()[0], 2432902008176640000);  // 20!, beyond 2^53
}

TEST(Prod, RejectsBoolWithAClearError) {
  testing::expect_error([] { prod(ones({2}, DType::Bool)); }, "prod: dtype bool is not supported");
}

}  // namespace
}  // namespace smelt
