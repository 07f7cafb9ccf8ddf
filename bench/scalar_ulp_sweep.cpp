// Exhaustive accuracy of the float32 transcendental functions in kernels/scalar.h: every finite
// float32 input (all 2^32 bit patterns but NaN and inf) against the float64 std:: reference
// rounded to float, in ulps (one ulp of a subnormal is the smallest subnormal). This is what the
// table at the top of scalar.h reports; tests/kernels/scalar_math_test.cpp re-checks a strided
// sweep in CI. Not a Google Benchmark: a plain program, too slow for CI (tens of seconds per
// function), built with the library's flags so that the functions vectorize as in the kernels.
//
//   build/bench/scalar_ulp_sweep [threads] [function...]   (default: 2 threads, every function)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kernels/scalar.h"
#include "support/ulp.h"  // tests/support: the references the CI test uses

namespace {

using namespace smelt;

using testing::gelu_erf_ref;
using testing::gelu_tanh_ref;
using testing::sigmoid_ref;
using testing::silu_ref;
using testing::softplus_ref;
using testing::ulp_error;

// y (n) = f(x) in a loop that vectorizes as the kernels' loops do.
#define SMELT_SWEEP_KERNEL(name, expr)                                            \
  [[gnu::noinline]] void name##_kernel(const float* __restrict x, float* __restrict y, int64_t n) { \
    _Pragma("omp simd") for (int64_t i = 0; i < n; ++i) y[i] = expr;            \
  }
SMELT_SWEEP_KERNEL(exp, scalar::exp(x[i]))
SMELT_SWEEP_KERNEL(log, scalar::log(x[i]))
SMELT_SWEEP_KERNEL(tanh, scalar::tanh(x[i]))
SMELT_SWEEP_KERNEL(erf, scalar::erf(x[i]))
SMELT_SWEEP_KERNEL(sigmoid, scalar::sigmoid(x[i]))
SMELT_SWEEP_KERNEL(silu, scalar::silu(x[i]))
SMELT_SWEEP_KERNEL(gelu_erf, scalar::gelu_erf(x[i]))
SMELT_SWEEP_KERNEL(gelu_tanh, scalar::gelu_tanh(x[i]))
SMELT_SWEEP_KERNEL(softplus, scalar::softplus(x[i], 1.0f, 20.0f))
#undef SMELT_SWEEP_KERNEL

struct Function {
  const char* name;
  void (*kernel)(const float*, float*, int64_t);
  double (*ref)(double);
};

const Function kFunctions[] = {
    {"exp", exp_kernel, [](double x) { return std::exp(x); }},
    {"log", log_kernel, [](double x) { return std::log(x); }},
    {"tanh", tanh_kernel, [](double x) { return std::tanh(x); }},
    {"erf", erf_kernel, [](double x) { return std::erf(x); }},
    {"sigmoid", sigmoid_kernel, sigmoid_ref},
    {"silu", silu_kernel, silu_ref},
    {"gelu_erf", gelu_erf_kernel, gelu_erf_ref},
    {"gelu_tanh", gelu_tanh_kernel, gelu_tanh_ref},
    {"softplus", softplus_kernel, softplus_ref},
};

struct Worst {
  int64_t ulps = 0;
  float x = 0;
};

// Bit patterns [begin, end) in blocks; NaN and inf inputs are skipped (tests check them).
Worst sweep(const Function& f, uint64_t begin, uint64_t end) {
  constexpr int64_t kBlock = 4096;
  std::vector<float> x(kBlock), y(kBlock);
  Worst worst;
  for (uint64_t b0 = begin; b0 < end; b0 += kBlock) {
    const int64_t n = int64_t(std::min<uint64_t>(kBlock, end - b0));
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t u = uint32_t(b0 + uint64_t(i));
      std::memcpy(&x[i], &u, sizeof u);
    }
    f.kernel(x.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isfinite(x[i])) continue;
      const int64_t e = ulp_error(y[i], f.ref(double(x[i])));
      if (e > worst.ulps) worst = {e, x[i]};
    }
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  if (threads < 1) threads = 1;
  std::vector<std::string> wanted(argv + std::min(argc, 2), argv + argc);
  for (const Function& f : kFunctions) {
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), f.name) == wanted.end()) continue;
    // Interleaved slices, so that the threads share the expensive ranges alike.
    constexpr uint64_t kSlices = 1024, kAll = uint64_t(1) << 32, kSlice = kAll / kSlices;
    std::vector<Worst> worst(static_cast<size_t>(threads));
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        for (uint64_t s = uint64_t(t); s < kSlices; s += uint64_t(threads)) {
          const Worst w = sweep(f, s * kSlice, (s + 1) * kSlice);
          if (w.ulps > worst[size_t(t)].ulps) worst[size_t(t)] = w;
        }
      });
    }
    for (std::thread& th : pool) th.join();
    Worst all;
    for (const Worst& w : worst) {
      if (w.ulps > all.ulps) all = w;
    }
    float got;
    f.kernel(&all.x, &got, 1);
    std::printf("%-10s max %lld ulp at x = %.9g (bits 0x%08x): got %.9g, want %.9g\n", f.name,
                (long long)all.ulps, double(all.x), [&] { uint32_t u; std::memcpy(&u, &all.x, 4); return u; }(),
                double(got), double(float(f.ref(double(all.x)))));
    std::fflush(stdout);
  }
}
