// Every conv2d forward implementation (kernels/conv_select.h: gemm, gemm_own, gemm_openblas,
// depthwise, onednn, direct) against a direct 7-loop reference on odd shapes — groups, dilation, padding,
// strides, size-1 and empty dims — and the epilogue contract they share: each output element is
// handed to the epilogue exactly once, after its value is final. Also the depthwise gradient
// kernels against the adjoint of the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/conv_depthwise.h"
#include "kernels/conv_select.h"
#include "smelt/creation.h"
#include "support/check.h"

namespace smelt {
namespace {

using kernels::Conv2dGeometry;
using kernels::ConvImpl;

Conv2dGeometry make(int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t kH, int64_t kW, int64_t s_h,
                    int64_t s_w, int64_t p_h, int64_t p_w, int64_t d_h, int64_t d_w, int64_t groups) {
  Conv2dGeometry g;
  g.N = N, g.C = C, g.H = H, g.W = W, g.O = O, g.kH = kH, g.kW = kW;
  g.stride_h = s_h, g.stride_w = s_w, g.pad_h = p_h, g.pad_w = p_w, g.dil_h = d_h, g.dil_w = d_w, g.groups = groups;
  g.Ho = kernels::conv_output_size(H, kH, s_h, p_h, d_h);
  g.Wo = kernels::conv_output_size(W, kW, s_w, p_w, d_w);
  return g;
}

// The flat index of input element (n, c, ih, iw) that output (n, o, i, j) reads under tap
// (c within the group, ki, kj), or -1 when it falls in the padding.
int64_t input_index(const Conv2dGeometry& g, int64_t n, int64_t o, int64_t c, int64_t i, int64_t j, int64_t ki,
                    int64_t kj) {
  const int64_t ih = i * g.stride_h - g.pad_h + ki * g.dil_h, iw = j * g.stride_w - g.pad_w + kj * g.dil_w;
  if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) return -1;
  const int64_t Cg = g.C / g.groups, Og = g.O / g.groups;
  return ((n * g.C + (o / Og) * Cg + c) * g.H + ih) * g.W + iw;
}

// Calls fn(y_index, x_index, w_index) for every product of the convolution.
template <class F>
void for_each_product(const Conv2dGeometry& g, const F& fn) {
  const int64_t Cg = g.C / g.groups;
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t o = 0; o < g.O; ++o)
      for (int64_t i = 0; i < g.Ho; ++i)
        for (int64_t j = 0; j < g.Wo; ++j)
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t ki = 0; ki < g.kH; ++ki)
              for (int64_t kj = 0; kj < g.kW; ++kj) {
                const int64_t xi = input_index(g, n, o, c, i, j, ki, kj);
                if (xi >= 0) fn(((n * g.O + o) * g.Ho + i) * g.Wo + j, xi, ((o * Cg + c) * g.kH + ki) * g.kW + kj);
              }
}

Tensor naive_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w) {
  const std::vector<double> xv = x.to_vector(), wv = w.to_vector();
  std::vector<double> y(size_t(g.N * g.O * g.Ho * g.Wo), 0.0);
  for_each_product(g, [&](int64_t yi, int64_t xi, int64_t wi) { y[size_t(yi)] += xv[size_t(xi)] * wv[size_t(wi)]; });
  return from_vector(y, {g.N, g.O, g.Ho, g.Wo}, DType::Float64).to(x.dtype());
}

