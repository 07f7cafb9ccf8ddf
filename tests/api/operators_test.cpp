// Numbers and tensors in operators: + - * / with a number on either side, unary -, comparisons
// giving Bool, in-place += -= *= /=, and PyTorch's promotion of number operands.
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "support/check.h"
#include "support/errors.h"
#include "support/helpers.h"

namespace smelt {
namespace {

using testing::values;

using testing::expect_error;

// What must compile (and what must not convert), checked by the compiler.
static_assert(requires(const Tensor& t) {
  { t > 0 } -> std::same_as<Tensor>;
  { 0 < t } -> std::same_as<Tensor>;
  { t == 1.5 } -> std::same_as<Tensor>;
  { t != t } -> std::same_as<Tensor>;
  { 2 * t - 1 } -> std::same_as<Tensor>;
  { 1.0 / t } -> std::same_as<Tensor>;
  { gt(t, 0) } -> std::same_as<Tensor>;
  { lt(0.5, t) } -> std::same_as<Tensor>;
  { -t } -> std::same_as<Tensor>;
});
static_assert(requires(Tensor t) {
  { t += 1 } -> std::same_as<Tensor&>;
  { t -= t } -> std::same_as<Tensor&>;
  { t *= 2.5 } -> std::same_as<Tensor&>;
  { t /= t } -> std::same_as<Tensor&>;
});
// A number never becomes a Tensor by accident (so tensor-tensor overloads stay unambiguous).
static_assert(!std::is_convertible_v<int, Tensor> && !std::is_convertible_v<double, Tensor>);
static_assert(!std::is_convertible_v<Tensor, Scalar>);

TEST(Operators, NumbersOnEitherSide) {
  Tensor a = tensor({1.0, -2.0, 4.0});
  EXPECT_EQ(values(a + 1), (std::vector<double>{2, -1, 5}));
  EXPECT_EQ(values(1 + a), (std::vector<double>{2, -1, 5}));
  EXPECT_EQ(values(a - 1), (std::vector<double>{0, -3, 3}));
  EXPECT_EQ(values(1 - a), (std::vector<double>{0, 3, -3}));
  EXPECT_EQ(values(a * 2), (std::vector<double>{2, -4, 8}));
  EXPECT_EQ(values(2 * a), (std::vector<double>{2, -4, 8}));
  EXPECT_EQ(values(a / 2), (std::vector<double>{0.5, -1, 2}));
  EXPECT_EQ(values(8 / a), (std::vector<double>{8, -4, 2}));
  EXPECT_EQ(values(-a), (std::vector<double>{-1, 2, -4}));
  EXPECT_EQ((a + 1).dtype(), DType::Float32);
}

TEST(Operators, ComparisonsGiveBool) {
  Tensor a = tensor({-1.0, 0.0, 2.0});
  Tensor b = tensor({0.0, 0.0, 3.0});
  EXPECT_EQ((a > 0).dtype(), DType::Bool);
  EXPECT_EQ(values(a > 0), (std::vector<double>{0, 0, 1}));
  EXPECT_EQ(values(a >= 0), (std::vector<double>{0, 1, 1}));
  EXPECT_EQ(values(a < 0), (std::vector<double>{1, 0, 0}));
  EXPECT_EQ(values(a <= 0), (std::vector<double>{1, 1, 0}));
  EXPECT_EQ(values(a == 0), (std::vector<double>{0, 1, 0}));
  EXPECT_EQ(values(a != 0), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(values(0 < a), values(a > 0));
  EXPECT_EQ(values(a < b), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(values(a == b), (std::vector<double>{0, 1, 0}));
  EXPECT_EQ(values(gt(a, 0)), values(a > 0));
  // NaN compares false except !=, as IEEE and PyTorch
  Tensor n = tensor({std::nan("")});
  EXPECT_EQ(values(n == n), (std::vector<double>{0}));
  EXPECT_EQ(values(n != n), (std::vector<double>{1}));
  EXPECT_EQ(values(n > 0), (std::vector<double>{0}));
  // masks combine with where
  EXPECT_EQ(values(where(a > 0, a, zeros_like(a))), (std::vector<double>{0, 0, 2}));
}

// Expected dtypes made with PyTorch 1.13 (torch.zeros(2, dtype=...) + number):
//   int64 + 1 -> int64, int64 + 1.5 -> float32, int64 + True -> int64
//   float32 + 1 / 1.5 / True -> float32; float64 + 1 / 1.5 / True -> float64
//   bool + 1 -> int64, bool + 1.5 -> float32; every comparison -> bool
TEST(Operators, NumberPromotionMatchesPyTorch) {
  struct Case {
    DType tensor;
    Scalar number;
    DType expected;
  };
  const Case cases[] = {
      {DType::Int64, 1, DType::Int64},        {DType::Int64, 1.5, DType::Float32},
      {DType::Int64, true, DType::Int64},     {DType::Float32, 1, DType::Float32},
      {DType::Float32, 1.5, DType::Float32},  {DType::Float32, true, DType::Float32},
      {DType::Float64, 1, DType::Float64},    {DType::Float64, 1.5, DType::Float64},
      {DType::Float64, true, DType::Float64}, {DType::Bool, 1, DType::Int64},
      {DType::Bool, 1.5, DType::Float32},     {DType::Bool, true, DType::Bool},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(promote_with_scalar(c.tensor, c.number), c.expected) << dtype_name(c.tensor);
    Tensor t = zeros({2}, c.tensor);
    EXPECT_EQ((t > c.number).dtype(), DType::Bool);
    if (c.tensor != DType::Bool || c.number.kind() != Scalar::Kind::Bool) {
      EXPECT_EQ((t + c.number).dtype(), c.expected) << dtype_name(c.tensor);
    }
  }
  // the values: an int tensor + 1.5 is computed in float, not truncated
  Tensor i = tensor({1, 2, -3});
  EXPECT_EQ(i.dtype(), DType::Int64);
  EXPECT_EQ(values(i + 1.5), (std::vector<double>{2.5, 3.5, -1.5}));
  EXPECT_EQ(values(i * 0.5), (std::vector<double>{0.5, 1, -1.5}));
  EXPECT_EQ(values(i > 1.5), (std::vector<double>{0, 1, 0}));
  EXPECT_EQ((i + 1).dtype(), DType::Int64);
  EXPECT_EQ(values(tensor({true, false}) + 1), (std::vector<double>{2, 1}));
  EXPECT_EQ(values(tensor({true, false}) == true), (std::vector<double>{1, 0}));
}

TEST(Operators, Int64ExtremesStayExact) {
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  Tensor t = from_vector({kMax - 1, kMin + 1}, {2});
  Tensor up = t + int64_t(1);
  EXPECT_EQ(up.data<int64_t>()[0], kMax);
  Tensor down = t - 1;
  EXPECT_EQ(down.data<int64_t>()[1], kMin);
  // 2^53 + 1 is not a double: an integer number compares exactly in int64
  const int64_t big = (int64_t(1) << 53) + 1;
  Tensor b = from_vector({big}, {1});
  EXPECT_EQ(values(b == big), (std::vector<double>{1}));
  EXPECT_EQ(values(b == big - 1), (std::vector<double>{0}));
  EXPECT_EQ(full({1}, kMax, Int64).data<int64_t>()[0], kMax);
  expect_error([] { Scalar s(std::numeric_limits<uint64_t>::max()); }, {"Scalar", "int64"});
}

TEST(Operators, BroadcastEmptyAndViews) {
  Tensor e = zeros({0, 3});
  EXPECT_EQ((e + 1).shape(), (Shape{0, 3}));
  EXPECT_EQ((1 - e).shape(), (Shape{0, 3}));
  EXPECT_EQ((e > 0).shape(), (Shape{0, 3}));
  Tensor s = scalar_tensor(2.0);
  EXPECT_EQ((s * 3).shape(), Shape{});
  EXPECT_EQ((s * 3).item(), 6.0);
  Tensor m = arange(0, 6, 1, Float32).reshape({2, 3});
  Tensor v = m.t();  // non-contiguous
  EXPECT_TRUE(testing::all_close(v * 2 + 1, (m * 2 + 1).t()));
  EXPECT_EQ(values(v > 2), values((m > 2).t().contiguous()));
  // int64 and bool tensors broadcast against numbers like float ones
  Tensor iv = arange(4).reshape({2, 2}).t();
  EXPECT_EQ(values(iv * 10), (std::vector<double>{0, 20, 10, 30}));
  EXPECT_EQ(values((iv > 1) == false), (std::vector<double>{1, 0, 1, 0}));  // iv = [[0, 2], [1, 3]]
}

TEST(Operators, InPlaceWritesTheSameTensorAndBumpsTheVersion) {
  Tensor a = tensor({1.0, 2.0});
  Tensor alias = a;
  const uint64_t v0 = a.storage()->version();
  a += 1;
  a *= tensor({2.0, 3.0});
  a -= 0.5;
  a /= 2;
  EXPECT_EQ(values(alias), (std::vector<double>{1.75, 4.25}));
  EXPECT_EQ(a.storage()->version(), v0 + 4);
  // through a view
  Tensor m = zeros({2, 3});
  Tensor row = m.index({1});
  row += 5;
  EXPECT_EQ(values(m), (std::vector<double>{0, 0, 0, 5, 5, 5}));
  // int64 keeps its dtype; a float number would change it, which in place is an error (PyTorch too)
  Tensor i = tensor({1, 2});
  i += 2;
  i *= 3;
  EXPECT_EQ(values(i), (std::vector<double>{9, 12}));
  expect_error([&] { i += 1.5; }, {"add_", "float32", "int64", "cannot be written"});
  expect_error([&] { i *= 0.5; }, {"mul_", "float32"});
  // a broadcast that does not fit the written tensor
  expect_error([&] { a += zeros({3, 2}); }, {"add_", "(3, 2)"});
}

TEST(Operators, InPlaceFollowsAutogradRules) {
  Tensor x = testing::random_leaf({3});
  // a leaf that requires grad cannot be written in place under grad mode
  expect_error([&] { x += 1; }, "leaf");
  // a computed tensor can, and the gradient goes through the in-place op
  Tensor y = x * 2;
  y += 1;
  y *= y;  // y = (2x + 1)^2
  y.sum().backward();
  Tensor expected = (x.detach() * 2 + 1) * 4;
  EXPECT_TRUE(testing::all_close(x.grad(), expected));
  // writing a tensor that backward saved is caught by the version counter
  Tensor z = x.exp();
  Tensor w = z * z;
  z += 1;
  expect_error([&] { w.sum().backward(); }, "modified");
}

TEST(Operators, Errors) {
  Tensor a = tensor({1.0, 2.0});
  expect_error([&] { (void)(a + Tensor()); }, "undefined");
  expect_error([&] { (void)(Tensor() + 1); }, "undefined");
  expect_error([&] { (void)(a + tensor({1.0, 2.0}, Float64)); }, {"add", "float32", "float64"});
  expect_error([&] { (void)(a + zeros({3})); }, {"add", "(2,)", "(3,)"});
}

}  // namespace
}  // namespace smelt
