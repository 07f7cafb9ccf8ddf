// codegen/size_float.h: the numbers a dynamic batch re-evaluates (c * n and c / n, n affine in
// the batch size) are found from two batch sizes only when a form gives both bit for bit, and
// re-evaluate as the trace computes them (scalar_tensor of a double, in the dtype).
#include "codegen/size_float.h"

#include <cmath>
#include <functional>

#include <gtest/gtest.h>

namespace smelt::codegen {
namespace {

double in(DType dtype, double v) { return dtype == DType::Float32 ? double(float(v)) : v; }

// Fits `value(B)` (the number as the trace computes it, before rounding to the dtype) at the
// probe batch sizes 17 and 19, then expects the fit to give every batch size in 1..300 and some
// large ones bit for bit.
void expect_fits(const std::function<double(int64_t)>& value, DType dtype, const std::string& what) {
  auto f = size_float_fit(in(dtype, value(17)), 17, in(dtype, value(19)), 19, dtype);
  ASSERT_TRUE(f) << what << " " << dtype_name(dtype);
  std::vector<int64_t> batches;
  for (int64_t b = 1; b <= 300; ++b) batches.push_back(b);
  for (int64_t b : {1000, 4097, 65536, 1000003}) batches.push_back(b);
  for (int64_t b : batches) {
    const double got = size_float_value(*f, f->n.at({b}), dtype);
    ASSERT_TRUE(size_float_same_bits(got, in(dtype, value(b))))
        << what << " " << dtype_name(dtype) << " at batch " << b << ": " << got << " vs " << in(dtype, value(b))
        << " (n " << f->n.text() << ", c " << f->scale << ")";
  }
}

TEST(SizeFloat, FitsCountsAndReciprocalsAffineInTheBatch) {
  // a mean's count 12 B, float64 (the lowered mean) and float32 (its gradient's g / double(n))
  for (DType dtype : {DType::Float64, DType::Float32}) {
    auto f = size_float_fit(12.0 * 17, 17, 12.0 * 19, 19, dtype);
    ASSERT_TRUE(f);
    EXPECT_EQ(f->form, SizeFloatForm::Count);
    EXPECT_EQ(f->n.text(), "(12 * S0)");
    EXPECT_EQ(f->scale, 1.0);
  }
  // 1 / (3 B + 1) in float32, as the trace rounds it
  const double r17 = double(float(1.0 / 52)), r19 = double(float(1.0 / 58));
  auto f = size_float_fit(r17, 17, r19, 19, DType::Float32);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->form, SizeFloatForm::Reciprocal);
  EXPECT_EQ(f->n.text(), "(1 + 3 * S0)");
  EXPECT_EQ(f->scale, 1.0);
  // re-evaluated at a batch size the fit never saw: the float32 rounding of the double quotient
  const int64_t n = f->n.at({1000});
  EXPECT_TRUE(size_float_same_bits(size_float_value(*f, n, DType::Float32), double(float(1.0 / double(n)))));
  EXPECT_TRUE(size_float_same_bits(size_float_value(*f, n, DType::Float32), double(1.0f / float(n))));
}

TEST(SizeFloat, FitsTheScaledFormsATrainingGraphMakes) {
  for (DType dtype : {DType::Float64, DType::Float32}) {
    expect_fits([](int64_t b) { return -1.0 / double(b); }, dtype, "-1 / B (nll's gradient)");
    expect_fits([](int64_t b) { return 2.0 / double(b * 3); }, dtype, "2 / (3 B) (mse's gradient)");
    expect_fits([](int64_t b) { return 1.0 / double(b * 128); }, dtype, "1 / (128 B) (mean over B x 128 tokens)");
    expect_fits([](int64_t b) { return 1.0 / double(b * 77); }, dtype, "1 / (77 B) (mean over B x 77 tokens)");
    expect_fits([](int64_t b) { return -1.0 / double(b * 1000); }, dtype, "-1 / (1000 B)");
    // (float32 only: in float64, 0.1 / B and 0.5 / (5 B) give the same bits at the probes, not
    // everywhere; size_float.h)
    if (dtype == DType::Float32) expect_fits([](int64_t b) { return 0.1 / double(b); }, dtype, "0.1 / B (a loss scale)");
    expect_fits([](int64_t b) { return 0.5 * double(b); }, dtype, "B / 2");
    expect_fits([](int64_t b) { return -double(b - 1); }, dtype, "-(B - 1) (a clamp bound)");
    expect_fits([](int64_t b) { return 3.0 * double(2 * b + 5); }, dtype, "3 (2 B + 5)");
  }
}

TEST(SizeFloat, PrefersTheSimplestScale) {
  // 1 / (3 B): c = 1 with n = 3 B, not c = 1/3 with n = B (which rounds twice)
  auto f = size_float_fit(1.0 / 51, 17, 1.0 / 57, 19, DType::Float64);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->form, SizeFloatForm::Reciprocal);
  EXPECT_EQ(f->scale, 1.0);
  EXPECT_EQ(f->n.text(), "(3 * S0)");
}

