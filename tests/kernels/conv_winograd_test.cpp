// oneDNN's Winograd convolution (kernels/conv_onednn.h, ConvImpl::OneDnnWinograd): its error
// against a float64 reference, bounded by the size of the sum it approximates; and its guard:
// operands with NaN, an infinity or a huge value run the direct algorithm instead (Winograd would
// spread one inf or NaN over a whole output tile, as NaN), so special values keep the semantics
// of every other implementation, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/conv_select.h"
#include "smelt/creation.h"
#include "support/check.h"

namespace smelt {
namespace {

using kernels::Conv2dGeometry;
using kernels::ConvImpl;


// A 3x3 stride-1 convolution, padding 1: the shape Winograd takes (ResNet's, scaled down).
Conv2dGeometry resnet_like(int64_t N, int64_t C, int64_t HW, int64_t O) {
  Conv2dGeometry g;
  g.N = N, g.C = C, g.H = HW, g.W = HW, g.O = O, g.kH = 3, g.kW = 3;
  g.stride_h = g.stride_w = 1, g.pad_h = g.pad_w = 1, g.dil_h = g.dil_w = 1, g.groups = 1;
  g.Ho = g.Wo = HW;
  return g;
}

// y = conv(x, w) in float64, and s = conv(|x|, |w|): the sum of the magnitudes of each output's
// products, the scale any float32 summation error of that output is measured against.
void reference(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, std::vector<double>* y,
               std::vector<double>* s) {
  const std::vector<double> xv = x.to_vector(), wv = w.to_vector();
  y->assign(size_t(g.N * g.O * g.Ho * g.Wo), 0.0);
  s->assign(y->size(), 0.0);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t o = 0; o < g.O; ++o)
      for (int64_t i = 0; i < g.Ho; ++i)
        for (int64_t j = 0; j < g.Wo; ++j) {
          double acc = 0, mag = 0;
          for (int64_t c = 0; c < g.C; ++c)
            for (int64_t ki = 0; ki < 3; ++ki)
              for (int64_t kj = 0; kj < 3; ++kj) {
                const int64_t ih = i - 1 + ki, iw = j - 1 + kj;
                if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
                const double p = xv[size_t(((n * g.C + c) * g.H + ih) * g.W + iw)] * wv[size_t(((o * g.C + c) * 3 + ki) * 3 + kj)];
                acc += p;
                mag += std::fabs(p);
              }
          const size_t k = size_t(((n * g.O + o) * g.Ho + i) * g.Wo + j);
          (*y)[k] = acc;
          (*s)[k] = mag;
        }
}

// max over outputs of |got - want| / (magnitude sum * 2^-24): the error in float32 ulps of the
// scale of the sum.
double worst_scaled_error(const Tensor& got, const std::vector<double>& want, const std::vector<double>& mag) {
  const std::vector<double> g = got.to_vector();
  double worst = 0;
  for (size_t k = 0; k < g.size(); ++k) {
    if (mag[k] == 0) continue;
    worst = std::max(worst, std::fabs(g[k] - want[k]) / (mag[k] * 0x1p-24));
  }
  return worst;
}

Tensor run(ConvImpl impl, const Conv2dGeometry& g, const Tensor& x, const Tensor& w, bool weight_constant = false) {
  Tensor y = full({g.N, g.O, g.Ho, g.Wo}, std::nan(""), DType::Float32);
  kernels::conv2d_forward_with(impl, g, y, x, w, nullptr, weight_constant);
  return y;
}

class Winograd : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kernels::conv_impl_supports(ConvImpl::OneDnnWinograd, resnet_like(1, 16, 12, 16), DType::Float32)) {
      GTEST_SKIP() << "oneDNN has no Winograd convolution on this machine (it needs AVX-512) or smelt was built "
                      "without oneDNN";
    }
  }
};

