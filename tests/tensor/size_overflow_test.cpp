// Element counts and byte sizes that do not fit int64, and negative sizes, are clear errors
// wherever a shape is made: creation, views, and every op's output shape (the dispatcher checks
// them all), never a silently wrapped count.
#include <cstdint>
#include <limits>

#include "support/check.h"
#include "support/errors.h"

namespace smelt {
namespace {

using testing::expect_error;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t k2to32 = int64_t(1) << 32;

TEST(SizeOverflow, CreationRefusesCountsBeyondInt64) {
  // the regression: 2^32 * 2^32 wrapped to numel 0 and "succeeded"
  expect_error([] { zeros({k2to32, k2to32}); }, {"size overflow", "(4294967296, 4294967296)"});
  expect_error([] { empty({kMax, 2}); }, "size overflow");
  expect_error([] { ones({int64_t(1) << 62, 2, 2}); }, "size overflow");
  // the count fits, the bytes do not
  expect_error([] { empty({kMax}, DType::Float32); }, {"size overflow", "bytes"});
  expect_error([] { empty({int64_t(1) << 61}, DType::Float64); }, {"size overflow", "bytes"});
  // a zero does not excuse the other sizes: contiguous strides are built from their product
  expect_error([] { empty({0, k2to32, k2to32}); }, "size overflow");
  // shape_numel itself
  expect_error([] { shape_numel({kMax, kMax}); }, "size overflow");
  EXPECT_EQ(shape_numel({kMax}), kMax);
  EXPECT_EQ(shape_numel({0, kMax}), 0);
  EXPECT_EQ(shape_numel({}), 1);
}

TEST(SizeOverflow, NegativeSizesAreErrors) {
  expect_error([] { zeros({-1}); }, {"negative size", "-1"});
  expect_error([] { empty({2, -3}); }, "negative size");
  expect_error([] { shape_numel({3, -1}); }, "negative size");
  expect_error([] { full({-2}, 1.0); }, "negative size");
}

TEST(SizeOverflow, ViewsAndOpOutputsAreChecked) {
  Tensor one = ones({1, 1});
  // expand and reshape make no allocation, so only the dispatcher's check catches these
  expect_error([&] { one.expand({k2to32, k2to32}); }, "size overflow");
  expect_error([&] { one.reshape({k2to32, k2to32}); }, "size overflow");
  expect_error([&] { one.expand({-2, 1}); }, "expand");
  // ops whose shape rules multiply or add sizes
  Tensor col = one.expand({k2to32, 1}), row = one.expand({1, k2to32});
  expect_error([&] { matmul(col, row); }, "size overflow");
  expect_error([&] { add(col, row); }, "size overflow");
  Tensor wide = ones({1}).expand({kMax / 2 + 1});
  expect_error([&] { cat({wide, wide}, 0); }, {"cat", "size overflow"});
  // within range, the same calls work
  EXPECT_EQ(one.expand({3, 4}).shape(), (Shape{3, 4}));
  EXPECT_EQ(matmul(one.expand({3, 1}), one.expand({1, 2})).shape(), (Shape{3, 2}));
}

}  // namespace
}  // namespace smelt
