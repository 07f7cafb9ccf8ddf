// lower(): which group bodies become loop kernels, and what those kernels compute on both
// backends against the eager ops the body names.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "codegen/kernel_builder.h"
#include "codegen/lower.h"
#include "fuzz/special_values.h"
#include "ir/graph.h"
#include "support/check.h"

namespace smelt::codegen::testing {
namespace {

using ops::OpId;

// Runs `k` on both backends over `inputs` (then zeroed outputs of the given shapes).
RunResult run_lowered(const LowerResult& lowered, std::vector<Tensor> inputs, const std::vector<Shape>& outs) {
  for (const Tensor& c : lowered.constants) inputs.push_back(c);
  const size_t first_output = inputs.size();
  for (size_t o = 0; o < outs.size(); ++o) {
    inputs.push_back(zeros(outs[o]).to(lowered.kernel->args[first_output + o].dtype));
  }
  return run_both(*lowered.kernel, inputs);
}

// A group returning a reduction's result without kept dims, over [N, N]: the value's shape [N]
// is also a shape that broadcasts along the space's last dim, but it is the row result (indexed
// by dim 0). It used to be read as a broadcast and the group refused.
TEST(Lower, ReducedShapeWithoutKeptDimsIsTheRowNotABroadcast) {
  const int64_t N = 6;
  auto g = std::make_unique<ir::Graph>();
  ir::Value* x = g->add_input({{N, N}, DType::Float32});
  ir::Value* e = g->add_node(OpId::exp, {x})->outputs[0];
  ir::Value* s = g->add_node(OpId::sum, {e}, {{"dims", std::vector<int64_t>{1}}, {"keepdim", int64_t(0)}})->outputs[0];
  ir::Value* m = g->add_node(OpId::amax, {x}, {{"dims", std::vector<int64_t>{1}}, {"keepdim", int64_t(0)}})->outputs[0];
  g->add_output(s);
  g->add_output(g->add_node(OpId::mul, {m, s})->outputs[0]);
  LowerResult lowered = lower(*g, "rows");
  ASSERT_TRUE(lowered.kernel) << lowered.reason;

  std::mt19937_64 rng(5);
  Tensor xv = fuzz::random_tensor({N, N}, DType::Float32, fuzz::ElementDraw{-2, 2, 0.0}, rng);
  Tensor want_s = sum(exp(xv), {1});
  Tensor want_ms = amax(xv, {1}) * want_s;
  RunResult r = run_lowered(lowered, {xv}, {{N}, {N}});
  for (const auto* got : {&r.interpreted, &r.compiled}) {
    EXPECT_TRUE(smelt::testing::all_close((*got)[0], want_s, 1e-6, 1e-6));
    EXPECT_TRUE(smelt::testing::all_close((*got)[1], want_ms, 1e-6, 1e-6));
  }
}

// The same shape when the reduced dim is 0: the row result [N] is indexed by dim 1, where
// broadcasting also puts it (the two readings agree).
TEST(Lower, ReducedShapeAlongDimZero) {
  const int64_t N = 5;
  auto g = std::make_unique<ir::Graph>();
  ir::Value* x = g->add_input({{N, N}, DType::Float32});
  ir::Value* s = g->add_node(OpId::sum, {x}, {{"dims", std::vector<int64_t>{0}}, {"keepdim", int64_t(0)}})->outputs[0];
  g->add_output(s);
  LowerResult lowered = lower(*g, "cols");
  ASSERT_TRUE(lowered.kernel) << lowered.reason;
  std::mt19937_64 rng(6);
  Tensor xv = fuzz::random_tensor({N, N}, DType::Float32, fuzz::ElementDraw{-2, 2, 0.0}, rng);
  RunResult r = run_lowered(lowered, {xv}, {{N}});
  EXPECT_TRUE(smelt::testing::all_close(r.interpreted[0], sum(xv, {0}), 1e-6, 1e-6));
  EXPECT_TRUE(smelt::testing::all_close(r.compiled[0], sum(xv, {0}), 1e-6, 1e-6));
}

// Rows of `cols` elements: all -inf; one +inf; one NaN; -inf among finite values; two +inf;
// values rising along the row (the running maximum grows in every block); ordinary.
Tensor special_rows(int64_t cols, DType dtype) {
  const int64_t rows = 7;
  std::vector<double> v(size_t(rows * cols));
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(-3, 3);
  for (double& e : v) e = u(rng);
  auto at = [&](int64_t r, int64_t c) -> double& { return v[size_t(r * cols + c)]; };
  for (int64_t c = 0; c < cols; ++c) at(0, c) = -INFINITY;
  at(1, cols / 2) = INFINITY;
  at(2, cols - 1) = std::nan("");
  at(3, 0) = -INFINITY;
  at(3, cols - 1) = -INFINITY;
  at(4, 0) = INFINITY;
  at(4, cols - 1) = INFINITY;
  for (int64_t c = 0; c < cols; ++c) at(5, c) = -40.0 + 80.0 * double(c) / double(cols);
  return from_vector(v, {rows, cols}, DType::Float64).to(dtype);
}

// NaN exactly where `want` has NaN, the same infinities, finite values within rounding.
::testing::AssertionResult same_specials_close(const Tensor& got, const Tensor& want, double tol) {
  std::vector<double> a = got.to_vector(), b = want.to_vector();
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < a.size(); ++i) {
    const bool ok = std::isnan(b[i]) ? std::isnan(a[i])
                    : std::isinf(b[i]) ? a[i] == b[i]
                                       : std::abs(a[i] - b[i]) <= tol * (1 + std::abs(b[i]));
    if (!ok) return ::testing::AssertionFailure() << "element " << i << ": got " << a[i] << ", want " << b[i];
  }
  return ::testing::AssertionSuccess();
}

// softmax and log_softmax lower to one pass for the row's maximum and sum (a SumExp reduction in
// the max's stage: two stages, not three) and give, on both backends, what the eager row kernels
// give: the same NaN rows (all -inf, +inf, NaN) and the same values up to rounding, for rows of
// one element (no inner loop) and of several blocks, not a multiple of one (2500).
TEST(Lower, OnlineSoftmaxMatchesEagerOnSpecialRows) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (int64_t cols : dtype == DType::Float32 ? std::vector<int64_t>{1, 2500} : std::vector<int64_t>{2500}) {
      for (OpId op : {OpId::softmax, OpId::log_softmax}) {
        auto g = std::make_unique<ir::Graph>();
        ir::Value* x = g->add_input({{7, cols}, dtype});
        g->add_output(g->add_node(op, {x}, {{"dim", int64_t(-1)}})->outputs[0]);
        LowerResult lowered = lower(*g, "rows");
        ASSERT_TRUE(lowered.kernel) << lowered.reason;
        const std::string text = print_kernel(*lowered.kernel);
        EXPECT_NE(text.find("sumexp"), std::string::npos) << text;
        EXPECT_EQ(lowered.kernel->stages, 2) << text;
        Tensor xv = special_rows(cols, dtype);
        Tensor want = op == OpId::softmax ? softmax(xv, -1) : log_softmax(xv, -1);
        RunResult r = run_lowered(lowered, {xv}, {{7, cols}});
        const double tol = dtype == DType::Float32 ? 2e-6 : 1e-13;
        EXPECT_TRUE(same_specials_close(r.interpreted[0], want, tol)) << "interpreter " << cols << " " << dtype_name(dtype);
        EXPECT_TRUE(same_specials_close(r.compiled[0], want, tol)) << "generated C++ " << cols << " " << dtype_name(dtype);
      }
    }
  }
}

