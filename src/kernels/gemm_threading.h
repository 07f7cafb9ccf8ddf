// How both GEMM implementations use threads: C is cut along its longer side into strips of whole
// tiles, and OpenMP threads take strips dynamically. More strips than threads (a few per thread)
// lets a thread that got descheduled on a busy machine hand its share to the others, at the cost
// of packing the shorter operand once per strip (a few percent at most: strips stay >= 4 tiles).
// One thread when called inside a parallel region or for little work.
#pragma once

#include <algorithm>
#include <cstdint>

#include "base/parallel.h"

namespace smelt::kernels::gemm_detail {

// Below this many flops per thread a fork costs more than it saves.
inline constexpr double kMinFlopsPerThread = 4.0e6;
inline constexpr int64_t kStripsPerThread = 4;
inline constexpr int64_t kMinStripTiles = 4;

// run(split_n, begin, end) computes C's columns (split_n) or rows [begin, end).
// row_tile / col_tile: the strip granularity along M / N.
template <class F>
void for_each_strip(int64_t M, int64_t N, int64_t K, int64_t row_tile, int64_t col_tile,
                    const F& run) {
  const bool split_n = N >= M;
  const int64_t extent = split_n ? N : M;
  const int64_t tile = split_n ? col_tile : row_tile;
  const int64_t tiles = (extent + tile - 1) / tile;
  const double flops = 2.0 * double(M) * double(N) * double(K);
  const int threads = int(std::min<double>(
      {double(num_threads()), double(tiles), std::max(1.0, flops / kMinFlopsPerThread)}));
  if (threads <= 1) {
    run(split_n, int64_t(0), extent);
    return;
  }
  const int64_t strips =
      std::max<int64_t>(threads, std::min(threads * kStripsPerThread, tiles / kMinStripTiles));
  ParallelErrors errors;  // an exception in run() reaches the caller, not std::terminate
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int64_t s = 0; s < strips; ++s) {
    errors.run([&] {
      const int64_t begin = std::min(tiles * s / strips * tile, extent);
      const int64_t end = std::min(tiles * (s + 1) / strips * tile, extent);
      if (begin < end) run(split_n, begin, end);
    });
  }
  errors.rethrow();
}

}  // namespace smelt::kernels::gemm_detail