const std::vector<Conv2dGeometry> kShapes = {
    make(2, 3, 7, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1),      // plain 3x3
    make(1, 4, 9, 8, 6, 3, 2, 2, 3, 1, 2, 2, 1, 2),      // groups 2, uneven stride, dilation
    make(2, 5, 4, 6, 3, 1, 1, 1, 1, 0, 0, 1, 1, 1),      // pointwise: no im2col
    make(2, 6, 7, 5, 4, 1, 1, 2, 2, 0, 0, 1, 1, 2),      // strided 1x1, grouped
    make(3, 4, 5, 5, 4, 3, 3, 2, 2, 1, 1, 1, 1, 4),      // depthwise 3x3 stride 2
    make(1, 3, 9, 21, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3),     // depthwise 3x3 stride 1, rows past a vector
    make(2, 2, 11, 10, 2, 5, 5, 1, 1, 2, 2, 1, 1, 2),    // depthwise 5x5 stride 1
    make(1, 2, 12, 13, 2, 5, 5, 2, 2, 2, 2, 1, 1, 2),    // depthwise 5x5 stride 2
    make(2, 3, 8, 7, 3, 3, 2, 1, 2, 2, 0, 2, 1, 3),      // depthwise generic: dilation, uneven
    make(1, 2, 3, 3, 2, 3, 3, 1, 1, 3, 3, 1, 1, 2),      // depthwise: padding wider than the image
    make(1, 40, 7, 7, 40, 3, 3, 1, 1, 1, 1, 1, 1, 40),   // depthwise 7x7 planes: epilogue over several
    make(2, 24, 14, 13, 24, 3, 3, 2, 2, 1, 1, 1, 1, 24), // depthwise stride 2, odd width, two images
    make(1, 5, 6, 9, 5, 3, 3, 1, 1, 0, 0, 1, 1, 5),      // depthwise without padding (no copy)
    make(1, 4, 7, 8, 4, 3, 3, 2, 2, 0, 0, 1, 1, 4),      // depthwise stride 2 without padding
    make(1, 3, 1, 1, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3),      // depthwise on 1x1 planes
    make(1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1),      // all size 1
    make(2, 3, 20, 37, 10, 3, 3, 2, 2, 1, 1, 1, 1, 1),   // a stem (direct): O not a multiple of 8, 2 blocks
    make(1, 2, 9, 40, 9, 3, 3, 1, 3, 2, 1, 2, 1, 1),     // direct: dilation, uneven stride and padding
    make(1, 3, 1, 9, 2, 1, 3, 1, 2, 0, 1, 1, 1, 1),      // a single row
    make(0, 3, 5, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1),      // empty batch
    make(0, 3, 5, 5, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3),      // empty batch, depthwise
    make(2, 0, 4, 4, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1),      // no input channels: zeros
};

std::vector<ConvImpl> supported(const Conv2dGeometry& g, DType dtype) {
  std::vector<ConvImpl> out;
  for (ConvImpl impl : kernels::kConvImpls) {
    if (kernels::conv_impl_supports(impl, g, dtype)) out.push_back(impl);
  }
  return out;
}

TEST(ConvImpl, EveryImplementationMatchesTheReference) {
  int checked_depthwise = 0;
  for (const Conv2dGeometry& g : kShapes) {
    for (DType dt : {DType::Float32, DType::Float64}) {
      Tensor x = randn({g.N, g.C, g.H, g.W}, dt), w = randn({g.O, g.C / g.groups, g.kH, g.kW}, dt);
      const Tensor want = naive_forward(g, x, w);
      for (ConvImpl impl : supported(g, dt)) {
        Tensor y = full({g.N, g.O, g.Ho, g.Wo}, std::nan(""), dt);  // every element must be written
        kernels::conv2d_forward_with(impl, g, y, x, w);
        EXPECT_TRUE(testing::all_close(y, want, 1e-4, 1e-5))
            << kernels::conv_impl_name(impl) << " on " << kernels::conv_tuning_key(g, dt);
        checked_depthwise += impl == ConvImpl::Depthwise;
      }
    }
  }
  EXPECT_GE(checked_depthwise, 2 * 13);  // the depthwise shapes above all reached their kernel
}

