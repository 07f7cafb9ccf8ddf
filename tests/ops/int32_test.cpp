// int32 end to end: arithmetic at INT32_MIN / INT32_MAX wraps in 32 bits (not in int64), integer
// division truncates toward zero and INT32_MIN / -1 wraps (PyTorch 1.13 dies of SIGFPE there),
// reductions and scans stay int32 (ONNX ReduceSum / CumSum keep the input type), and the
// creation functions refuse values int32 cannot hold. References are computed here, naively,
// in uint32 two's complement, independent of kernels/scalar.h.
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

constexpr int32_t kInt32Min = std::numeric_limits<int32_t>::min();
constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();

std::vector<int32_t> ints32(const Tensor& t) {
  EXPECT_EQ(t.dtype(), DType::Int32);
  Tensor c = t.contiguous();
  const int32_t* p = c.data<int32_t>();
  return std::vector<int32_t>(p, p + c.numel());
}

Tensor i32(const std::vector<int32_t>& v, Shape shape = {}) {
  if (shape.empty()) shape = {int64_t(v.size())};
  Tensor t = empty(shape, DType::Int32);
  if (!v.empty()) std::memcpy(t.raw_data(), v.data(), v.size() * sizeof(int32_t));
  return t;
}

int32_t wrap(uint32_t u) {
  int32_t r;
  std::memcpy(&r, &u, sizeof r);
  return r;
}

const std::vector<int32_t> kEdges = {kInt32Min, kInt32Min + 1, -65536, -3, -1, 0, 1, 3, 65536, kInt32Max - 1, kInt32Max};

TEST(Int32, DTypeTable) {
  EXPECT_EQ(dtype_size(DType::Int32), 4u);
  EXPECT_STREQ(dtype_name(DType::Int32), "int32");
  EXPECT_STREQ(dtype_short_name(DType::Int32), "i32");
  EXPECT_EQ(dtype_from_name("int32"), DType::Int32);
  EXPECT_EQ(dtype_from_name("i32"), DType::Int32);
  EXPECT_FALSE(dtype_is_floating(DType::Int32));
  EXPECT_TRUE(dtype_is_signed_integer(DType::Int32));
  expect_error([] { dtype_from_name("int16"); }, {"int16", "int32 (i32)"});
}

TEST(Int32, AddSubMulWrapInThirtyTwoBits) {
  std::vector<int32_t> a_vals, b_vals, add_ref, sub_ref, mul_ref;
  for (int32_t x : kEdges) {
    for (int32_t y : kEdges) {
      a_vals.push_back(x);
      b_vals.push_back(y);
      add_ref.push_back(wrap(uint32_t(x) + uint32_t(y)));
      sub_ref.push_back(wrap(uint32_t(x) - uint32_t(y)));
      mul_ref.push_back(wrap(uint32_t(x) * uint32_t(y)));
    }
  }
  Tensor a = i32(a_vals), b = i32(b_vals);
  EXPECT_EQ(ints32(add(a, b)), add_ref);
  EXPECT_EQ(ints32(sub(a, b)), sub_ref);
  EXPECT_EQ(ints32(mul(a, b)), mul_ref);
  // broadcast against a 0-dim operand, and the number overloads keep int32 (torch.result_type)
  EXPECT_EQ(ints32(add(i32({kInt32Max}), scalar_tensor(1, DType::Int32))), std::vector<int32_t>{kInt32Min});
  EXPECT_EQ((i32({1, 2}) + 1).dtype(), DType::Int32);
  EXPECT_EQ((i32({1, 2}) * 1.5).dtype(), DType::Float32);
}

TEST(Int32, NegAbsSignOfMin) {
  Tensor a = i32({kInt32Min, kInt32Min + 1, -1, 0, kInt32Max});
  EXPECT_EQ(ints32(neg(a)), (std::vector<int32_t>{kInt32Min, kInt32Max, 1, 0, -kInt32Max}));
  EXPECT_EQ(ints32(abs(a)), (std::vector<int32_t>{kInt32Min, kInt32Max, 1, 0, kInt32Max}));
  EXPECT_EQ(ints32(sign(a)), (std::vector<int32_t>{-1, -1, -1, 0, 1}));
  EXPECT_EQ(ints32(relu(a)), (std::vector<int32_t>{0, 0, 0, 0, kInt32Max}));
}

TEST(Int32, DivisionTruncatesAndMinByMinusOneWraps) {
  Tensor a = i32({7, -7, 7, -7, 0, kInt32Min, kInt32Max, kInt32Min});
  Tensor b = i32({2, 2, -2, -2, 5, 2, -3, -1});
  EXPECT_EQ(ints32(div(a, b)), (std::vector<int32_t>{3, -3, -3, 3, 0, kInt32Min / 2, kInt32Max / -3, kInt32Min}));
  expect_error([] { div(i32({1, 2}), i32({1, 0})); }, {"div", "division by zero"});
}

