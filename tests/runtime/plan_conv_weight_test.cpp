// A conv whose weight a compiled plan computes into its arena: the generated kernel writes the
// arena through raw pointers (no storage version bump), so the conv must not reuse a conversion
// of that memory from an earlier run (kernels/conv.h UnversionedWritesScope): each run's result
// is that of eager execution on its own inputs.
#include "smelt/compile.h"

#include "support/check.h"

namespace smelt {
namespace {

TEST(PlanConvWeight, AWeightComputedInTheArenaIsReadAfreshEachRun) {
  // Large enough (1.5e7 flops, 3x3) that the heuristic picks oneDNN where smelt has it.
  const CompiledFunction::Fn fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{conv2d(in[0], tanh(in[1]) * 2.0, Tensor(), 1, 1)};
  };
  CompileOptions options;
  options.backend = "cpp";  // generated kernels from the first run: raw writes into the arena
  CompiledFunction f = compile(fn, options);
  const Tensor x = randn({1, 16, 40, 40});
  for (int run = 0; run < 3; ++run) {
    const std::vector<Tensor> in{x, randn({32, 16, 3, 3})};
    EXPECT_TRUE(testing::all_close(f(in)[0], fn(in)[0], 1e-4, 1e-5)) << "run " << run;
  }
}

}  // namespace
}  // namespace smelt
