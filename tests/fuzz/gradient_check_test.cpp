// The compile fuzzer's gradient mode (fuzz/gradient_check.h): random graphs' joint forward+backward
// graphs split at random memory budgets run as the joint graph does, bit for bit, and both halves
// compile; and the cases it found, as regressions.
#include "fuzz/gradient_check.h"

#include <gtest/gtest.h>

#include "fuzz/fuzzer.h"
#include "ir/printer.h"

namespace smelt {
namespace {

TEST(GradientCheck, RandomGraphsSplitIntoHalvesThatMatchTheJointGraph) {
  int applicable = 0, saved = 0, recomputed = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    auto g = fuzz::random_graph(seed, fuzz::RandomGraphOptions{});
    fuzz::CompileCheckOptions options;
    const fuzz::GradientResult r = fuzz::check_gradients(*g, options, seed);
    EXPECT_TRUE(r.passed) << "seed " << seed << ": " << r.message;
    applicable += r.applicable;
    saved += r.saved;
    recomputed += r.recomputed;
  }
  // Most graphs have a floating output that depends on a floating input, and the cut both keeps
  // and recomputes values across them.
  EXPECT_GT(applicable, 200);
  EXPECT_GT(saved, 100);
  EXPECT_GT(recomputed, 100);
}

TEST(GradientCheck, ADeadIntegerDivisionByZeroRaisesInTheForwardHalf) {
  // Found by smelt fuzz --compile --gradients (seeds 428, 816): a division that refuses its
  // divisor runs even unread (ir::Node::must_run), so the joint graph raised; the forward half
  // kept only what its outputs and the saved values need, dropped it, and ran.
  auto g = ir::parse(R"(graph(%0: f32[3], %1: i64[3]) {
  %2: i64[1] = constant [0]
  %3: i64[3] = div(%1, %2)
  %4: f32[3] = exp(%0)
  return %4
})");
  fuzz::CompileCheckOptions options;
  for (uint64_t seed = 0; seed < 7; ++seed) {  // every budget
    const fuzz::GradientResult r = fuzz::check_gradients(*g, options, seed);
    EXPECT_TRUE(r.applicable);
    EXPECT_TRUE(r.passed) << r.message;
  }
}

}  // namespace
}  // namespace smelt
