// Concat elimination in the plan (runtime/plan_cat.cpp): operands written by their producers
// straight into their slices of the cat's buffer. Each case compiles the function with it and
// without it (SMELT_NO_CAT_IN_PLACE=1: every cat copies) and wants the same bits, special values
// included (the same kernels run, only where they write differs), and eager's values within
// rounding; the plan text shows which cats lost their copy. Negative cases: an operand that is a
// graph output, a cat that is a graph output, an unaligned slice, batch 2 (strided slices), the
// same operand twice (placed once), a graph input as operand. Each test runs in its own process
// (gtest_discover_tests), so the cache directory set here is the one the kernel cache reads.
#include <cstdlib>
#include <optional>
#include <string>

#include "kernels/conv_onednn.h"
#include "smelt/compile.h"
#include "support/check.h"
#include "support/temp_dir.h"
#include "support/helpers.h"

namespace smelt {
namespace {

using testing::rand32;

using testing::ScopedEnv;

using Fn = CompiledFunction::Fn;
using testing::all_close;
using testing::same_bits;

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

struct Plans {
  std::string in_place, copying;
};

class PlanCat : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    setenv("SMELT_CACHE_DIR", dir_.c_str(), 1);
  }

  // Compiles fn with and without concat elimination on both backends, runs each twice (the second
  // call replays the plan), and checks the results; returns the cpp backend's two plan texts.
  Plans expect_same_as_copying(const Fn& fn, const std::vector<Tensor>& inputs) {
    const std::vector<Tensor> eager = fn(inputs);
    Plans plans;
    for (const char* backend : {"interpreter", "cpp"}) {
      CompileOptions o;
      o.backend = backend;
      std::vector<Tensor> want;
      {
        ScopedEnv off("SMELT_NO_CAT_IN_PLACE", "1");
        CompiledFunction f = compile(fn, o);
        want = f(inputs);
        plans.copying = f.report().plan;
      }
      CompiledFunction f = compile(fn, o);
      for (int call = 0; call < 2; ++call) {
        const std::vector<Tensor> got = f(inputs);
        EXPECT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
          EXPECT_TRUE(same_bits(got[i], want[i])) << backend << " output " << i << "\n" << f.report().plan;
          EXPECT_TRUE(all_close(got[i], eager[i], 1e-4, 1e-5)) << backend << " output " << i;
        }
      }
      plans.in_place = f.report().plan;
      EXPECT_EQ(occurrences(plans.copying, "into its slice"), 0u) << plans.copying;
    }
    return plans;
  }
};

// A fire module (squeeze 1x1; 1x1 and 3x3 expands; cat; a conv after it) at batch 1, on NCHW and
// on the blocked layout, with NaN and infinities in the input: both expands write their slices,
// no cat step is left.
TEST_F(PlanCat, FireModuleWritesBothSlices) {
  const Tensor ws = rand32({16, 32, 1, 1}, 1, 0.2), we1 = rand32({32, 16, 1, 1}, 2, 0.25);
  const Tensor we3 = rand32({32, 16, 3, 3}, 3, 0.08), wn = rand32({16, 64, 1, 1}, 4, 0.12);
  const Tensor b = rand32({32}, 5);
  const Fn fn = [&](const std::vector<Tensor>& in) {
    Tensor s = relu(conv2d(in[0], ws));
    Tensor c = cat({relu(conv2d(s, we1, b)), relu(conv2d(s, we3, Tensor(), 1, 1))}, 1);
    return std::vector<Tensor>{relu(conv2d(c, wn))};
  };
  const Tensor x = testing::special_values({1, 32, 16, 16}, 6, 97);
  for (const char* blocked : {"0", "1"}) {
    ScopedEnv env("SMELT_BLOCKED_LAYOUT", blocked);
    SCOPED_TRACE(std::string("SMELT_BLOCKED_LAYOUT=") + blocked);
    const Plans p = expect_same_as_copying(fn, {x});
    EXPECT_EQ(occurrences(p.copying, "op cat ("), 1u) << p.copying;
    EXPECT_EQ(occurrences(p.in_place, "op cat ("), 0u) << p.in_place;
    EXPECT_EQ(occurrences(p.in_place, "into its slice"), 0u) << p.in_place;
    EXPECT_GE(occurrences(p.in_place, "alias"), 2u) << p.in_place;
  }
}

// Rows of matmuls concatenated on dim 0 (nothing before it: contiguous slices), the middle one
// a graph input, which is copied into its slice; the others written in place.
TEST_F(PlanCat, MatmulRowsAndAnInputOperand) {
  const Tensor w = rand32({24, 32}, 11);
  const Fn fn = [&](const std::vector<Tensor>& in) {
    Tensor c = cat({relu(matmul(in[0], w)), in[1], tanh(matmul(in[0], w) + 1.0)}, 0);
    return std::vector<Tensor>{exp(c * 0.5)};
  };
  const Plans p = expect_same_as_copying(fn, {rand32({8, 24}, 12), rand32({4, 32}, 13)});
  EXPECT_EQ(occurrences(p.in_place, "op cat ("), 0u) << p.in_place;
  EXPECT_EQ(occurrences(p.in_place, "cat operand 1 into its slice"), 1u) << p.in_place;
  EXPECT_EQ(occurrences(p.in_place, "into its slice"), 1u) << p.in_place;
}

