// Linear + bias + ReLU at 1024^3 against the plain GEMM: the target is at most 1.03x the
// plain GEMM's time for the compiled function. Rows:
//   PlainGemm                  eager matmul(x, w) (allocates its output, as every row does)
//   EagerLinearRelu            eager relu(linear(x, w, b)): three kernels, two extra passes
//   PlainGemmTransposedB       eager matmul(x, w^T) with w^T a view: the GEMM linear() runs
//   Compiled/*_tiled           smelt::compile, backend cpp: one step, the bias + ReLU kernel's tile
//                              entry called on each output tile the GEMM finishes
//   Compiled/*_twostep         the same with SMELT_NO_EPILOGUE_IN_TILE=1: GEMM into a temporary,
//                              then the epilogue kernel over it
// The machine may be shared: compare the `min` rows (least disturbed run) of one invocation.
// Run with OMP_NUM_THREADS=2 and SMELT_GEMM=own|openblas to pin the GEMM (the choice is made once
// per process), e.g.
//   OMP_NUM_THREADS=2 SMELT_GEMM=own build/bench/epilogue_bench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "smelt/compile.h"
#include "smelt/smelt.h"

namespace {

using namespace smelt;

constexpr int64_t kN = 1024;

struct Operands {
  Tensor x = randn({kN, kN}), w = randn({kN, kN}), b = randn({kN});
};

Operands& operands() {
  static Operands o;
  return o;
}

void BM_PlainGemm(benchmark::State& state) {
  NoGradGuard no_grad;
  Operands& o = operands();
  Tensor wt = o.w.t().contiguous();
  for (auto _ : state) benchmark::DoNotOptimize(matmul(o.x, wt));
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * kN * kN * kN, benchmark::Counter::kIsIterationInvariantRate);
}

// The GEMM linear() runs: B = w^T, a transposed (column-major) view.
void BM_PlainGemmTransposedB(benchmark::State& state) {
  NoGradGuard no_grad;
  Operands& o = operands();
  for (auto _ : state) benchmark::DoNotOptimize(matmul(o.x, o.w.t()));
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * kN * kN * kN, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_EagerLinearRelu(benchmark::State& state) {
  NoGradGuard no_grad;
  Operands& o = operands();
  for (auto _ : state) benchmark::DoNotOptimize(relu(linear(o.x, o.w, o.b)));
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * kN * kN * kN, benchmark::Counter::kIsIterationInvariantRate);
}

// `linear`: relu(linear(x, w, b)) as the bench suite writes it (the permute of the captured
// weight is computed once when the plan is built: "nodes computed once at build 1"); else
// relu(matmul(x, w^T) + b) with w^T captured contiguous: the contraction group alone, comparable
// with BM_PlainGemm.
void BM_Compiled(benchmark::State& state, bool linear_form, bool tiled) {
  Operands& o = operands();
  if (tiled) {
    ::unsetenv("SMELT_NO_EPILOGUE_IN_TILE");
  } else {
    ::setenv("SMELT_NO_EPILOGUE_IN_TILE", "1", 1);
  }
  CompileOptions options;
  options.backend = "cpp";
  options.freeze = true;  // the captured weight is a constant (its transpose computed at build)
  Tensor w = o.w, wt = o.w.t().contiguous(), b = o.b;
  CompiledFunction f = compile(
      [=](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{linear_form ? relu(linear(in[0], w, b)) : relu(matmul(in[0], wt) + b)};
      },
      options);
  f({o.x});  // compiles
  ::unsetenv("SMELT_NO_EPILOGUE_IN_TILE");
  if (std::getenv("EPILOGUE_BENCH_PLAN")) std::fprintf(stderr, "%s\n", f.report().plan.c_str());
  for (auto _ : state) benchmark::DoNotOptimize(f({o.x}));
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * kN * kN * kN, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(f.report().plan.find("GEMM's tiles") != std::string::npos ? "one step" : "two steps");
}

double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

#define EPILOGUE_BENCH(b) b->Unit(benchmark::kMillisecond)->UseRealTime()->ComputeStatistics("min", min_of)

EPILOGUE_BENCH(BENCHMARK(BM_PlainGemm));
EPILOGUE_BENCH(BENCHMARK(BM_PlainGemmTransposedB));
EPILOGUE_BENCH(BENCHMARK(BM_EagerLinearRelu));
EPILOGUE_BENCH(BENCHMARK_CAPTURE(BM_Compiled, matmul_bias_relu_tiled, false, true));
EPILOGUE_BENCH(BENCHMARK_CAPTURE(BM_Compiled, matmul_bias_relu_twostep, false, false));
EPILOGUE_BENCH(BENCHMARK_CAPTURE(BM_Compiled, linear_relu_tiled, true, true));
EPILOGUE_BENCH(BENCHMARK_CAPTURE(BM_Compiled, linear_relu_twostep, true, false));

}  // namespace

BENCHMARK_MAIN();
