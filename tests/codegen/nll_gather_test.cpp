// log_softmax + nll_loss as one row kernel (codegen/loop_kernel.h: a row-indexed gather picks
// logp[n, target[n]] in the row expressions; a fold sums the rows for sum and mean). On both
// backends, against the eager kernels run node by node: special logits (NaN, ±inf), ignored
// rows, every row ignored, an empty batch; and bit for bit against eager nll_loss applied to the
// log-probabilities the same kernel stores (the gather reads exactly the stored element, the fold
// sums exactly as the eager kernel does). Targets out of range fail before the kernel runs, with
// the eager op's message.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "codegen/kernel_builder.h"
#include "codegen/lower.h"
#include "fuzz/compare.h"
#include "ir/printer.h"
#include "smelt/error.h"
#include "trace/interpreter.h"
#include "support/helpers.h"

namespace smelt::codegen::testing {
namespace {

using smelt::testing::error_of;

constexpr int64_t kIgnore = -100;

// The fused group's body: logp = log_softmax(x), loss = nll_loss(logp, t); returns loss and, with
// `with_logp`, logp too.
std::unique_ptr<ir::Graph> body(int64_t n, int64_t c, DType dtype, int reduction, bool with_logp) {
  const std::string d = dtype == DType::Float32 ? "f32" : "f64";
  const std::string x = d + "[" + std::to_string(n) + "," + std::to_string(c) + "]";
  const std::string loss = reduction == 0 ? d + "[" + std::to_string(n) + "]" : d + "[]";
  return ir::parse("graph(%x: " + x + ", %t: i64[" + std::to_string(n) + "]) {\n  %1: " + x +
                   " = log_softmax(%x) {dim=-1}\n  %2: " + loss + " = nll_loss(%1, %t) {ignore_index=" +
                   std::to_string(kIgnore) + ", reduction=" + std::to_string(reduction) + "}\n  return %2" +
                   (with_logp ? ", %1" : "") + "\n}\n");
}

enum class Targets { Mixed, AllIgnored, None };

// Logits in [-3, 3], with `special` about one in ten NaN, +inf or -inf; targets in range with
// about one row in four ignored (Mixed), or every row ignored.
std::vector<Tensor> inputs(int64_t n, int64_t c, DType dtype, bool special, Targets targets, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-3, 3);
  const double kSpecial[] = {std::nan(""), INFINITY, -INFINITY};
  std::vector<double> x(size_t(n * c));
  for (double& v : x) v = special && rng() % 10 == 0 ? kSpecial[rng() % 3] : u(rng);
  std::vector<double> t(static_cast<size_t>(n));
  for (double& v : t) {
    v = targets == Targets::AllIgnored || rng() % 4 == 0 ? double(kIgnore) : double(int64_t(rng() % uint64_t(c)));
  }
  return {from_vector(x, {n, c}, DType::Float64).to(dtype), from_vector(t, {n}, DType::Float64).to(DType::Int64)};
}

std::vector<Tensor> kernel_args(const LowerResult& lowered, const std::vector<Tensor>& in,
                                const std::vector<Tensor>& want) {
  std::vector<Tensor> args = in;
  for (const Tensor& c : lowered.constants) args.push_back(c);
  for (const Tensor& w : want) args.push_back(full(w.shape(), 7.0).to(w.dtype()));  // every element written
  return args;
}

TEST(NllGather, LogSoftmaxNllLossIsOneRowKernelMatchingEager) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (int reduction : {0, 1, 2}) {
      for (bool with_logp : {false, true}) {
        for (auto [n, c] : std::vector<std::pair<int64_t, int64_t>>{{37, 11}, {5, 1}, {0, 4}, {64, 300}}) {
          const std::string what = std::string(dtype_name(dtype)) + " reduction " + std::to_string(reduction) +
                                   (with_logp ? " with logp" : "") + " (" + std::to_string(n) + ", " +
                                   std::to_string(c) + ")";
          SCOPED_TRACE(what);
          std::unique_ptr<ir::Graph> g = body(n, c, dtype, reduction, with_logp);
          LowerResult lowered = lower(*g, "log_softmax_nll_loss");
          ASSERT_TRUE(lowered.kernel) << lowered.reason;
          const LoopKernel& k = *lowered.kernel;
          EXPECT_EQ(k.index_checks.size(), 1u);
          EXPECT_EQ(k.folds.size(), reduction == 0 ? 0u : 1u);
          // one class: the pick is column 0 whatever the target (no gather left)
          EXPECT_EQ(print_kernel(k).find("gather=") != std::string::npos, c > 1) << print_kernel(k);
          for (Targets targets : {Targets::Mixed, Targets::AllIgnored}) {
            for (bool special : {false, true}) {
              std::vector<Tensor> in = inputs(n, c, dtype, special, targets, uint64_t(n * 131 + c + special));
              std::vector<Tensor> want = trace::interpret(*g, in);
              RunResult r = run_both(k, kernel_args(lowered, in, want));
              // logp and so the loss may differ from eager's in the last bit: the row sums'
              // order is the backend's (loop_kernel.h); NaN, ±inf and 0/0 must agree exactly
              const std::vector<bool> tolerant(want.size(), true);
              EXPECT_EQ(fuzz::compare(r.interpreted, want, "interpreter", tolerant), "");
              EXPECT_EQ(fuzz::compare(r.compiled, want, "generated C++", tolerant), "");
              if (!with_logp) continue;
              // Bit for bit: eager nll_loss over the log-probabilities each backend stored.
              using smelt::Reduction;
              const Reduction red = reduction == 0 ? Reduction::None : reduction == 1 ? Reduction::Mean : Reduction::Sum;
              EXPECT_TRUE(bit_equal(r.interpreted[0], nll_loss(r.interpreted[1], in[1], kIgnore, red)));
              EXPECT_TRUE(bit_equal(r.compiled[0], nll_loss(r.compiled[1], in[1], kIgnore, red)));
            }
          }
        }
      }
    }
  }
}

