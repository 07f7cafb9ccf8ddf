#include "quant/calibration.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "smelt/error.h"

namespace smelt::quant {

const char* method_name(ThresholdMethod m) {
  switch (m) {
    case ThresholdMethod::Max: return "max";
    case ThresholdMethod::Percentile: return "percentile";
    case ThresholdMethod::Entropy: return "entropy";
    case ThresholdMethod::Mse: return "mse";
  }
  return "?";
}

ThresholdMethod method_from_name(const std::string& name) {
  for (ThresholdMethod m : {ThresholdMethod::Max, ThresholdMethod::Percentile, ThresholdMethod::Entropy,
                            ThresholdMethod::Mse}) {
    if (name == method_name(m)) return m;
  }
  SMELT_CHECK(false) << "calibration: unknown threshold method '" << name.substr(0, 40)
                     << "'; valid: max, percentile, entropy, mse";
  return ThresholdMethod::Max;
}

void Observer::observe_range(const float* x, int64_t n) {
  double lo = min_, hi = max_;
  int64_t seen = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    if (v != v) continue;
    SMELT_CHECK(std::isfinite(v)) << "calibration: the tensor holds " << v
                                  << "; valid: finite values (no threshold holds an infinity)";
    lo = std::min<double>(lo, v);
    hi = std::max<double>(hi, v);
    ++seen;
  }
  min_ = lo;
  max_ = hi;
  count_ += seen;
}

void Observer::observe_histogram(const float* x, int64_t n) {
  if (hist_.empty()) hist_.assign(kHistogramBins, 0.0);
  const double width = bin_width();
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    if (v != v) continue;
    const double a = std::fabs(double(v));
    const int64_t bin = width > 0 ? int64_t(a / width) : 0;
    hist_[size_t(std::clamp<int64_t>(bin, 0, kHistogramBins - 1))] += 1;
  }
}

namespace {

// Moves a little mass onto the zero bins of a distribution (sum 1), so that the divergence is
// finite where one distribution has mass and the other none; the nonzero bins pay for it.
std::vector<double> smoothed(std::vector<double> p) {
  constexpr double kEps = 1e-4;
  int64_t zeros = 0;
  for (double v : p) zeros += v == 0;
  const int64_t nonzeros = int64_t(p.size()) - zeros;
  if (zeros == 0 || nonzeros == 0) return p;
  const double take = kEps * double(zeros) / double(nonzeros);
  for (double& v : p) v = v == 0 ? kEps : v - take;
  return p;
}

std::vector<double> normalized(std::vector<double> p) {
  double total = 0;
  for (double v : p) total += v;
  if (total > 0) {
    for (double& v : p) v /= total;
  }
  return p;
}

double percentile_threshold(const Observer& o, double percentile) {
  SMELT_CHECK(percentile > 0 && percentile <= 100)
      << "calibration: percentile " << percentile << "; valid: (0, 100]";
  const std::vector<double>& h = o.histogram();
  double total = 0;
  for (double v : h) total += v;
  const double want = total * percentile / 100.0;
  double cum = 0;
  for (size_t b = 0; b < h.size(); ++b) {
    cum += h[b];
    if (cum >= want) return double(b + 1) * o.bin_width();
  }
  return o.abs_max();
}

// Expected squared error of values |x| in the histogram quantized with threshold t: clipping
// beyond t, and a uniform rounding error step^2 / 12 within (step = t / (levels - 1)).
double mse_at(const Observer& o, double t, int levels) {
  const std::vector<double>& h = o.histogram();
  const double width = o.bin_width(), step = t / double(levels - 1);
  const double rounding = step * step / 12.0;
  double err = 0;
  for (size_t b = 0; b < h.size(); ++b) {
    if (h[b] == 0) continue;
    const double center = (double(b) + 0.5) * width;
    err += h[b] * (center > t ? (center - t) * (center - t) : rounding);
  }
  return err;
}

}  // namespace

