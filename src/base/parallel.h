// Threads: OpenMP above a minimum amount of work, never nested (no oversubscription).
// The thread count is OpenMP's: OMP_NUM_THREADS, else the number of cores.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace smelt {

// Elementwise work below this many elements runs on one thread: forking costs ~ a few µs.
inline constexpr int64_t kParallelGrain = 32768;

inline int num_threads() { return omp_in_parallel() ? 1 : omp_get_max_threads(); }

// Calls fn(begin, end) over contiguous chunks of [0, n), in parallel when n >= grain. Chunks are
// at least `grain` long, so small problems never pay for a fork.
template <class F>
void parallel_for(int64_t n, int64_t grain, const F& fn) {
  if (n <= 0) return;
  int threads = num_threads();
  int64_t chunks = std::min<int64_t>(threads, std::max<int64_t>(1, n / std::max<int64_t>(grain, 1)));
  if (chunks <= 1) {
    fn(int64_t(0), n);
    return;
  }
#pragma omp parallel for num_threads(int(chunks)) schedule(static, 1)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t begin = n * c / chunks;
    int64_t end = n * (c + 1) / chunks;
    fn(begin, end);
  }
}

}  // namespace smelt
