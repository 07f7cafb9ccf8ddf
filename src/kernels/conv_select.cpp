#include "kernels/conv_select.h"

#include <chrono>
#include <map>
#include <mutex>
#include <sstream>

#include "base/env.h"
#include "base/log.h"
#include "base/parallel.h"
#include "kernels/conv_depthwise.h"
#include "kernels/conv_direct.h"
#include "kernels/conv_onednn.h"
#include "smelt/creation.h"

namespace smelt::kernels {
namespace {

struct Choice {
  ConvImpl impl;
  const char* source;  // "SMELT_CONV", "tuning file", "tuned", "heuristic"
};

std::mutex g_conv_mutex;
ConvTuningStore* g_store = nullptr;

// Cached choices, one per key (function-local: conv calls may come from static initializers).
std::map<std::string, Choice>& choices() {
  static std::map<std::string, Choice> table;
  return table;
}

std::optional<ConvImpl> forced_conv_impl() {
  static const std::optional<ConvImpl> forced = []() -> std::optional<ConvImpl> {
    const std::string v =
        env_choice("SMELT_CONV", "auto", {"auto", "gemm", "gemm_own", "gemm_openblas", "depthwise", "onednn", "onednn_winograd", "direct"});
    if (v == "auto") return std::nullopt;
    return conv_impl_from_name(v);
  }();
  return forced;
}

// Below this many output pixels a depthwise plane is too short a row for the depthwise kernels'
// vectors, and oneDNN (which vectorizes across channels) wins.
constexpr int64_t kDepthwiseMinPixels = 256;
// Below this many flops oneDNN's per-call costs (a stream, reordered copies of x, w and y) exceed
// what it saves: small convolutions (a digits CNN's training step) stay on smelt's own kernels.
constexpr double kOneDnnMinFlops = 1.0e7;
// Output rows narrower than this leave the direct kernel's vectors mostly empty.
constexpr int64_t kDirectMinWidth = 32;

// From conv_bench's conv_impl rows (OMP_NUM_THREADS=1, CPU time, ResNet-18 / MobileNetV2 /
// SqueezeNet shapes): oneDNN is fastest on convolutions with a spatial kernel even when it
// converts x, w and y on every call (3x3 64->64 on 56x56: 2.6 ms vs 3.0 ms OpenBLAS, 3.4 ms own);
// on 1x1 convolutions those conversions cost more than they save, and the GEMM on the image wins.
ConvImpl heuristic(const Conv2dGeometry& g, DType dtype) {
  const double flops = 2.0 * double(g.N) * double(g.O) * double(g.Ho) * double(g.Wo) * double(g.C / std::max<int64_t>(1, g.groups)) *
                       double(g.kH) * double(g.kW);
  if (flops < kOneDnnMinFlops) return conv2d_is_depthwise(g) ? ConvImpl::Depthwise : ConvImpl::Gemm;
  if (conv2d_is_depthwise(g)) {
    const bool small = g.Ho * g.Wo < kDepthwiseMinPixels;
    return small && conv_impl_supports(ConvImpl::OneDnn, g, dtype) ? ConvImpl::OneDnn : ConvImpl::Depthwise;
  }
  // Winograd: 3x3 stride 1 on ResNet-18's shapes (64 to 512 channels, 56x56 to 7x7; one thread,
  // CPU time, x and y converted on each call) 1.4x to 3x faster than oneDNN's direct convolution.
  if (conv_impl_supports(ConvImpl::OneDnnWinograd, g, dtype)) return ConvImpl::OneDnnWinograd;
  const bool spatial = g.kH * g.kW > 1;
  // A stem (3 channels, 3x3): the direct kernel (SqueezeNet and MobileNetV2 stems at 1 thread:
  // 0.66 and 0.45 ms against oneDNN's 0.76 and 0.59, with the epilogue).
  if (spatial && conv2d_direct_supports(g) && g.Wo >= kDirectMinWidth) return ConvImpl::Direct;
  if (spatial && g.groups == 1 && conv_impl_supports(ConvImpl::OneDnn, g, dtype)) return ConvImpl::OneDnn;
  return ConvImpl::Gemm;
}

bool has_zero_dim(const Conv2dGeometry& g) {
  return g.N == 0 || g.C == 0 || g.O == 0 || g.Ho == 0 || g.Wo == 0;
}

// Random values in [-1, 1) without touching the global generator (tuning must not change what
// a seeded program draws).
void fill_scratch(const Tensor& t) {
  uint32_t state = 12345;
  const int64_t n = t.numel();
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return double(int32_t(state >> 8) - (1 << 23)) / double(1 << 23);
  };
  if (t.dtype() == DType::Float32) {
    float* p = t.data<float>();
    for (int64_t i = 0; i < n; ++i) p[i] = float(next());
  } else {
    double* p = t.data<double>();
    for (int64_t i = 0; i < n; ++i) p[i] = next();
  }
}

}  // namespace

const char* conv_impl_name(ConvImpl impl) {
  switch (impl) {
    case ConvImpl::Auto: return "auto";
    case ConvImpl::Gemm: return "gemm";
    case ConvImpl::GemmOwn: return "gemm_own";
    case ConvImpl::GemmOpenBlas: return "gemm_openblas";
    case ConvImpl::Depthwise: return "depthwise";
    case ConvImpl::OneDnn: return "onednn";
    case ConvImpl::OneDnnWinograd: return "onednn_winograd";
    case ConvImpl::Direct: return "direct";
  }
  return "?";
}

