// Contraction groups whose epilogue runs inside the GEMM's output tiles (runtime/plan.cpp,
// ops/contraction_tiles.h) against the two-step path (SMELT_NO_EPILOGUE_IN_TILE=1: the product
// into a temporary, then the epilogue kernel) and against eager execution: the same bits, special
// values included, on both backends (tile interpreter, generated C++). Shapes are chosen to cut
// C into many partial tiles (M, N not multiples of the micro-tile) and, for the larger ones, to
// run the GEMM on several threads. Each test runs in its own process (gtest_discover_tests), so
// the cache directory set here is the one KernelCache::global() reads.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "smelt/compile.h"
#include "support/check.h"
#include "support/temp_dir.h"
#include "support/helpers.h"

namespace smelt {
namespace {

using testing::ScopedEnv;

using testing::same_bits;
using testing::special_values;

using Fn = CompiledFunction::Fn;

constexpr const char* kTiled = "(epilogue in the GEMM's tiles)";

class TiledContraction : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    setenv("SMELT_CACHE_DIR", dir_.c_str(), 1);
    // Convolutions on NCHW, as eager runs them: the blocked layout's (passes/blocked_layout.h) run
    // through oneDNN and differ from eager in rounding; blocked_layout_test.cpp compares them.
    setenv("SMELT_BLOCKED_LAYOUT", "0", 1);
  }

  // `tiled`: whether the plan must run the contraction group in one step (else the lowering must
  // have refused the tile form and the two-step path runs).
  void expect_same_as_two_step(const Fn& fn, const std::vector<Tensor>& inputs, bool tiled = true) {
    const std::vector<Tensor> eager = fn(inputs);
    std::vector<Tensor> two_step;
    {
      ScopedEnv off("SMELT_NO_EPILOGUE_IN_TILE", "1");
      CompileOptions o;
      o.backend = "interpreter";
      CompiledFunction f = compile(fn, o);
      two_step = f(inputs);
      EXPECT_EQ(f.report().plan.find(kTiled), std::string::npos) << f.report().plan;
    }
    ASSERT_EQ(two_step.size(), eager.size());
    for (size_t i = 0; i < eager.size(); ++i) EXPECT_TRUE(same_bits(two_step[i], eager[i])) << "two-step output " << i;
    for (const char* backend : {"interpreter", "cpp"}) {
      CompileOptions o;
      o.backend = backend;
      CompiledFunction f = compile(fn, o);
      for (int call = 0; call < 2; ++call) {  // the second call replays the plan
        std::vector<Tensor> got = f(inputs);
        ASSERT_EQ(got.size(), eager.size());
        for (size_t i = 0; i < got.size(); ++i) {
          EXPECT_TRUE(same_bits(got[i], two_step[i])) << backend << ", output " << i << ", call " << call << "\n"
                                                      << f.report().plan;
        }
      }
      const std::string plan = f.report().plan;
      EXPECT_EQ(plan.find(kTiled) != std::string::npos, tiled) << backend << "\n" << plan;
      if (std::string(backend) == "cpp") {
        EXPECT_NE(plan.find("[compiled]"), std::string::npos) << plan;
      }
    }
  }
};

TEST_F(TiledContraction, MatmulBiasReluOverManyPartialTiles) {
  // 2 * 300 * 64 * 700 flops: the GEMM runs threaded; 300 and 700 leave partial micro-tiles.
  expect_same_as_two_step(
      [](const std::vector<Tensor>& in) { return std::vector<Tensor>{relu(matmul(in[0], in[1]) + in[2])}; },
      {special_values({300, 64}, 1, 997), special_values({64, 700}, 2, 991), special_values({700}, 3, 7)});
}

TEST_F(TiledContraction, LinearWithCapturedWeightsAsInTheBench) {
  Tensor w = testing::random_tensor({96, 80}, -0.2, 0.2, 4).to(DType::Float32);
  Tensor b = special_values({96}, 5, 11);
  expect_same_as_two_step([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{relu(linear(in[0], w, b))}; },
                          {special_values({130, 80}, 6, 301)});
}

