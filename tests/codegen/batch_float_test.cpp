// codegen/batch_float.h: the numbers a dynamic batch re-evaluates (n and 1 / n, n affine in the
// batch size) are found from two batch sizes only when a form gives both bit for bit, and
// re-evaluate as the trace computes them (scalar_tensor of a double, in the dtype).
#include "codegen/batch_float.h"

#include <cmath>

#include <gtest/gtest.h>

namespace smelt::codegen {
namespace {

TEST(BatchFloat, FitsCountsAndReciprocalsAffineInTheBatch) {
  // a mean's count 12 B, float64 (the lowered mean) and float32 (its gradient's g / double(n))
  for (DType dtype : {DType::Float64, DType::Float32}) {
    auto f = batch_float_fit(12.0 * 17, 17, 12.0 * 19, 19, dtype);
    ASSERT_TRUE(f);
    EXPECT_EQ(f->form, BatchFloatForm::Count);
    EXPECT_EQ(f->n, 12 * 17);
    EXPECT_EQ(f->slope, 12);
  }
  // 1 / (3 B + 1) in float32, as the trace rounds it
  const double r17 = double(float(1.0 / 52)), r19 = double(float(1.0 / 58));
  auto f = batch_float_fit(r17, 17, r19, 19, DType::Float32);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->form, BatchFloatForm::Reciprocal);
  EXPECT_EQ(f->n, 52);
  EXPECT_EQ(f->slope, 3);
  // re-evaluated at a batch size the fit never saw: the float32 rounding of the double quotient
  const int64_t n = f->n + f->slope * (1000 - 17);
  EXPECT_TRUE(batch_float_same_bits(batch_float_value(f->form, n, DType::Float32), double(float(1.0 / double(n)))));
  EXPECT_TRUE(batch_float_same_bits(batch_float_value(f->form, n, DType::Float32), double(1.0f / float(n))));
}

TEST(BatchFloat, RefusesWhatNoFormGives) {
  // sqrt(B), B / 2 (not an integer at odd B), a slope that is not an integer (n = 17 + B / 2),
  // a float64 reciprocal rounded to float32 (not what the trace would compute in float64)
  EXPECT_FALSE(batch_float_fit(std::sqrt(17.0), 17, std::sqrt(19.0), 19, DType::Float64));
  EXPECT_FALSE(batch_float_fit(8.5, 17, 9.5, 19, DType::Float64));
  EXPECT_FALSE(batch_float_fit(25.0, 17, 26.0, 19, DType::Float64));
  EXPECT_FALSE(batch_float_fit(double(float(1.0 / 17)), 17, double(float(1.0 / 19)), 19, DType::Float64));
  // -0 and +0 differ, NaN and inf are no count
  EXPECT_FALSE(batch_float_same_bits(0.0, -0.0));
  EXPECT_FALSE(batch_float_fit(NAN, 17, 1.0, 19, DType::Float64));
  EXPECT_FALSE(batch_float_fit(INFINITY, 17, 1.0, 19, DType::Float64));
}

}  // namespace
}  // namespace smelt::codegen