// Negative: a sum of exp(x - max) whose max keeps no dims broadcasts the maxima along the row
// (another function), so it is not an online sum: three stages, no sumexp.
TEST(Lower, SumOfExpWithoutKeptMaxIsNotOnline) {
  auto g = std::make_unique<ir::Graph>();
  ir::Value* x = g->add_input({{4, 4}, DType::Float32});
  ir::Value* m = g->add_node(OpId::amax, {x}, {{"dims", std::vector<int64_t>{1}}, {"keepdim", int64_t(0)}})->outputs[0];
  ir::Value* e = g->add_node(OpId::exp, {g->add_node(OpId::sub, {x, m})->outputs[0]})->outputs[0];
  g->add_output(g->add_node(OpId::sum, {e}, {{"dims", std::vector<int64_t>{1}}, {"keepdim", int64_t(1)}})->outputs[0]);
  LowerResult lowered = lower(*g, "not_online");
  if (lowered.kernel) {
    EXPECT_EQ(print_kernel(*lowered.kernel).find("sumexp"), std::string::npos);
  }
}

// A row epilogue reading an argument of the reduced shape (sum(x) + b[row]; a mean's count in the
// joint graph of a training step) loads one element per row, on both backends. It used to be
// refused and the group interpreted.
TEST(Lower, RowEpilogueReadsAnArgumentOfTheReducedShape) {
  auto g = std::make_unique<ir::Graph>();
  ir::Value* x = g->add_input({{4, 6}, DType::Float32});
  ir::Value* b = g->add_input({{4}, DType::Float32});
  ir::Value* s = g->add_node(OpId::sum, {x}, {{"dims", std::vector<int64_t>{1}}, {"keepdim", int64_t(0)}})->outputs[0];
  g->add_output(g->add_node(OpId::add, {s, b})->outputs[0]);
  LowerResult lowered = lower(*g, "bias");
  ASSERT_TRUE(lowered.kernel) << lowered.reason;
  std::mt19937_64 rng(9);
  Tensor xv = fuzz::random_tensor({4, 6}, DType::Float32, fuzz::ElementDraw{-2, 2, 0.0}, rng);
  Tensor bv = fuzz::random_tensor({4}, DType::Float32, fuzz::ElementDraw{-2, 2, 0.0}, rng);
  Tensor want = sum(xv, {1}) + bv;
  RunResult r = run_lowered(lowered, {xv, bv}, {{4}});
  for (const auto* got : {&r.interpreted, &r.compiled}) EXPECT_TRUE(smelt::testing::all_close((*got)[0], want, 1e-6, 1e-6));
}

