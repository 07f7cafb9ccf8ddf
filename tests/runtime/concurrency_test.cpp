// Compiled functions called from several threads at once: plans serialize their runs (one arena),
// readers (describe, report) run beside them while kernels switch to compiled code, and random
// functions reserve their generator blocks, so that concurrent calls draw disjoint masks exactly
// as concurrent eager calls do.
#include <atomic>
#include <set>
#include <thread>

#include "smelt/compile.h"
#include "runtime/pipeline.h"
#include "smelt/creation.h"
#include "support/check.h"
#include "trace/random_draws.h"
#include "trace/trace.h"

namespace smelt {
namespace {

using testing::same_bits;
using Fn = CompiledFunction::Fn;

Tensor input(const Shape& shape, uint64_t seed) {
  return testing::random_tensor(shape, -2, 2, seed).to(DType::Float32);
}

TEST(CompileThreads, TwoThreadsRunOnePlanAndGetTheirOwnResults) {
  Fn fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{sum(tanh(in[0] * 3.0) + in[1], {1}, false), relu(in[0]) * in[1]};
  };
  CompileOptions options;
  options.backend = "interpreter";
  CompiledFunction f = compile(fn, options);
  std::vector<std::vector<Tensor>> inputs;
  for (uint64_t k = 0; k < 8; ++k) inputs.push_back({input({16, 40}, 2 * k), input({16, 40}, 2 * k + 1)});
  std::vector<std::vector<Tensor>> want;
  for (const auto& in : inputs) want.push_back(fn(in));
  f(inputs[0]);  // compiled once, before the threads
  std::atomic<int> wrong{0};
  auto worker = [&](size_t first) {
    for (int round = 0; round < 25; ++round) {
      const size_t k = (first + size_t(round)) % inputs.size();
      std::vector<Tensor> got = f(inputs[k]);
      for (size_t o = 0; o < got.size(); ++o) wrong += same_bits(got[o], want[k][o]) ? 0 : 1;
    }
  };
  std::thread a(worker, 0), b(worker, 3);
  a.join();
  b.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(f.num_compiles(), 1);
}

TEST(CompileThreads, ReadersBesideRunsWhileKernelsSwitchToCompiledCode) {
  // Tiered: the third run starts the background compiles (compile_after_runs 2), switching each
  // kernel step to the kernel cache while another thread reads the plan (describe, kernels).
  Fn fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{exp(in[0] * 0.5) - in[0]}; };
  const Tensor x = input({64, 64}, 40);
  const Tensor want = fn({x})[0];
  runtime::PipelineOptions options;
  options.compile_after_runs = 2;
  runtime::CompiledGraph compiled = runtime::compile_graph(
      trace::trace([&](const std::vector<Tensor>& in, const std::vector<Tensor>&) { return fn(in); }, {x}),
      options);
  runtime::Plan& plan = *compiled.plan;
  std::atomic<bool> done{false};
  std::atomic<int> wrong{0};
  std::thread runner([&] {
    for (int i = 0; i < 40; ++i) wrong += same_bits(plan.run({x})[0], want) ? 0 : 1;
    done = true;
  });
  size_t reads = 0;
  do {  // at least once: on a loaded machine the runner may finish before this thread is scheduled
    reads += plan.describe().find("exp") != std::string::npos ? 1 : 0;
    reads += plan.kernels().empty() ? 0 : 1;
  } while (!done);
  runner.join();
  plan.wait_for_kernels();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(reads, 0u);
  EXPECT_TRUE(same_bits(plan.run({x})[0], want));
}

TEST(RandomDraws, LearnsTheBlockCountAndThenReservesFirst) {
  manual_seed(11);
  trace::RandomDraws draws;
  EXPECT_EQ(draws.blocks(), -1);
  auto run = [](const Tensor& state) {
    GeneratorState s = generator_state_from_tensor(state);
    s.counter += 6;  // a graph drawing 6 blocks
    return std::vector<Tensor>{state.clone(), generator_state_tensor(s)};
  };
  std::vector<Tensor> first = draws.run(run);
  EXPECT_EQ(draws.blocks(), 6);
  EXPECT_TRUE(generator_state_from_tensor(first[0]) == (GeneratorState{11, 0}));
  EXPECT_TRUE(default_generator().state() == (GeneratorState{11, 6}));
  std::vector<Tensor> second = draws.run(run);
  EXPECT_TRUE(generator_state_from_tensor(second[0]) == (GeneratorState{11, 6}));
  EXPECT_TRUE(default_generator().state() == (GeneratorState{11, 12}));
}

TEST(RandomDraws, AFirstCallOvertakenByAnotherDrawRunsAgainOnItsOwnBlocks) {
  manual_seed(12);
  trace::RandomDraws draws;
  int calls = 0;
  auto run = [&](const Tensor& state) {
    if (calls++ == 0) default_generator().reserve(4);  // another thread draws meanwhile
    GeneratorState s = generator_state_from_tensor(state);
    s.counter += 3;
    return std::vector<Tensor>{state.clone(), generator_state_tensor(s)};
  };
  std::vector<Tensor> outs = draws.run(run);
  EXPECT_EQ(calls, 2);
  // The other draw took blocks 0..3, this one 4..6: its result is from block 4.
  EXPECT_TRUE(generator_state_from_tensor(outs[0]) == (GeneratorState{12, 4}));
  EXPECT_TRUE(default_generator().state() == (GeneratorState{12, 7}));
}

TEST(CompileThreads, DropoutFromTwoThreadsDrawsDisjointMasksLikeEagerCalls) {
  Fn fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{dropout(in[0], 0.5, true)}; };
  const Tensor x = ones({8, 32}, DType::Float32);
  CompileOptions options;
  options.backend = "interpreter";
  CompiledFunction f = compile(fn, options);
  manual_seed(21);
  f({x});  // learns how many blocks a call draws
  const GeneratorState start = default_generator().state();
  const uint64_t blocks = start.counter;  // the first call drew from counter 0
  ASSERT_GT(blocks, 0u);
  constexpr int kCalls = 20;
  std::vector<Tensor> got[2];
  auto worker = [&](int t) {
    for (int i = 0; i < kCalls; ++i) got[t].push_back(f({x})[0]);
  };
  std::thread a(worker, 0), b(worker, 1);
  a.join();
  b.join();
  EXPECT_TRUE(default_generator().state() == (GeneratorState{21, blocks * (2 * kCalls + 1)}));
  // Each call's mask is the eager mask of one distinct position of the stream.
  std::vector<Tensor> eager;
  for (int k = 0; k < 2 * kCalls; ++k) {
    default_generator().set_state({21, start.counter + uint64_t(k) * blocks});
    eager.push_back(fn({x})[0]);
  }
  std::set<int> used;
  for (const auto& list : got) {
    for (const Tensor& mask : list) {
      int match = -1;
      for (int k = 0; k < 2 * kCalls && match < 0; ++k) {
        if (same_bits(mask, eager[size_t(k)])) match = k;
      }
      EXPECT_GE(match, 0) << "a compiled call's mask is no eager draw of the stream";
      used.insert(match);
    }
  }
  EXPECT_EQ(used.size(), size_t(2 * kCalls)) << "two calls drew the same blocks";
}

}  // namespace
}  // namespace smelt
