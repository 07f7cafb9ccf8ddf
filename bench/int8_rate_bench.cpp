// The multiply-accumulate rates that bound int8 against float32 on this CPU (docs/quantization.md
// "Measured"): one core's vfmadd231ps (16 float MACs), vpdpbusd (64 u8 x s8 MACs) and, where the
// CPU and OS allow it, AMX's TDPBSUD (16 x 16 x 64 MACs), each in a loop of independent
// accumulators so that only throughput counts. Counters: MAC/s (`MACs`) per instruction kind.
//   ./build/bench/int8_rate_bench
#include <benchmark/benchmark.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/qgemm.h"
#include "kernels/qgemm_tiles.h"

namespace {

constexpr int64_t kRounds = 1 << 16;
constexpr int kChains = 16;  // independent accumulators: more than latency x throughput needs

#if defined(__x86_64__)
__attribute__((target("avx512f"), noinline)) float fma_rounds(int64_t rounds) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(float(i));
  __m512 a = _mm512_set1_ps(1.0001f);
  const __m512 b = _mm512_set1_ps(0.9999f);
  for (int64_t r = 0; r < rounds; ++r) {
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
    __asm__ volatile("" : "+v"(a));  // a loop-carried input: the loop cannot be folded
  }
  __m512 sum = acc[0];
  for (int i = 1; i < kChains; ++i) sum = _mm512_add_ps(sum, acc[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  return lanes[0];
}

__attribute__((target("avx512f,avx512bw,avx512vnni"), noinline)) int vnni_rounds(int64_t rounds) {
  __m512i acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_epi32(i);
  __m512i a = _mm512_set1_epi32(0x01020304);
  const __m512i b = _mm512_set1_epi32(0x05060708);
  for (int64_t r = 0; r < rounds; ++r) {
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
    __asm__ volatile("" : "+v"(a));
  }
  __m512i sum = acc[0];
  for (int i = 1; i < kChains; ++i) sum = _mm512_add_epi32(sum, acc[i]);
  alignas(64) int lanes[16];
  _mm512_store_si512(lanes, sum);
  return lanes[0];
}

// Four TDPBSUDs per round on tiles loaded once (operands in registers: the unit's own rate).
__attribute__((target("amx-tile,amx-int8"), noinline)) int amx_rounds(int64_t rounds) {
  alignas(64) static int8_t a[2 * 16 * 64];
  alignas(64) static int8_t b[16 * 128];
  alignas(64) static int32_t c[32 * 32];
  smelt::kernels::qtiles::AmxTiles tiles(smelt::kernels::qtiles::kAmxBlock);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, a, 64);
  _tile_loadd(5, a + 16 * 64, 64);
  _tile_loadd(6, b, 128);
  _tile_loadd(7, b + 64, 128);
  for (int64_t r = 0; r < rounds; ++r) {
    _tile_dpbsud(0, 4, 6);
    _tile_dpbsud(1, 4, 7);
    _tile_dpbsud(2, 5, 6);
    _tile_dpbsud(3, 5, 7);
  }
  _tile_stored(0, c, 128);
  return c[0];
}
#endif

void BM_Fma(benchmark::State& state) {
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx512f")) return state.SkipWithError("no AVX-512 on this CPU");
  for (auto _ : state) benchmark::DoNotOptimize(fma_rounds(kRounds));
  state.counters["MACs"] = benchmark::Counter(double(state.iterations()) * kRounds * kChains * 16,
                                              benchmark::Counter::kIsRate);
#else
  state.SkipWithError("x86-64 only");
#endif
}
BENCHMARK(BM_Fma);

void BM_Vnni(benchmark::State& state) {
#if defined(__x86_64__)
  if (!smelt::kernels::qgemm_isa_supported(smelt::kernels::QGemmIsa::Avx512Vnni)) {
    return state.SkipWithError("no AVX-512 VNNI on this CPU");
  }
  for (auto _ : state) benchmark::DoNotOptimize(vnni_rounds(kRounds));
  state.counters["MACs"] = benchmark::Counter(double(state.iterations()) * kRounds * kChains * 64,
                                              benchmark::Counter::kIsRate);
#else
  state.SkipWithError("x86-64 only");
#endif
}
BENCHMARK(BM_Vnni);

void BM_Amx(benchmark::State& state) {
#if defined(__x86_64__)
  if (!smelt::kernels::qgemm_isa_supported(smelt::kernels::QGemmIsa::Amx)) {
    return state.SkipWithError("no AMX on this CPU (or the OS did not grant it)");
  }
  for (auto _ : state) benchmark::DoNotOptimize(amx_rounds(kRounds / 16));
  state.counters["MACs"] = benchmark::Counter(double(state.iterations()) * (kRounds / 16) * 4 * 16 * 16 * 64,
                                              benchmark::Counter::kIsRate);
#else
  state.SkipWithError("x86-64 only");
#endif
}
BENCHMARK(BM_Amx);

}  // namespace

BENCHMARK_MAIN();
