// A conv whose weight a compiled plan computes into its arena: the generated kernel writes the
// arena through raw pointers (no storage version bump), so the conv may reuse a conversion of that
// memory from an earlier run only while its bytes are unchanged (kernels/conv_onednn.h): each
// run's result is that of eager execution on its own inputs.
#include "smelt/compile.h"

#include "kernels/conv_onednn.h"
#include "kernels/conv_select.h"
#include "ops/conv_geometry.h"

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

// A weight that is a plan input (a training step's parameter, a conv called with its weight):
// oneDNN keeps its conversion across runs, as eager calls do, and converts again only when the
// weight's bytes changed, also through a raw write that bumps no version. (Every run converted
// before: a Winograd weight transform per call made the compiled 3x3 conv slower than eager.)
TEST(PlanConvWeight, AnInputWeightIsConvertedOnceAndAgainAfterARawWrite) {
  const std::vector<int64_t> one{1, 1};
  const kernels::Conv2dGeometry g = ops::conv2d_geometry(
      {1, 16, 40, 40}, {32, 16, 3, 3}, {{"stride", one}, {"padding", one}, {"dilation", one}, {"groups", int64_t(1)}});
  const kernels::ConvImpl impl = kernels::conv_choice(g, DType::Float32);
  if (impl != kernels::ConvImpl::OneDnn && impl != kernels::ConvImpl::OneDnnWinograd) {
    GTEST_SKIP() << "the heuristic picks " << kernels::conv_impl_name(impl) << " here (no oneDNN)";
  }
  const CompiledFunction::Fn fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{relu(conv2d(in[0], in[1], Tensor(), 1, 1))};
  };
  CompileOptions options;
  options.backend = "cpp";
  CompiledFunction f = compile(fn, options);
  const Tensor x = randn({1, 16, 40, 40});
  Tensor w = randn({32, 16, 3, 3});
  const std::vector<Tensor> in{x, w};
  f(in);   // compiles, converts
  fn(in);  // eager converts for its own primitive (the plan's conv may run on the blocked layout)
  const uint64_t before = kernels::onednn_weight_conversions();
  for (int run = 0; run < 3; ++run) EXPECT_TRUE(testing::same_bits(f(in)[0], fn(in)[0])) << "run " << run;
  EXPECT_EQ(kernels::onednn_weight_conversions(), before) << "each run converted the weight again";
  w.data<float>()[17] = -4.0f * w.data<float>()[17] - 1.0f;  // raw: no version bump
  const Tensor got = f(in)[0];
  kernels::UnversionedWritesScope fresh;  // eager, converting the current bytes afresh
  EXPECT_TRUE(testing::same_bits(got, fn(in)[0]));
}

}  // namespace
}  // namespace smelt
