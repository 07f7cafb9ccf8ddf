// Batch-norm folding on traced inference graphs: Conv -> BatchNorm(eval) -> ReLU and
// Linear -> BatchNorm(eval) fold into the contraction's weights and compute the same values.
// conv2d, matmul and batch_norm are looked up by name: these tests skip while the op table
// does not have them yet.
#include "ir/graph.h"
#include "ops/dispatch.h"
#include "passes/pass_manager.h"
#include "support/check.h"
#include "trace/interpreter.h"
#include "trace/trace.h"

namespace smelt {
namespace {

using ops::OpId;

struct BatchNormParams {
  Tensor gamma, beta, mean, var;
};

BatchNormParams random_batch_norm(int64_t channels, DType dtype, uint64_t seed) {
  Generator gen(seed);
  return {uniform({channels}, 0.5, 1.5, dtype, &gen), uniform({channels}, -1, 1, dtype, &gen),
          uniform({channels}, -0.5, 0.5, dtype, &gen), uniform({channels}, 0.25, 2, dtype, &gen)};
}

Tensor batch_norm_eval(OpId bn, const Tensor& x, const BatchNormParams& p, bool training = false) {
  return ops::call(bn, {x, p.gamma, p.beta, p.mean, p.var},
                   {{"training", int64_t(training)}, {"momentum", 0.1}, {"eps", 1e-5}})[0];
}

Tensor conv(OpId conv2d, const Tensor& x, const Tensor& w, int64_t stride, int64_t padding, int64_t groups) {
  return ops::call1(conv2d, {x, w},
                    {{"stride", Shape{stride, stride}}, {"padding", Shape{padding, padding}},
                     {"dilation", Shape{1, 1}}, {"groups", groups}});
}

int count_ops(const ir::Graph& g, OpId op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->op == op;
  return n;
}

// Folds `graph` and checks it against the unfolded graph on random inputs.
void fold_and_compare(ir::Graph& graph, const std::vector<Tensor>& inputs, double tol) {
  auto reference = graph.clone();
  passes::PipelineOptions options;
  options.verify = true;
  auto result = passes::run_pipeline(graph, "fold_batchnorm,dce", options);
  ASSERT_TRUE(result.converged) << result.report();
  auto want = trace::interpret(*reference, inputs);
  auto got = trace::interpret(graph, inputs);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(testing::all_close(got[i], want[i], tol, tol)) << "output " << i;
}

bool lookup(const char* name, OpId* op) { return ops::op_from_name(name, op); }

TEST(FoldBatchNorm, ConvBatchNormReluFoldsAndComputesTheSame) {
  OpId conv2d, bn;
  if (!lookup("conv2d", &conv2d) || !lookup("batch_norm", &bn)) GTEST_SKIP() << "conv2d/batch_norm not in the op table yet";
  for (DType dtype : {DType::Float64, DType::Float32}) {
    Generator gen(7);
    Tensor w = uniform({4, 3, 3, 3}, -1, 1, dtype, &gen), bias = uniform({4}, -1, 1, dtype, &gen);
    BatchNormParams p = random_batch_norm(4, dtype, 8);
    Tensor x = uniform({2, 3, 6, 5}, -2, 2, dtype, &gen);
    auto fn = [&](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
      Tensor y = conv(conv2d, in[0], w, 1, 1, 1) + bias.reshape({1, 4, 1, 1});
      return std::vector<Tensor>{relu(batch_norm_eval(bn, y, p))};
    };
    auto graph = trace::trace(fn, {x});
    ASSERT_EQ(count_ops(*graph, bn), 1);
    fold_and_compare(*graph, {x}, dtype == DType::Float64 ? 1e-12 : 1e-5);
    EXPECT_EQ(count_ops(*graph, bn), 0);
    EXPECT_EQ(count_ops(*graph, conv2d), 1);
    // The folded graph also matches eager execution.
    EXPECT_TRUE(testing::all_close(trace::interpret(*graph, {x})[0], fn({x}, {})[0], 1e-5, 1e-5));
  }
}

TEST(FoldBatchNorm, GroupedStridedConvWithoutBias) {
  OpId conv2d, bn;
  if (!lookup("conv2d", &conv2d) || !lookup("batch_norm", &bn)) GTEST_SKIP() << "conv2d/batch_norm not in the op table yet";
  Generator gen(9);
  Tensor w = uniform({6, 2, 3, 3}, -1, 1, DType::Float64, &gen);
  BatchNormParams p = random_batch_norm(6, DType::Float64, 10);
  Tensor x = uniform({1, 4, 7, 7}, -2, 2, DType::Float64, &gen);
  auto fn = [&](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
    return std::vector<Tensor>{batch_norm_eval(bn, conv(conv2d, in[0], w, 2, 1, 2), p)};
  };
  auto graph = trace::trace(fn, {x});
  fold_and_compare(*graph, {x}, 1e-12);
  EXPECT_EQ(count_ops(*graph, bn), 0);
}

TEST(FoldBatchNorm, LinearBatchNormFolds) {
  OpId matmul, bn;
  if (!lookup("matmul", &matmul) || !lookup("batch_norm", &bn)) GTEST_SKIP() << "matmul/batch_norm not in the op table yet";
  Generator gen(11);
  Tensor w = uniform({5, 3}, -1, 1, DType::Float64, &gen), bias = uniform({5}, -1, 1, DType::Float64, &gen);
  BatchNormParams p = random_batch_norm(5, DType::Float64, 12);
  Tensor x = uniform({4, 3}, -2, 2, DType::Float64, &gen);
  auto fn = [&](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
    Tensor y = ops::call1(matmul, {in[0], w.t()}) + bias;  // linear: x W^T + b
    return std::vector<Tensor>{relu(batch_norm_eval(bn, y, p))};
  };
  auto graph = trace::trace(fn, {x});
  fold_and_compare(*graph, {x}, 1e-12);
  EXPECT_EQ(count_ops(*graph, bn), 0);
  EXPECT_EQ(count_ops(*graph, matmul), 1);
}

TEST(FoldBatchNorm, LeavesTrainingModeParamsAndSharedConvAlone) {
  OpId conv2d, bn;
  if (!lookup("conv2d", &conv2d) || !lookup("batch_norm", &bn)) GTEST_SKIP() << "conv2d/batch_norm not in the op table yet";
  Generator gen(13);
  Tensor w = uniform({2, 1, 2, 2}, -1, 1, DType::Float64, &gen);
  Tensor x = uniform({2, 1, 4, 4}, -2, 2, DType::Float64, &gen);
  BatchNormParams p = random_batch_norm(2, DType::Float64, 14);
  // training mode: statistics of the batch, nothing to fold
  auto training = trace::trace([&](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
    return std::vector<Tensor>{batch_norm_eval(bn, conv(conv2d, in[0], w, 1, 0, 1), random_batch_norm(2, DType::Float64, 15), true)};
  }, {x});
  // the weight is a parameter (a graph input), not a constant
  auto with_param = trace::trace([&](const std::vector<Tensor>& in, const std::vector<Tensor>& params) {
    BatchNormParams q = p;
    q.gamma = params[0];
    return std::vector<Tensor>{batch_norm_eval(bn, conv(conv2d, in[0], w, 1, 0, 1), q)};
  }, {x}, {p.gamma});
  // the conv result is used twice
  auto shared = trace::trace([&](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
    Tensor y = conv(conv2d, in[0], w, 1, 0, 1);
    return std::vector<Tensor>{batch_norm_eval(bn, y, p), y};
  }, {x});
  for (ir::Graph* g : {training.get(), with_param.get(), shared.get()}) {
    auto result = passes::run_pipeline(*g, "fold_batchnorm");
    EXPECT_EQ(result.stats[0].changes, 0);
    EXPECT_EQ(count_ops(*g, bn), 1);
  }
}

}  // namespace
}  // namespace smelt