// Every row ignored: eager's mean is 0/0 = NaN and its sum 0; so is the kernel's.
TEST(NllGather, AllRowsIgnoredGiveWhatEagerGives) {
  for (int reduction : {1, 2}) {
    std::unique_ptr<ir::Graph> g = body(6, 5, DType::Float32, reduction, false);
    LowerResult lowered = lower(*g, "nll");
    ASSERT_TRUE(lowered.kernel) << lowered.reason;
    std::vector<Tensor> in = inputs(6, 5, DType::Float32, false, Targets::AllIgnored, 3);
    std::vector<Tensor> want = trace::interpret(*g, in);
    ASSERT_EQ(std::isnan(want[0].to_vector()[0]), reduction == 1);
    RunResult r = run_both(*lowered.kernel, kernel_args(lowered, in, want));
    EXPECT_TRUE(bit_equal(r.interpreted[0], want[0]));
    EXPECT_TRUE(bit_equal(r.compiled[0], want[0]));
  }
}

// One row whose target is a body constant (fuse copies one-element constants into the body): a
// plain load of that column, or 0 for ignore_index; a constant out of range is not lowered (node
// by node, the eager kernel reports it).
TEST(NllGather, ConstantTargetOfOneRow) {
  for (int64_t t : {int64_t(3), kIgnore, int64_t(10)}) {
    std::unique_ptr<ir::Graph> g = ir::parse("graph(%x: f32[1,10]) {\n  %t: i64[1] = constant [" + std::to_string(t) +
                                             "]\n  %1: f32[1,10] = log_softmax(%x) {dim=-1}\n  %2: f32[] = nll_loss(%1, "
                                             "%t) {ignore_index=-100, reduction=1}\n  return %2, %1\n}\n");
    LowerResult lowered = lower(*g, "nll");
    if (t == 10) {
      EXPECT_FALSE(lowered.kernel);
      EXPECT_NE(lowered.reason.find("constant target 10 is out of range"), std::string::npos) << lowered.reason;
      continue;
    }
    ASSERT_TRUE(lowered.kernel) << lowered.reason;
    EXPECT_TRUE(lowered.kernel->index_checks.empty());
    std::vector<Tensor> in{inputs(1, 10, DType::Float32, true, Targets::Mixed, 5)[0]};
    std::vector<Tensor> want = trace::interpret(*g, in);
    RunResult r = run_both(*lowered.kernel, kernel_args(lowered, in, want));
    Tensor target = full({1}, double(t)).to(DType::Int64);
    EXPECT_TRUE(bit_equal(r.interpreted[0], nll_loss(r.interpreted[1], target, kIgnore, smelt::Reduction::Mean)));
    EXPECT_TRUE(bit_equal(r.compiled[0], nll_loss(r.compiled[1], target, kIgnore, smelt::Reduction::Mean)));
  }
}

// A target out of range or negative (not ignore_index) fails before the kernel runs, with the
// message eager nll_loss gives (the op, the row, the value, what is valid).
TEST(NllGather, TargetsOutOfRangeFailAsEagerDoes) {
  std::unique_ptr<ir::Graph> g = body(4, 5, DType::Float32, 1, false);
  LowerResult lowered = lower(*g, "nll");
  ASSERT_TRUE(lowered.kernel) << lowered.reason;
  for (int64_t bad : {int64_t(5), int64_t(-1), int64_t(-99), int64_t(1) << 62}) {
    Tensor x = zeros({4, 5});
    Tensor t = from_vector({1, 2, 0, 0}, {4}, DType::Float64).to(DType::Int64);
    t.data<int64_t>()[2] = bad;
    const std::string eager = error_of([&] { nll_loss(log_softmax(x, -1), t, kIgnore, smelt::Reduction::Mean); });
    ASSERT_NE(eager.find("nll_loss: target " + std::to_string(bad) + " at flat index 2"), std::string::npos) << eager;
    Tensor out = zeros({});
    std::vector<void*> ptrs{x.raw_data(), t.raw_data(), out.raw_data()};
    EXPECT_EQ(error_of([&] { check_indices(*lowered.kernel, ptrs.data()); }), eager);
  }
  // ignore_index itself passes
  Tensor t = from_vector({1, 2, 0, 0}, {4}, DType::Float64).to(DType::Int64);
  t.data<int64_t>()[1] = kIgnore;
  std::vector<void*> ptrs{nullptr, t.raw_data(), nullptr};
  EXPECT_EQ(error_of([&] { check_indices(*lowered.kernel, ptrs.data()); }), "");
}

}  // namespace
}  // namespace smelt::codegen::testing
