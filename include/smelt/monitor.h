// Watching training (off unless asked for): a gradient health monitor and anomaly detection.
//
//   smelt::GradientMonitor monitor(model);            // per step, after backward:
//   const smelt::GradientStep& s = monitor.check();   // norms per parameter, NaN/Inf named
//   // compiled: CompileOptions::gradient_norms computes the norms inside the step's plan, and
//   // monitor.check(step) reads them (no pass over the gradients of its own)
//
// A non-finite gradient is attributed to the parameter(s) it reached and to the op that first
// produced a NaN or an infinity from finite operands: in eager code through anomaly detection
// (the monitor turns it on while it lives: every op's output is scanned), in a compiled step by
// running the step's graph once more node by node, only when its norms were not finite.
// Exploding and vanishing norms warn once per parameter, naming it.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace smelt {

namespace nn {
class Module;
}
class CompiledFunction;

// Anomaly detection (all threads): while on, an op (eager, forward or backward) that returns a NaN
// or an infinity from finite floating operands records itself; take_anomaly() returns the first
// record since the last take ("log f32[4,8]: NaN from finite operands") or "".
void set_detect_anomaly(bool on);
bool detect_anomaly();
std::string take_anomaly();

struct GradientMonitorOptions {
  double exploding = 1e4;    // a gradient's L2 norm above this warns, once per parameter
  double vanishing = 1e-10;  // at or below this (a zero gradient included) warns, once per parameter
  bool detect_anomaly = true;  // eager: anomaly detection on while the monitor lives
};

struct GradientStep {
  int64_t step = 0;  // from 1
  std::vector<std::pair<std::string, double>> norms;  // L2 norm of each parameter's gradient
  std::vector<std::string> non_finite;  // parameters whose gradient holds a NaN or an infinity
  std::string origin;                   // the op that first produced one, when known
  std::vector<std::string> warnings;    // the warnings this step raised (also printed)
};

class GradientMonitor {
 public:
  explicit GradientMonitor(nn::Module& module, GradientMonitorOptions options = {});
  ~GradientMonitor();
  GradientMonitor(const GradientMonitor&) = delete;
  GradientMonitor& operator=(const GradientMonitor&) = delete;

  // After an eager step's backward: the norms of the parameters' .grad.
  const GradientStep& check();
  // After a call of a compiled training step compiled with CompileOptions::gradient_norms: the
  // norms its plan computed.
  const GradientStep& check(const CompiledFunction& step);
  const std::vector<GradientStep>& history() const { return history_; }

 private:
  const GradientStep& record(GradientStep s);
  nn::Module& module_;
  GradientMonitorOptions options_;
  bool previous_anomaly_ = false;
  std::set<std::string> warned_;
  std::vector<GradientStep> history_;
};

}  // namespace smelt