TEST(Int32, ComparesMaximumWhereClamp) {
  Tensor a = i32({kInt32Min, kInt32Max, 0, -5}), b = i32({kInt32Max, kInt32Min, 0, 5});
  EXPECT_EQ(ints32(maximum(a, b)), (std::vector<int32_t>{kInt32Max, kInt32Max, 0, 5}));
  EXPECT_EQ(ints32(minimum(a, b)), (std::vector<int32_t>{kInt32Min, kInt32Min, 0, -5}));
  EXPECT_EQ(lt(a, b).to_vector(), (std::vector<double>{1, 0, 0, 1}));
  EXPECT_EQ(eq(a, b).to_vector(), (std::vector<double>{0, 0, 1, 0}));
  EXPECT_EQ(ints32(where(lt(a, b), a, b)), (std::vector<int32_t>{kInt32Min, kInt32Min, 0, -5}));
  // an infinite bound clamps nothing; a bound beyond int32 on the side it clamps is refused
  EXPECT_EQ(ints32(clamp(a, -INFINITY, 3)), (std::vector<int32_t>{kInt32Min, 3, 0, -5}));
  EXPECT_EQ(ints32(clamp(a, -2, 1e30)), (std::vector<int32_t>{-2, kInt32Max, 0, -2}));
  expect_error([] { clamp(i32({1}), 3e9, INFINITY); }, {"clamp", "int32", "2^31"});
  // mixed int32 / int64 operands are a dtype error, as for every other pair
  expect_error([] { add(i32({1}), scalar_tensor(1, DType::Int64)); }, "add");
}

TEST(Int32, ReductionsStayInt32AndWrap) {
  std::vector<int32_t> v(1000);
  uint32_t sum_ref = 0, prod_ref = 1;
  int32_t max_ref = kInt32Min, min_ref = kInt32Max;
  int64_t argmax_ref = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = i % 7 == 0 ? kInt32Max - int32_t(i) : int32_t(i * 2654435761u % 2001) - 1000;
    sum_ref += uint32_t(v[i]);
    prod_ref *= uint32_t(v[i] | 1);
    if (v[i] > max_ref) max_ref = v[i], argmax_ref = int64_t(i);
    min_ref = std::min(min_ref, v[i]);
  }
  Tensor t = i32(v);
  EXPECT_EQ(ints32(sum(t)), std::vector<int32_t>{wrap(sum_ref)});
  std::vector<int32_t> odd(v);
  for (int32_t& x : odd) x |= 1;
  EXPECT_EQ(ints32(prod(i32(odd), {0})), std::vector<int32_t>{wrap(prod_ref)});
  EXPECT_EQ(ints32(amax(t, {0})), std::vector<int32_t>{max_ref});
  EXPECT_EQ(ints32(amin(t, {0})), std::vector<int32_t>{min_ref});
  Tensor am = argmax(t, 0);
  EXPECT_EQ(am.dtype(), DType::Int64);
  EXPECT_EQ(am.item(), double(argmax_ref));
  // over a non-trailing dim
  Tensor m = i32({kInt32Max, 5, kInt32Max, 6}, {2, 2});
  EXPECT_EQ(ints32(sum(m, {0})), (std::vector<int32_t>{wrap(uint32_t(kInt32Max) * 2u), 11}));
}

TEST(Int32, CumsumWraps) {
  Tensor t = i32({kInt32Max, 1, 2, kInt32Min, -1});
  std::vector<int32_t> ref;
  uint32_t run = 0;
  for (int32_t x : ints32(t)) ref.push_back(wrap(run += uint32_t(x)));
  EXPECT_EQ(ints32(cumsum(t, 0)), ref);
}

TEST(Int32, CreationRefusesValuesInt32CannotHold) {
  EXPECT_EQ(ints32(full({2}, -2147483648.0, DType::Int32)), (std::vector<int32_t>{kInt32Min, kInt32Min}));
  EXPECT_EQ(ints32(full({1}, 2147483647, DType::Int32)), std::vector<int32_t>{kInt32Max});
  EXPECT_EQ(ints32(full({1}, -2.9, DType::Int32)), std::vector<int32_t>{-2});  // truncation
  expect_error([] { full({2}, 2147483648.0, DType::Int32); }, {"full", "int32"});
  expect_error([] { full({2}, NAN, DType::Int32); }, {"full", "int32"});
  expect_error([] { from_vector(std::vector<double>{1, -3e9}, {2}, DType::Int32); }, "from_vector");
  EXPECT_EQ(ints32(arange(-2, 2, 1, DType::Int32)), (std::vector<int32_t>{-2, -1, 0, 1}));
  Tensor z = zeros({3}, DType::Int32);
  z.fill_(kInt32Min);
  EXPECT_EQ(ints32(z), (std::vector<int32_t>{kInt32Min, kInt32Min, kInt32Min}));
  EXPECT_EQ(i32({kInt32Min}).item(), double(kInt32Min));
}

TEST(Int32, ViewsCopiesAndGather) {
  Tensor m = i32({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(ints32(m.permute({1, 0}).contiguous()), (std::vector<int32_t>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(ints32(m.slice(1, 1, 3)), (std::vector<int32_t>{2, 3, 5, 6}));
  EXPECT_EQ(ints32(cat({m, m}, 0).reshape({-1})), (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}));
  Tensor idx = from_vector(std::vector<int64_t>{2, 0}, {2});
  EXPECT_EQ(ints32(index_select(m, 1, idx)), (std::vector<int32_t>{3, 1, 6, 4}));
}

}  // namespace
}  // namespace smelt
