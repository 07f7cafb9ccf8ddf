// SizePoly and fit_size (codegen/size_poly.h): the polynomials of a dynamic-shape graph's sizes,
// fitted through a grid of probe sizes and exact at every other size.
#include "codegen/size_poly.h"

#include <functional>
#include <random>

#include <gtest/gtest.h>

namespace smelt::codegen {
namespace {

SymbolGrid grid_of(int symbols) {
  SymbolGrid g;
  const std::vector<std::array<int64_t, kGridValues>> axes = {{17, 19, 23}, {30, 32, 36}, {43, 45, 49}};
  g.axes.assign(axes.begin(), axes.begin() + symbols);
  for (int s = 0; s < symbols; ++s) g.check.push_back(axes[size_t(s)][2] + 6);
  return g;
}

std::optional<SizePoly> fit(const SymbolGrid& g, const std::function<int64_t(const SymbolPoint&)>& f) {
  std::vector<int64_t> values;
  for (const SymbolPoint& p : g.points()) values.push_back(f(p));
  return fit_size(g, values);
}

TEST(SizePoly, GridPointsVaryTheLastSymbolFastest) {
  const std::vector<SymbolPoint> p = grid_of(2).points();
  ASSERT_EQ(p.size(), 9u);
  EXPECT_EQ(p[0], (SymbolPoint{17, 30}));
  EXPECT_EQ(p[1], (SymbolPoint{17, 32}));
  EXPECT_EQ(p[3], (SymbolPoint{19, 30}));
  EXPECT_EQ(p[8], (SymbolPoint{23, 36}));
  EXPECT_EQ(grid_of(3).points().size(), 27u);
}

TEST(SizePoly, FitsTheSizesAttentionMakes) {
  const SymbolGrid g = grid_of(2);  // S0 = B, S1 = S
  struct Case {
    std::function<int64_t(const SymbolPoint&)> f;
    const char* text;
  };
  const std::vector<Case> cases = {
      {[](const SymbolPoint&) { return int64_t(64); }, "64"},
      {[](const SymbolPoint&) { return int64_t(0); }, "0"},
      {[](const SymbolPoint& p) { return p[0]; }, "(S0)"},
      {[](const SymbolPoint& p) { return p[0] * p[1] * 64; }, "(64 * S0 * S1)"},            // [B*S, 64]
      {[](const SymbolPoint& p) { return 4 * p[1] * p[1]; }, "(4 * S1 * S1)"},              // a stride of [B,4,S,S]
      {[](const SymbolPoint& p) { return p[0] * 4 * p[1] * p[1]; }, "(4 * S0 * S1 * S1)"},  // its numel
      {[](const SymbolPoint& p) { return p[1] - 1; }, "(-1 + S1)"},                        // a causal mask's slice
      {[](const SymbolPoint& p) { return -p[0]; }, "(-1 * S0)"},
  };
  for (const Case& c : cases) {
    std::optional<SizePoly> poly = fit(g, c.f);
    ASSERT_TRUE(poly) << c.text;
    EXPECT_EQ(poly->text(), c.text);
    for (int64_t b : {0, 1, 2, 1000}) {
      for (int64_t s : {1, 5, 4096}) EXPECT_EQ(poly->at({b, s}), c.f({b, s})) << c.text << " at " << b << ", " << s;
    }
  }
}

TEST(SizePoly, RefusesWhatIsNoIntegerPolynomial) {
  const SymbolGrid g = grid_of(1);
  // a strided conv's output size, half a size, a cube: no integer polynomial of degree <= 2 through
  // the grid (the cube's interpolation has integer coefficients: the check point refuses it, see
  // the next test)
  EXPECT_FALSE(fit(g, [](const SymbolPoint& p) { return (p[0] - 1) / 2 + 1; }));
  EXPECT_FALSE(fit(g, [](const SymbolPoint& p) { return p[0] / 2; }));
  EXPECT_FALSE(fit(g, [](const SymbolPoint& p) { return p[0] * p[0] / 3; }));
}

TEST(SizePoly, TheCheckPointSeesACube) {
  const SymbolGrid g = grid_of(1);
  auto cube = [](const SymbolPoint& p) { return p[0] * p[0] * p[0]; };
  std::optional<SizePoly> poly = fit(g, cube);
  if (poly) {
    EXPECT_NE(poly->at(g.check), cube(g.check));
  }
}

// Random integer polynomials of degree <= 2 in each of 3 symbols come back exactly.
TEST(SizePoly, RandomPolynomialsComeBack) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> coef(-50, 50);
  const SymbolGrid g = grid_of(3);
  for (int trial = 0; trial < 50; ++trial) {
    int64_t c[27];
    for (int64_t& x : c) x = trial % 3 == 0 && coef(rng) % 2 ? 0 : coef(rng);
    auto f = [&](const SymbolPoint& p) {
      int64_t v = 0;
      for (int i = 0; i < 27; ++i) {
        int64_t t = c[i];
        for (int e = 0; e < i / 9; ++e) t *= p[0];
        for (int e = 0; e < (i / 3) % 3; ++e) t *= p[1];
        for (int e = 0; e < i % 3; ++e) t *= p[2];
        v += t;
      }
      return v;
    };
    std::optional<SizePoly> poly = fit(g, f);
    ASSERT_TRUE(poly) << trial;
    EXPECT_EQ(poly->at(g.check), f(g.check)) << trial << " " << poly->text();
    EXPECT_EQ(poly->at({1, 2, 3}), f({1, 2, 3})) << trial;
  }
}

TEST(SizePoly, Arithmetic) {
  const SizePoly b = SizePoly::symbol(0), s = SizePoly::symbol(1);
  EXPECT_EQ((b * s * SizePoly(3) + SizePoly(2)).text(), "(2 + 3 * S0 * S1)");
  EXPECT_EQ((b + SizePoly(-1) * b).text(), "0");
  EXPECT_TRUE((b + SizePoly(-1) * b).constant());
  EXPECT_EQ(b * s, s * b);
  EXPECT_EQ(SizePoly(7).value(), 7);
  EXPECT_EQ(point_str({3, 4}), "S0=3, S1=4");
}

}  // namespace
}  // namespace smelt::codegen