TEST(SizeFloat, RefusesWhatNoFormGives) {
  // sqrt(B), 1 / B^2 (its ratio needs a denominator beyond any small n), a float64 reciprocal
  // rounded to float32 (not what the trace would compute in float64)
  EXPECT_FALSE(size_float_fit(std::sqrt(17.0), 17, std::sqrt(19.0), 19, DType::Float64));
  EXPECT_FALSE(size_float_fit(std::sqrt(17.0) / 3, 17, std::sqrt(19.0) / 3, 19, DType::Float64));
  EXPECT_FALSE(size_float_fit(std::log(17.0), 17, std::log(19.0), 19, DType::Float64));
  EXPECT_FALSE(size_float_fit(double(float(1.0 / 17)), 17, double(float(1.0 / 19)), 19, DType::Float64));
  // different signs (n crossing zero is no affine count of one sign), -0 and +0 differ, NaN and
  // inf are no count
  EXPECT_FALSE(size_float_fit(1.0 / 17, 17, -1.0 / 19, 19, DType::Float64));
  EXPECT_FALSE(size_float_same_bits(0.0, -0.0));
  EXPECT_FALSE(size_float_fit(NAN, 17, 1.0, 19, DType::Float64));
  EXPECT_FALSE(size_float_fit(INFINITY, 17, 1.0, 19, DType::Float64));
  EXPECT_FALSE(size_float_fit(0.0, 17, 1.0, 19, DType::Float64));
}

TEST(SizeFloat, OneOverBSquaredFitsNoProbeTriple) {
  // 1 / B^2 may pass two probes as some c / n, but never a third as well
  for (DType dtype : {DType::Float64, DType::Float32}) {
    auto f = size_float_fit(in(dtype, 1.0 / 289), 17, in(dtype, 1.0 / 361), 19, dtype);
    if (!f) continue;
    EXPECT_FALSE(size_float_same_bits(size_float_value(*f, f->n.at({23}), dtype), in(dtype, 1.0 / 529)))
        << dtype_name(dtype);
  }
}

// Two symbols (B, S): a mean over B * S tokens, its gradient's 1 / (B S), a count S * S, fitted
// through the 3 x 3 grid and right at sizes the grid never saw.
TEST(SizeFloat, FitsPolynomialsInTwoSymbolsThroughTheGrid) {
  SymbolGrid grid;
  grid.axes = {{17, 19, 23}, {30, 32, 36}};
  grid.check = {29, 42};
  struct Case {
    std::function<double(int64_t, int64_t)> value;
    const char* what;
    const char* n;
  };
  const std::vector<Case> cases = {
      {[](int64_t b, int64_t s) { return 1.0 / double(b * s); }, "1 / (B S)", "(S0 * S1)"},
      {[](int64_t b, int64_t s) { return -1.0 / double(b * s * 4); }, "-1 / (4 B S)", "(4 * S0 * S1)"},
      {[](int64_t, int64_t s) { return double(s * s); }, "S^2", "(S1 * S1)"},
      {[](int64_t b, int64_t s) { return 1.0 / double(b * (s - 1)); }, "1 / (B (S - 1))",
       "(-1 * S0 + S0 * S1)"}};
  for (DType dtype : {DType::Float64, DType::Float32}) {
    for (const Case& c : cases) {
      std::vector<double> values;
      for (const SymbolPoint& p : grid.points()) values.push_back(in(dtype, c.value(p[0], p[1])));
      std::optional<SizeFloat> f = size_float_fit_grid(grid, values, dtype);
      ASSERT_TRUE(f) << c.what << " " << dtype_name(dtype);
      EXPECT_EQ(f->n.text(), c.n) << c.what;
      for (int64_t b : {1, 2, 7, 64, 1000}) {
        for (int64_t s : {2, 3, 128, 513}) {
          ASSERT_TRUE(size_float_same_bits(size_float_value(*f, f->n.at({b, s}), dtype), in(dtype, c.value(b, s))))
              << c.what << " " << dtype_name(dtype) << " at B=" << b << " S=" << s;
        }
      }
    }
  }
  // sqrt(B S) is no count
  std::vector<double> values;
  for (const SymbolPoint& p : grid.points()) values.push_back(std::sqrt(double(p[0] * p[1])));
  EXPECT_FALSE(size_float_fit_grid(grid, values, DType::Float64));
}

}  // namespace
}  // namespace smelt::codegen
