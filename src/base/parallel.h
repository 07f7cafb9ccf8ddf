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

// OpenMP's workers start on the CPU of the thread that creates them, and share it until the
// kernel's load balancer moves them: on a 2-CPU virtual machine every 2-thread region of the
// first ~130 ms ran at the scheduler's 8 ms slice (a 0.3 ms GEMM took 8 ms), which also decided
// timing-based choices (kernels/gemm.cpp) for the whole process. spread_threads(n) runs once per
// thread count, outside any region: each of the n threads is bound for a moment to its own CPU of
// the process's set (the move is immediate) and then given its own set back, so the workers start
// spread and stay free to move. Skipped where OpenMP binds threads itself (OMP_PROC_BIND), with
// one CPU, or with SMELT_SPREAD_THREADS=0 (docs/env.md).
void spread_threads(int n);
inline std::atomic<int> threads_spread{1};  // the largest thread count spread so far

inline int num_threads() {
  if (omp_in_parallel()) return 1;
  const int n = omp_get_max_threads();
  if (n > threads_spread.load(std::memory_order_relaxed)) spread_threads(n);
  return n;
}

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
