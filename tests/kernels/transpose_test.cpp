// The normalized transpose copy against a naive element-by-element copy: every permutation of
// rank <= 4 over shapes with size-1 dims, every element size, slices and broadcasts, and sizes
// large enough for the tiled and multi-threaded paths.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "kernels/transpose.h"
#include "support/check.h"

namespace smelt {
namespace {

// Naive reference: walks the logical index in row-major order and reads through the strides.
std::vector<uint8_t> naive_contiguous_bytes(const Tensor& x) {
  const size_t es = dtype_size(x.dtype());
  std::vector<uint8_t> out(size_t(x.numel()) * es);
  const auto* base = static_cast<const uint8_t*>(x.raw_data());
  for (int64_t linear = 0; linear < x.numel(); ++linear) {
    int64_t rem = linear, offset = 0;
    for (int64_t d = x.dim() - 1; d >= 0; --d) {
      offset += (rem % x.shape()[d]) * x.strides()[d];
      rem /= x.shape()[d];
    }
    std::memcpy(&out[size_t(linear) * es], base + offset * int64_t(es), es);
  }
  return out;
}

::testing::AssertionResult copies_like_naive(const Tensor& view) {
  Tensor got = kernels::contiguous_copy(view);
  if ((view.numel() > 0 && !got.is_contiguous()) || got.shape() != view.shape()) {
    return ::testing::AssertionFailure() << "result not contiguous or wrong shape";
  }
  std::vector<uint8_t> want = naive_contiguous_bytes(view);
  if (!want.empty() && std::memcmp(got.raw_data(), want.data(), want.size()) != 0) {
    return ::testing::AssertionFailure() << "copy differs from the naive copy for shape "
                                         << shape_str(view.shape()) << " strides "
                                         << shape_str(view.strides());
  }
  return ::testing::AssertionSuccess();
}

Tensor iota(const Shape& shape, DType dtype) {
  Tensor t = arange(0, double(shape_numel(shape)), 1, dtype == DType::Int64 ? DType::Int64 : DType::Float64);
  if (dtype != t.dtype()) t = cast(t, dtype);
  return t.reshape(shape).contiguous();
}

// Every shape of `rank` dims with sizes in {1, 2, 3}.
std::vector<Shape> small_shapes(int rank) {
  std::vector<Shape> shapes{{}};
  for (int d = 0; d < rank; ++d) {
    std::vector<Shape> next;
    for (const Shape& s : shapes) {
      for (int64_t n : {1, 2, 3}) {
        Shape t = s;
        t.push_back(n);
        next.push_back(t);
      }
    }
    shapes = next;
  }
  return shapes;
}

void check_all_permutations(const Shape& shape, DType dtype) {
  Tensor x = iota(shape, dtype);
  Shape perm(shape.size());
  std::iota(perm.begin(), perm.end(), 0);
  do {
    ASSERT_TRUE(copies_like_naive(x.permute(perm))) << "permutation " << shape_str(perm) << " of "
                                                    << shape_str(shape) << " " << dtype_name(dtype);
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST(TransposeCopy, EveryPermutationOfSmallShapesUpToRank4) {
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int64, DType::UInt8, DType::Bool}) {
    for (int rank = 0; rank <= 4; ++rank) {
      for (const Shape& shape : small_shapes(rank)) check_all_permutations(shape, dtype);
    }
  }
}

TEST(TransposeCopy, EveryPermutationOfLargerShapesWithSizeOneDims) {
  // Sizes off the tile size (32) so partial tiles occur; big enough to run on several threads.
  check_all_permutations({67, 1, 45, 33}, DType::Float32);
  check_all_permutations({1, 130, 3, 70}, DType::Float64);
  check_all_permutations({5, 1, 300, 1}, DType::UInt8);
}

TEST(TransposeCopy, LargeTwoDimTranspose) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Tensor x = iota({257, 300}, dtype);
    EXPECT_TRUE(copies_like_naive(x.t()));
    EXPECT_TRUE(copies_like_naive(x.t().slice(0, 3, 290)));
  }
}

TEST(TransposeCopy, SlicedAndBroadcastSources) {
  Tensor x = iota({6, 8, 10}, DType::Float32);
  EXPECT_TRUE(copies_like_naive(x.slice(2, 1, 9, 2)));                  // no unit stride
  EXPECT_TRUE(copies_like_naive(x.slice(1, 2, 7).permute({2, 0, 1})));  // a window, permuted
  EXPECT_TRUE(copies_like_naive(x.select(1, 3).t()));
  EXPECT_TRUE(copies_like_naive(iota({1, 5}, DType::Float64).expand({4, 5})));   // stride 0 rows
  EXPECT_TRUE(copies_like_naive(iota({5, 1}, DType::Float64).expand({5, 7})));   // stride 0 cols
  EXPECT_TRUE(copies_like_naive(scalar_tensor(3.0).expand({2, 3, 4})));
  EXPECT_TRUE(copies_like_naive(iota({0, 3}, DType::Float32).t()));              // empty
}

TEST(TransposeCopy, LayoutDropsSizeOneDimsAndMergesAdjacentDims) {
  // (2, 3, 4, 5) permuted by (2, 3, 0, 1): dims 2,3 and 0,1 stay adjacent -> a (20, 6) transpose.
  Tensor x = iota({2, 3, 4, 5}, DType::Float32);
  Tensor v = x.permute({2, 3, 0, 1});
  kernels::CopyLayout layout = kernels::copy_layout(v.shape(), v.strides());
  EXPECT_EQ(layout.shape, (Shape{20, 6}));
  EXPECT_EQ(layout.kind, kernels::CopyKind::Tiled);
  EXPECT_EQ(layout.tile_dim, 0);

  // Keeping the last dim: rows of 5 contiguous elements.
  v = x.permute({1, 0, 2, 3});
  layout = kernels::copy_layout(v.shape(), v.strides());
  EXPECT_EQ(layout.shape, (Shape{3, 2, 20}));
  EXPECT_EQ(layout.kind, kernels::CopyKind::Rows);

  // Size-1 dims moved around change nothing: one contiguous block.
  Tensor y = iota({1, 4, 1, 6}, DType::Float32);
  v = y.permute({2, 1, 0, 3});
  layout = kernels::copy_layout(v.shape(), v.strides());
  EXPECT_EQ(layout.shape, (Shape{24}));
  EXPECT_EQ(layout.kind, kernels::CopyKind::Rows);

  v = x.slice(3, 0, 5, 2);
  EXPECT_EQ(kernels::copy_layout(v.shape(), v.strides()).kind, kernels::CopyKind::Strided);
}

TEST(TransposeCopy, ContiguousOpAndReductionsUseIt) {
  Tensor x = iota({3, 4, 5}, DType::Float64);
  Tensor p = x.permute({2, 0, 1});
  Tensor c = contiguous(p);
  EXPECT_TRUE(c.is_contiguous());
  std::vector<uint8_t> want = naive_contiguous_bytes(p);
  EXPECT_EQ(std::memcmp(c.raw_data(), want.data(), want.size()), 0);
  // Reducing the middle dim brings it last with a permuted copy.
  Tensor s = sum(x, {1});
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t k = 0; k < 5; ++k) {
      double expect = 0;
      for (int64_t j = 0; j < 4; ++j) expect += double(i * 20 + j * 5 + k);
      EXPECT_EQ(s.select(0, i).select(0, k).item(), expect);
    }
  }
}

}  // namespace
}  // namespace smelt
