// The compile fuzzer in CI: random graphs through the whole compile pipeline, their plans run on
// the kernel interpreter (a few thousand cases) and as generated C++ (several hundred, their
// kernels compiled together in a few compiler runs), compared with the unoptimized graph; and checks
// that the fuzzer catches what it is for: a wrong rewrite, a memory planner whose lifetimes are
// too short, and that a failure minimizes into a regression file that still fails.
#include <cstdio>
#include <map>

#include "codegen/kernel_cache.h"
#include "fuzz/compile_fuzzer.h"
#include "fuzz/fuzzer.h"
#include "ir/printer.h"
#include "passes/pass_manager.h"
#include "support/check.h"

namespace smelt {
namespace {

constexpr int kInterpreterCases = 3000;
constexpr int kCppCases = 1000;  // kernels batched into a few compiler runs: ~15 s on 2 cores

struct Counts {
  int failed = 0, exact = 0, tolerant = 0, kernels = 0, op_steps = 0, interpreted = 0;
};

void check_seeds(uint64_t first, int cases, fuzz::CompileBackend backend, Counts& c) {
  fuzz::CompileCheckOptions options;
  options.backend = backend;
  // All cases prepared first: with generated C++ their kernels compile together on the pool.
  std::vector<std::unique_ptr<ir::Graph>> graphs;
  std::vector<std::unique_ptr<fuzz::PreparedCase>> prepared;
  codegen::KernelCache& cache = codegen::KernelCache::global();
  cache.hold_compiles();  // queued until all are prepared, then compiled in a few large runs
  for (uint64_t seed = first; seed < first + uint64_t(cases); ++seed) {
    graphs.push_back(fuzz::random_graph(seed));
    prepared.push_back(fuzz::prepare_compiled(*graphs.back(), options));
  }
  cache.release_compiles();
  for (size_t i = 0; i < prepared.size(); ++i) {
    const uint64_t seed = first + i;
    fuzz::CompileCaseResult r = fuzz::check_prepared(*prepared[i], seed);
    prepared[i].reset();
    c.exact += r.exact_outputs;
    c.tolerant += r.tolerant_outputs;
    c.kernels += r.kernels;
    c.op_steps += r.op_steps;
    c.interpreted += r.interpreted_groups;
    if (!r.passed && ++c.failed <= 5) {
      auto small = fuzz::minimize(*graphs[i], [&](const ir::Graph& g) {
        return !fuzz::check_compiled(g, options, seed).passed;
      });
      ADD_FAILURE() << "seed " << seed << ": " << r.message << "\n"
                    << fuzz::compiled_regression_text(*small, options, seed, r.message);
    }
  }
}

TEST(CompileFuzz, InterpreterBackendMatchesInterpreter) {
  Counts c;
  check_seeds(1, kInterpreterCases, fuzz::CompileBackend::Interpreter, c);
  EXPECT_EQ(c.failed, 0);
  std::printf("%d cases: %d outputs bit for bit, %d within the tolerance; %d kernels, %d op steps, %d "
              "interpreted groups\n",
              kInterpreterCases, c.exact, c.tolerant, c.kernels, c.op_steps, c.interpreted);
  // The cases do exercise the compiler: most graphs lower to kernels, most outputs are compared
  // bit for bit, and reductions inside kernels give tolerant outputs.
  EXPECT_GT(c.kernels, kInterpreterCases);
  EXPECT_GT(c.exact, kInterpreterCases);
  EXPECT_GT(c.tolerant, kInterpreterCases / 20);
  EXPECT_LT(c.interpreted, kInterpreterCases / 20);
}

TEST(CompileFuzz, GeneratedKernelsMatchInterpreter) {
  if (!codegen::KernelCache::global().compiler().available()) GTEST_SKIP() << "no C++ compiler";
  Counts c;
  check_seeds(1, kCppCases, fuzz::CompileBackend::Cpp, c);
  EXPECT_EQ(c.failed, 0);
  EXPECT_GT(c.kernels, kCppCases / 2);
  const codegen::KernelCacheStats s = codegen::KernelCache::global().stats();
  std::printf("%d cpp cases: %lld kernels compiled (%.1f s in the compiler), %lld disk hits, %lld memory hits\n",
              kCppCases, static_cast<long long>(s.misses), s.compile_seconds, static_cast<long long>(s.disk_hits),
              static_cast<long long>(s.memory_hits));
}

// A planner bug the plan's own check_plan cannot see: lifetimes cut to the step that writes each
// buffer (as a Plan that forgot to record a read would make them). The requests stay
// consistent, so the placement is valid for them, but a later reader finds its buffer
// overwritten: the run with the memory plan on differs from the run with it off, or from the
// interpreter.
TEST(CompileFuzz, CatchesLifetimesTooShort) {
  fuzz::CompileCheckOptions broken;
  broken.edit_requests = [](std::vector<runtime::BufferRequest>& requests) {
    for (runtime::BufferRequest& r : requests) {
      r.last_step = r.first_step;
      r.inplace_of = -1;
    }
  };
  int caught = 0;
  std::map<std::string, int> how;
  for (uint64_t seed = 1; seed <= 500; ++seed) {
    auto g = fuzz::random_graph(seed);
    ASSERT_TRUE(fuzz::check_compiled(*g, {}, seed).passed) << "seed " << seed;  // the fuzzer's own baseline
    fuzz::CompileCaseResult r = fuzz::check_compiled(*g, broken, seed);
    if (r.passed) continue;
    ++caught;
    how[r.message.substr(0, r.message.find(':'))]++;
  }
  for (const auto& [what, n] : how) std::printf("caught %d by \"%s\"\n", n, what.c_str());
  EXPECT_GT(caught, 10);
  EXPECT_TRUE(how.count("memory plan off vs on")) << "the planned-vs-unplanned comparison never fired";
}

// A wrong rewrite in the passes compile_graph runs: mul -> add. Caught, minimized, written as a
// regression file that parses back and still fails.
bool break_muls(ir::Graph& g) {
  bool changed = false;
  for (const auto& n : g.nodes()) {
    if (n->op == ops::OpId::mul) {
      n->op = ops::OpId::add;
      changed = true;
    }
  }
  return changed;
}

TEST(CompileFuzz, CatchesAndMinimizesAWrongRewrite) {
  passes::register_pass({"test-compile-break-muls", "turns mul into add (a wrong pass, for this test)", break_muls});
  fuzz::CompileCheckOptions options;
  options.passes = "test-compile-break-muls";
  int caught = 0;
  for (uint64_t seed = 1; seed <= 300 && caught < 3; ++seed) {
    auto g = fuzz::random_graph(seed);
    fuzz::CompileCaseResult r = fuzz::check_compiled(*g, options, seed);
    if (r.passed) continue;  // no mul, or mul(x, 2) == add(x, 2) at the drawn values
    ++caught;
    auto small = fuzz::minimize(*g, [&](const ir::Graph& h) { return !fuzz::check_compiled(h, options, seed).passed; });
    EXPECT_LE(small->num_nodes(), g->num_nodes());
    const std::string text = fuzz::compiled_regression_text(*small, options, seed, r.message);
    EXPECT_NE(text.find("# COMPILE: interpreter\n"), std::string::npos);
    auto parsed = ir::parse(text);
    EXPECT_FALSE(fuzz::check_compiled(*parsed, options, seed).passed) << text;
  }
  EXPECT_EQ(caught, 3);
}

}  // namespace
}  // namespace smelt
