// Forward values and gradients at the edges of clamp (infinite and absent bounds), pow (zero
// bases and exponents, first and second order), sqrt/rsqrt/log at 0 and div by 0, against the
// values PyTorch 1.13 computes for the same programs (noted next to each).
#include <cmath>
#include <limits>
#include <vector>

#include "support/check.h"
#include "support/errors.h"

namespace smelt {
namespace {

using testing::expect_error;

constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor f64(std::vector<double> v) {
  const int64_t n = int64_t(v.size());
  return from_vector(v, {n}, DType::Float64);
}
Tensor leaf(std::vector<double> v) {
  Tensor t = f64(std::move(v));
  t.set_requires_grad();
  return t;
}

// Equal elementwise, NaN matching NaN and the sign of zero checked.
::testing::AssertionResult same_values(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < got.size(); ++i) {
    bool ok = std::isnan(want[i]) ? std::isnan(got[i])
                                  : got[i] == want[i] && std::signbit(got[i]) == std::signbit(want[i]);
    if (!ok) return ::testing::AssertionFailure() << "element " << i << ": got " << got[i] << ", want " << want[i];
  }
  return ::testing::AssertionSuccess();
}

// d/dx sum(f(x)) and d/dx sum(d/dx sum(f(x))) (second order through create_graph).
std::pair<std::vector<double>, std::vector<double>> grads12(const std::function<Tensor(const Tensor&)>& f,
                                                            std::vector<double> x0) {
  Tensor x = leaf(std::move(x0));
  Tensor g = autograd::grad({sum(f(x))}, {x}, {}, false, /*create_graph=*/true)[0];
  std::vector<double> first = g.to_vector();
  std::vector<double> second(first.size(), 0.0);
  if (g.requires_grad()) {
    Tensor gg = autograd::grad({sum(g)}, {x}, {}, false, false, /*allow_unused=*/true)[0];
    if (gg.defined()) second = gg.to_vector();
  }
  return {first, second};
}

// ---- clamp

TEST(ClampEdges, InfiniteAndAbsentBoundsAreRealInfinities) {
  Tensor x = f64({kInf, -kInf, 1, NAN});
  // the regression: an absent max became DBL_MAX, so inf came out as DBL_MAX (PyTorch: inf)
  EXPECT_TRUE(same_values(clamp(x, 0.0, std::nullopt).to_vector(), {kInf, 0, 1, NAN}));
  // the regression: min = inf was taken as "no bound" (PyTorch: inf everywhere but NaN)
  EXPECT_TRUE(same_values(clamp(x, kInf, std::nullopt).to_vector(), {kInf, kInf, kInf, NAN}));
  EXPECT_TRUE(same_values(clamp(x, std::nullopt, -kInf).to_vector(), {-kInf, -kInf, -kInf, NAN}));
  EXPECT_TRUE(same_values(clamp(x, -kInf, kInf).to_vector(), {kInf, -kInf, 1, NAN}));
  // a NaN bound gives NaN (PyTorch: the same)
  EXPECT_TRUE(same_values(clamp(f64({1, 2}), NAN, std::nullopt).to_vector(), {NAN, NAN}));
  // float32 the same
  Tensor xf = from_vector(std::vector<float>{INFINITY, 1.0f}, {2});
  EXPECT_TRUE(same_values(clamp(xf, 0.0, std::nullopt).to_vector(), {kInf, 1}));
  EXPECT_TRUE(same_values(clamp(xf, kInf, std::nullopt).to_vector(), {kInf, kInf}));
  // a float bound beyond float32's range rounds to inf, as any float64 -> float32 value
  EXPECT_TRUE(same_values(clamp(xf, std::nullopt, 1e300).to_vector(), {kInf, 1}));
}

TEST(ClampEdges, Int64BoundsBindExactlyOrAreRefused) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  Tensor x = from_vector(std::vector<int64_t>{-5, 0, 5, kMax}, {4});
  // an infinity or out-of-range value on the side where it clamps nothing is no bound
  EXPECT_EQ(clamp(x, -kInf, kInf).to_vector(), x.to_vector());
  EXPECT_EQ(clamp(x, -1e30, 1e30).to_vector(), x.to_vector());
  EXPECT_EQ(clamp(x, -2.0, 3.0).to_vector(), (std::vector<double>{-2, 0, 3, 3}));
  Tensor big = clamp(x, double(int64_t(1) << 62), std::nullopt);
  EXPECT_EQ(big.data<int64_t>()[0], int64_t(1) << 62);
  EXPECT_EQ(big.data<int64_t>()[3], kMax);
  // no type promotion in smelt (PyTorch would return float): what int64 cannot hold is an error
  expect_error([&] { clamp(x, 2.5, std::nullopt); }, {"clamp", "min", "not an integer"});
  expect_error([&] { clamp(x, std::nullopt, NAN); }, {"clamp", "max", "NaN"});
  expect_error([&] { clamp(x, kInf, std::nullopt); }, {"clamp", "min", "beyond the range"});
  expect_error([&] { clamp(x, std::nullopt, -1e30); }, {"clamp", "max", "beyond the range"});
}

