#include "ops/anomaly.h"

#include <atomic>
#include <cmath>
#include <mutex>

#include "smelt/autograd.h"
#include "smelt/monitor.h"

namespace smelt {
namespace ops {
namespace {

std::atomic<bool> g_on{false};
std::mutex g_mutex;
std::string g_first;                  // guarded by g_mutex
thread_local bool t_checking = false;  // the check's own ops are not checked

template <class T>
bool finite_elements(const Tensor& c) {
  const T* p = c.data<T>();
  for (int64_t i = 0, n = c.numel(); i < n; ++i) {
    if (!std::isfinite(p[i])) return false;
  }
  return true;
}

}  // namespace

bool anomaly_detection_on() { return g_on.load(std::memory_order_relaxed); }

bool all_finite(const Tensor& t) {
  if (!t.defined() || !t.storage() || (t.dtype() != DType::Float32 && t.dtype() != DType::Float64)) return true;
  NoGradGuard no_grad;
  const Tensor c = t.contiguous();
  return t.dtype() == DType::Float32 ? finite_elements<float>(c) : finite_elements<double>(c);
}

void check_anomaly(OpId op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
  if (t_checking) return;
  t_checking = true;
  struct Reset {
    ~Reset() { t_checking = false; }
  } reset;
  size_t bad = outputs.size();
  for (size_t k = 0; k < outputs.size() && bad == outputs.size(); ++k) {
    if (!all_finite(outputs[k])) bad = k;
  }
  if (bad == outputs.size()) return;
  for (const Tensor& t : inputs) {
    if (!all_finite(t)) return;  // propagated, not produced here
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_first.empty()) return;
  g_first = std::string(op_name(op)) + " (output " + std::to_string(bad) + ", " + dtype_name(outputs[bad].dtype()) +
            " " + shape_str(outputs[bad].shape()) + "): a NaN or an infinity from finite operands" +
            (autograd::grad_enabled() ? "" : " (grad mode off: a backward step, or no_grad code)");
}

}  // namespace ops

void set_detect_anomaly(bool on) { ops::g_on.store(on); }
bool detect_anomaly() { return ops::g_on.load(); }

std::string take_anomaly() {
  std::lock_guard<std::mutex> lock(ops::g_mutex);
  std::string first = std::move(ops::g_first);
  ops::g_first.clear();
  return first;
}

}  // namespace smelt
