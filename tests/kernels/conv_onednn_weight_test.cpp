// oneDNN's converted weights on eager calls (kernels/conv_onednn.h): a weight smelt allocated is
// converted once and reused while its storage, version and bytes stay the same; an in-place write
// (to the tensor or to a view of its storage) or a raw write to its memory converts again; memory written behind smelt's back (a
// wrapped buffer, or anything inside an UnversionedWritesScope) is converted on every call. The
// results always have the bits of a fresh conversion of the weight's current values.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernels/conv_onednn.h"
#include "kernels/conv_select.h"
#include "ops/conv_geometry.h"
#include "smelt/creation.h"
#include "support/check.h"

namespace smelt {
namespace {

using kernels::ConvImpl;

// x (1, 16, 12, 10), w (32, 16, 3, 3), padding 1.
kernels::Conv2dGeometry geometry() {
  const std::vector<int64_t> one{1, 1};
  return ops::conv2d_geometry({1, 16, 12, 10}, {32, 16, 3, 3},
                              {{"stride", one}, {"padding", one}, {"dilation", one}, {"groups", int64_t(1)}});
}

Tensor conv_with(ConvImpl impl, const Tensor& x, const Tensor& w) {
  const kernels::Conv2dGeometry g = geometry();
  Tensor y = empty({g.N, g.O, g.Ho, g.Wo});
  kernels::conv2d_forward_with(impl, g, y, x, w);
  return y;
}

// The conversions one oneDNN call makes, after checking its result bit for bit against a call
// that converts w's current values afresh (a kept conversion that went stale would differ).
uint64_t conversions_of(const Tensor& x, const Tensor& w) {
  const uint64_t before = kernels::onednn_weight_conversions();
  const Tensor got = conv_with(ConvImpl::OneDnn, x, w);
  const uint64_t made = kernels::onednn_weight_conversions() - before;
  kernels::UnversionedWritesScope fresh;
  EXPECT_TRUE(testing::same_bits(got, conv_with(ConvImpl::OneDnn, x, w)));
  return made;
}

TEST(ConvOneDnnWeight, EagerCallsReuseTheConversionUntilAWrite) {
  if (!kernels::conv2d_onednn_supports(geometry(), DType::Float32)) GTEST_SKIP() << "built without oneDNN";
  const Tensor x = randn({1, 16, 12, 10});
  Tensor w = randn({32, 16, 3, 3});
  // The first call converts (oneDNN's blocked weight layout is not OIHW), the next ones reuse it.
  EXPECT_EQ(conversions_of(x, w), 1u);
  EXPECT_EQ(conversions_of(x, w), 0u);
  EXPECT_EQ(conversions_of(x, w), 0u);
  // A write in place bumps the storage's version: converted again, and the new values are used.
  const Tensor old = conv_with(ConvImpl::OneDnn, x, w);
  w.mul_(-2.0);
  EXPECT_EQ(conversions_of(x, w), 1u);
  EXPECT_FALSE(testing::all_close(conv_with(ConvImpl::OneDnn, x, w), old, 1e-4, 1e-5));
  EXPECT_EQ(conversions_of(x, w), 0u);
  // A write to a view shares the storage's version.
  w.slice(0, 3, 4).fill_(0.5);
  EXPECT_EQ(conversions_of(x, w), 1u);
  // Another tensor with the same values is other memory: its own conversion.
  const Tensor copy = w.clone();
  EXPECT_EQ(conversions_of(x, copy), 1u);
  EXPECT_EQ(conversions_of(x, w), 0u);
}

// A raw write to smelt's own memory outside any scope (Tensor::data, a NumPy view from
// Tensor.numpy()) bumps no version: the kept conversion is compared with w's bytes and converted
// again, for the direct and the Winograd conversions.
TEST(ConvOneDnnWeight, RawWritesToAKeptWeightAreSeen) {
  if (!kernels::conv2d_onednn_supports(geometry(), DType::Float32)) GTEST_SKIP() << "built without oneDNN";
  const Tensor x = randn({1, 16, 12, 10});
  Tensor w = randn({32, 16, 3, 3});
  EXPECT_EQ(conversions_of(x, w), 1u);
  EXPECT_EQ(conversions_of(x, w), 0u);
  const Tensor before = conv_with(ConvImpl::OneDnn, x, w);
  w.data<float>()[100] += 3.0f;
  EXPECT_EQ(conversions_of(x, w), 1u);  // conversions_of checks the bits against a fresh conversion
  EXPECT_FALSE(testing::same_bits(conv_with(ConvImpl::OneDnn, x, w), before));
  EXPECT_EQ(conversions_of(x, w), 0u);
  if (kernels::conv2d_onednn_supports(geometry(), DType::Float32, /*winograd=*/true)) {
    const Tensor wino = conv_with(ConvImpl::OneDnnWinograd, x, w);
    w.data<float>()[7] = -w.data<float>()[7];
    Tensor got = conv_with(ConvImpl::OneDnnWinograd, x, w);
    kernels::UnversionedWritesScope fresh;
    EXPECT_TRUE(testing::same_bits(got, conv_with(ConvImpl::OneDnnWinograd, x, w)));
    EXPECT_FALSE(testing::same_bits(got, wino));
  }
}

TEST(ConvOneDnnWeight, MemoryWrittenBehindSmeltsBackIsConvertedEveryCall) {
  if (!kernels::conv2d_onednn_supports(geometry(), DType::Float32)) GTEST_SKIP() << "built without oneDNN";
  const Tensor x = randn({1, 16, 12, 10});
  // A caller's buffer: its writes bump no version.
  std::vector<float> buffer(32 * 16 * 3 * 3);
  const Tensor values = randn({32, 16, 3, 3});
  std::memcpy(buffer.data(), values.data<float>(), buffer.size() * sizeof(float));
  const Tensor wrapped = from_blob(buffer.data(), {32, 16, 3, 3}, DType::Float32);
  EXPECT_EQ(conversions_of(x, wrapped), 1u);
  buffer[5] = 7.0f;  // seen, since nothing was kept
  EXPECT_EQ(conversions_of(x, wrapped), 1u);
  // Smelt's own memory inside a scope of unversioned writes: the same.
  Tensor w = randn({32, 16, 3, 3});
  kernels::UnversionedWritesScope scope;
  EXPECT_EQ(conversions_of(x, w), 1u);
  w.data<float>()[3] = 9.0f;  // a raw write, as a generated kernel makes
  EXPECT_EQ(conversions_of(x, w), 1u);
}

}  // namespace
}  // namespace smelt