// The weight is an input, so its transpose is computed on every call: the plan hands the GEMM a
// strided view (runtime/plan_build.cpp, strided_operand_only) instead of a copy kernel.
TEST_F(TiledContraction, LinearWithWeightAsInputReadsTheTransposeInPlace) {
  const Fn fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{relu(linear(in[0], in[1], in[2]))}; };
  const std::vector<Tensor> inputs = {special_values({130, 80}, 42, 301), special_values({96, 80}, 43, 17),
                                      special_values({96}, 44, 11)};
  expect_same_as_two_step(fn, inputs);
  CompiledFunction f = compile(fn, {});
  f(inputs);
  EXPECT_EQ(f.report().plan.find("kernel permute"), std::string::npos) << f.report().plan;
  EXPECT_EQ(f.report().plan.find("permute"), std::string::npos) << f.report().plan;
}

// A transpose also read by something other than a matmul stays a copy (kernels read contiguous
// memory); a matmul alone (an op step, no group) reads it in place.
TEST_F(TiledContraction, TransposeReadElsewhereIsCopiedAndLoneMatmulReadsItInPlace) {
  const Fn shared = [](const std::vector<Tensor>& in) {
    Tensor wt = in[1].t();
    return std::vector<Tensor>{relu(matmul(in[0], wt) + in[2]), wt * 2.0};
  };
  const std::vector<Tensor> inputs = {special_values({20, 12}, 45, 31), special_values({9, 12}, 46, 7),
                                      special_values({9}, 47, 5)};
  expect_same_as_two_step(shared, inputs);
  const Fn lone = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{matmul(in[0], in[1].t()), matmul(in[1], in[0].t())};
  };
  const std::vector<Tensor> eager = lone(inputs);
  for (const char* backend : {"interpreter", "cpp"}) {
    CompileOptions o;
    o.backend = backend;
    CompiledFunction f = compile(lone, o);
    for (int call = 0; call < 2; ++call) {
      std::vector<Tensor> got = f(inputs);
      ASSERT_EQ(got.size(), 2u);
      for (size_t i = 0; i < 2; ++i) EXPECT_TRUE(same_bits(got[i], eager[i])) << backend << " output " << i;
    }
    EXPECT_EQ(f.report().plan.find("permute"), std::string::npos) << f.report().plan;
  }
}

// The transpose of a value the plan computes (an arena slot a kernel writes), read as the operand
// of two matmuls, one of them in place of the other's epilogue input: the strided view must keep
// its base alive (lifetimes follow the root slot) and both products must match eager.
TEST_F(TiledContraction, TransposeOfAComputedValueUsedTwice) {
  expect_same_as_two_step(
      [](const std::vector<Tensor>& in) {
        Tensor wt = tanh(in[1] * 0.5).t();  // computed, then viewed transposed
        Tensor y = relu(matmul(in[0], wt) + in[2]);
        return std::vector<Tensor>{y, matmul(y, wt.t())};
      },
      {special_values({19, 12}, 48, 31), special_values({9, 12}, 49, 7), special_values({9}, 50, 5)});
}

TEST_F(TiledContraction, BatchedMatmulWithResidualAndPerBatchScale) {
  // The per-batch scale (3, 1, 1) keeps the row dims (3, 40) apart: tiles' rows unflatten.
  expect_same_as_two_step(
      [](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{tanh((matmul(in[0], in[1]) + in[2]) * in[3])};
      },
      {special_values({3, 40, 24}, 7, 97), special_values({24, 56}, 8, 89), special_values({3, 40, 56}, 9, 13), special_values({3, 1, 1}, 10, 2)});
}

TEST_F(TiledContraction, BroadcastBatchOfTheRightOperand) {
  expect_same_as_two_step(
      [](const std::vector<Tensor>& in) { return std::vector<Tensor>{sigmoid(matmul(in[0], in[1]) - in[2])}; },
      {special_values({5, 17}, 11, 31), special_values({2, 17, 9}, 12, 29), special_values({9}, 13, 3)});
}

TEST_F(TiledContraction, ProductAlsoReturnedAndSeveralOutputs) {
  expect_same_as_two_step(
      [](const std::vector<Tensor>& in) {
        Tensor y = matmul(in[0], in[1]);
        return std::vector<Tensor>{y, relu(y + in[2]), y * 2.0};
      },
      {special_values({45, 33}, 14, 37), special_values({33, 70}, 15, 41), special_values({70}, 16, 5)});
}