// Zero padding is zeros that take part in the products: a non-finite weight on a tap that falls in
// the padding makes that output NaN (0 * inf), as the im2col + GEMM path computes it. Every
// implementation gives the GEMM path's bits for NaN-ness and the same values elsewhere (oneDNN
// and the own direct kernels skip padded taps, so they hand such weights to the GEMM path).
TEST(ConvImpl, NonFiniteWeightsMeetThePaddingLikeTheGemmPath) {
  const std::vector<Conv2dGeometry> shapes = {
      make(1, 16, 12, 10, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1),    // 3x3 (Winograd where oneDNN has it)
      make(1, 3, 20, 37, 10, 3, 3, 2, 2, 1, 1, 1, 1, 1),     // a stem (direct)
      make(1, 24, 14, 13, 24, 3, 3, 2, 2, 1, 1, 1, 1, 24),   // depthwise stride 2
      make(1, 24, 9, 9, 24, 3, 3, 1, 1, 1, 1, 1, 1, 24),     // depthwise stride 1
      make(1, 8, 6, 6, 8, 1, 1, 1, 1, 0, 0, 1, 1, 1),        // pointwise: no padding at all
  };
  for (const Conv2dGeometry& g : shapes) {
    for (float special : {INFINITY, -INFINITY, NAN}) {
      Tensor x = randn({g.N, g.C, g.H, g.W}), w = randn({g.O, g.C / g.groups, g.kH, g.kW});
      w.data<float>()[0] = special;  // tap (0, 0) of output channel 0: in the padding at the top-left
      Tensor want = full({g.N, g.O, g.Ho, g.Wo}, 0.0, DType::Float32);
      kernels::conv2d_forward_with(ConvImpl::Gemm, g, want, x, w);
      for (ConvImpl impl : supported(g, DType::Float32)) {
        for (bool constant : {false, true}) {
          Tensor y = full({g.N, g.O, g.Ho, g.Wo}, 1.0, DType::Float32);
          kernels::conv2d_forward_with(impl, g, y, x, w, nullptr, constant);
          const std::vector<double> got = y.to_vector(), ref = want.to_vector();
          int64_t differ = 0;
          for (size_t i = 0; i < ref.size(); ++i) {
            const bool nan_got = std::isnan(got[i]), nan_ref = std::isnan(ref[i]);
            if (nan_got != nan_ref || (!nan_ref && std::fabs(got[i] - ref[i]) > 1e-3 * (1 + std::fabs(ref[i])))) {
              ++differ;
            }
          }
          EXPECT_EQ(differ, 0) << kernels::conv_impl_name(impl) << (constant ? " (constant w)" : "") << " on "
                               << kernels::conv_tuning_key(g, DType::Float32) << " with w[0] = " << special;
        }
      }
    }
  }
}

// weight_constant lets oneDNN keep the converted weight; the second call reads it from its cache.
// Another weight tensor of the same shape must not hit that entry.
TEST(ConvImpl, ConstantWeightsGiveTheSameResults) {
  for (const Conv2dGeometry& g : kShapes) {
    Tensor x = randn({g.N, g.C, g.H, g.W});
    for (ConvImpl impl : supported(g, DType::Float32)) {
      for (int round = 0; round < 2; ++round) {
        Tensor w = randn({g.O, g.C / g.groups, g.kH, g.kW});  // round 1: a new weight
        const Tensor want = naive_forward(g, x, w);
        for (int call = 0; call < 2; ++call) {
          Tensor y = full({g.N, g.O, g.Ho, g.Wo}, std::nan(""), DType::Float32);
          kernels::conv2d_forward_with(impl, g, y, x, w, nullptr, /*weight_constant=*/true);
          EXPECT_TRUE(testing::all_close(y, want, 1e-4, 1e-5))
              << kernels::conv_impl_name(impl) << " on " << kernels::conv_tuning_key(g, DType::Float32, true)
              << ", round " << round << ", call " << call;
        }
      }
    }
  }
}

// A constant weight written in place by a smelt op (its storage version changes) is converted again.
TEST(ConvImpl, ConstantWeightWrittenInPlaceIsSeen) {
  const Conv2dGeometry g = kShapes[0];
  Tensor x = randn({g.N, g.C, g.H, g.W}), w = randn({g.O, g.C / g.groups, g.kH, g.kW});
  for (ConvImpl impl : supported(g, DType::Float32)) {
    for (int step = 0; step < 2; ++step) {
      Tensor y = empty({g.N, g.O, g.Ho, g.Wo});
      kernels::conv2d_forward_with(impl, g, y, x, w, nullptr, /*weight_constant=*/true);
      EXPECT_TRUE(testing::all_close(y, naive_forward(g, x, w), 1e-4, 1e-5))
          << kernels::conv_impl_name(impl) << ", step " << step;
      w.add_(1.0);
    }
  }
}