TEST(ClampEdges, GradientFlowsWhereTheValueWasNotClamped) {
  // PyTorch: grad 1 where min <= x <= max (bounds inclusive), 0 elsewhere; lo > hi: 0 everywhere
  auto g = [](std::optional<double> lo, std::optional<double> hi, std::vector<double> x) {
    return grads12([=](const Tensor& t) { return clamp(t, lo, hi); }, x).first;
  };
  EXPECT_TRUE(same_values(g(0.0, std::nullopt, {0, 1, 2}), {1, 1, 1}));
  EXPECT_TRUE(same_values(g(std::nullopt, 0.0, {0, 1, 2}), {1, 0, 0}));
  EXPECT_TRUE(same_values(g(1.0, 1.0, {0, 1, 2}), {0, 1, 0}));
  EXPECT_TRUE(same_values(g(2.5, 1.5, {1, 2, 3}), {0, 0, 0}));
  // infinite values and bounds: the forward leaves inf alone under (0, none), so does the gradient
  EXPECT_TRUE(same_values(g(0.0, std::nullopt, {kInf, -kInf}), {1, 0}));
  EXPECT_TRUE(same_values(g(kInf, std::nullopt, {kInf, 1}), {1, 0}));
  EXPECT_TRUE(same_values(g(-kInf, kInf, {kInf, -kInf, NAN}), {1, 1, 0}));
}

// ---- pow

TEST(PowEdges, ZeroExponentHasZeroGradientAtZeroBase) {
  // the regression: 0 * 0^-1 = 0 * inf = NaN; PyTorch: 0, and second order 0 too
  auto [g1, g2] = grads12([](const Tensor& z) { return pow(z, 0.0); }, {0, -0.0, 2, -2});
  EXPECT_TRUE(same_values(g1, {0, 0, 0, 0}));
  EXPECT_TRUE(same_values(g2, {0, 0, 0, 0}));
  // a tensor exponent that is 0 in places, with the exponent's own gradient
  Tensor z = leaf({0, 0, -2, 3}), e = leaf({0, 2, 0, 0});
  auto gs = autograd::grad({sum(pow(z, e))}, {z, e}, {}, false, true);
  EXPECT_TRUE(same_values(gs[0].to_vector(), {0, 0, 0, 0}));
  auto gg = autograd::grad({sum(gs[0])}, {z}, {}, false, false, true);
  EXPECT_TRUE(same_values(gg[0].to_vector(), {0, 2, 0, 0}));  // d^2/dz^2 z^2 = 2
}

TEST(PowEdges, BaseGradientsMatchPyTorch) {
  // torch.tensor([0., -2.], dtype=float64) ** e: first and second derivatives in z
  struct Case {
    double e;
    std::vector<double> g1, g2;
  };
  const std::vector<Case> cases = {
      {1.0, {1, 1}, {0, 0}},
      {0.5, {kInf, NAN}, {-kInf, NAN}},
      {2.0, {0, -4}, {2, 2}},
      {3.0, {0, 12}, {0, -12}},
      {-1.0, {-kInf, -0.25}, {kInf, -0.25}},
      {-2.0, {-kInf, 0.25}, {kInf, 0.375}},
  };
  for (const Case& c : cases) {
    auto [g1, g2] = grads12([&](const Tensor& z) { return pow(z, c.e); }, {0, -2});
    EXPECT_TRUE(same_values(g1, c.g1)) << "exponent " << c.e;
    EXPECT_TRUE(same_values(g2, c.g2)) << "exponent " << c.e;
  }
}

TEST(PowEdges, ExponentGradientMatchesPyTorch) {
  // d z^e / de = z^e log z; PyTorch: 0 at z == 0 for e >= 0, -inf for e < 0, NaN for z < 0
  Tensor z = f64({0, 0, 0, -2, -2, 2});
  Tensor e = leaf({0, 1, -1, 2, 0.5, 3});
  Tensor ge = autograd::grad({sum(pow(z, e))}, {e})[0];
  EXPECT_TRUE(same_values(ge.to_vector(), {0, 0, -kInf, NAN, NAN, 8 * std::log(2.0)}));
}

TEST(PowEdges, FiniteDifferencesAwayFromTheEdges) {
  Tensor z = testing::random_leaf({7}, 0.5, 2.0, 3);
  Tensor e = testing::random_leaf({7}, -2.0, 2.0, 4);
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& v) { return pow(v[0], v[1]); }, {z, e}));
}

// ---- other functions at their poles

TEST(PoleGradients, SqrtRsqrtLogAndDivAtZero) {
  // PyTorch at 0: sqrt' = inf, rsqrt' = -inf, log' = inf
  EXPECT_TRUE(same_values(grads12([](const Tensor& z) { return sqrt(z); }, {0}).first, {kInf}));
  EXPECT_TRUE(same_values(grads12([](const Tensor& z) { return rsqrt(z); }, {0}).first, {-kInf}));
  EXPECT_TRUE(same_values(grads12([](const Tensor& z) { return log(z); }, {0}).first, {kInf}));
  // a / b with b = 0: da = [inf, inf, inf, 1], db = [-inf, nan, inf, -0] (PyTorch)
  Tensor a = leaf({1, 0, -1, 0}), b = leaf({0, 0, 0, 1});
  auto g = autograd::grad({sum(div(a, b))}, {a, b});
  EXPECT_TRUE(same_values(g[0].to_vector(), {kInf, kInf, kInf, 1}));
  EXPECT_TRUE(same_values(g[1].to_vector(), {-kInf, NAN, kInf, -0.0}));
}

}  // namespace
}  // namespace smelt
