#include "runtime/profile.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "smelt/error.h"

namespace smelt::runtime {
namespace {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Trace viewers draw one track per thread id; small numbers read better than OS ids.
int32_t this_thread_number() {
  static std::atomic<int32_t> next{0};
  thread_local const int32_t number = next.fetch_add(1, std::memory_order_relaxed);
  return number;
}

}  // namespace

Profile::Profile(bool enabled, size_t max_events)
    : enabled_(enabled), max_events_(max_events), epoch_ns_(steady_ns()) {}

int32_t Profile::kernel_id(std::string_view name) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, inserted] = ids_.try_emplace(std::string(name), int32_t(kernels_.size()));
  if (inserted) kernels_.push_back(KernelProfile{std::string(name)});
  return it->second;
}

int64_t Profile::now_ns() const { return steady_ns() - epoch_ns_.load(std::memory_order_relaxed); }

void Profile::record(int32_t kernel, int64_t ns, int64_t bytes, int64_t flops) {
  if (!enabled()) return;
  add(kernel, now_ns() - ns, ns, bytes, flops);
}

void Profile::record(std::string_view kernel, int64_t ns, int64_t bytes, int64_t flops) {
  if (!enabled()) return;
  add(kernel_id(kernel), now_ns() - ns, ns, bytes, flops);
}

void Profile::record_span(int32_t kernel, int64_t start_ns, int64_t end_ns, int64_t bytes,
                          int64_t flops) {
  if (!enabled()) return;
  add(kernel, start_ns, end_ns - start_ns, bytes, flops);
}

void Profile::add(int32_t kernel, int64_t start_ns, int64_t ns, int64_t bytes, int64_t flops) {
  SMELT_CHECK(ns >= 0 && bytes >= 0 && flops >= 0)
      << "profile: a call took " << ns << " ns, moved " << bytes << " bytes and did " << flops
      << " flops; valid: none negative";
  const int32_t thread = this_thread_number();
  std::lock_guard<std::mutex> lock(mutex_);
  SMELT_CHECK(kernel >= 0 && size_t(kernel) < kernels_.size())
      << "profile: kernel id " << kernel << " was not given by kernel_id(); valid: 0 to "
      << int64_t(kernels_.size()) - 1;
  KernelProfile& k = kernels_[kernel];
  k.min_ns = k.calls == 0 ? ns : std::min(k.min_ns, ns);
  k.max_ns = k.calls == 0 ? ns : std::max(k.max_ns, ns);
  ++k.calls;
  k.total_ns += ns;
  k.bytes += bytes;
  k.flops += flops;
  if (events_.size() < max_events_) {
    events_.push_back({kernel, thread, start_ns, ns, bytes, flops});
  } else {
    ++dropped_;
  }
}

std::vector<KernelProfile> Profile::kernels() const {
  std::vector<KernelProfile> out;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const KernelProfile& k : kernels_) {
      if (k.calls > 0) out.push_back(k);
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const KernelProfile& a, const KernelProfile& b) {
    return a.total_ns > b.total_ns;
  });
  return out;
}

std::vector<ProfileEvent> Profile::events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_;
}

int64_t Profile::dropped_events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dropped_;
}

void Profile::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (KernelProfile& k : kernels_) k = KernelProfile{k.name};
  events_.clear();
  dropped_ = 0;
  epoch_ns_.store(steady_ns(), std::memory_order_relaxed);
}

std::string Profile::table() const {
  const std::vector<KernelProfile> ks = kernels();
  int64_t total_ns = 0, total_calls = 0;
  size_t width = 6;  // "kernel"
  for (const KernelProfile& k : ks) {
    total_ns += k.total_ns;
    total_calls += k.calls;
    width = std::max(width, std::min<size_t>(k.name.size(), 48));
  }
  auto per_ns = [](int64_t amount, int64_t ns) {  // bytes/ns = GB/s, flops/ns = GFLOP/s
    return ns > 0 ? double(amount) / double(ns) : 0.0;
  };
  std::ostringstream o;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-*s %9s %11s %11s %11s %9s %9s %7s\n", int(width), "kernel", "calls",
                "total ms", "mean us", "min us", "GB/s", "GFLOP/s", "time %");
  o << buf;
  for (const KernelProfile& k : ks) {
    // Names longer than the column are cut with "..." so the columns stay aligned.
    const std::string name =
        k.name.size() <= width ? k.name : k.name.substr(0, width - 3) + "...";
    std::snprintf(buf, sizeof buf, "%-*s %9lld %11.3f %11.3f %11.3f %9.2f %9.2f %6.1f%%\n", int(width),
                  name.c_str(), (long long)k.calls, double(k.total_ns) * 1e-6,
                  double(k.total_ns) * 1e-3 / double(k.calls), double(k.min_ns) * 1e-3, per_ns(k.bytes, k.total_ns),
                  per_ns(k.flops, k.total_ns),
                  total_ns > 0 ? 100.0 * double(k.total_ns) / double(total_ns) : 0.0);
    o << buf;
  }
  std::snprintf(buf, sizeof buf, "%-*s %9lld %11.3f\n", int(width), "total",
                (long long)total_calls, double(total_ns) * 1e-6);
  o << buf;
  return o.str();
}

std::string Profile::chrome_trace_json() const {
  std::vector<ProfileEvent> evs;
  std::vector<std::string> names;
  int64_t dropped = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    evs = events_;
    for (const KernelProfile& k : kernels_) names.push_back(k.name);
    dropped = dropped_;
  }
  const int pid = int(::getpid());
  nlohmann::json trace = nlohmann::json::array();
  trace.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0},
                   {"args", {{"name", "smelt"}}}});
  std::vector<bool> named_thread;
  for (const ProfileEvent& e : evs) {
    if (size_t(e.thread) >= named_thread.size()) named_thread.resize(e.thread + 1, false);
    if (!named_thread[e.thread]) {
      named_thread[e.thread] = true;
      trace.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", e.thread},
                       {"args", {{"name", "smelt thread " + std::to_string(e.thread)}}}});
    }
    trace.push_back({{"name", names[e.kernel]},
                     {"cat", "kernel"},
                     {"ph", "X"},
                     {"ts", double(e.start_ns) * 1e-3},
                     {"dur", double(e.duration_ns) * 1e-3},
                     {"pid", pid},
                     {"tid", e.thread},
                     {"args", {{"bytes", e.bytes}, {"flops", e.flops}}}});
  }
  nlohmann::json doc = {{"traceEvents", std::move(trace)},
                        {"displayTimeUnit", "ns"},
                        {"otherData", {{"dropped_events", dropped}}}};
  // Kernel names come from the caller: bytes that are not UTF-8 are replaced, not an error.
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void Profile::write_chrome_trace(const std::string& path) const {
  const std::string json = chrome_trace_json();
  std::ofstream f(path, std::ios::binary);
  SMELT_CHECK(f.good()) << "cannot open '" << path << "' to write the Chrome trace";
  f << json;
  f.close();
  SMELT_CHECK(f.good()) << "writing the Chrome trace to '" << path << "' failed";
}

}  // namespace smelt::runtime
