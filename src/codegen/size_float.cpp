#include "codegen/size_float.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <set>
#include <utility>
#include <vector>

#include "smelt/error.h"

namespace smelt::codegen {
namespace {

// The reduced ratio n2 / n1 is read off the values: its denominator is kept small enough that
// two values of the dtype pin it down (and that no ratio of two arbitrary floats passes for one).
constexpr int64_t kMaxDenominator = int64_t(1) << 20;
constexpr int64_t kMaxN = int64_t(1) << 40;
// Multiples k of the reduced ratio tried for n1 = k q: every k up to kDenseMultiples, and the k
// that make c an integer up to kIntegerScales (n = S B for a long S, the mean over B S tokens).
constexpr int64_t kDenseMultiples = 256;
constexpr int kIntegerScales = 64;

double round_to(double v, DType dtype) {
  SMELT_INTERNAL_CHECK(dtype_is_floating(dtype)) << "size_float: " << dtype_name(dtype) << " is not floating";
  return dtype == DType::Float32 ? double(float(v)) : v;
}

// `c` rounded to its `bits` leading significant bits.
double round_bits(double c, int bits) {
  int e = 0;
  const double m = std::frexp(c, &e);
  return std::ldexp(std::nearbyint(std::ldexp(m, bits)), e - bits);
}

int significant_bits(double c) {
  int e = 0;
  const uint64_t m = uint64_t(std::ldexp(std::fabs(std::frexp(c, &e)), 53));
  return m == 0 ? 0 : 53 - std::countr_zero(m);
}

// The convergents p / q of the continued fraction of x > 0 with q <= kMaxDenominator.
std::vector<std::pair<int64_t, int64_t>> convergents(double x) {
  std::vector<std::pair<int64_t, int64_t>> out;
  int64_t p0 = 1, q0 = 0, p1 = 0, q1 = 1;  // the two previous convergents, latest first
  for (int i = 0; i < 64 && x < 0x1p40; ++i) {
    const double a = std::floor(x);
    if (a > double(kMaxN)) break;
    const int64_t p = int64_t(a) * p0 + p1, q = int64_t(a) * q0 + q1;
    if (q > kMaxDenominator || p > kMaxN) break;
    out.emplace_back(p, q);
    p1 = p0, q1 = q0, p0 = p, q0 = q;
    if (x - a == 0) break;
    x = 1 / (x - a);
  }
  return out;
}

}  // namespace

double size_float_value(const SizeFloat& f, int64_t n, DType dtype) {
  return round_to(f.form == SizeFloatForm::Count ? f.scale * double(n) : f.scale / double(n), dtype);
}

std::optional<SizeFloat> size_float_fit(double v1, int64_t b1, double v2, int64_t b2, DType dtype) {
  SMELT_INTERNAL_CHECK(b1 != b2) << "size_float_fit: two values at the same batch size " << b1;
  if (!std::isfinite(v1) || !std::isfinite(v2) || v1 == 0 || v2 == 0 || std::signbit(v1) != std::signbit(v2)) {
    return std::nullopt;
  }
  // How far x2 / x1 may be from n2 / n1: each value is rounded to the dtype once (and 1 / v once more).
  const double tolerance = dtype == DType::Float32 ? 0x1p-21 : 0x1p-49;
  std::optional<SizeFloat> best;
  int best_bits = 54;
  // Among c of equally few bits, the one nearest 1 (n = 12 B, not 4 * (3 B)); then the first found.
  auto nearer_one = [](double a, double b) {
    int ea = 0, eb = 0;
    std::frexp(a, &ea);
    std::frexp(b, &eb);
    return std::abs(ea - 1) < std::abs(eb - 1);
  };
  for (SizeFloatForm form : {SizeFloatForm::Count, SizeFloatForm::Reciprocal}) {
    // x is n times a constant (c, or 1 / c)
    const double x1 = form == SizeFloatForm::Count ? std::fabs(v1) : 1 / std::fabs(v1);
    const double x2 = form == SizeFloatForm::Count ? std::fabs(v2) : 1 / std::fabs(v2);
    const double ratio = x2 / x1;
    for (const auto& [p, q] : convergents(ratio)) {
      if (std::fabs(double(p) / double(q) - ratio) > tolerance * ratio) continue;
      auto c_for = [&](int64_t n1) { return form == SizeFloatForm::Count ? v1 / double(n1) : v1 * double(n1); };
      std::set<int64_t> multiples;
      for (int64_t k = 1; k <= kDenseMultiples; ++k) multiples.insert(k);
      for (int t = 1; t <= kIntegerScales; ++t) {
        const double k = std::nearbyint(double(t) / std::fabs(c_for(q)));
        if (k >= 1 && k * double(q) <= double(kMaxN)) multiples.insert(int64_t(k));
      }
      for (int64_t k : multiples) {
        const int64_t n1 = q * k, n2 = p * k;
        if (n1 > kMaxN || n2 > kMaxN) break;
        if ((n2 - n1) % (b2 - b1) != 0) continue;
        const double c_estimate = c_for(n1);
        for (int bits = 1; bits <= best_bits && bits <= 53; ++bits) {
          const int64_t slope = (n2 - n1) / (b2 - b1);
          const SizeFloat f{form, SizePoly(n1 - slope * b1) + SizePoly(slope) * SizePoly::symbol(0),
                             round_bits(c_estimate, bits)};
          if (size_float_same_bits(size_float_value(f, n1, dtype), v1) &&
              size_float_same_bits(size_float_value(f, n2, dtype), v2)) {
            const int fb = std::max(1, significant_bits(f.scale));
            if (!best || fb < best_bits || (fb == best_bits && nearer_one(f.scale, best->scale))) {
              best = f;
              best_bits = fb;
            }
            break;
          }
        }
      }
    }
  }
  return best;
}

std::optional<SizeFloat> size_float_fit_grid(const SymbolGrid& grid, const std::vector<double>& values,
                                               DType dtype) {
  const std::vector<SymbolPoint> points = grid.points();
  SMELT_INTERNAL_CHECK(points.size() == values.size() && points.size() >= 2)
      << "size_float_fit_grid: " << values.size() << " values for " << points.size() << " points";
  std::optional<SizeFloat> f =
      size_float_fit(values[0], points[0].back(), values[1], points[1].back(), dtype);
  if (!f) return std::nullopt;
  std::vector<int64_t> n;
  for (double v : values) {
    const double x = f->form == SizeFloatForm::Count ? v / f->scale : f->scale / v;
    if (!std::isfinite(x) || x < 1 || x > double(kMaxN)) return std::nullopt;
    n.push_back(int64_t(std::nearbyint(x)));
    if (!size_float_same_bits(size_float_value(*f, n.back(), dtype), v)) return std::nullopt;
  }
  std::optional<SizePoly> poly = fit_size(grid, n);
  if (!poly) return std::nullopt;
  f->n = *poly;
  return f;
}

bool size_float_same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

const char* size_float_form_name(SizeFloatForm form) {
  return form == SizeFloatForm::Count ? "count" : "reciprocal";
}

}  // namespace smelt::codegen
