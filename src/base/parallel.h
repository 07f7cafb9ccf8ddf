// Threads: OpenMP above a minimum amount of work, never nested (no oversubscription).
// The thread count is OpenMP's: OMP_NUM_THREADS, else the number of cores.
//
// An exception must not leave an OpenMP region (the runtime calls std::terminate), so every
// parallel region in smelt runs its body through ParallelErrors: the first exception is kept,
// the chunks not yet started are skipped, and the caller's thread rethrows it after the region.
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>

namespace smelt {

// Elementwise work below this many elements runs on one thread: forking costs ~ a few µs.
inline constexpr int64_t kParallelGrain = 32768;

inline int num_threads() { return omp_in_parallel() ? 1 : omp_get_max_threads(); }

// Carries the first exception of a parallel region to the thread that opened it:
//   ParallelErrors errors;
//   #pragma omp parallel for
//   for (...) errors.run([&] { body; });
//   errors.rethrow();
class ParallelErrors {
 public:
  template <class F>
  void run(const F& body) noexcept {
    if (failed_.load(std::memory_order_relaxed)) return;  // the region's result is lost anyway
    try {
      body();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!first_) first_ = std::current_exception();
      failed_.store(true, std::memory_order_relaxed);
    }
  }
  // After the region (its implicit barrier makes first_ visible here).
  void rethrow() const {
    if (first_) std::rethrow_exception(first_);
  }

 private:
  std::atomic<bool> failed_{false};
  std::mutex mutex_;
  std::exception_ptr first_;
};

// Calls fn(begin, end) over contiguous chunks of [0, n), in parallel when n >= grain. Chunks are
// at least `grain` long, so small problems never pay for a fork. An exception thrown by fn on any
// thread reaches the caller (the first one, when several chunks throw).
template <class F>
void parallel_for(int64_t n, int64_t grain, const F& fn) {
  if (n <= 0) return;
  int threads = num_threads();
  int64_t chunks = std::min<int64_t>(threads, std::max<int64_t>(1, n / std::max<int64_t>(grain, 1)));
  if (chunks <= 1) {
    fn(int64_t(0), n);
    return;
  }
  ParallelErrors errors;
#pragma omp parallel for num_threads(int(chunks)) schedule(static, 1)
  for (int64_t c = 0; c < chunks; ++c) {
    errors.run([&] {
      int64_t begin = n * c / chunks;
      int64_t end = n * (c + 1) / chunks;
      fn(begin, end);
    });
  }
  errors.rethrow();
}

}  // namespace smelt
