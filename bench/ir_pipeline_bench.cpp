// The default pass pipeline on large graphs: 10k and 100k nodes, a chain and a wide DAG with
// duplicates, foldable constants and dead code (tests/passes/big_graphs.h describes them). The
// passes and the verifier after each pass must stay linear-ish: a 100k-node graph in seconds.
//   build/bench/ir_pipeline_bench [--benchmark_filter=Wide]
#include <benchmark/benchmark.h>

#include "../tests/passes/big_graphs.h"
#include "ir/printer.h"
#include "passes/dce.h"
#include "passes/pass_manager.h"

namespace smelt {
namespace {

using Builder = std::unique_ptr<ir::Graph> (*)(int64_t nodes);

std::unique_ptr<ir::Graph> chain_of(int64_t nodes) { return big_graphs::chain(nodes / 5); }
std::unique_ptr<ir::Graph> wide_of(int64_t nodes) { return big_graphs::wide(nodes); }

// Default pipeline to a fixed point, verifier after every pass that changed the graph.
void pipeline(benchmark::State& state, Builder build, bool verify) {
  passes::PassOptions options;
  options.verify = verify;
  size_t after = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto g = build(state.range(0));
    state.ResumeTiming();
    passes::run_pipeline(*g, passes::kDefaultPipeline, options);
    after = g->num_nodes();
  }
  state.counters["nodes_after"] = double(after);
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_PipelineChain(benchmark::State& s) { pipeline(s, chain_of, true); }
void BM_PipelineWide(benchmark::State& s) { pipeline(s, wide_of, true); }
void BM_PipelineWideNoVerify(benchmark::State& s) { pipeline(s, wide_of, false); }

// dce alone on a graph that is mostly dead (the case that was quadratic).
void BM_DceWide(benchmark::State& state) {
  for (auto _ : state) {
    state.PauseTiming();
    auto g = wide_of(state.range(0));
    state.ResumeTiming();
    passes::dce(*g);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

// Text round trip of the optimized-size graph: print and parse.
void BM_PrintParseWide(benchmark::State& state) {
  auto g = wide_of(state.range(0));
  for (auto _ : state) {
    auto back = ir::parse(ir::print(*g));
    benchmark::DoNotOptimize(back);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

BENCHMARK(BM_PipelineChain)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PipelineWide)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PipelineWideNoVerify)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DceWide)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PrintParseWide)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace smelt

BENCHMARK_MAIN();
