// The blocked channel layout's kernels (kernels/conv_blocked.h) against naive references: the
// conversions element by element, and conv2d_blocked_forward (oneDNN on nChw16c where it applies,
// else the convert-around path) against conv2d_forward on NCHW, with the output memory holding
// NaN before the call: every element, padding lanes included, must be written, and the padding
// with zeros.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/conv_blocked.h"
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

struct Case {
  int64_t N, C, H, W, O, k, stride, pad, groups;
};

class ConvBlockedForward : public ::testing::TestWithParam<Case> {};

TEST_P(ConvBlockedForward, MatchesThePlainConvolution) {
  const Case c = GetParam();
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
                         ::testing::Values(Case{2, 20, 9, 11, 20, 3, 1, 1, 1},    // 3x3, 4 padding lanes
                                           Case{1, 32, 8, 8, 24, 1, 1, 0, 1},     // 1x1 pointwise
                                           Case{3, 24, 13, 14, 24, 3, 2, 1, 24},  // depthwise stride 2
                                           Case{1, 16, 7, 7, 40, 3, 2, 1, 1},     // stride 2 3x3
                                           Case{2, 8, 6, 6, 8, 3, 1, 1, 2}));     // grouped, C < 16

}  // namespace
}  // namespace smelt
