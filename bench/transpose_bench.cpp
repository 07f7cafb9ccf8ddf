// Permuted copies against memcpy of the same bytes. A permutation that keeps the last dim should
// run close to memcpy (rows are copied as blocks); a true 2-D transpose runs tiled. The
// elementwise-loop copy (what contiguous() used before) is the baseline for both.
//   OMP_NUM_THREADS=1 ./build/bench/transpose_bench     (memcpy is single-threaded)
#include <benchmark/benchmark.h>

#include <cstring>

#include "kernels/reduce.h"
#include "kernels/transpose.h"
#include "smelt/smelt.h"

namespace {

using smelt::Shape;
using smelt::Tensor;

// 16 Mi floats = 64 MiB: far beyond the caches, so every variant is bandwidth-bound.
const Shape kShape{64, 256, 16, 64};

Tensor source() { return smelt::zeros(kShape) + 1.0; }

void set_bytes(benchmark::State& state, int64_t numel) {
  state.SetBytesProcessed(int64_t(state.iterations()) * numel * int64_t(sizeof(float)));
}

void BM_Memcpy(benchmark::State& state) {
  Tensor src = source();
  Tensor dst = smelt::empty(kShape);
  const size_t bytes = size_t(src.numel()) * sizeof(float);
  for (auto _ : state) {
    std::memcpy(dst.raw_data(), src.raw_data(), bytes);
    benchmark::ClobberMemory();
  }
  set_bytes(state, src.numel());
}

// Copies src.permute(perm) into a contiguous buffer with the normalized kernel.
void BM_PermuteCopy(benchmark::State& state, Shape perm, bool baseline) {
  Tensor view = source().permute(perm);
  Tensor dst = smelt::empty(view.shape());
  for (auto _ : state) {
    if (baseline) smelt::kernels::copy_strided(dst, view);
    else smelt::kernels::transpose_copy(dst, view);
    benchmark::ClobberMemory();
  }
  set_bytes(state, view.numel());
}

BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond);
// Keeps the last dim (rows of 64 floats = 256 bytes).
BENCHMARK_CAPTURE(BM_PermuteCopy, keep_last, Shape{2, 0, 1, 3}, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PermuteCopy, keep_last_elementwise_loop, Shape{2, 0, 1, 3}, true)->Unit(benchmark::kMillisecond);
// Keeps the last two dims, which merge into rows of 1024 floats.
BENCHMARK_CAPTURE(BM_PermuteCopy, keep_last_two, Shape{1, 0, 2, 3}, false)->Unit(benchmark::kMillisecond);
// Swaps the innermost dims: a tiled transpose of (16, 64) planes.
BENCHMARK_CAPTURE(BM_PermuteCopy, swap_inner, Shape{0, 1, 3, 2}, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PermuteCopy, swap_inner_elementwise_loop, Shape{0, 1, 3, 2}, true)->Unit(benchmark::kMillisecond);
// Reverses all dims: after merging nothing, a tiled transpose with strided outer dims.
BENCHMARK_CAPTURE(BM_PermuteCopy, reverse, Shape{3, 2, 1, 0}, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PermuteCopy, reverse_elementwise_loop, Shape{3, 2, 1, 0}, true)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
