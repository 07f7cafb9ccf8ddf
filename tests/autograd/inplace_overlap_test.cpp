// In-place writes whose operands share memory with the written tensor.
#include "support/check.h"
#include "support/helpers.h"
#include "tensor/overlap.h"

namespace smelt {
namespace {

using testing::error_of;

using testing::all_close;

Tensor seq(int64_t n, const Shape& shape) {
  return arange(0.0, double(n), 1.0, DType::Float64).reshape(shape).contiguous();
}

TEST(Overlap, InternalOverlap) {
  Tensor x = seq(6, {2, 3});
  EXPECT_FALSE(has_internal_overlap(x));
  EXPECT_FALSE(has_internal_overlap(x.t()));
  EXPECT_FALSE(has_internal_overlap(x.slice(1, 0, 3, 2)));
  EXPECT_FALSE(has_internal_overlap(x.slice(1, 0, 1).expand({2, 1})));  // expand of size 1 to 1
  EXPECT_TRUE(has_internal_overlap(x.slice(0, 0, 1).expand({4, 3})));
  EXPECT_TRUE(has_internal_overlap(make_tensor(x.storage(), {2, 2}, {1, 1}, 0, DType::Float64)));
  EXPECT_FALSE(has_internal_overlap(make_tensor(x.storage(), {2, 2}, {1, 2}, 0, DType::Float64)));
  EXPECT_FALSE(has_internal_overlap(zeros({0, 3}).expand({0, 3})));
}

TEST(Overlap, MemOverlapKinds) {
  Tensor x = seq(6, {2, 3});
  EXPECT_EQ(mem_overlap(x, x), MemOverlap::Same);
  EXPECT_EQ(mem_overlap(x, x.detach()), MemOverlap::Same);
  EXPECT_EQ(mem_overlap(x, x.clone()), MemOverlap::None);
  EXPECT_EQ(mem_overlap(x.slice(0, 0, 1), x.slice(0, 1, 2)), MemOverlap::None);
  EXPECT_EQ(mem_overlap(x, x.slice(0, 0, 1)), MemOverlap::Partial);  // a broadcast row of x
  Tensor sq = seq(4, {2, 2});
  EXPECT_EQ(mem_overlap(sq, sq.t()), MemOverlap::Partial);
}

TEST(Overlap, AddTransposeOfItselfReadsTheOldValues) {
  // The example: gave 0 3 5 6 (read elements already overwritten).
  Tensor x = seq(4, {2, 2});
  x.add_(x.t());
  EXPECT_TRUE(all_close(x, from_vector(std::vector<double>{0, 3, 3, 6}, {2, 2}), 0, 0));
}

TEST(Overlap, PartialOverlapsGiveTheOutOfPlaceResult) {
  Tensor x = seq(6, {2, 3});
  Tensor expect = x.clone() + x.slice(0, 1, 2);
  x.add_(x.slice(0, 1, 2));  // the row read by every row, including itself
  EXPECT_TRUE(all_close(x, expect, 0, 0));

  Tensor s = seq(5, {5});
  s.slice(0, 1, 5).copy_(s.slice(0, 0, 4));  // a shift: the classic memmove case
  EXPECT_TRUE(all_close(s, from_vector(std::vector<double>{0, 0, 1, 2, 3}, {5}), 0, 0));

  Tensor m = seq(9, {3, 3});
  Tensor mt = m.t().clone();
  m.copy_(m.t());
  EXPECT_TRUE(all_close(m, mt, 0, 0));

  Tensor p = seq(4, {2, 2});
  p.mul_(p.t());
  EXPECT_TRUE(all_close(p, from_vector(std::vector<double>{0, 2, 2, 9}, {2, 2}), 0, 0));
}

TEST(Overlap, WritingAnExpandedTensorIsAnError) {
  // The example: a data race that gave 531014.
  Tensor one = zeros({1});
  Tensor big = one.expand({1000000});
  const std::string where = "several elements at one memory address";
  EXPECT_NE(error_of([&] { big.add_(ones({1000000})); }).find(where), std::string::npos);
  EXPECT_NE(error_of([&] { big.fill_(1.0); }).find(where), std::string::npos);
  EXPECT_NE(error_of([&] { big.copy_(ones({1000000})); }).find(where), std::string::npos);
  EXPECT_NE(error_of([&] { big.mul_(2.0); }).find(where), std::string::npos);
  EXPECT_EQ(one.item(), 0.0);  // nothing was written
  // Reading an expanded tensor is fine.
  Tensor x = zeros({3});
  x.add_(ones({1}).expand({3}));
  EXPECT_TRUE(all_close(x, ones({3}), 0, 0));
}

TEST(Overlap, VersionBumpsOnEveryWrite) {
  Tensor x = zeros({3});
  uint64_t v = x.storage()->version();
  x.fill_(1.0);
  x.add_(1.0);
  x.copy_(ones({3}));
  x.add_(x);  // same layout: no copy needed, still a write
  EXPECT_EQ(x.storage()->version(), v + 4);
  EXPECT_TRUE(all_close(x, full({3}, 2.0), 0, 0));
}

}  // namespace
}  // namespace smelt
