// Elementwise throughput against the machine's memory bandwidth: STREAM-like copy and triad on
// raw arrays (threaded exactly as smelt's kernels are, through smelt::parallel_for), then smelt's
// public ops on 16M floats. Each reports GB/s of bytes read + written; an op running at the copy
// bandwidth is memory bound, i.e. as fast as it can be without fusion.
//
//   OMP_NUM_THREADS=2 build/bench/elementwise_bench
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "base/parallel.h"
#include "kernels/loops.h"
#include "kernels/scalar.h"
#include "smelt/smelt.h"

namespace {

constexpr int64_t kN = int64_t(1) << 24;  // 16M floats: 64 MB per array, far beyond the caches

void report_bytes(benchmark::State& state, int64_t bytes_per_iteration) {
  // shown as e.g. "bandwidth=25.1G/s": bytes read + written per second, in units of 10^9
  state.counters["bandwidth"] = benchmark::Counter(double(bytes_per_iteration) * double(state.iterations()),
                                                   benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// A raw array, first touched by the same threads (same chunks) that will use it.
struct Array {
  float* data;
  explicit Array(float value) : data(static_cast<float*>(std::aligned_alloc(64, kN * sizeof(float)))) {
    smelt::parallel_for(kN, smelt::kParallelGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) data[i] = value;
    });
  }
  ~Array() { std::free(data); }
};

void BM_StreamCopy(benchmark::State& state) {
  Array a(0.0f), b(1.0f);
  for (auto _ : state) {
    float* __restrict out = a.data;
    const float* __restrict in = b.data;
    smelt::parallel_for(kN, smelt::kParallelGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[i] = in[i];
    });
    benchmark::DoNotOptimize(a.data);
    benchmark::ClobberMemory();
  }
  report_bytes(state, 2 * kN * int64_t(sizeof(float)));
}

void BM_StreamTriad(benchmark::State& state) {
  Array a(0.0f), b(1.0f), c(2.0f);
  const float s = 3.0f;
  for (auto _ : state) {
    float* __restrict out = a.data;
    const float* __restrict x = b.data;
    const float* __restrict y = c.data;
    smelt::parallel_for(kN, smelt::kParallelGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[i] = x[i] + s * y[i];
    });
    benchmark::DoNotOptimize(a.data);
    benchmark::ClobberMemory();
  }
  report_bytes(state, 3 * kN * int64_t(sizeof(float)));
}

smelt::Tensor input(uint64_t seed) {
  smelt::Generator gen(seed);
  return smelt::rand({kN}, smelt::DType::Float32, &gen) * 8.0 - 4.0;  // [-4, 4): all branches
}

// smelt's public ops: the output is freshly allocated on every call, as in eager code.
void BM_SmeltAdd(benchmark::State& state) {
  smelt::Tensor a = input(1), b = input(2);
  for (auto _ : state) benchmark::DoNotOptimize(smelt::add(a, b));
  report_bytes(state, 3 * kN * int64_t(sizeof(float)));
}
void BM_SmeltMul(benchmark::State& state) {
  smelt::Tensor a = input(1), b = input(2);
  for (auto _ : state) benchmark::DoNotOptimize(smelt::mul(a, b));
  report_bytes(state, 3 * kN * int64_t(sizeof(float)));
}
template <smelt::Tensor (*Op)(const smelt::Tensor&)>
void BM_SmeltUnary(benchmark::State& state) {
  smelt::Tensor a = input(1);
  for (auto _ : state) benchmark::DoNotOptimize(Op(a));
  report_bytes(state, 2 * kN * int64_t(sizeof(float)));
}
smelt::Tensor gelu_erf(const smelt::Tensor& x) { return smelt::gelu(x); }
smelt::Tensor gelu_tanh(const smelt::Tensor& x) { return smelt::gelu(x, smelt::GeluApprox::Tanh); }

// The same kernels writing into an output that already exists (no allocation, no page faults):
// the gap to the ops above is the cost of a fresh output buffer.
void BM_KernelExpIntoExisting(benchmark::State& state) {
  smelt::Tensor a = input(1), out = smelt::exp(a);
  for (auto _ : state) {
    smelt::kernels::map1<float, float>(out, a, [](float x) { return smelt::scalar::exp(x); });
    benchmark::ClobberMemory();
  }
  report_bytes(state, 2 * kN * int64_t(sizeof(float)));
}
void BM_KernelAddIntoExisting(benchmark::State& state) {
  smelt::Tensor a = input(1), b = input(2), out = smelt::add(a, b);
  for (auto _ : state) {
    smelt::kernels::map2<float, float, float>(out, a, b, [](float x, float y) { return x + y; });
    benchmark::ClobberMemory();
  }
  report_bytes(state, 3 * kN * int64_t(sizeof(float)));
}

// The compute ceiling: one thread on 16K floats that stay in L1/L2, so memory is not the limit.
// An op whose in-cache rate is well above the copy bandwidth per thread is memory bound.
template <float (*F)(float)>
void BM_InCache(benchmark::State& state) {
  constexpr int64_t kSmall = 16384;  // below kParallelGrain: one thread
  smelt::Generator gen(3);
  smelt::Tensor a = smelt::rand({kSmall}, smelt::DType::Float32, &gen) * 8.0 - 4.0, out = smelt::exp(a);
  for (auto _ : state) {
    smelt::kernels::map1<float, float>(out, a, [](float x) { return F(x); });
    benchmark::ClobberMemory();
  }
  report_bytes(state, 2 * kSmall * int64_t(sizeof(float)));
}
float copy_f(float x) { return x; }
float exp_f(float x) { return smelt::scalar::exp(x); }
float gelu_f(float x) { return smelt::scalar::gelu_erf(x); }
float gelu_tanh_f(float x) { return smelt::scalar::gelu_tanh(x); }
float sigmoid_f(float x) { return smelt::scalar::sigmoid(x); }

}  // namespace

BENCHMARK(BM_InCache<copy_f>)->Name("BM_InCacheCopy1Thread");
BENCHMARK(BM_InCache<exp_f>)->Name("BM_InCacheExp1Thread");
BENCHMARK(BM_InCache<gelu_f>)->Name("BM_InCacheGelu1Thread");
BENCHMARK(BM_InCache<gelu_tanh_f>)->Name("BM_InCacheGeluTanh1Thread");
BENCHMARK(BM_InCache<sigmoid_f>)->Name("BM_InCacheSigmoid1Thread");
BENCHMARK(BM_StreamCopy)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_StreamTriad)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SmeltAdd)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SmeltMul)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SmeltUnary<smelt::exp>)->Name("BM_SmeltExp")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SmeltUnary<gelu_erf>)->Name("BM_SmeltGelu")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SmeltUnary<gelu_tanh>)->Name("BM_SmeltGeluTanh")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SmeltUnary<smelt::sigmoid>)->Name("BM_SmeltSigmoid")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_KernelExpIntoExisting)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_KernelAddIntoExisting)->UseRealTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