std::optional<ConvImpl> conv_impl_from_name(const std::string& name) {
  for (ConvImpl impl : kConvImpls) {
    if (name == conv_impl_name(impl)) return impl;
  }
  return std::nullopt;
}

bool conv_impl_supports(ConvImpl impl, const Conv2dGeometry& g, DType dtype) {
  if (!dtype_is_floating(dtype)) return false;
  switch (impl) {
    case ConvImpl::Auto:
    case ConvImpl::Gemm:
    case ConvImpl::GemmOwn:
    case ConvImpl::GemmOpenBlas: return true;
    case ConvImpl::Depthwise: return conv2d_is_depthwise(g);
    case ConvImpl::OneDnn: return !has_zero_dim(g) && conv2d_onednn_supports(g, dtype);
    case ConvImpl::OneDnnWinograd: return !has_zero_dim(g) && conv2d_onednn_supports(g, dtype, /*winograd=*/true);
    case ConvImpl::Direct: return conv2d_direct_supports(g);
  }
  return false;
}

std::string conv_tuning_key(const Conv2dGeometry& g, DType dtype, bool weight_constant) {
  std::ostringstream os;
  os << "conv2d " << dtype_name(dtype) << " threads=" << num_threads() << " N=" << g.N << " C=" << g.C
     << " H=" << g.H << " W=" << g.W << " O=" << g.O << " k=" << g.kH << "x" << g.kW << " s=" << g.stride_h << "x"
     << g.stride_w << " p=" << g.pad_h << "x" << g.pad_w << " d=" << g.dil_h << "x" << g.dil_w << " g=" << g.groups;
  if (weight_constant) os << " w=constant";
  return os.str();
}

void conv_set_tuning_store(ConvTuningStore* store) {
  std::lock_guard<std::mutex> lock(g_conv_mutex);
  g_store = store;
  choices().clear();
}

std::optional<std::string> tuning_store_lookup(const std::string& key) {
  std::lock_guard<std::mutex> lock(g_conv_mutex);
  return g_store ? g_store->lookup(key) : std::nullopt;
}

void tuning_store_record(const std::string& key, const std::string& choice, const std::string& detail) {
  std::lock_guard<std::mutex> lock(g_conv_mutex);
  if (g_store) g_store->record(key, choice, detail);
}

ConvImpl conv_choice(const Conv2dGeometry& g, DType dtype, bool weight_constant) {
  if (auto forced = forced_conv_impl(); forced && conv_impl_supports(*forced, g, dtype)) return *forced;
  const std::string key = conv_tuning_key(g, dtype, weight_constant);
  std::lock_guard<std::mutex> lock(g_conv_mutex);
  auto it = choices().find(key);
  if (it != choices().end()) return it->second.impl;
  Choice c{heuristic(g, dtype), "heuristic"};
  if (g_store) {
    if (std::optional<std::string> name = g_store->lookup(key)) {
      std::optional<ConvImpl> impl = conv_impl_from_name(*name);
      // An entry naming an implementation this build lacks (no oneDNN) falls back to the heuristic.
      if (impl && conv_impl_supports(*impl, g, dtype)) c = {*impl, "tuning file"};
    }
  }
  choices().emplace(key, c);
  debug_log(2, key + " -> " + conv_impl_name(c.impl) + " (" + c.source + ")");
  return c.impl;
}

ConvTuneResult conv_tune(const Conv2dGeometry& g, DType dtype, int runs, bool weight_constant) {
  ConvTuneResult r;
  r.key = conv_tuning_key(g, dtype, weight_constant);
  Tensor x = empty({g.N, g.C, g.H, g.W}, dtype), w = empty({g.O, g.C / g.groups, g.kH, g.kW}, dtype);
  Tensor y = empty({g.N, g.O, g.Ho, g.Wo}, dtype);
  fill_scratch(x);
  fill_scratch(w);
  double best = 1e300;
  for (ConvImpl impl : kConvImpls) {
    if (impl == ConvImpl::Gemm || !conv_impl_supports(impl, g, dtype)) continue;  // gemm = own or openblas
    double ms = 1e300;
    for (int run = 0; run <= runs; ++run) {
      auto start = std::chrono::steady_clock::now();
      conv2d_forward_with(impl, g, y, x, w, nullptr, weight_constant);
      const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (run > 0) ms = std::min(ms, t);
    }
    r.times.push_back({impl, ms});
    if (ms < best) best = ms, r.best = impl;
  }
  std::ostringstream detail;
  for (const ConvCandidateTime& t : r.times) detail << (&t == &r.times[0] ? "" : " ") << conv_impl_name(t.impl) << "=" << t.ms << "ms";
  std::lock_guard<std::mutex> lock(g_conv_mutex);
  choices()[r.key] = {r.best, "tuned"};
  if (g_store) g_store->record(r.key, conv_impl_name(r.best), detail.str());
  debug_log(2, r.key + " -> " + conv_impl_name(r.best) + " (tuned: " + detail.str() + ")");
  return r;
}

void conv_choice_reset() {
  std::lock_guard<std::mutex> lock(g_conv_mutex);
  choices().clear();
}

}  // namespace smelt::kernels