// The first operand is also read by another op: it is still written into its slice (the other
// reader reads it there). The second is a graph output (returned in its own tensor): copied.
TEST_F(PlanCat, OperandsReadElsewhereArePlacedOutputsCopied) {
  const Tensor w = rand32({16, 16}, 21);
  const Fn fn = [&](const std::vector<Tensor>& in) {
    Tensor a = relu(matmul(in[0], w)), b = sigmoid(matmul(in[0], w)), c = tanh(matmul(in[0], w));
    Tensor k = cat({a, b, c}, 0);
    return std::vector<Tensor>{k * 2.0, a.sum(), b};
  };
  const Plans p = expect_same_as_copying(fn, {rand32({16, 16}, 22)});
  EXPECT_EQ(occurrences(p.in_place, "cat operand 0 into its slice"), 0u) << p.in_place;
  EXPECT_EQ(occurrences(p.in_place, "cat operand 1 into its slice"), 1u) << p.in_place;
  EXPECT_EQ(occurrences(p.in_place, "cat operand 2 into its slice"), 0u) << p.in_place;
}

// A recurrence stacked over its steps (as recurrent_layer does): each step's state is read by the
// next step and is a stack operand through an unsqueeze; every state is written into its slice
// of the stack, none copied, in forward and in reverse order; also with NaN and infinities.
TEST_F(PlanCat, StackedRecurrentStatesAreWrittenInPlace) {
  const Tensor w = rand32({16, 16}, 41, 0.3);
  for (bool reverse : {false, true}) {
    SCOPED_TRACE(reverse ? "reverse" : "forward");
    const Fn fn = [&](const std::vector<Tensor>& in) {
      Tensor h = zeros({1, 16});
      std::vector<Tensor> states(6);
      for (int i = 0; i < 6; ++i) {
        const int t = reverse ? 5 - i : i;
        h = tanh(matmul(h, w) + in[0].select(0, t));
        states[size_t(t)] = h;
      }
      return std::vector<Tensor>{stack(states, 0) * 2.0, h.sum()};
    };
    const Plans p = expect_same_as_copying(fn, {testing::special_values({6, 1, 16}, 42, 13)});
    EXPECT_EQ(occurrences(p.copying, "op cat ("), 1u) << p.copying;
    EXPECT_EQ(occurrences(p.in_place, "op cat ("), 0u) << p.in_place;
    EXPECT_EQ(occurrences(p.in_place, "into its slice"), 0u) << p.in_place;
  }
}

// Cats left to their own step: one that is a graph output, one over batch 2 on channels (each
// operand strided in the result); one with the same operand twice (its first slice written in
// place, the second copied from it), and one on channels whose
// second slice would start at byte 300 (3 channels of 5x5): that operand is copied, the first
// (at byte 0) written in place.
TEST_F(PlanCat, NegativeCases) {
  const Tensor w = rand32({3, 4, 3, 3}, 31, 0.2);
  const Fn output_cat = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{cat({relu(in[0] * 2.0), exp(in[0])}, 1)};
  };
  Plans p = expect_same_as_copying(output_cat, {rand32({1, 16, 4, 4}, 32)});
  EXPECT_EQ(occurrences(p.in_place, "op cat ("), 1u) << p.in_place;

  const Fn batch2 = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{cat({relu(in[0] * 2.0), exp(in[0])}, 1).sum({1})};
  };
  p = expect_same_as_copying(batch2, {rand32({2, 16, 4, 4}, 33)});
  EXPECT_EQ(occurrences(p.in_place, "op cat ("), 1u) << p.in_place;

  const Fn twice = [&](const std::vector<Tensor>& in) {
    Tensor a = relu(in[0] * 2.0);
    return std::vector<Tensor>{cat({a, a}, 0).sum({0})};
  };
  p = expect_same_as_copying(twice, {rand32({16, 16}, 34)});
  EXPECT_EQ(occurrences(p.in_place, "cat operand 0 into its slice"), 0u) << p.in_place;
  EXPECT_EQ(occurrences(p.in_place, "cat operand 1 into its slice"), 1u) << p.in_place;

  const Fn unaligned = [&](const std::vector<Tensor>& in) {
    Tensor c = cat({relu(conv2d(in[0], w, Tensor(), 1, 1)), tanh(conv2d(in[0], w, Tensor(), 1, 1))}, 1);
    return std::vector<Tensor>{c.sum({1})};
  };
  p = expect_same_as_copying(unaligned, {rand32({1, 4, 5, 5}, 35)});
  EXPECT_EQ(occurrences(p.in_place, "op cat ("), 0u) << p.in_place;
  EXPECT_EQ(occurrences(p.in_place, "cat operand 1 into its slice"), 1u) << p.in_place;
  EXPECT_EQ(occurrences(p.in_place, "cat operand 0 into its slice"), 0u) << p.in_place;
}

}  // namespace
}  // namespace smelt