double kl_divergence_at(const std::vector<double>& hist, int bins, int levels) {
  SMELT_INTERNAL_CHECK(bins >= levels && bins <= int(hist.size()) && levels >= 1);
  std::vector<double> p(hist.begin(), hist.begin() + bins);
  for (size_t b = size_t(bins); b < hist.size(); ++b) p.back() += hist[b];  // outliers clip to T
  // Q: the kept bins (without the outliers) merged into `levels` groups, each group's mass spread
  // evenly over the bins where P has mass (an empty bin stays empty, as after dequantization).
  std::vector<double> q(size_t(bins), 0.0);
  const double per_level = double(bins) / levels;
  for (int j = 0; j < levels; ++j) {
    const int start = int(std::floor(j * per_level));
    const int end = j == levels - 1 ? bins : int(std::floor((j + 1) * per_level));
    double total = 0;
    int nonzero = 0;
    for (int k = start; k < end; ++k) {
      total += hist[size_t(k)];
      nonzero += p[size_t(k)] != 0;
    }
    for (int k = start; k < end; ++k) {
      if (p[size_t(k)] != 0) q[size_t(k)] = total / nonzero;
    }
  }
  p = smoothed(normalized(std::move(p)));
  q = smoothed(normalized(std::move(q)));
  double kl = 0;
  for (size_t k = 0; k < p.size(); ++k) {
    if (p[k] > 0 && q[k] > 0) kl += p[k] * std::log(p[k] / q[k]);
  }
  return kl;
}

double choose_threshold(const Observer& o, const ThresholdOptions& options) {
  SMELT_CHECK(options.levels >= 2 && options.levels <= kHistogramBins)
      << "calibration: " << options.levels << " levels; valid: [2, " << kHistogramBins << "]";
  if (!o.seen() || o.abs_max() == 0) return 0;
  if (options.method == ThresholdMethod::Max) return o.abs_max();
  SMELT_CHECK(o.histogram().size() == size_t(kHistogramBins))
      << "calibration: the " << method_name(options.method) << " method needs the histogram pass";
  switch (options.method) {
    case ThresholdMethod::Percentile: return percentile_threshold(o, options.percentile);
    case ThresholdMethod::Entropy: {
      // Bin 0 holds every exact zero (half of a ReLU's outputs), which any threshold represents
      // exactly; left as it is, that spike dominates the divergence of the group it falls in and
      // drags the search toward small thresholds. It counts as much as its neighbour instead.
      std::vector<double> hist = o.histogram();
      if (hist.size() > 1) hist[0] = hist[1];
      int best = kHistogramBins;
      double best_kl = std::numeric_limits<double>::infinity();
      for (int bins = options.levels; bins <= kHistogramBins; ++bins) {
        const double kl = kl_divergence_at(hist, bins, options.levels);
        if (kl < best_kl) best_kl = kl, best = bins;
      }
      return double(best) * o.bin_width();
    }
    case ThresholdMethod::Mse: {
      double best_t = o.abs_max(), best_err = std::numeric_limits<double>::infinity();
      for (int bins = 1; bins <= kHistogramBins; ++bins) {
        const double t = double(bins) * o.bin_width();
        const double err = mse_at(o, t, options.levels);
        if (err < best_err) best_err = err, best_t = t;
      }
      return best_t;
    }
    case ThresholdMethod::Max: break;
  }
  return o.abs_max();
}

QuantParams params_for_range(double lo, double hi, DType dtype) {
  SMELT_CHECK(dtype == DType::UInt8 || dtype == DType::Int8)
      << "calibration: " << dtype_name(dtype) << "; valid: uint8 or int8";
  SMELT_CHECK(lo <= 0 && hi >= 0 && std::isfinite(lo) && std::isfinite(hi))
      << "calibration: range [" << lo << ", " << hi << "] must be finite and hold 0";
  const double qmin = dtype == DType::UInt8 ? 0 : -128, qmax = dtype == DType::UInt8 ? 255 : 127;
  QuantParams p;
  p.dtype = dtype;
  const double scale = (hi - lo) / (qmax - qmin);
  if (!(scale > 0) || float(scale) == 0.0f) {  // all zeros (or below float's range): any scale
    p.scale = 1;
    p.zero_point = 0;
    return p;
  }
  p.scale = float(scale);
  p.zero_point = int32_t(std::clamp(std::nearbyint(qmin - lo / double(p.scale)), qmin, qmax));
  return p;
}

QuantParams activation_params(const Observer& o, double threshold) {
  if (o.min() >= 0) return params_for_range(0, threshold, DType::UInt8);
  QuantParams p;
  p.dtype = DType::UInt8;
  p.zero_point = 128;
  p.scale = threshold > 0 && float(threshold / 127) > 0 ? float(threshold / 127) : 1.0f;
  return p;
}

}  // namespace smelt::quant
