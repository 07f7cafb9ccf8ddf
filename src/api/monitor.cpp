// smelt::GradientMonitor (include/smelt/monitor.h): norms per parameter, non-finite gradients
// named with the op that produced them, exploding and vanishing norms warned once.
#include "smelt/monitor.h"

#include <cmath>
#include <sstream>

#include "base/log.h"
#include "ops/anomaly.h"
#include "smelt/autograd.h"
#include "smelt/compile.h"
#include "smelt/nn.h"
#include "smelt/ops.h"

namespace smelt {

GradientMonitor::GradientMonitor(nn::Module& module, GradientMonitorOptions options)
    : module_(module), options_(options), previous_anomaly_(detect_anomaly()) {
  SMELT_CHECK(options.exploding > 0 && options.vanishing >= 0 && options.vanishing < options.exploding)
      << "GradientMonitor: thresholds exploding " << options.exploding << ", vanishing " << options.vanishing
      << "; valid: 0 <= vanishing < exploding";
  if (options_.detect_anomaly) {
    set_detect_anomaly(true);
    take_anomaly();  // what happened before the monitor is not its business
  }
}

GradientMonitor::~GradientMonitor() {
  if (options_.detect_anomaly) set_detect_anomaly(previous_anomaly_);
}

const GradientStep& GradientMonitor::check() {
  GradientStep s;
  NoGradGuard no_grad;
  for (const auto& [name, p] : module_.named_parameters()) {
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    const double n = std::sqrt(sum(g.to(DType::Float64) * g.to(DType::Float64)).item());
    s.norms.emplace_back(name, n);
  }
  s.origin = options_.detect_anomaly ? take_anomaly() : "";
  return record(std::move(s));
}

const GradientStep& GradientMonitor::check(const CompiledFunction& step) {
  GradientStep s;
  s.norms = step.gradient_norms();
  s.origin = step.non_finite_origin();
  return record(std::move(s));
}

const GradientStep& GradientMonitor::record(GradientStep s) {
  s.step = int64_t(history_.size()) + 1;
  auto warn_once = [&](const std::string& name, const std::string& kind, const std::string& what) {
    if (!warned_.insert(kind + " " + name).second) return;
    s.warnings.push_back("gradient of '" + name + "' " + what + " at step " + std::to_string(s.step));
    warn(s.warnings.back());
  };
  for (const auto& [name, n] : s.norms) {
    std::ostringstream norm;
    norm << n;
    if (!std::isfinite(n)) {
      s.non_finite.push_back(name);
    } else if (n > options_.exploding) {
      warn_once(name, "exploding", "is exploding (L2 norm " + norm.str() + " above " + std::to_string(options_.exploding) + ")");
    } else if (n <= options_.vanishing) {
      warn_once(name, "vanishing", "is vanishing (L2 norm " + norm.str() + ")");
    }
  }
  if (!s.non_finite.empty() && warned_.insert("non-finite").second) {  // the first step with one
    std::string names;
    for (const std::string& n : s.non_finite) names += (names.empty() ? "'" : ", '") + n + "'";
    s.warnings.push_back("non-finite gradient at step " + std::to_string(s.step) + " in " + names +
                         (s.origin.empty() ? "" : "; first produced by " + s.origin));
    warn(s.warnings.back());
  }
  history_.push_back(std::move(s));
  return history_.back();
}

}  // namespace smelt