TEST_F(Winograd, ErrorWithinAFewUlpsOfTheSumsScale) {
  for (const Conv2dGeometry& g : {resnet_like(1, 64, 20, 64), resnet_like(2, 32, 9, 48), resnet_like(1, 128, 7, 128)}) {
    Tensor x = randn({g.N, g.C, g.H, g.W}), w = randn({g.O, g.C, 3, 3}) * 0.05;
    std::vector<double> want, mag;
    reference(g, x, w, &want, &mag);
    const double direct = worst_scaled_error(run(ConvImpl::OneDnn, g, x, w), want, mag);
    const double wino = worst_scaled_error(run(ConvImpl::OneDnnWinograd, g, x, w), want, mag);
    const std::string key = kernels::conv_tuning_key(g, DType::Float32);
    RecordProperty(key + " direct", std::to_string(direct));
    RecordProperty(key + " winograd", std::to_string(wino));
    // Measured (these shapes, this seed): direct 3.4 to 4.7, Winograd 1.5 to 2.2 of these units.
    // Both sum C * 9 products in float32; Winograd sums fewer (the tiles share them) but also
    // rounds its transforms. The bound: no worse than 4x the direct algorithm on the same data
    // (and at least a few ulps for sums so short that the direct error is below one). A wrong
    // transform or tile border is off by the values themselves: ~2^24 of these units.
    EXPECT_LE(wino, 4 * std::max(direct, 2.0)) << key << ": direct " << direct;
  }
}

// Every special operand: inf, -inf, NaN, a huge finite value (in x, then in w) gives the direct
// algorithm's bits exactly, and the plain operands before and after still run Winograd (whose
// bits differ from the direct sum's somewhere on a problem this size).
TEST_F(Winograd, SpecialOperandsRunTheDirectAlgorithm) {
  const Conv2dGeometry g = resnet_like(1, 16, 12, 16);
  const float specials[] = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(), 0x1p41f};
  for (bool in_weight : {false, true}) {
    for (float v : specials) {
      Tensor x = randn({g.N, g.C, g.H, g.W}), w = randn({g.O, g.C, 3, 3});
      EXPECT_FALSE(testing::same_bits(run(ConvImpl::OneDnnWinograd, g, x, w), run(ConvImpl::OneDnn, g, x, w)))
          << "Winograd and the direct sum gave the same bits: is Winograd running at all?";
      Tensor& t = in_weight ? w : x;
      // Through a smelt op, which bumps the version: eager calls keep w's conversion and scan
      // while it is unchanged (kernels/conv_onednn.h), so a raw write to it would not be seen.
      t.reshape({-1}).slice(0, 37, 38).fill_(double(v));
      const Tensor direct = run(ConvImpl::OneDnn, g, x, w);
      EXPECT_TRUE(testing::same_bits(run(ConvImpl::OneDnnWinograd, g, x, w), direct))
          << v << (in_weight ? " in w" : " in x");
      EXPECT_TRUE(testing::same_bits(run(ConvImpl::OneDnnWinograd, g, x, w, /*weight_constant=*/true), direct))
          << v << (in_weight ? " in a constant w" : " in x, w constant");
    }
  }
}

// A constant weight's scan is remembered per storage version: an in-place write that makes it
// special (or plain again) is seen.
TEST_F(Winograd, ConstantWeightWrittenInPlaceIsScannedAgain) {
  const Conv2dGeometry g = resnet_like(1, 16, 12, 16);
  Tensor x = randn({g.N, g.C, g.H, g.W}), w = randn({g.O, g.C, 3, 3});
  const Tensor plain = run(ConvImpl::OneDnnWinograd, g, x, w, true);
  EXPECT_FALSE(testing::same_bits(plain, run(ConvImpl::OneDnn, g, x, w)));
  Tensor inf_at = zeros({g.O, g.C, 3, 3});
  inf_at.data<float>()[5] = std::numeric_limits<float>::infinity();
  w.add_(inf_at);  // a smelt op: the storage version changes
  EXPECT_TRUE(testing::same_bits(run(ConvImpl::OneDnnWinograd, g, x, w, true), run(ConvImpl::OneDnn, g, x, w)));
}

}  // namespace
}  // namespace smelt
