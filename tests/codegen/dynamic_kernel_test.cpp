// Dynamic-shape kernels (codegen/loop_kernel.h SizeTerms): fitted through kernels lowered at a
// grid of sizes (kernel_fit), equal to the kernel lowered at any other size (kernel_at), and one
// InterpretedKernel runs them at every size its arguments carry (the sizes after the buffers).
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "codegen/kernel_interpreter.h"
#include "codegen/lower.h"
#include "ir/printer.h"

namespace smelt::codegen {
namespace {

// exp of a [B, S] input, then its row sums: a reduction kernel whose extents and strides follow B
// and S.
LoopKernel lowered_at(int64_t b, int64_t s) {
  const std::string shape = std::to_string(b) + ", " + std::to_string(s);
  auto g = ir::parse("graph(%0: f32[" + shape + "]) {\n  %1: f32[" + shape + "] = exp(%0)\n  %2: f32[" +
                     std::to_string(b) + "] = sum(%1) {dims=[1]}\n  return %1, %2\n}\n");
  LowerOptions options;
  options.size_generic = true;
  LowerResult r = lower(*g, "exp_sum", options);
  EXPECT_TRUE(r.kernel) << r.reason;
  return *r.kernel;
}

// The kernel fitted through lowerings at a (B, S) grid; nullopt with `why` when the fit fails.
std::optional<LoopKernel> fitted_kernel(std::string* why) {
  SymbolGrid grid;
  grid.axes = {{17, 19, 23}, {30, 32, 36}};
  grid.check = {29, 42};
  std::vector<LoopKernel> kernels;
  for (const SymbolPoint& p : grid.points()) kernels.push_back(lowered_at(p[0], p[1]));
  std::vector<const LoopKernel*> ptrs;
  for (const LoopKernel& k : kernels) ptrs.push_back(&k);
  return kernel_fit(ptrs, grid, why);
}

TEST(DynamicKernel, FitsThroughTheGridAndMatchesTheLoweringElsewhere) {
  std::string why;
  const std::optional<LoopKernel> fitted = fitted_kernel(&why);
  ASSERT_TRUE(fitted) << why;
  for (const SymbolPoint& p : {SymbolPoint{29, 42}, SymbolPoint{3, 100}, SymbolPoint{2, 2}}) {
    LoopKernel at = kernel_at(*fitted, p);
    validate(at);
    at.sizes.reset();
    EXPECT_EQ(print_kernel(at), print_kernel(lowered_at(p[0], p[1]))) << point_str(p);
  }
  // (at size 1 the lowering drops the dim; the fitted kernel keeps an extent of 1, as valid)
  validate(kernel_at(*fitted, {1, 1}));
}

// One interpreter, the kernel made at one size, run at others through the sizes argument.
TEST(DynamicKernel, OneInterpreterRunsEverySize) {
  std::string why;
  const std::optional<LoopKernel> fitted = fitted_kernel(&why);
  ASSERT_TRUE(fitted) << why;
  const InterpretedKernel interpreter(*fitted);  // at the first grid point
  for (int round = 0; round < 2; ++round) {       // the second finds the programs made
    for (const SymbolPoint& p : {SymbolPoint{2, 3}, SymbolPoint{5, 7}, SymbolPoint{17, 30}, SymbolPoint{1, 64}}) {
      const int64_t b = p[0], s = p[1];
      std::vector<float> x(size_t(b * s)), e(size_t(b * s), -1), sums(size_t(b), -1);
      for (size_t i = 0; i < x.size(); ++i) x[i] = float(std::sin(double(i))) * 2;
      int64_t sizes[2] = {b, s};
      void* args[] = {x.data(), e.data(), sums.data(), sizes};
      interpreter.run(args);
      // the same bits as the kernel made at these sizes, and the values exp and its row sums
      std::vector<float> e_at(e.size(), -2), sums_at(sums.size(), -2);
      void* args_at[] = {x.data(), e_at.data(), sums_at.data(), sizes};
      run_interpreted(kernel_at(*fitted, p), args_at);
      EXPECT_EQ(e, e_at) << point_str(p);
      EXPECT_EQ(sums, sums_at) << point_str(p);
      for (int64_t r = 0; r < b; ++r) {
        double want = 0;
        for (int64_t c = 0; c < s; ++c) {
          const double v = std::exp(double(x[size_t(r * s + c)]));
          EXPECT_NEAR(e[size_t(r * s + c)], v, 1e-6 * v) << point_str(p);
          want += double(e[size_t(r * s + c)]);
        }
        EXPECT_NEAR(sums[size_t(r)], want, 1e-5 * std::abs(want)) << point_str(p) << " row " << r;
      }
    }
  }
}

}  // namespace
}  // namespace smelt::codegen
