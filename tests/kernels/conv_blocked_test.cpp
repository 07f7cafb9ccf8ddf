// The blocked channel layout's kernels (kernels/conv_blocked.h) against naive references: the
// conversions element by element, and conv2d_blocked_forward (oneDNN on nChw16c where it applies,
// else the convert-around path) against conv2d_forward on NCHW, with the output memory holding
// NaN before the call: every element, padding lanes included, must be written, and the padding
// with zeros.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/conv_blocked.h"
#include "kernels/conv_select.h"
#include "kernels/conv_onednn.h"
#include "smelt/creation.h"
#include "support/check.h"

namespace smelt {
namespace {

using kernels::blocks_of;
using kernels::Conv2dGeometry;

Tensor filled_nan(const Shape& shape, DType dtype) {
  return full(shape, std::numeric_limits<double>::quiet_NaN(), dtype);
}

TEST(ConvBlocked, ConversionsPlaceEveryChannelAndZeroThePadding) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    const Tensor x = testing::random_tensor({2, 21, 3, 5}, -1, 1, 3).to(dtype);
    Tensor b = filled_nan({2, blocks_of(21, 16), 3, 5, 16}, dtype);
    kernels::to_blocked_forward(b, x);
    for (int64_t n = 0; n < 2; ++n) {
      for (int64_t c = 0; c < 32; ++c) {
        for (int64_t h = 0; h < 3; ++h) {
          for (int64_t w = 0; w < 5; ++w) {
            const double got = b.index({n, c / 16, h, w, c % 16}).item();
            const double want = c < 21 ? x.index({n, c, h, w}).item() : 0.0;
            ASSERT_EQ(got, want) << dtype_name(dtype) << " n=" << n << " c=" << c << " h=" << h << " w=" << w;
          }
        }
      }
    }
    Tensor back = filled_nan({2, 21, 3, 5}, dtype);
    kernels::from_blocked_forward(back, b);
    EXPECT_TRUE(testing::same_bits(back, x));
  }
}

struct BlockedCase {
  int64_t N, C, H, W, O, k, stride, pad, groups;
};

class ConvBlockedForward : public ::testing::TestWithParam<BlockedCase> {};

TEST_P(ConvBlockedForward, MatchesThePlainConvolution) {
  const BlockedCase c = GetParam();
  Conv2dGeometry g;
  g.N = c.N, g.C = c.C, g.H = c.H, g.W = c.W, g.O = c.O, g.kH = g.kW = c.k;
  g.stride_h = g.stride_w = c.stride, g.pad_h = g.pad_w = c.pad, g.groups = c.groups;
  g.Ho = kernels::conv_output_size(c.H, c.k, c.stride, c.pad, 1);
  g.Wo = kernels::conv_output_size(c.W, c.k, c.stride, c.pad, 1);
  const Tensor x = testing::random_tensor({c.N, c.C, c.H, c.W}, -1, 1, 5).to(DType::Float32);
  const Tensor w = testing::random_tensor({c.O, c.C / c.groups, c.k, c.k}, -0.3, 0.3, 6).to(DType::Float32);
  Tensor want = empty({c.N, c.O, g.Ho, g.Wo}, DType::Float32);
  kernels::conv2d_forward(g, want, x, w);

  Tensor xb = empty({c.N, blocks_of(c.C, 16), c.H, c.W, 16}, DType::Float32);
  kernels::to_blocked_forward(xb, x);
  for (bool weight_constant : {false, true}) {
    Tensor yb = filled_nan({c.N, blocks_of(c.O, 16), g.Ho, g.Wo, 16}, DType::Float32);
    kernels::conv2d_blocked_forward(g, yb, xb, w, nullptr, weight_constant);
    for (int64_t o = c.O; o < blocks_of(c.O, 16) * 16; ++o) {  // the padding lanes
      for (int64_t n = 0; n < c.N; ++n) {
        ASSERT_EQ(yb.index({n, o / 16, 0, 0, o % 16}).item(), 0.0) << "padding lane " << o;
        ASSERT_EQ(yb.index({n, o / 16, g.Ho - 1, g.Wo - 1, o % 16}).item(), 0.0) << "padding lane " << o;
      }
    }
    Tensor got = filled_nan({c.N, c.O, g.Ho, g.Wo}, DType::Float32);
    kernels::from_blocked_forward(got, yb);
    EXPECT_TRUE(testing::all_close(got, want, 1e-4, 1e-5))
        << "native oneDNN: " << kernels::conv2d_blocked_native(g, DType::Float32, 16);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, ConvBlockedForward,
                         ::testing::Values(BlockedCase{2, 20, 9, 11, 20, 3, 1, 1, 1},    // 3x3, 4 padding lanes
                                           BlockedCase{1, 32, 8, 8, 24, 1, 1, 0, 1},     // 1x1 pointwise
                                           BlockedCase{3, 24, 13, 14, 24, 3, 2, 1, 24},  // depthwise stride 2
                                           BlockedCase{1, 16, 7, 7, 40, 3, 2, 1, 1},     // stride 2 3x3
                                           BlockedCase{2, 8, 6, 6, 8, 3, 1, 1, 2}));     // grouped, C < 16

}  // namespace
}  // namespace smelt

