// The sizes of a dynamic-shape graph (runtime/shape_fit.h) as polynomials in its symbols.
//
// A compiled function whose calls differ in some input dims makes those dims symbols S0, S1, ...
// (dims that always had equal sizes share one). Every integer of its graphs and kernels — a dim,
// an int attribute, an extent, a stride, an offset, a buffer's length — is then a polynomial in
// the symbols with integer coefficients: B * S * 64 for a [B, S, 64] tensor's length, H * S * S
// for a stride of attention scores [B, H, S, S]. SizePoly is such a polynomial; the generated C++
// prints it as an expression of S0, S1, ... read at run time (codegen/emit_cpp.cpp), the
// interpreter and the memory plan evaluate it at the call's sizes.
//
// The polynomials are found by tracing at probe sizes (a grid of three values per symbol, the
// exact interpolation of every polynomial of degree <= 2 in each symbol) and checked at a point
// off the grid; sizes that are not such polynomials (a strided conv's floor((S - 1) / 2) + 1, a
// reshape to a fixed 64 rows) fail the fit or the check, and the function is specialized.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace smelt::codegen {

constexpr int kMaxSymbols = 3;     // a grid has 3^symbols points: 27 traces at most
constexpr int kGridValues = 3;     // per symbol: exact for degree <= 2 in each symbol
using SymbolPoint = std::vector<int64_t>;  // one value per symbol

class SizePoly {
 public:
  SizePoly(int64_t c = 0);  // NOLINT: constants mix freely with polynomials
  static SizePoly symbol(int s);

  int64_t at(const SymbolPoint& p) const;
  bool constant() const { return terms_.empty() || (terms_.size() == 1 && terms_.begin()->first == Monomial{}); }
  int64_t value() const;  // a constant's value (an internal error otherwise)
  // "5", or a C++ expression of S0, S1, ...: "(3 + 2 * S0 * S1)". The same text at every size.
  std::string text() const;
  bool operator==(const SizePoly& o) const { return terms_ == o.terms_; }
  friend SizePoly operator*(const SizePoly& a, const SizePoly& b);
  friend SizePoly operator+(const SizePoly& a, const SizePoly& b);

 private:
  using Monomial = std::array<uint8_t, kMaxSymbols>;  // the exponent of each symbol
  std::map<Monomial, int64_t> terms_;                 // no zero coefficients
};

// The probe sizes of a fit: every combination of the symbols' axis values, and one point off the
// grid that checks it.
struct SymbolGrid {
  std::vector<std::array<int64_t, kGridValues>> axes;  // per symbol, distinct values
  SymbolPoint check;
  // Every grid point, the last symbol varying fastest (so points()[0] and points()[1] differ only
  // in the last symbol).
  std::vector<SymbolPoint> points() const;
  int symbols() const { return int(axes.size()); }
};

// The polynomial through `values` (one per grid.points(), in order): nullopt when the
// interpolating polynomial has a coefficient that is not an integer (or does not fit int64).
std::optional<SizePoly> fit_size(const SymbolGrid& grid, const std::vector<int64_t>& values);

// "S0=17, S1=31" for messages.
std::string point_str(const SymbolPoint& p);

}  // namespace smelt::codegen