TEST(ConvImpl, EpilogueSeesEveryOutputOnceWithItsFinalValue) {
  for (const Conv2dGeometry& g : kShapes) {
    Tensor x = randn({g.N, g.C, g.H, g.W}), w = randn({g.O, g.C / g.groups, g.kH, g.kW});
    const std::vector<double> want = naive_forward(g, x, w).to_vector();
    for (ConvImpl impl : supported(g, DType::Float32)) {
      Tensor y = empty({g.N, g.O, g.Ho, g.Wo});
      const int64_t cols = g.Ho * g.Wo;
      struct Ctx {
        const float* y;
        const std::vector<double>* want;
        std::vector<int> seen;
        int64_t cols;
        int wrong = 0;
      } ctx{y.data<float>(), &want, std::vector<int>(want.size(), 0), cols};
      kernels::GemmEpilogue epilogue;
      epilogue.ctx = &ctx;
      epilogue.fn = [](void* p, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
        auto* c = static_cast<Ctx*>(p);
        for (int64_t r = r0; r < r1; ++r) {
          for (int64_t col = c0; col < c1; ++col) {
            const size_t i = size_t(r * c->cols + col);
            ++c->seen[i];
            if (std::fabs(c->y[i] - (*c->want)[i]) > 1e-4 + 1e-4 * std::fabs((*c->want)[i])) ++c->wrong;
          }
        }
      };
      kernels::conv2d_forward_with(impl, g, y, x, w, &epilogue);
      const std::string where = std::string(kernels::conv_impl_name(impl)) + " on " +
                                kernels::conv_tuning_key(g, DType::Float32);
      EXPECT_EQ(ctx.wrong, 0) << where;
      for (size_t i = 0; i < ctx.seen.size(); ++i) {
        ASSERT_EQ(ctx.seen[i], 1) << where << ", element " << i;
      }
    }
  }
}

// The depthwise gradients against the reference's adjoint: dx[xi] += dy[yi] w[wi] and
// dw[wi] += dy[yi] x[xi] over every product.
TEST(ConvImpl, DepthwiseGradientsMatchTheReference) {
  for (const Conv2dGeometry& g : kShapes) {
    if (!kernels::conv2d_is_depthwise(g)) continue;
    for (DType dt : {DType::Float32, DType::Float64}) {
      Tensor x = randn({g.N, g.C, g.H, g.W}, dt), w = randn({g.O, 1, g.kH, g.kW}, dt);
      Tensor dy = randn({g.N, g.O, g.Ho, g.Wo}, dt);
      const std::vector<double> xv = x.to_vector(), wv = w.to_vector(), dyv = dy.to_vector();
      std::vector<double> dx_want(xv.size(), 0.0), dw_want(wv.size(), 0.0);
      for_each_product(g, [&](int64_t yi, int64_t xi, int64_t wi) {
        dx_want[size_t(xi)] += dyv[size_t(yi)] * wv[size_t(wi)];
        dw_want[size_t(wi)] += dyv[size_t(yi)] * xv[size_t(xi)];
      });
      Tensor dx = full(x.shape(), std::nan(""), dt), dw = full(w.shape(), std::nan(""), dt);
      kernels::conv2d_depthwise_backward_input(g, dx, dy, w);
      kernels::conv2d_depthwise_backward_weight(g, dw, x, dy);
      const std::string where = kernels::conv_tuning_key(g, dt);
      EXPECT_TRUE(testing::all_close(dx, from_vector(dx_want, x.shape(), DType::Float64).to(dt), 1e-4, 1e-5)) << where;
      EXPECT_TRUE(testing::all_close(dw, from_vector(dw_want, w.shape(), DType::Float64).to(dt), 1e-4, 1e-4)) << where;
    }
  }
}

TEST(ConvImpl, NamesRoundTripAndDepthwiseOnlyWhereItApplies) {
  for (ConvImpl impl : kernels::kConvImpls) {
    EXPECT_EQ(kernels::conv_impl_from_name(kernels::conv_impl_name(impl)), impl);
  }
  EXPECT_FALSE(kernels::conv_impl_from_name("winograd").has_value());
  EXPECT_FALSE(kernels::conv_impl_supports(ConvImpl::Depthwise, kShapes[0], DType::Float32));
  EXPECT_FALSE(kernels::conv_impl_supports(ConvImpl::OneDnn, kShapes[4], DType::Float64));  // float32 only
  EXPECT_FALSE(kernels::conv_impl_supports(ConvImpl::Gemm, kShapes[0], DType::Int64));
}

}  // namespace
}  // namespace smelt
