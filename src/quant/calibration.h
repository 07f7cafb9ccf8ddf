// Calibration (docs/quantization.md "Calibration"): what range of an activation to map onto 8
// bits. An observer sees every value a tensor takes over a calibration set, in two passes: the
// first finds its range, the second fills a histogram of |x| over [0, max |x|] (2048 bins, as
// TensorRT's entropy calibration). A threshold method then picks the saturating threshold T:
// values beyond T are clipped, those within are rounded to 8 bits.
//
//   max         T = max |x| (no saturation; with asymmetric ranges: [min, max])
//   percentile  the smallest bin edge below which `percentile`% of |x| lie
//   entropy     the T minimizing the KL divergence between the histogram clipped at T and its
//               quantization to the 8-bit levels in [0, T] (the classic 2048-bin search)
//   mse         the T minimizing the expected squared error (clipping plus rounding)
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "smelt/dtype.h"

namespace smelt::quant {

enum class ThresholdMethod : uint8_t { Max, Percentile, Entropy, Mse };

const char* method_name(ThresholdMethod m);
// "max", "percentile", "entropy", "mse"; smelt::Error listing them otherwise.
ThresholdMethod method_from_name(const std::string& name);

inline constexpr int kHistogramBins = 2048;

// One activation's statistics over a calibration set.
class Observer {
 public:
  // Pass 1: the range. NaN is ignored (it has no place on a scale); +-inf is an error naming the
  // tensor, since no finite threshold holds it.
  void observe_range(const float* x, int64_t n);
  // Pass 2: the histogram of |x| over [0, max |x|] (values past it, impossible after pass 1 on
  // the same data, land in the last bin).
  void observe_histogram(const float* x, int64_t n);

  double min() const { return min_; }
  double max() const { return max_; }
  double abs_max() const { return std::max(-min_, max_); }
  int64_t count() const { return count_; }
  const std::vector<double>& histogram() const { return hist_; }
  double bin_width() const { return abs_max() / kHistogramBins; }
  bool seen() const { return count_ > 0; }

 private:
  double min_ = 0, max_ = 0;  // the range always holds 0, so that 0 is exact
  int64_t count_ = 0;
  std::vector<double> hist_;
};

struct ThresholdOptions {
  ThresholdMethod method = ThresholdMethod::Entropy;
  double percentile = 99.99;  // Percentile: in (0, 100]
  // The quantization levels in [0, T]: 128 for signed values (int8, or uint8 with zero point
  // 128), 256 for non-negative values on uint8.
  int levels = 128;
};

// The saturating threshold T in (0, max |x|] (the histogram's bin edges); 0 when every value
// observed was 0.
double choose_threshold(const Observer& o, const ThresholdOptions& options);

// The KL divergence the entropy method minimizes at a threshold of `bins` bins (exposed for
// tests): P = hist[0, bins) with the outliers added to its last bin, Q = P merged into `levels`
// groups and spread back over the nonzero bins of each group.
double kl_divergence_at(const std::vector<double>& hist, int bins, int levels);

// The scale and zero point for values in [lo, hi] (lo <= 0 <= hi) on `dtype` (uint8 or int8):
// the range's ends map to the dtype's ends; zero point exact.
struct QuantParams {
  float scale = 1;
  int32_t zero_point = 0;
  DType dtype = DType::UInt8;
};
QuantParams params_for_range(double lo, double hi, DType dtype);
// An activation with threshold T: non-negative values (min >= 0) on uint8 [0, T]; signed ones
// symmetric [-T, T] around zero point 128 (uint8, what the integer GEMM takes).
QuantParams activation_params(const Observer& o, double threshold);

}  // namespace smelt::quant
