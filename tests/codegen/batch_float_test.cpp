// codegen/batch_float.h: the numbers a dynamic batch re-evaluates (c * n and c / n, n affine in
// the batch size) are found from two batch sizes only when a form gives both bit for bit, and
// re-evaluate as the trace computes them (scalar_tensor of a double, in the dtype).
#include "codegen/batch_float.h"

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
  auto f = batch_float_fit(in(dtype, value(17)), 17, in(dtype, value(19)), 19, dtype);
  ASSERT_TRUE(f) << what << " " << dtype_name(dtype);
  std::vector<int64_t> batches;
  for (int64_t b = 1; b <= 300; ++b) batches.push_back(b);
  for (int64_t b : {1000, 4097, 65536, 1000003}) batches.push_back(b);
  for (int64_t b : batches) {
    const double got = batch_float_value(*f, f->n + f->slope * (b - 17), dtype);
    ASSERT_TRUE(batch_float_same_bits(got, in(dtype, value(b))))
        << what << " " << dtype_name(dtype) << " at batch " << b << ": " << got << " vs " << in(dtype, value(b))
        << " (n " << f->n << ", slope " << f->slope << ", c " << f->scale << ")";
  }
}

TEST(BatchFloat, FitsCountsAndReciprocalsAffineInTheBatch) {
  // a mean's count 12 B, float64 (the lowered mean) and float32 (its gradient's g / double(n))
  for (DType dtype : {DType::Float64, DType::Float32}) {
    auto f = batch_float_fit(12.0 * 17, 17, 12.0 * 19, 19, dtype);
    ASSERT_TRUE(f);
    EXPECT_EQ(f->form, BatchFloatForm::Count);
    EXPECT_EQ(f->n, 12 * 17);
    EXPECT_EQ(f->slope, 12);
    EXPECT_EQ(f->scale, 1.0);
  }
  // 1 / (3 B + 1) in float32, as the trace rounds it
  const double r17 = double(float(1.0 / 52)), r19 = double(float(1.0 / 58));
  auto f = batch_float_fit(r17, 17, r19, 19, DType::Float32);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->form, BatchFloatForm::Reciprocal);
  EXPECT_EQ(f->n, 52);
  EXPECT_EQ(f->slope, 3);
  EXPECT_EQ(f->scale, 1.0);
  // re-evaluated at a batch size the fit never saw: the float32 rounding of the double quotient
  const int64_t n = f->n + f->slope * (1000 - 17);
  EXPECT_TRUE(batch_float_same_bits(batch_float_value(*f, n, DType::Float32), double(float(1.0 / double(n)))));
  EXPECT_TRUE(batch_float_same_bits(batch_float_value(*f, n, DType::Float32), double(1.0f / float(n))));
}

TEST(BatchFloat, FitsTheScaledFormsATrainingGraphMakes) {
  for (DType dtype : {DType::Float64, DType::Float32}) {
    expect_fits([](int64_t b) { return -1.0 / double(b); }, dtype, "-1 / B (nll's gradient)");
    expect_fits([](int64_t b) { return 2.0 / double(b * 3); }, dtype, "2 / (3 B) (mse's gradient)");
    expect_fits([](int64_t b) { return 1.0 / double(b * 128); }, dtype, "1 / (128 B) (mean over B x 128 tokens)");
    expect_fits([](int64_t b) { return 1.0 / double(b * 77); }, dtype, "1 / (77 B) (mean over B x 77 tokens)");
    expect_fits([](int64_t b) { return -1.0 / double(b * 1000); }, dtype, "-1 / (1000 B)");
    // (float32 only: in float64, 0.1 / B and 0.5 / (5 B) give the same bits at the probes, not
    // everywhere; batch_float.h)
    if (dtype == DType::Float32) expect_fits([](int64_t b) { return 0.1 / double(b); }, dtype, "0.1 / B (a loss scale)");
    expect_fits([](int64_t b) { return 0.5 * double(b); }, dtype, "B / 2");
    expect_fits([](int64_t b) { return -double(b - 1); }, dtype, "-(B - 1) (a clamp bound)");
    expect_fits([](int64_t b) { return 3.0 * double(2 * b + 5); }, dtype, "3 (2 B + 5)");
  }
}

TEST(BatchFloat, PrefersTheSimplestScale) {
  // 1 / (3 B): c = 1 with n = 3 B, not c = 1/3 with n = B (which rounds twice)
  auto f = batch_float_fit(1.0 / 51, 17, 1.0 / 57, 19, DType::Float64);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->form, BatchFloatForm::Reciprocal);
  EXPECT_EQ(f->scale, 1.0);
  EXPECT_EQ(f->n, 51);
  EXPECT_EQ(f->slope, 3);
}

TEST(BatchFloat, RefusesWhatNoFormGives) {
  // sqrt(B), 1 / B^2 (its ratio needs a denominator beyond any small n), a float64 reciprocal
  // rounded to float32 (not what the trace would compute in float64)
  EXPECT_FALSE(batch_float_fit(std::sqrt(17.0), 17, std::sqrt(19.0), 19, DType::Float64));
  EXPECT_FALSE(batch_float_fit(std::sqrt(17.0) / 3, 17, std::sqrt(19.0) / 3, 19, DType::Float64));
  EXPECT_FALSE(batch_float_fit(std::log(17.0), 17, std::log(19.0), 19, DType::Float64));
  EXPECT_FALSE(batch_float_fit(double(float(1.0 / 17)), 17, double(float(1.0 / 19)), 19, DType::Float64));
  // different signs (n crossing zero is no affine count of one sign), -0 and +0 differ, NaN and
  // inf are no count
  EXPECT_FALSE(batch_float_fit(1.0 / 17, 17, -1.0 / 19, 19, DType::Float64));
  EXPECT_FALSE(batch_float_same_bits(0.0, -0.0));
  EXPECT_FALSE(batch_float_fit(NAN, 17, 1.0, 19, DType::Float64));
  EXPECT_FALSE(batch_float_fit(INFINITY, 17, 1.0, 19, DType::Float64));
  EXPECT_FALSE(batch_float_fit(0.0, 17, 1.0, 19, DType::Float64));
}

TEST(BatchFloat, OneOverBSquaredFitsNoProbeTriple) {
  // 1 / B^2 may pass two probes as some c / n, but never a third as well
  for (DType dtype : {DType::Float64, DType::Float32}) {
    auto f = batch_float_fit(in(dtype, 1.0 / 289), 17, in(dtype, 1.0 / 361), 19, dtype);
    if (!f) continue;
    EXPECT_FALSE(batch_float_same_bits(batch_float_value(*f, f->n + f->slope * 6, dtype), in(dtype, 1.0 / 529)))
        << dtype_name(dtype);
  }
}

}  // namespace
}  // namespace smelt::codegen
