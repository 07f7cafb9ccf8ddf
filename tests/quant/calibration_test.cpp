// Calibration's threshold methods (quant/calibration.h) on distributions whose answer is known:
// ranges, percentiles of a uniform ramp, the entropy and MSE searches (each the minimum of its own
// objective over every candidate, clipping outliers of a Gaussian, keeping a uniform's full
// range), and the scale/zero-point rules.
#include "quant/calibration.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "smelt/error.h"

namespace smelt::quant {
namespace {

Observer observe(const std::vector<float>& x) {
  Observer o;
  o.observe_range(x.data(), int64_t(x.size()));
  o.observe_histogram(x.data(), int64_t(x.size()));
  return o;
}

std::vector<float> gaussian_with_outliers(int n, int outliers, float outlier_value) {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0, 1);
  std::vector<float> x;
  for (int i = 0; i < n; ++i) x.push_back(d(rng));
  for (int i = 0; i < outliers; ++i) x.push_back(i % 2 ? outlier_value : -outlier_value);
  return x;
}

TEST(Calibration, RangeHoldsZeroIgnoresNaNAndRefusesInfinity) {
  Observer o = observe({1.5f, 2.0f, NAN, 3.0f});
  EXPECT_EQ(o.min(), 0.0);  // 0 is always in the range
  EXPECT_EQ(o.max(), 3.0);
  EXPECT_EQ(o.count(), 3);
  Observer neg = observe({-4.0f, -1.0f});
  EXPECT_EQ(neg.min(), -4.0);
  EXPECT_EQ(neg.max(), 0.0);
  EXPECT_EQ(neg.abs_max(), 4.0);
  Observer bad;
  const float inf[] = {1.0f, INFINITY};
  EXPECT_THROW(bad.observe_range(inf, 2), Error);
  // every value 0: no threshold, a usable scale
  Observer zero = observe({0.0f, -0.0f});
  EXPECT_EQ(choose_threshold(zero, {}), 0.0);
  EXPECT_EQ(activation_params(zero, 0.0).scale, 1.0f);
}

TEST(Calibration, PercentileOfAUniformRamp) {
  std::vector<float> x;
  for (int i = 1; i <= 100000; ++i) x.push_back(float(i) / 100000.0f);
  const Observer o = observe(x);
  ThresholdOptions p;
  p.method = ThresholdMethod::Percentile;
  for (double q : {50.0, 99.0, 99.99, 100.0}) {
    p.percentile = q;
    EXPECT_NEAR(choose_threshold(o, p), q / 100.0, o.bin_width() * 1.01) << q;
  }
  p.percentile = 0;
  EXPECT_THROW(choose_threshold(o, p), Error);
  p.method = ThresholdMethod::Max;
  EXPECT_EQ(choose_threshold(o, p), 1.0);
}

TEST(Calibration, EntropyIsTheMinimumOfItsDivergenceAndClipsOutliers) {
  const Observer o = observe(gaussian_with_outliers(200000, 20, 40.0f));
  ThresholdOptions e;
  e.method = ThresholdMethod::Entropy;
  const double t = choose_threshold(o, e);
  // the threshold of the smallest divergence over every candidate
  // (with bin 0, the exact zeros, counted as its neighbour: calibration.cpp)
  std::vector<double> hist = o.histogram();
  hist[0] = hist[1];
  const int chosen = int(std::lround(t / o.bin_width()));
  const double kl = kl_divergence_at(hist, chosen, e.levels);
  for (int bins = e.levels; bins <= kHistogramBins; bins += 7) {
    EXPECT_LE(kl, kl_divergence_at(hist, bins, e.levels) + 1e-12) << bins;
  }
  // the outliers at 40 are clipped, the Gaussian's body (|x| < 3) is kept
  EXPECT_LT(t, 20.0);
  EXPECT_GT(t, 2.5);
  // a uniform distribution has nothing to clip: its full range
  std::vector<float> u;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1, 1);
  for (int i = 0; i < 200000; ++i) u.push_back(d(rng));
  EXPECT_NEAR(choose_threshold(observe(u), e), 1.0, 0.02);
}

TEST(Calibration, DivergenceIsZeroForAHistogramTheLevelsRepresent) {
  std::vector<double> h(kHistogramBins, 0.0);
  // one nonzero bin per group of 16 (128 levels over 2048 bins): quantization loses nothing
  for (int j = 0; j < 128; ++j) h[size_t(j * 16)] = 1.0 + j % 5;
  EXPECT_NEAR(kl_divergence_at(h, kHistogramBins, 128), 0.0, 1e-12);
  // two bins in one group with different mass: Q averages them, the divergence is positive
  h[1] = 10;
  EXPECT_GT(kl_divergence_at(h, kHistogramBins, 128), 1e-4);
}

// MSE weighs clipping (the few values beyond T) against rounding (every value within): the
// thin end of a long tail is clipped, a fat cluster of outliers is kept.
TEST(Calibration, MseClipsALongTailAndKeepsACluster) {
  ThresholdOptions m;
  m.method = ThresholdMethod::Mse;
  std::mt19937 rng(8);
  std::exponential_distribution<float> tail(1.0f);
  std::vector<float> values;
  for (int i = 0; i < 200000; ++i) values.push_back(tail(rng));
  const Observer o = observe(values);
  const double t = choose_threshold(o, m);
  EXPECT_LT(t, 0.8 * o.abs_max());
  EXPECT_GT(t, 3.0);
  const double cluster = choose_threshold(observe(gaussian_with_outliers(200000, 2000, 50.0f)), m);
  EXPECT_NEAR(cluster, 50.0, 1.0);
  ThresholdOptions x;
  x.method = ThresholdMethod::Max;
  EXPECT_NEAR(choose_threshold(observe(gaussian_with_outliers(10, 1, 60.0f)), x), 60.0, 1e-9);
  EXPECT_THROW(method_from_name("kl"), Error);
  EXPECT_EQ(method_from_name("mse"), ThresholdMethod::Mse);
}

TEST(Calibration, ScalesAndZeroPointsRepresentZeroExactly) {
  const QuantParams a = params_for_range(0, 2.55, DType::UInt8);
  EXPECT_FLOAT_EQ(a.scale, 0.01f);
  EXPECT_EQ(a.zero_point, 0);
  const QuantParams b = params_for_range(-1, 3, DType::UInt8);
  EXPECT_FLOAT_EQ(b.scale, 4.0f / 255);
  EXPECT_EQ(b.zero_point, 64);  // 0 - (-1) / (4/255) = 63.75 -> 64
  const QuantParams c = params_for_range(-1, 3, DType::Int8);
  EXPECT_EQ(c.zero_point, -64);  // -128 + 1 / (4/255) = -64.25
  EXPECT_THROW(params_for_range(0.5, 2, DType::UInt8), Error);
  Observer relu = observe({0.0f, 0.5f, 1.0f});
  const QuantParams r = activation_params(relu, 1.0);
  EXPECT_EQ(r.zero_point, 0);
  EXPECT_FLOAT_EQ(r.scale, 1.0f / 255);
  Observer signed_values = observe({-1.0f, 0.5f});
  const QuantParams s = activation_params(signed_values, 1.0);
  EXPECT_EQ(s.zero_point, 128);
  EXPECT_FLOAT_EQ(s.scale, 1.0f / 127);
}

}  // namespace
}  // namespace smelt::quant
