// A per-kernel profile that a Plan fills while it replays: per kernel the calls, time, bytes moved
// and flops, printable as a table and exportable as a Chrome trace (JSON; opens in Perfetto and
// chrome://tracing). Recording is thread-safe; when the profile is disabled a record is one
// relaxed atomic load.
//
// Kernels are named once through kernel_id() (at plan instantiation), so that a record does not
// hash a string. Times are nanoseconds on the steady clock, counted from the profile's creation
// (or its last clear()).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace smelt::runtime {

struct KernelProfile {
  std::string name;
  int64_t calls = 0;
  int64_t total_ns = 0;
  int64_t min_ns = 0;
  int64_t max_ns = 0;
  int64_t bytes = 0;  // moved (read + written), summed over the calls
  int64_t flops = 0;  // summed over the calls
};

struct ProfileEvent {
  int32_t kernel = 0;  // a kernel_id()
  int32_t thread = 0;  // a small number per OS thread, in order of first record
  int64_t start_ns = 0;
  int64_t duration_ns = 0;
  int64_t bytes = 0;
  int64_t flops = 0;
};

class Profile {
 public:
  // Keeps at most `max_events` events for the trace; later calls still count in the table.
  explicit Profile(bool enabled = false, size_t max_events = size_t(1) << 20);
  Profile(const Profile&) = delete;
  Profile& operator=(const Profile&) = delete;

  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  void set_enabled(bool on) { enabled_.store(on, std::memory_order_relaxed); }

  // The id of the kernel called `name`, the same for the same name.
  int32_t kernel_id(std::string_view name);
  // Nanoseconds since the profile's epoch.
  int64_t now_ns() const;

  // One call that just ended and took `ns`.
  void record(int32_t kernel, int64_t ns, int64_t bytes, int64_t flops);
  void record(std::string_view kernel, int64_t ns, int64_t bytes, int64_t flops);
  // One call over [start_ns, end_ns], both from now_ns().
  void record_span(int32_t kernel, int64_t start_ns, int64_t end_ns, int64_t bytes, int64_t flops);

  // Kernels that were called at least once, most total time first.
  std::vector<KernelProfile> kernels() const;
  std::vector<ProfileEvent> events() const;  // in recording order
  int64_t dropped_events() const;            // calls beyond max_events, missing from the trace
  void clear();                              // forgets calls and events, keeps kernel ids

  // Columns: kernel, calls, total ms, mean us, min us (the fastest call: under load the mean
  // mostly measures the other work), GB/s, GFLOP/s, share of the total time.
  std::string table() const;
  // {"traceEvents": [...]} with one complete ("X") event per call, timestamps in microseconds.
  std::string chrome_trace_json() const;
  // Writes chrome_trace_json() to `path`; throws smelt::Error naming the path on failure.
  void write_chrome_trace(const std::string& path) const;

 private:
  void add(int32_t kernel, int64_t start_ns, int64_t ns, int64_t bytes, int64_t flops);

  std::atomic<bool> enabled_;
  size_t max_events_;
  std::atomic<int64_t> epoch_ns_;  // steady clock at creation / clear()
  mutable std::mutex mutex_;       // guards everything below
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<KernelProfile> kernels_;  // by id
  std::vector<ProfileEvent> events_;
  int64_t dropped_ = 0;
};

// Times one kernel call from construction to destruction into `profile`, if it is enabled.
class ProfileScope {
 public:
  ProfileScope(Profile& profile, int32_t kernel, int64_t bytes, int64_t flops)
      : profile_(profile.enabled() ? &profile : nullptr), kernel_(kernel), bytes_(bytes),
        flops_(flops), start_ns_(profile_ ? profile.now_ns() : 0) {}
  ~ProfileScope() {
    if (profile_) profile_->record_span(kernel_, start_ns_, profile_->now_ns(), bytes_, flops_);
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  Profile* profile_;
  int32_t kernel_;
  int64_t bytes_, flops_, start_ns_;
};

}  // namespace smelt::runtime
