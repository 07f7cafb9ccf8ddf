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
  for (const Shape& s : outs) inputs.push_back(zeros(s));
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

// Negative: a row epilogue that reads an argument of the reduced shape stays refused, with the
// reason named.
TEST(Lower, RowEpilogueReadingAnArgumentIsRefused) {
  auto g = std::make_unique<ir::Graph>();
  ir::Value* x = g->add_input({{4, 6}, DType::Float32});
  ir::Value* b = g->add_input({{4}, DType::Float32});
  ir::Value* s = g->add_node(OpId::sum, {x}, {{"dims", std::vector<int64_t>{1}}, {"keepdim", int64_t(0)}})->outputs[0];
  g->add_output(g->add_node(OpId::add, {s, b})->outputs[0]);
  LowerResult lowered = lower(*g, "bias");
  EXPECT_FALSE(lowered.kernel);
  EXPECT_NE(lowered.reason.find("row epilogue reads an argument"), std::string::npos) << lowered.reason;
}

}  // namespace
}  // namespace smelt::codegen::testing