// The same over a full reduction to a scalar: a 0-dim argument read once.
TEST(Lower, FullReductionEpilogueReadsAScalarArgument) {
  auto g = std::make_unique<ir::Graph>();
  ir::Value* x = g->add_input({{5, 7}, DType::Float64});
  ir::Value* n = g->add_input({{}, DType::Float64});
  ir::Value* s = g->add_node(OpId::sum, {x}, {{"dims", std::vector<int64_t>{0, 1}}, {"keepdim", int64_t(0)}})->outputs[0];
  g->add_output(g->add_node(OpId::div, {s, n})->outputs[0]);
  LowerResult lowered = lower(*g, "mean");
  ASSERT_TRUE(lowered.kernel) << lowered.reason;
  std::mt19937_64 rng(10);
  Tensor xv = fuzz::random_tensor({5, 7}, DType::Float64, fuzz::ElementDraw{-2, 2, 0.0}, rng);
  Tensor nv = scalar_tensor(3.0, DType::Float64);
  RunResult r = run_lowered(lowered, {xv, nv}, {{}});
  for (const auto* got : {&r.interpreted, &r.compiled}) {
    EXPECT_TRUE(smelt::testing::all_close((*got)[0], sum(xv, {0, 1}) / nv, 1e-12, 1e-12));
  }
}

// An argument that varies within the row is not a row load: an epilogue over the whole space reads
// it in a stage after the reduction (sum(x, keepdim) + y).
TEST(Lower, AnArgumentVaryingWithinTheRowIsReadInALaterStage) {
  auto g = std::make_unique<ir::Graph>();
  ir::Value* x = g->add_input({{4, 6}, DType::Float32});
  ir::Value* y = g->add_input({{4, 6}, DType::Float32});
  ir::Value* s = g->add_node(OpId::sum, {x}, {{"dims", std::vector<int64_t>{1}}, {"keepdim", int64_t(1)}})->outputs[0];
  g->add_output(g->add_node(OpId::add, {s, y})->outputs[0]);
  LowerResult lowered = lower(*g, "varying");
  ASSERT_TRUE(lowered.kernel) << lowered.reason;
  EXPECT_EQ(lowered.kernel->stages, 2);
  for (const Access& a : lowered.kernel->accesses) {
    if (a.arg == 1) {
      EXPECT_NE(a.inner_strides, std::vector<int64_t>(a.inner_strides.size(), 0));
    }
  }
  std::mt19937_64 rng(11);
  Tensor xv = fuzz::random_tensor({4, 6}, DType::Float32, fuzz::ElementDraw{-2, 2, 0.0}, rng);
  Tensor yv = fuzz::random_tensor({4, 6}, DType::Float32, fuzz::ElementDraw{-2, 2, 0.0}, rng);
  RunResult r = run_lowered(lowered, {xv, yv}, {{4, 6}});
  for (const auto* got : {&r.interpreted, &r.compiled}) {
    EXPECT_TRUE(smelt::testing::all_close((*got)[0], sum(xv, {1}, true) + yv, 1e-6, 1e-6));
  }
}

}  // namespace
}  // namespace smelt::codegen::testing