namespace smelt {
namespace {

// Every real lane has max_pool2d's bits (special values included: NaN wins, -inf, ±0), the
// padding lanes are zero; windows with padding, stride 2, and a dilated one. Specials at every
// 5th element put a NaN in nearly every window (the full rule); at every 97th most windows hold
// none, and some only an infinity or a signed zero (the ordered max, which must keep the same bits);
// "every 0" is a tensor of +0, -0 and -1 only, where the first of tied zeros must win.
TEST(ConvBlocked, MaxPoolMatchesThePlainKernelBitForBit) {
  struct Window {
    int64_t k, stride, pad, dil;
  };
  auto signed_zeros = [](DType dtype) {
    std::vector<double> v(2 * 21 * 9 * 10);
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] = (i * 2654435761u >> 7) % 3 == 0 ? -0.0 : (i * 40503u >> 5) % 4 == 0 ? -1.0 : 0.0;
    }
    return from_vector(v, {2, 21, 9, 10}, DType::Float64).to(dtype);
  };
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (Window w : {Window{3, 2, 1, 1}, Window{2, 2, 0, 1}, Window{3, 1, 1, 2}, Window{3, 2, 0, 1}}) {
      for (int every : {5, 97, 0}) {
        SCOPED_TRACE("specials at every " + std::to_string(every) + "th element");
        const Tensor x = every ? testing::special_values({2, 21, 9, 10}, 7, every, dtype) : signed_zeros(dtype);
        const kernels::Pool2dWindow win{w.k, w.k, w.stride, w.stride, w.pad, w.pad, w.dil, w.dil};
        const int64_t Ho = kernels::conv_output_size(9, w.k, w.stride, w.pad, w.dil);
        const int64_t Wo = kernels::conv_output_size(10, w.k, w.stride, w.pad, w.dil);
        Tensor want = empty({2, 21, Ho, Wo}, dtype);
        kernels::max_pool2d_values_forward(win, want, x);
        Tensor xb = empty({2, 2, 9, 10, 16}, dtype);
        kernels::to_blocked_forward(xb, x);
        Tensor yb = filled_nan({2, 2, Ho, Wo, 16}, dtype);
        kernels::max_pool2d_blocked_forward(win, yb, xb);
        for (int64_t c = 21; c < 32; ++c) ASSERT_EQ(yb.index({1, 1, Ho - 1, Wo - 1, c % 16}).item(), 0.0);
        Tensor got = filled_nan({2, 21, Ho, Wo}, dtype);
        kernels::from_blocked_forward(got, yb);
        EXPECT_TRUE(testing::same_bits(got, want)) << dtype_name(dtype) << " k=" << w.k << " dil=" << w.dil;
      }
    }
  }
}

}  // namespace
}  // namespace smelt

namespace smelt {
namespace {

// An infinity in x makes 0 * inf = NaN in sums over zero weights: the padding lanes (which a
// later blocked conv multiplies by its zero weights) must still be zero everywhere.
TEST(ConvBlocked, PaddingStaysZeroWhenTheInputHoldsInfinities) {
  Conv2dGeometry g;
  g.N = 1, g.C = 16, g.H = g.W = 6, g.O = 20, g.kH = g.kW = 3, g.pad_h = g.pad_w = 1, g.Ho = g.Wo = 6;
  Tensor x = testing::random_tensor({1, 16, 6, 6}, -1, 1, 9).to(DType::Float32);
  x.data<float>()[3 * 36 + 14] = std::numeric_limits<float>::infinity();
  const Tensor w = testing::random_tensor({20, 16, 3, 3}, -0.3, 0.3, 10).to(DType::Float32);
  Tensor xb = empty({1, 1, 6, 6, 16}, DType::Float32);
  kernels::to_blocked_forward(xb, x);
  Tensor yb = filled_nan({1, 2, 6, 6, 16}, DType::Float32);
  kernels::conv2d_blocked_forward(g, yb, xb, w);
  const float* p = yb.data<float>();
  for (int64_t pixel = 0; pixel < 36; ++pixel) {
    for (int64_t lane = 4; lane < 16; ++lane) ASSERT_EQ(p[(36 + pixel) * 16 + lane], 0.0f) << pixel << " " << lane;
  }
}

}  // namespace
}  // namespace smelt

