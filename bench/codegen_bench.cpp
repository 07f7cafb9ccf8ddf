// Fused-kernel backends: gelu(x * a + b) over 16M floats and a three-stage softmax over 2048x1024,
// eager smelt vs the tile interpreter vs the generated C++; and the compile time of a kernel,
// cold (the compiler runs) and warm (a disk-cache hit in a fresh cache).
//
//   build/bench/codegen_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <filesystem>

#include "codegen/kernel_cache.h"
#include "codegen/kernel_interpreter.h"
#include "smelt/smelt.h"

namespace {

using namespace smelt;
using namespace smelt::codegen;
using kernels::ScalarFn;

constexpr int64_t kChain = int64_t(1) << 24;
constexpr int64_t kRows = 2048, kCols = 1024;

Expr call(ScalarFn fn, std::vector<int> ops, DType dtype = DType::Float32, int stage = 0) {
  Expr e;
  e.kind = ExprKind::Call;
  e.call.fn = fn;
  e.operands = std::move(ops);
  e.dtype = dtype;
  e.stage = stage;
  return e;
}
Expr constant(double v) {
  Expr e;
  e.fvalue = v;
  return e;
}
Expr load(int access, int stage = 0) {
  Expr e;
  e.kind = ExprKind::Load;
  e.access = access;
  e.stage = stage;
  return e;
}

LoopKernel gelu_chain(double scale) {
  LoopKernel k;
  k.name = "mul_add_gelu";
  k.args = {{DType::Float32, kChain, false}, {DType::Float32, kChain, true}};
  k.inner = {kChain};
  k.accesses = {{0, 0, {}, {1}}, {1, 0, {}, {1}}};
  k.exprs = {load(0), constant(scale), call(ScalarFn::mul, {0, 1}), constant(0.25), call(ScalarFn::add, {2, 3}),
             call(ScalarFn::gelu_erf, {4})};
  k.stores = {{5, 1, 0}};
  return k;
}

LoopKernel softmax_kernel() {
  LoopKernel k;
  k.name = "softmax";
  k.args = {{DType::Float32, kRows * kCols, false}, {DType::Float32, kRows * kCols, true}};
  k.outer = {kRows};
  k.inner = {kCols};
  k.stages = 3;
  k.accesses = {{0, 0, {kCols}, {1}}, {1, 0, {kCols}, {1}}};
  Expr max_result;
  max_result.kind = ExprKind::ReductionResult;
  max_result.reduction = 0;
  Expr sum_result = max_result;
  sum_result.reduction = 1;
  k.exprs.push_back(load(0, 0));                                   // 0
  k.exprs.push_back(load(0, 1));                                   // 1
  max_result.stage = 1;
  k.exprs.push_back(max_result);                                   // 2
  k.exprs.push_back(call(ScalarFn::sub, {1, 2}, DType::Float32, 1));  // 3
  k.exprs.push_back(call(ScalarFn::exp, {3}, DType::Float32, 1));     // 4
  k.exprs.push_back(load(0, 2));                                   // 5
  max_result.stage = 2;
  k.exprs.push_back(max_result);                                   // 6
  k.exprs.push_back(call(ScalarFn::sub, {5, 6}, DType::Float32, 2));  // 7
  k.exprs.push_back(call(ScalarFn::exp, {7}, DType::Float32, 2));     // 8
  sum_result.stage = 2;
  k.exprs.push_back(sum_result);                                   // 9
  k.exprs.push_back(call(ScalarFn::div, {8, 9}, DType::Float32, 2));  // 10
  k.reductions = {{ReduceOp::Max, 0, 0, DType::Float32}, {ReduceOp::Sum, 4, 1, DType::Float32}};
  k.stores = {{10, 1, 2}};
  return k;
}

KernelCache& cache() {
  static KernelCache* c = [] {
    KernelCacheOptions o = KernelCacheOptions::from_env();
    o.sync_compile = true;
    return new KernelCache(o);
  }();
  return *c;
}

void bytes(benchmark::State& state, int64_t n) {
  state.SetBytesProcessed(int64_t(state.iterations()) * n * 2 * int64_t(sizeof(float)));
}

void BM_GeluChainEager(benchmark::State& state) {
  Tensor x = randn({kChain});
  for (auto _ : state) benchmark::DoNotOptimize(gelu(x * 1.5 + 0.25));
  bytes(state, kChain);
}
void BM_GeluChainInterpreted(benchmark::State& state) {
  Tensor x = randn({kChain}), y = zeros({kChain});
  LoopKernel kernel = gelu_chain(1.5);
  validate(kernel);
  InterpretedKernel k(kernel);
  void* args[] = {x.raw_data(), y.raw_data()};
  for (auto _ : state) k.run(args);
  bytes(state, kChain);
}
void BM_GeluChainCompiled(benchmark::State& state) {
  Tensor x = randn({kChain}), y = zeros({kChain});
  auto compiled = cache().compile(gelu_chain(1.5));
  if (!compiled) return state.SkipWithError("no compiler");
  void* args[] = {x.raw_data(), y.raw_data()};
  for (auto _ : state) compiled->entry(args);
  bytes(state, kChain);
}
void BM_SoftmaxEager(benchmark::State& state) {
  Tensor x = randn({kRows, kCols});
  for (auto _ : state) benchmark::DoNotOptimize(softmax(x, 1));
  bytes(state, kRows * kCols);
}
void BM_SoftmaxInterpreted(benchmark::State& state) {
  Tensor x = randn({kRows, kCols}), y = zeros({kRows, kCols});
  LoopKernel kernel = softmax_kernel();
  validate(kernel);
  InterpretedKernel k(kernel);
  void* args[] = {x.raw_data(), y.raw_data()};
  for (auto _ : state) k.run(args);
  bytes(state, kRows * kCols);
}
void BM_SoftmaxCompiled(benchmark::State& state) {
  Tensor x = randn({kRows, kCols}), y = zeros({kRows, kCols});
  auto compiled = cache().compile(softmax_kernel());
  if (!compiled) return state.SkipWithError("no compiler");
  void* args[] = {x.raw_data(), y.raw_data()};
  for (auto _ : state) compiled->entry(args);
  bytes(state, kRows * kCols);
}

// Per-call cost of a tiny kernel (16 floats): what a replayed plan of small ops pays per kernel.
LoopKernel tiny() {
  LoopKernel k;
  k.name = "tiny_add";
  k.args = {{DType::Float32, 16, false}, {DType::Float32, 16, true}};
  k.inner = {16};
  k.accesses = {{0, 0, {}, {1}}, {1, 0, {}, {1}}};
  k.exprs = {load(0), constant(1.0), call(ScalarFn::add, {0, 1})};
  k.stores = {{2, 1, 0}};
  return k;
}
void BM_TinyInterpreted(benchmark::State& state) {
  Tensor x = randn({16}), y = zeros({16});
  InterpretedKernel k(tiny());
  void* args[] = {x.raw_data(), y.raw_data()};
  for (auto _ : state) k.run(args);
}
void BM_TinyCompiled(benchmark::State& state) {
  Tensor x = randn({16}), y = zeros({16});
  auto compiled = cache().compile(tiny());
  if (!compiled) return state.SkipWithError("no compiler");
  void* args[] = {x.raw_data(), y.raw_data()};
  for (auto _ : state) compiled->entry(args);
}

// A kernel no cache holds yet (a new constant each time), compiled into a scratch directory.
void BM_CompileCold(benchmark::State& state) {
  std::string dir = std::filesystem::temp_directory_path() / "smelt-codegen-bench-cold";
  std::filesystem::remove_all(dir);
  KernelCacheOptions o = KernelCacheOptions::from_env();
  o.dir = dir;
  KernelCache c(o);
  double scale = 1.0;
  for (auto _ : state) benchmark::DoNotOptimize(c.compile(gelu_chain(scale += 1.0)));
  std::filesystem::remove_all(dir);
}
// The same kernel from the disk cache, in a fresh in-memory cache each time.
void BM_CompileWarm(benchmark::State& state) {
  std::string dir = std::filesystem::temp_directory_path() / "smelt-codegen-bench-warm";
  KernelCacheOptions o = KernelCacheOptions::from_env();
  o.dir = dir;
  { KernelCache(o).compile(gelu_chain(1.5)); }
  for (auto _ : state) {
    KernelCache c(o);
    benchmark::DoNotOptimize(c.compile(gelu_chain(1.5)));
  }
  std::filesystem::remove_all(dir);
}

BENCHMARK(BM_GeluChainEager)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GeluChainInterpreted)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GeluChainCompiled)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SoftmaxEager)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SoftmaxInterpreted)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SoftmaxCompiled)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_TinyInterpreted);
BENCHMARK(BM_TinyCompiled);
BENCHMARK(BM_CompileCold)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK(BM_CompileWarm)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(20);

}  // namespace

BENCHMARK_MAIN();