TEST_F(TiledContraction, BoolEpilogueNeedsATemporary) {
  // No output has the product's dtype: the product goes to an arena temporary.
  expect_same_as_two_step(
      [](const std::vector<Tensor>& in) { return std::vector<Tensor>{gt(matmul(in[0], in[1]) + in[2], in[3])}; },
      {special_values({29, 16}, 17, 23), special_values({16, 40}, 18, 19), special_values({40}, 19, 3), special_values({29, 1}, 33, 4)});
}

TEST_F(TiledContraction, Float64) {
  expect_same_as_two_step(
      [](const std::vector<Tensor>& in) { return std::vector<Tensor>{gelu(matmul(in[0], in[1]) * 0.5 + in[2])}; },
      {special_values({50, 20}, 20, 43, DType::Float64), special_values({20, 37}, 21, 47, DType::Float64),
       special_values({50, 37}, 22, 17, DType::Float64)});
}

TEST_F(TiledContraction, Conv2dBiasRelu) {
  Tensor w = special_values({8, 3, 3, 3}, 23, 41);
  Tensor b = special_values({8}, 24, 5);
  expect_same_as_two_step(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{relu(conv2d(in[0], w, b, {1, 1}, {1, 1}))}; },
      {special_values({2, 3, 9, 11}, 25, 67)});
}

TEST_F(TiledContraction, Conv2dGroupedAndPointwiseWithResidual) {
  Tensor w3 = special_values({6, 2, 3, 3}, 26, 37);  // groups = 2 over 4 input channels
  Tensor w1 = special_values({6, 6, 1, 1}, 27, 31);  // 1x1: no im2col
  expect_same_as_two_step(
      [&](const std::vector<Tensor>& in) {
        Tensor y = conv2d(in[0], w3, Tensor(), {2, 1}, {1, 0}, {1, 1}, 2);
        return std::vector<Tensor>{conv2d(y, w1) * in[1] + y};
      },
      {special_values({3, 4, 10, 7}, 28, 59), special_values({1, 6, 1, 1}, 29, 2)});
}

// MobileNet's block: depthwise 3x3 (its own kernel, the epilogue per plane) + bias + relu6, then
// a 1x1 conv + bias + residual; special values in every operand.
TEST_F(TiledContraction, DepthwiseBiasRelu6ThenPointwiseResidual) {
  Tensor wd = special_values({6, 1, 3, 3}, 33, 29), bd = special_values({6}, 34, 4);
  Tensor wp = special_values({6, 6, 1, 1}, 35, 31), bp = special_values({6}, 36, 5);
  expect_same_as_two_step(
      [&](const std::vector<Tensor>& in) {
        Tensor y = clamp(conv2d(in[0], wd, bd, {2, 2}, {1, 1}, {1, 1}, 6), 0.0, 6.0);
        Tensor r = conv2d(y, wp, bp);
        return std::vector<Tensor>{r + y};
      },
      {special_values({2, 6, 13, 21}, 37, 53)});
}

// oneDNN for every convolution (read at the process's first convolution: each test is its own
// process): the plan's constant weight is kept in oneDNN's layout, eager converts it each call;
// the bits agree, special values included.
TEST_F(TiledContraction, OneDnnConvWithConstantWeightBiasReluResidual) {
  ScopedEnv onednn("SMELT_CONV", "onednn");
  Tensor w = special_values({16, 8, 3, 3}, 38, 41), b = special_values({16}, 39, 5);
  expect_same_as_two_step(
      [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{relu(conv2d(in[0], w, b, {1, 1}, {1, 1}) + in[1])};
      },
      {special_values({2, 8, 12, 10}, 40, 61), special_values({2, 16, 12, 10}, 41, 3)});
}

TEST_F(TiledContraction, ColumnDimsNotWalkedAsOneFallBackToTwoSteps) {
  // An operand broadcast along Wo only: the tile's columns (Ho Wo) are not one dim for it.
  Tensor w = special_values({4, 2, 3, 3}, 30, 23);
  expect_same_as_two_step(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{relu(conv2d(in[0], w) + in[1])}; },
      {special_values({2, 2, 8, 8}, 31, 43), special_values({6, 1}, 32, 3)}, /*tiled=*/false);
}

}  // namespace
}  // namespace smelt