namespace smelt {
namespace {

// A non-finite weight on a tap in the zero padding: NaN there, as on NCHW (kernels/conv_onednn.h:
// oneDNN skips padded taps, so such a weight takes the reference path), also for a constant
// weight, whose scan is remembered.
TEST(ConvBlocked, NonFiniteWeightsMeetThePaddingLikeThePlainConvolution) {
  Conv2dGeometry g;
  g.N = 1, g.C = 16, g.H = g.W = 8, g.O = 32, g.kH = g.kW = 3, g.pad_h = g.pad_w = 1, g.Ho = g.Wo = 8;
  const Tensor x = testing::random_tensor({1, 16, 8, 8}, -1, 1, 11).to(DType::Float32);
  Tensor xb = empty({1, 1, 8, 8, 16}, DType::Float32);
  kernels::to_blocked_forward(xb, x);
  for (float special : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    Tensor w = testing::random_tensor({32, 16, 3, 3}, -0.3, 0.3, 12).to(DType::Float32);
    w.data<float>()[0] = special;  // output channel 0, input channel 0, tap (0, 0)
    Tensor want = empty({1, 32, 8, 8}, DType::Float32);
    kernels::conv2d_forward_with(kernels::ConvImpl::Gemm, g, want, x, w);
    ASSERT_TRUE(std::isnan(want.index({0, 0, 0, 0}).item()));  // the corner reads the padding there
    for (bool weight_constant : {false, true}) {
      Tensor yb = filled_nan({1, 2, 8, 8, 16}, DType::Float32);
      kernels::conv2d_blocked_forward(g, yb, xb, w, nullptr, weight_constant);
      Tensor got = filled_nan({1, 32, 8, 8}, DType::Float32);
      kernels::from_blocked_forward(got, yb);
      EXPECT_TRUE(testing::all_close(got, want, 1e-4, 1e-5)) << special << " " << weight_constant;  // NaN must meet NaN
    }
  }
}


// A constant weight's conversion and a call site's oneDNN arguments are kept, keyed by the memory
// of x, w and y (kernels/conv_onednn.cpp, kept_args): a weight written in place by a smelt op (its
// storage version moves) is seen by the next call at the same memory, and a call with another
// weight at the same x and y uses that weight.
TEST(ConvBlocked, ConstantWeightWrittenInPlaceIsSeenAtTheSameCallSite) {
  for (int64_t k : {1, 3}) {
    Conv2dGeometry g;
    g.N = 1, g.C = 16, g.H = g.W = 8, g.O = 32, g.kH = g.kW = k, g.pad_h = g.pad_w = k / 2, g.Ho = g.Wo = 8;
    const Tensor x = testing::random_tensor({1, 16, 8, 8}, -1, 1, 21).to(DType::Float32);
    Tensor xb = empty({1, 1, 8, 8, 16}, DType::Float32);
    kernels::to_blocked_forward(xb, x);
    Tensor w = testing::random_tensor({32, 16, k, k}, -0.3, 0.3, 22).to(DType::Float32);
    const Tensor w2 = testing::random_tensor({32, 16, k, k}, -0.3, 0.3, 23).to(DType::Float32);
    const Tensor other = testing::random_tensor({32, 16, k, k}, -0.3, 0.3, 24).to(DType::Float32);
    Tensor yb = empty({1, 2, 8, 8, 16}, DType::Float32);
    auto expect_conv_with = [&](const Tensor& weight, const Tensor& used, const char* what) {
      Tensor want = empty({1, 32, 8, 8}, DType::Float32), got = empty({1, 32, 8, 8}, DType::Float32);
      kernels::conv2d_forward_with(kernels::ConvImpl::Gemm, g, want, x, weight);
      kernels::conv2d_blocked_forward(g, yb, xb, used, nullptr, /*weight_constant=*/true);
      kernels::from_blocked_forward(got, yb);
      EXPECT_TRUE(testing::all_close(got, want, 1e-4, 1e-5)) << what << " k=" << k;
    };
    expect_conv_with(w, w, "first call");
    expect_conv_with(w, w, "second call");
    w.copy_(w2);  // in place: the version moves
    expect_conv_with(w2, w, "after an in-place write");
    expect_conv_with(other, other, "another weight at the same x and y");
    expect_conv_with(w2, w, "the first weight again");
  }
}

}  // namespace
}  // namespace smelt
