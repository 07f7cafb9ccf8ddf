// int64 at its extremes: every elementwise op and sum are defined (two's-complement wrap), the
// one division C leaves to the hardware (INT64_MIN / -1) wraps instead of killing the process,
// and integer division truncates toward zero.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "support/check.h"
#include "support/errors.h"

namespace smelt {
namespace {

using testing::expect_error;

constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

// int64 values exactly (to_vector() goes through double, which rounds beyond 2^53).
std::vector<int64_t> ints(const Tensor& t) {
  Tensor c = t.contiguous();
  const int64_t* p = c.data<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

Tensor i64(std::vector<int64_t> v) {
  const int64_t n = int64_t(v.size());
  return from_vector(v, {n});
}

// Two's-complement reference through unsigned arithmetic, independent of scalar.h.
int64_t wrap(uint64_t u) {
  int64_t r;
  std::memcpy(&r, &u, sizeof r);
  return r;
}

TEST(IntegerEdges, DivMinByMinusOneWrapsInsteadOfTrapping) {
  // the regression: this killed the process with SIGFPE
  EXPECT_EQ(ints(div(i64({kI64Min}), i64({-1}))), std::vector<int64_t>{kI64Min});
  // broadcast and strided divisors take the same path
  Tensor a = i64({kI64Min, kI64Min, kI64Max, 7});
  EXPECT_EQ(ints(div(a, scalar_tensor(-1, DType::Int64))),
            (std::vector<int64_t>{kI64Min, kI64Min, -kI64Max, -7}));
  Tensor strided = i64({-1, 99, -1, 99, -1, 99, 1, 99}).slice(0, 0, 8, 2);
  EXPECT_EQ(ints(div(a, strided)), (std::vector<int64_t>{kI64Min, kI64Min, -kI64Max, 7}));
}

TEST(IntegerEdges, DivisionTruncatesTowardZero) {
  Tensor a = i64({7, -7, 7, -7, 0, kI64Min, kI64Max});
  Tensor b = i64({2, 2, -2, -2, 5, 2, -3});
  EXPECT_EQ(ints(div(a, b)), (std::vector<int64_t>{3, -3, -3, 3, 0, kI64Min / 2, kI64Max / -3}));
}

TEST(IntegerEdges, DivisionByZeroIsAnError) {
  expect_error([] { div(i64({1, 2}), i64({1, 0})); }, {"div", "division by zero"});
  expect_error([] { div(i64({kI64Min}), scalar_tensor(0, DType::Int64)); }, "division by zero");
}

TEST(IntegerEdges, NegAndAbsOfMinWrapToMin) {
  // as PyTorch and NumPy: -INT64_MIN does not fit, two's complement gives INT64_MIN back
  Tensor a = i64({kI64Min, kI64Min + 1, -1, 0, kI64Max});
  EXPECT_EQ(ints(neg(a)), (std::vector<int64_t>{kI64Min, kI64Max, 1, 0, -kI64Max}));
  EXPECT_EQ(ints(abs(a)), (std::vector<int64_t>{kI64Min, kI64Max, 1, 0, kI64Max}));
  EXPECT_EQ(ints(sign(a)), (std::vector<int64_t>{-1, -1, -1, 0, 1}));
  EXPECT_EQ(ints(relu(a)), (std::vector<int64_t>{0, 0, 0, 0, kI64Max}));
}

TEST(IntegerEdges, AddSubMulWrapAround) {
  std::vector<int64_t> xs = {kI64Min, kI64Min + 1, -3, -1, 0, 1, 3, kI64Max - 1, kI64Max, int64_t(1) << 62};
  std::vector<int64_t> a_vals, b_vals, add_ref, sub_ref, mul_ref;
  for (int64_t x : xs) {
    for (int64_t y : xs) {
      a_vals.push_back(x);
      b_vals.push_back(y);
      add_ref.push_back(wrap(uint64_t(x) + uint64_t(y)));
      sub_ref.push_back(wrap(uint64_t(x) - uint64_t(y)));
      mul_ref.push_back(wrap(uint64_t(x) * uint64_t(y)));
    }
  }
  Tensor a = i64(a_vals), b = i64(b_vals);
  EXPECT_EQ(ints(add(a, b)), add_ref);
  EXPECT_EQ(ints(sub(a, b)), sub_ref);
  EXPECT_EQ(ints(mul(a, b)), mul_ref);
  // the values PyTorch 1.13 prints for the same programs
  EXPECT_EQ(ints(add(i64({kI64Max}), i64({1}))), std::vector<int64_t>{kI64Min});
  EXPECT_EQ(ints(mul(i64({int64_t(1) << 62}), i64({4}))), std::vector<int64_t>{0});
}

TEST(IntegerEdges, SumWrapsAround) {
  EXPECT_EQ(ints(sum(i64({kI64Max, 1}))), std::vector<int64_t>{kI64Min});  // PyTorch 1.13: the same
  // long enough for the lane-parallel path, with an overflow inside the lanes
  std::vector<int64_t> v(1000, kI64Max);
  uint64_t ref = 0;
  for (int64_t x : v) ref += uint64_t(x);
  EXPECT_EQ(ints(sum(from_vector(v, {1000}))), std::vector<int64_t>{wrap(ref)});
  // over a non-trailing dim
  Tensor m = from_vector(std::vector<int64_t>{kI64Max, 5, kI64Max, 6}, {2, 2});
  EXPECT_EQ(ints(sum(m, {0})), (std::vector<int64_t>{wrap(uint64_t(kI64Max) * 2), 11}));
}

TEST(IntegerEdges, MaximumMinimumAndComparesAtExtremes) {
  Tensor a = i64({kI64Min, kI64Max, 0}), b = i64({kI64Max, kI64Min, 0});
  EXPECT_EQ(ints(maximum(a, b)), (std::vector<int64_t>{kI64Max, kI64Max, 0}));
  EXPECT_EQ(ints(minimum(a, b)), (std::vector<int64_t>{kI64Min, kI64Min, 0}));
  EXPECT_EQ(lt(a, b).to_vector(), (std::vector<double>{1, 0, 0}));
  // kI64Max and kI64Max - 1 are one double apart from nothing: compared as integers, not doubles
  EXPECT_EQ(eq(i64({kI64Max}), i64({kI64Max - 1})).to_vector(), std::vector<double>{0});
}

TEST(IntegerEdges, FullAndFromVectorRefuseValuesIntegersCannotHold) {
  // as PyTorch's full: NaN, ±inf and out-of-range values are errors, not undefined conversions
  expect_error([] { full({2}, NAN, DType::Int64); }, {"full", "int64"});
  expect_error([] { full({2}, INFINITY, DType::Int64); }, {"full", "int64"});
  expect_error([] { full({2}, 1e30, DType::Int64); }, {"full", "int64"});
  expect_error([] { full({2}, 300, DType::UInt8); }, {"full", "uint8"});
  expect_error([] { from_vector(std::vector<double>{1, NAN}, {2}, DType::Int64); }, "from_vector");
  // a floating number promotes an int64 tensor to float32 (as PyTorch), so 1e19 is no overflow
  EXPECT_EQ((i64({1}) * 1e19).dtype(), DType::Float32);
  EXPECT_EQ((i64({1}) * 1e19).item(), double(1e19f));
  EXPECT_EQ(ints(full({1}, -9223372036854775808.0, DType::Int64)), std::vector<int64_t>{kI64Min});
  EXPECT_EQ(ints(full({1}, 2.9, DType::Int64)), std::vector<int64_t>{2});  // truncation, as PyTorch
  EXPECT_EQ(full({1}, NAN, DType::Bool).to_vector(), std::vector<double>{1});
  expect_error([] { arange(0, INFINITY, 1); }, "arange");
}

}  // namespace
}  // namespace smelt
