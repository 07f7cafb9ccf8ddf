// Batch-norm folding on traced inference graphs: Conv -> BatchNorm(eval) -> ReLU and
// Linear -> BatchNorm(eval) fold into the contraction's weights and compute the same values.
#include "ir/graph.h"
#include "ops/dispatch.h"
#include "passes/pass_manager.h"
#include "ir/printer.h"
#include "smelt/nn.h"
#include "support/check.h"
#include "support/helpers.h"
#include "trace/interpreter.h"
#include "trace/trace.h"

namespace smelt {
namespace {

using testing::count_ops;

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

// Folds `graph` and checks it against the unfolded graph on random inputs.
void fold_and_compare(ir::Graph& graph, const std::vector<Tensor>& inputs, double tol) {
  auto reference = graph.clone();
  passes::PassOptions options;
  options.verify = true;
  auto result = passes::run_pipeline(graph, "fold_batchnorm,dce", options);
  ASSERT_TRUE(result.converged) << result.report();
  auto want = trace::interpret(*reference, inputs);
  auto got = trace::interpret(graph, inputs);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(testing::all_close(got[i], want[i], tol, tol)) << "output " << i;
}

TEST(FoldBatchNorm, ConvBatchNormReluFoldsAndComputesTheSame) {
  const OpId conv2d = OpId::conv2d, bn = OpId::batch_norm;
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
  const OpId conv2d = OpId::conv2d, bn = OpId::batch_norm;
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
  const OpId matmul = OpId::matmul, bn = OpId::batch_norm;
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
  const OpId conv2d = OpId::conv2d, bn = OpId::batch_norm;
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
  for (ir::Graph* g : {training.get(), with_param.get()}) {
    auto result = passes::run_pipeline(*g, "fold_batchnorm");
    EXPECT_EQ(result.stats[0].changes, 0);
    EXPECT_EQ(count_ops(*g, bn), 1);
  }
}

// Where the weights cannot take it (the conv result is read elsewhere too, the batch norm follows
// a concat of two convs or a pooling, as in DenseNet and UNets), an eval batch norm becomes a
// per-channel x * s + t: the conv is not computed twice, and the values stay the same.
TEST(FoldBatchNorm, OtherEvalBatchNormsBecomeAScaleAndShift) {
  const OpId conv2d = OpId::conv2d, bn = OpId::batch_norm;
  for (DType dtype : {DType::Float64, DType::Float32}) {
    SCOPED_TRACE(dtype_name(dtype));
    Generator gen(13);
    Tensor w = uniform({2, 1, 2, 2}, -1, 1, dtype, &gen), w2 = uniform({2, 1, 2, 2}, -1, 1, dtype, &gen);
    Tensor x = uniform({2, 1, 5, 5}, -2, 2, dtype, &gen);
    BatchNormParams p = random_batch_norm(2, dtype, 14), q = random_batch_norm(4, dtype, 16);
    auto shared = trace::trace([&](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
      Tensor y = conv(conv2d, in[0], w, 1, 0, 1);
      return std::vector<Tensor>{batch_norm_eval(bn, y, p), y};
    }, {x});
    auto after_cat = trace::trace([&](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
      Tensor a = conv(conv2d, in[0], w, 1, 0, 1), b = conv(conv2d, in[0], w2, 1, 0, 1);
      return std::vector<Tensor>{relu(batch_norm_eval(bn, cat({a, b}, 1), q))};
    }, {x});
    auto after_pool = trace::trace([&](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
      return std::vector<Tensor>{batch_norm_eval(bn, max_pool2d(conv(conv2d, in[0], w, 1, 0, 1), {2, 2}), p)};
    }, {x});
    for (ir::Graph* g : {shared.get(), after_cat.get(), after_pool.get()}) {
      const int convs = count_ops(*g, conv2d);
      fold_and_compare(*g, {x}, dtype == DType::Float64 ? 1e-12 : 1e-5);
      EXPECT_EQ(count_ops(*g, bn), 0);
      EXPECT_EQ(count_ops(*g, OpId::mul), 1);
      EXPECT_EQ(count_ops(*g, conv2d), convs);
    }
  }
}

// A degenerate batch norm (a negative running variance: a NaN scale; a NaN mean; an infinite
// gamma) is left alone by both rewrites: x * s + t would give inf - inf = NaN where the eager
// kernel gives an infinity, or NaN where it gives a number.
TEST(FoldBatchNorm, DegenerateStatisticsStayABatchNorm) {
  const OpId conv2d = OpId::conv2d, bn = OpId::batch_norm;
  Generator gen(31);
  Tensor w = uniform({2, 1, 2, 2}, -1, 1, DType::Float32, &gen);
  Tensor x = uniform({2, 1, 5, 5}, -2, 2, DType::Float32, &gen);
  for (int which = 0; which < 3; ++which) {
    SCOPED_TRACE(which);
    BatchNormParams p = random_batch_norm(2, DType::Float32, 32);
    if (which == 0) p.var = from_vector(std::vector<double>{1.0, -1.0}, {2}, DType::Float32);
    if (which == 1) p.mean = from_vector(std::vector<double>{0.0, std::nan("")}, {2}, DType::Float32);
    if (which == 2) p.gamma = from_vector(std::vector<double>{1.0, INFINITY}, {2}, DType::Float32);
    for (bool after_conv : {true, false}) {
      auto g = trace::trace([&](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
        Tensor y = conv(conv2d, in[0], w, 1, 0, 1);
        return std::vector<Tensor>{batch_norm_eval(bn, after_conv ? y : max_pool2d(y, {2, 2}), p)};
      }, {x});
      auto reference = g->clone();
      auto result = passes::run_pipeline(*g, "fold_batchnorm");
      EXPECT_EQ(result.stats[0].changes, 0);
      EXPECT_EQ(count_ops(*g, bn), 1);
      EXPECT_TRUE(testing::identical(trace::interpret(*g, {x})[0], trace::interpret(*reference, {x})[0]));
    }
  }
}

// The "done when": nn::Conv2d -> nn::BatchNorm2d (eval, with trained running statistics)
// -> nn::ReLU, traced with its parameters captured as constants, becomes exactly
// conv2d(x, folded W) -> add(folded bias) -> relu under the default pipeline (smelt's conv2d op
// has no bias operand: the bias is the add), with the same results as the module run eagerly.
TEST(FoldBatchNorm, TracedConvBatchNormReluModulesBecomeConvRelu) {
  for (DType dtype : {DType::Float64, DType::Float32}) {
    for (bool conv_bias : {true, false}) {
      manual_seed(21);
      nn::Conv2d::Options conv_options;
      conv_options.padding = {1, 1};
      conv_options.bias = conv_bias;
      conv_options.dtype = dtype;
      nn::BatchNorm2d::Options bn_options;
      bn_options.dtype = dtype;
      auto model = std::make_shared<nn::Sequential>(std::vector<nn::ModulePtr>{
          std::make_shared<nn::Conv2d>(3, 4, std::vector<int64_t>{3, 3}, conv_options),
          std::make_shared<nn::BatchNorm2d>(4, bn_options), std::make_shared<nn::ReLU>()});
      auto* conv_module = dynamic_cast<nn::Conv2d*>((*model)[0].get());
      auto* bn_module = dynamic_cast<nn::BatchNorm2d*>((*model)[1].get());
      // Trained-looking statistics and affine parameters (not the identity of a fresh module).
      BatchNormParams p = random_batch_norm(4, dtype, 22);
      {
        NoGradGuard no_grad;
        bn_module->weight.copy_(p.gamma);
        bn_module->bias.copy_(p.beta);
        bn_module->running_mean.copy_(p.mean);
        bn_module->running_var.copy_(p.var);
      }
      model->eval();
      Generator gen(23);
      Tensor x = uniform({2, 3, 6, 5}, -2, 2, dtype, &gen);
      // No params argument: the module's tensors become constants of the graph.
      auto graph = trace::trace([&](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
        return std::vector<Tensor>{(*model)(in[0])};
      }, {x});
      ASSERT_EQ(count_ops(*graph, OpId::batch_norm), 1) << ir::print(*graph);

      auto reference = graph->clone();
      passes::PassOptions options;
      options.verify = true;
      auto result = passes::run_pipeline(*graph, passes::kDefaultPipeline, options);
      ASSERT_TRUE(result.converged) << result.report();
      std::vector<OpId> ops_left;
      for (const auto& n : graph->nodes()) ops_left.push_back(n->op);
      EXPECT_EQ(ops_left, (std::vector<OpId>{OpId::conv2d, OpId::add, OpId::relu})) << ir::print(*graph);
      const ir::Node& conv_node = *graph->nodes().front();
      ASSERT_EQ(conv_node.op, OpId::conv2d);
      // The weight is a new constant: each output channel's filter scaled by
      // gamma / sqrt(running_var + eps).
      ASSERT_EQ(conv_node.inputs[1]->kind, ir::ValueKind::Constant);
      Tensor scale = p.gamma / sqrt(p.var + bn_module->options.eps);
      Tensor want_weight = conv_module->weight.detach() * scale.reshape({4, 1, 1, 1});
      const double tol = dtype == DType::Float64 ? 1e-12 : 1e-5;
      EXPECT_TRUE(testing::all_close(conv_node.inputs[1]->constant, want_weight, tol, tol));
      EXPECT_EQ(graph->nodes().back()->outputs[0], graph->outputs()[0]);

      Tensor eager;
      {
        NoGradGuard no_grad;
        eager = (*model)(x);
      }
      EXPECT_TRUE(testing::all_close(trace::interpret(*graph, {x})[0], eager, tol, tol));
      EXPECT_TRUE(testing::all_close(trace::interpret(*graph, {x})[0], trace::interpret(*reference, {x})[0], tol, tol));
    }
  }
}

}  // namespace
}  // namespace smelt
