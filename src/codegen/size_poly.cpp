#include "codegen/size_poly.h"

#include <numeric>

#include "smelt/error.h"

namespace smelt::codegen {
namespace {

// An exact rational for the interpolation (__int128: products of sizes and grid values stay far
// inside its range; an overflow would need coefficients beyond int64, refused below anyway).
struct Rational {
  __int128 num = 0, den = 1;
};

__int128 gcd128(__int128 a, __int128 b) {
  if (a < 0) a = -a;
  if (b < 0) b = -b;
  while (b != 0) {
    const __int128 t = a % b;
    a = b;
    b = t;
  }
  return a;
}

Rational make(__int128 num, __int128 den) {
  if (den < 0) num = -num, den = -den;
  const __int128 g = gcd128(num, den);
  if (g > 1) num /= g, den /= g;
  return {num, den};
}

Rational operator-(const Rational& a, const Rational& b) { return make(a.num * b.den - b.num * a.den, a.den * b.den); }
Rational operator/(const Rational& a, int64_t d) { return make(a.num, a.den * d); }
Rational times(const Rational& a, int64_t x) { return make(a.num * x, a.den); }

// The coefficients (of x^0, x^1, x^2) of the polynomial of degree <= 2 through (x[i], y[i]):
// Newton's divided differences, expanded.
std::array<Rational, 3> interpolate(const std::array<int64_t, 3>& x, const std::array<Rational, 3>& y) {
  const Rational d01 = (y[1] - y[0]) / (x[1] - x[0]);
  const Rational d12 = (y[2] - y[1]) / (x[2] - x[1]);
  const Rational c2 = (d12 - d01) / (x[2] - x[0]);
  const Rational c1 = d01 - times(c2, x[0] + x[1]);
  const Rational c0 = y[0] - times(d01, x[0]) - times(c2, -x[0] * x[1]);
  return {c0, c1, c2};
}

}  // namespace

SizePoly::SizePoly(int64_t c) {
  if (c != 0) terms_[Monomial{}] = c;
}

SizePoly SizePoly::symbol(int s) {
  SMELT_INTERNAL_CHECK(s >= 0 && s < kMaxSymbols) << "SizePoly: symbol " << s;
  SizePoly p;
  Monomial m{};
  m[size_t(s)] = 1;
  p.terms_[m] = 1;
  return p;
}

int64_t SizePoly::at(const SymbolPoint& p) const {
  int64_t v = 0;
  for (const auto& [m, c] : terms_) {
    int64_t t = c;
    for (size_t s = 0; s < m.size(); ++s) {
      SMELT_INTERNAL_CHECK(m[s] == 0 || s < p.size()) << "SizePoly::at: symbol S" << s << " has no value";
      for (int e = 0; e < m[s]; ++e) t *= p[s];
    }
    v += t;
  }
  return v;
}

int64_t SizePoly::value() const {
  SMELT_INTERNAL_CHECK(constant()) << "SizePoly: " << text() << " used as a constant";
  return terms_.empty() ? 0 : terms_.begin()->second;
}

std::string SizePoly::text() const {
  if (constant()) return std::to_string(value());
  std::string t = "(";
  bool first = true;
  for (const auto& [m, c] : terms_) {
    if (!first) t += " + ";
    first = false;
    std::string factors;
    for (size_t s = 0; s < m.size(); ++s) {
      for (int e = 0; e < m[s]; ++e) factors += (factors.empty() ? "S" : " * S") + std::to_string(s);
    }
    if (c != 1 || factors.empty()) t += std::to_string(c) + (factors.empty() ? "" : " * ");
    t += factors;
  }
  return t + ")";
}

SizePoly operator*(const SizePoly& a, const SizePoly& b) {
  SizePoly r;
  for (const auto& [ma, ca] : a.terms_) {
    for (const auto& [mb, cb] : b.terms_) {
      SizePoly::Monomial m{};
      for (size_t s = 0; s < m.size(); ++s) m[s] = uint8_t(ma[s] + mb[s]);
      if ((r.terms_[m] += ca * cb) == 0) r.terms_.erase(m);
    }
  }
  return r;
}

SizePoly operator+(const SizePoly& a, const SizePoly& b) {
  SizePoly r = a;
  for (const auto& [m, c] : b.terms_) {
    if ((r.terms_[m] += c) == 0) r.terms_.erase(m);
  }
  return r;
}

std::vector<SymbolPoint> SymbolGrid::points() const {
  std::vector<SymbolPoint> out(1);
  for (const auto& axis : axes) {
    std::vector<SymbolPoint> next;
    for (const SymbolPoint& p : out) {
      for (int64_t v : axis) {
        next.push_back(p);
        next.back().push_back(v);
      }
    }
    out = std::move(next);
  }
  return out;
}

std::optional<SizePoly> fit_size(const SymbolGrid& grid, const std::vector<int64_t>& values) {
  const int k = grid.symbols();
  SMELT_INTERNAL_CHECK(k >= 1 && k <= kMaxSymbols) << "fit_size: " << k << " symbols";
  std::vector<Rational> c(values.size());
  for (size_t i = 0; i < values.size(); ++i) c[i] = {values[i], 1};
  SMELT_INTERNAL_CHECK(c.size() == grid.points().size()) << "fit_size: " << c.size() << " values";
  // Values to coefficients one axis at a time (the interpolation is a tensor product): along axis
  // a, index i's digit a (base 3, the last axis least significant) is the grid value, afterwards
  // the exponent of S_a.
  for (int a = 0; a < k; ++a) {
    size_t step = 1;
    for (int b = a + 1; b < k; ++b) step *= kGridValues;
    for (size_t i = 0; i < c.size(); ++i) {
      if ((i / step) % kGridValues != 0) continue;
      const std::array<Rational, 3> y{c[i], c[i + step], c[i + 2 * step]};
      const std::array<Rational, 3> coef = interpolate(grid.axes[size_t(a)], y);
      for (int e = 0; e < kGridValues; ++e) c[i + size_t(e) * step] = coef[size_t(e)];
    }
  }
  SizePoly out;
  for (size_t i = 0; i < c.size(); ++i) {
    if (c[i].num == 0) continue;
    if (c[i].den != 1 || c[i].num > INT64_MAX || c[i].num < INT64_MIN) return std::nullopt;
    SizePoly term(int64_t(c[i].num));
    size_t rest = i;
    for (int a = k - 1; a >= 0; --a, rest /= kGridValues) {
      for (size_t e = 0; e < rest % kGridValues; ++e) term = term * SizePoly::symbol(a);
    }
    out = out + term;
  }
  return out;
}

std::string point_str(const SymbolPoint& p) {
  std::string s;
  for (size_t i = 0; i < p.size(); ++i) s += (i ? ", S" : "S") + std::to_string(i) + "=" + std::to_string(p[i]);
  return s;
}

}  // namespace smelt::codegen
