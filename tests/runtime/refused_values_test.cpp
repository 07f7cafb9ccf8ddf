// A compiled function raises where eager raises on the values of its inputs (an index out of
// range, an integer divisor of 0: ops::may_refuse_values), also where the optimizer makes the
// refusing node unread (x - x -> 0 for int64, then dce), where a new batch size puts a constant
// index out of range, and where the node would otherwise fuse into a kernel that cannot check
// (a generated integer x / 0 is 0). Each case also runs on valid inputs, equal to eager.
#include "smelt/compile.h"

#include <cstdlib>
#include <limits>
#include <string>

#include "support/check.h"
#include "support/temp_dir.h"

namespace smelt {
namespace {

using Fn = CompiledFunction::Fn;

class RefusedValues : public testing::TempDirTest, public ::testing::WithParamInterface<const char*> {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    setenv("SMELT_CACHE_DIR", dir_.c_str(), 1);
  }

  // Compiles `fn` on `good` and checks the compiled results against eager twice (the second call
  // replays the plan); then each of eager and the compiled function refuses `bad` with an Error
  // that names `what`, and the compiled function still gives the eager results on `good` after.
  void expect_refused_alike(const Fn& fn, const std::vector<Tensor>& good, const std::vector<Tensor>& bad,
                            const std::string& what) {
    CompileOptions options;
    options.backend = GetParam();
    CompiledFunction f = compile(fn, options);
    const std::vector<Tensor> want = fn(good);
    auto expect_good = [&](const char* when) {
      const std::vector<Tensor> got = f(good);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_TRUE(testing::same_bits(got[i], want[i])) << when << ", output " << i << "\n" << f.report().plan;
      }
    };
    expect_good("first call");
    expect_good("replay");
    std::string eager_error, compiled_error;
    try { fn(bad); } catch (const Error& e) { eager_error = e.what(); }
    try { f(bad); } catch (const Error& e) { compiled_error = e.what(); }
    EXPECT_NE(eager_error.find(what), std::string::npos) << "eager: " << eager_error;
    EXPECT_NE(compiled_error.find(what), std::string::npos)
        << "compiled: " << (compiled_error.empty() ? "no error" : compiled_error) << "\n" << f.report().plan;
    expect_good("after the refused call");
  }
};

Tensor ints(std::vector<int64_t> v, Shape shape) { return from_vector(v, shape); }

// The compile-fuzz finding of 2026-11-26 (seed 21017740), with the index as an input: the
// gather's result reaches only g - g, which simplify folds to 0 for int64.
TEST_P(RefusedValues, AGatherOnlySubtractedFromItselfStillChecksItsIndex) {
  Fn fn = [](const std::vector<Tensor>& in) {
    Tensor g = gather(in[0].to(DType::Float32), 0, in[1]).to(DType::Int64);
    return std::vector<Tensor>{amax(g - g, {0}, true).to(DType::Float32) + in[2]};
  };
  Tensor x = ints({5, -7, 9}, {3});
  Tensor y = testing::random_tensor({1}, -1, 1, 1).to(DType::Float32);
  expect_refused_alike(fn, {x, ints({2, 0, 1, 2}, {4}), y}, {x, ints({2, 0, 3, 2}, {4}), y}, "gather: index 3");
}

// The finding itself: the index is a constant of the function, in range at the batch size the
// function was compiled at (3) and out of range at batch 1.
TEST_P(RefusedValues, AConstantIndexOutOfRangeAtANewBatchSizeIsRefused) {
  Fn fn = [](const std::vector<Tensor>& in) {
    Tensor g = gather(in[0].to(DType::Float32), 0, ints({2, 0, 1, 2}, {4})).to(DType::Int64);
    return std::vector<Tensor>{amax(g - g, {0}, true).to(DType::Float32)};
  };
  expect_refused_alike(fn, {ints({5, -7, 9}, {3})}, {ints({4}, {1})}, "gather: index 2");
}

// index_select whose result nothing reads at all, beside a live output.
TEST_P(RefusedValues, AnUnreadIndexSelectStillChecksItsIndex) {
  Fn fn = [](const std::vector<Tensor>& in) {
    index_select(in[0], 1, in[1]);
    return std::vector<Tensor>{in[0] * 2.0};
  };
  Tensor x = testing::random_tensor({2, 5}, -1, 1, 2);
  expect_refused_alike(fn, {x, ints({4, 0}, {2})}, {x, ints({0, 5}, {2})}, "index_select: index 5");
}

// The same with the int64 extremes as indices: INT64_MIN (no wrap to a valid negative index) and
// INT64_MAX.
TEST_P(RefusedValues, AnUnreadIndexSelectRefusesTheInt64Extremes) {
  Fn fn = [](const std::vector<Tensor>& in) {
    index_select(in[0], 0, in[1]);
    return std::vector<Tensor>{in[0] + 1.0};
  };
  Tensor x = testing::random_tensor({3, 2}, -1, 1, 3);
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  expect_refused_alike(fn, {x, ints({2}, {1})}, {x, ints({1, lo}, {2})}, "index_select: index " + std::to_string(lo));
  expect_refused_alike(fn, {x, ints({0}, {1})}, {x, ints({hi}, {1})}, "index_select: index " + std::to_string(hi));
}

// An integer division by a computed divisor inside an elementwise chain that fuses into one
// kernel; a zero divisor must not become the generated kernel's quiet 0.
TEST_P(RefusedValues, AnIntegerDivisorOfZeroInAFusedChainIsRefused) {
  Fn fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{(in[0] * 3) / (in[1] - 1) + 1};
  };
  Tensor a = ints({7, -8, 9, 100, -3, 0}, {2, 3});
  expect_refused_alike(fn, {a, ints({3, -1, 2, 5, 4, 9}, {2, 3})}, {a, ints({3, -1, 1, 5, 4, 9}, {2, 3})},
                       "integer division by zero");
}

// The same division unread, its quotient only subtracted from itself.
TEST_P(RefusedValues, AnUnreadIntegerDivisionStillRefusesAZeroDivisor) {
  Fn fn = [](const std::vector<Tensor>& in) {
    Tensor q = in[0] / in[1];
    return std::vector<Tensor>{in[0] + (q - q)};
  };
  Tensor a = ints({7, -8, 9}, {3});
  expect_refused_alike(fn, {a, ints({2, 3, -4}, {3})}, {a, ints({2, 0, -4}, {3})}, "integer division by zero");
}

INSTANTIATE_TEST_SUITE_P(Backends, RefusedValues, ::testing::Values("interpreter", "cpp"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
}  // namespace smelt
