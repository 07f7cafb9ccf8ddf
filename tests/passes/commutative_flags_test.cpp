// canonicalize and cse reorder the operands of every op the table flags kCommutative, so those ops
// must give the same bits in either order, on the special values too (signed zeros, infinities,
// NaN). Found by the fuzzer: maximum(-0, +0) once returned its second operand, so swapping the
// operands flipped the sign of a zero, and 1 / that zero flipped an infinity.
#include <cmath>

#include "ops/dispatch.h"
#include "support/check.h"

namespace smelt {
namespace {

// Bit-for-bit equality, except that any NaN equals any NaN (payloads are not specified).
bool same_bits(double x, double y) {
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
  return x == y && std::signbit(x) == std::signbit(y);
}

TEST(CommutativeFlags, FlaggedOpsGiveTheSameBitsInEitherOrder) {
  const std::vector<double> specials = {-0.0, 0.0, 1.0, -1.0, 2.5, INFINITY, -INFINITY, NAN};
  const int64_t n = int64_t(specials.size());
  int checked = 0;
  for (int i = 0; i < ops::kOpCount; ++i) {
    const ops::OpId op = static_cast<ops::OpId>(i);
    const ops::OpInfo& info = ops::op_info(op);
    if (!(info.flags & ops::kCommutative)) continue;
    ASSERT_EQ(info.arity, 2) << info.name;
    for (DType dtype : {DType::Float32, DType::Float64}) {
      // every ordered pair of special values: a (n, 1) against b (1, n)
      Tensor a = from_vector(specials, {n, 1}, dtype), b = from_vector(specials, {1, n}, dtype);
      std::vector<double> ab = ops::call1(op, {a, b}).to_vector();
      std::vector<double> ba = ops::call1(op, {b, a}).to_vector();
      ASSERT_EQ(ab.size(), ba.size());
      for (size_t k = 0; k < ab.size(); ++k) {
        const double x = specials[k / size_t(n)], y = specials[k % size_t(n)];
        EXPECT_TRUE(same_bits(ab[k], ba[k])) << info.name << "(" << x << ", " << y << ") = " << ab[k]
                                             << " but " << info.name << "(" << y << ", " << x
                                             << ") = " << ba[k] << " (" << dtype_name(dtype) << ")";
      }
    }
    ++checked;
  }
  EXPECT_GE(checked, 4);  // add, mul, maximum, minimum, eq, ne
}

TEST(CommutativeFlags, MaximumAndMinimumOrderSignedZeros) {
  Tensor neg_zero = scalar_tensor(-0.0), pos_zero = scalar_tensor(0.0);
  for (const auto& [x, y] : {std::pair{neg_zero, pos_zero}, std::pair{pos_zero, neg_zero}}) {
    EXPECT_FALSE(std::signbit(maximum(x, y).item())) << "maximum(-0, +0) is +0";
    EXPECT_TRUE(std::signbit(minimum(x, y).item())) << "minimum(-0, +0) is -0";
  }
}

}  // namespace
}  // namespace smelt
