// GEMM: smelt's own kernel vs OpenBLAS, row-major float32/float64, C = A B.
//
//   build/bench/gemm_bench --benchmark_filter=1024
//   OMP_NUM_THREADS=1 build/bench/gemm_bench --benchmark_filter=row_vector   (M = 1, both layouts of B)
//                                                                            (/24: B from DRAM)
//
// Implementations:
//   own           kernels::gemm_own (OpenMP strips, OMP_NUM_THREADS)
//   openblas      kernels::gemm_openblas (OpenBLAS single-threaded per OpenMP strip)
//   auto          kernels::gemm with GemmImpl::Auto (measures both on scratch buffers at the first call
//                 of a shape class, then keeps the faster)
//   openblas_pool cblas_sgemm with OpenBLAS's own pthread pool (openblas_set_num_threads to the
//                 OpenMP thread count), for reference: what the library does by itself
// Counter GFLOPS = 2 M N K / time.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <omp.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/gemm.h"

namespace {

using smelt::kernels::GemmImpl;

template <class T>
std::vector<T> random_matrix(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<T> v(static_cast<size_t>(n));
  for (T& x : v) x = T(dist(rng));
  return v;
}

enum class Which { Own, OpenBlas, OpenBlasPool, Auto };

template <class T>
void run_pool(int64_t M, int64_t N, int64_t K, const T* A, const T* B, T* C) {
  if constexpr (sizeof(T) == 4) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(M), int(N), int(K), 1.0f, A, int(K),
                B, int(N), 0.0f, C, int(N));
  } else {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(M), int(N), int(K), 1.0, A, int(K),
                B, int(N), 0.0, C, int(N));
  }
}

template <class T>
void bm_gemm(benchmark::State& state, Which which) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  auto A = random_matrix<T>(M * K, 1), B = random_matrix<T>(K * N, 2);
  std::vector<T> C(static_cast<size_t>(M * N));
  if (which == Which::OpenBlasPool) openblas_set_num_threads(omp_get_max_threads());
  for (auto _ : state) {
    switch (which) {
      case Which::Own:
        smelt::kernels::gemm<T>(M, N, K, T(1), A.data(), K, 1, B.data(), N, 1, T(0), C.data(), N,
                                1, GemmImpl::Own);
        break;
      case Which::OpenBlas:
        smelt::kernels::gemm<T>(M, N, K, T(1), A.data(), K, 1, B.data(), N, 1, T(0), C.data(), N,
                                1, GemmImpl::OpenBlas);
        break;
      case Which::OpenBlasPool:
        run_pool(M, N, K, A.data(), B.data(), C.data());
        break;
      case Which::Auto:
        smelt::kernels::gemm<T>(M, N, K, T(1), A.data(), K, 1, B.data(), N, 1, T(0), C.data(), N,
                                1, GemmImpl::Auto);
        break;
    }
    benchmark::DoNotOptimize(C.data());
    benchmark::ClobberMemory();
  }
  if (which == Which::OpenBlasPool) openblas_set_num_threads(1);
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * double(M) * double(N) * double(K),
                                                benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::kIs1000);
  state.SetLabel(smelt::kernels::gemm_own_kernel_name<T>());
}

void shapes(benchmark::internal::Benchmark* b) {
  b->Args({1024, 1024, 1024});
  b->Args({512, 512, 512});
  b->Args({256, 256, 256});
  b->Args({64, 3136, 576});   // conv 3x3 64->64 on 56x56, one image (im2col)
  b->Args({4096, 256, 1024}); // tall-skinny: a batch of 4096 through a 1024 -> 256 linear layer
  b->Args({127, 129, 131});   // odd sizes: edge tiles
  b->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.3);
}

void sgemm(benchmark::State& state, Which which) { bm_gemm<float>(state, which); }
void dgemm(benchmark::State& state, Which which) { bm_gemm<double>(state, which); }

void one_shape(benchmark::internal::Benchmark* b) {
  b->Args({1024, 1024, 1024})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.3);
}

BENCHMARK_CAPTURE(sgemm, own, Which::Own)->Apply(shapes);
BENCHMARK_CAPTURE(sgemm, openblas, Which::OpenBlas)->Apply(shapes);
BENCHMARK_CAPTURE(sgemm, openblas_pool, Which::OpenBlasPool)->Apply(shapes);
BENCHMARK_CAPTURE(sgemm, auto, Which::Auto)->Apply(shapes);
BENCHMARK_CAPTURE(dgemm, own, Which::Own)->Apply(one_shape);
BENCHMARK_CAPTURE(dgemm, openblas, Which::OpenBlas)->Apply(one_shape);

// M = 1 (a classifier at batch 1, 1280 -> 1000), gemm_own's row-vector path: B rows contiguous
// (first arg 0) or B a transposed weight, columns contiguous (1). The second arg is how many
// copies of B the calls cycle through: 1 keeps B in cache; 24 (24 x 4.9 MiB = 117 MiB, past the
// last-level cache) reads it from DRAM, as inside a model whose earlier layers evicted it.
void sgemm_row_vector(benchmark::State& state) {
  const int64_t N = 1000, K = 1280, copies = state.range(1);
  const bool transposed = state.range(0) != 0;
  auto A = random_matrix<float>(K, 1), B = random_matrix<float>(K * N * copies, 2);
  std::vector<float> C(static_cast<size_t>(N));
  const int64_t rsb = transposed ? 1 : N, csb = transposed ? K : 1;
  int64_t call = 0;
  for (auto _ : state) {
    const float* b = B.data() + (call++ % copies) * K * N;
    smelt::kernels::gemm<float>(1, N, K, 1.0f, A.data(), K, 1, b, rsb, csb, 0.0f, C.data(), N, 1, GemmImpl::Own);
    benchmark::DoNotOptimize(C.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * K * N * int64_t(sizeof(float)));
  state.SetLabel(std::string(transposed ? "B columns contiguous" : "B rows contiguous") +
                 (copies > 1 ? ", from DRAM" : ", in cache"));
}
BENCHMARK(sgemm_row_vector)
    ->Args({0, 1})
    ->Args({1, 1})
    ->Args({0, 24})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.3);

}  // namespace

// Google Benchmark's main, then what Auto chose per shape class (measured during sgemm/auto).
int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::printf("\nAuto's choices (kernels::gemm_selection_report):\n%s",
              smelt::kernels::gemm_selection_report().c_str());
  return 0;
}
