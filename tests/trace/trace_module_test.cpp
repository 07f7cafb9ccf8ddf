// trace_module: parameters and buffers as named graph inputs, updated buffers as graph outputs.
// The traced graph, run through ModuleGraph::run, must track eager execution bit for bit: outputs,
// running statistics, and parameters changed between runs (by an optimizer) without retracing.
#include <cmath>
#include <cstring>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/cse.h"
#include "passes/pass_manager.h"
#include "smelt/autograd.h"
#include "smelt/nn.h"
#include "smelt/optim.h"
#include "support/check.h"
#include "support/errors.h"
#include "trace/trace_module.h"

namespace smelt {
namespace {

using testing::same_bits;

std::shared_ptr<nn::Sequential> make_mlp(uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<nn::Sequential>(std::vector<nn::ModulePtr>{
      std::make_shared<nn::Linear>(5, 7), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(7, 3)});
}

// conv -> batch norm -> relu, the block whose training step updates buffers.
std::shared_ptr<nn::Sequential> make_conv_bn(uint64_t seed) {
  manual_seed(seed);
  nn::Conv2d::Options conv;
  conv.padding = {1, 1};
  return std::make_shared<nn::Sequential>(std::vector<nn::ModulePtr>{
      std::make_shared<nn::Conv2d>(2, 4, std::vector<int64_t>{3, 3}, conv),
      std::make_shared<nn::BatchNorm2d>(4), std::make_shared<nn::ReLU>()});
}

trace::ModuleFn forward_of(nn::Module& model) {
  return [&model](const std::vector<Tensor>& in) { return std::vector<Tensor>{model(in[0])}; };
}

void expect_same_state(nn::Module& got, nn::Module& want) {
  StateDict a = got.state_dict(), b = want.state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : b) EXPECT_TRUE(same_bits(a.at(name), t)) << name;
}

TEST(TraceModule, ParametersAndBuffersAreNamedInputsNotConstants) {
  auto model = make_conv_bn(1);
  auto mg = trace::trace_module(*model, forward_of(*model), {randn({2, 2, 5, 5})});
  ir::verify(*mg.graph);
  EXPECT_EQ(mg.buffers, (std::vector<std::string>{"1.running_mean", "1.running_var",
                                                  "1.num_batches_tracked"}));
  EXPECT_EQ(mg.params, (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias"}));
  const auto& inputs = mg.graph->inputs();
  ASSERT_EQ(inputs.size(), 1 + mg.buffers.size() + mg.params.size());
  for (size_t i = 0; i < mg.buffers.size(); ++i) {
    EXPECT_EQ(inputs[1 + i]->name, mg.buffers[i]);
    EXPECT_EQ(inputs[1 + i]->kind, ir::ValueKind::Input);
  }
  for (size_t i = 0; i < mg.params.size(); ++i) {
    EXPECT_EQ(inputs[1 + mg.buffers.size() + i]->name, mg.params[i]);
    EXPECT_EQ(inputs[1 + mg.buffers.size() + i]->kind, ir::ValueKind::Param);
  }
  // No constant holds (or views) the module's memory.
  for (const ir::Value* c : mg.graph->constants()) {
    for (const Tensor& t : model->parameters()) EXPECT_NE(c->constant.storage(), t.storage());
    for (const Tensor& t : model->buffers()) EXPECT_NE(c->constant.storage(), t.storage());
  }
  // Training mode: the three buffers batch norm replaces come back as outputs, after y.
  EXPECT_EQ(mg.num_outputs, 1u);
  EXPECT_EQ(mg.updated_buffers, mg.buffers);
  EXPECT_EQ(mg.graph->outputs().size(), 1 + mg.updated_buffers.size());
  // The names print, and the text parses back.
  const std::string text = ir::print(*mg.graph);
  EXPECT_NE(text.find("%0.weight"), std::string::npos) << text;
  EXPECT_NE(text.find("%1.running_mean"), std::string::npos) << text;
  EXPECT_NE(text.find("%1.running_mean.new"), std::string::npos) << text;
  EXPECT_NE(text.find("%1.num_batches_tracked.new"), std::string::npos) << text;
  EXPECT_EQ(ir::print(*ir::parse(text)), text);
}

TEST(TraceModule, MembersAreRestoredAfterTracingAndOnError) {
  auto model = make_conv_bn(2);
  auto* bn = dynamic_cast<nn::BatchNorm2d*>((*model)[1].get());
  const Tensor mean_before = bn->running_mean, weight_before = bn->weight;
  trace::trace_module(*model, forward_of(*model), {randn({2, 2, 4, 4})});
  EXPECT_EQ(bn->running_mean.impl(), mean_before.impl());
  EXPECT_EQ(bn->weight.impl(), weight_before.impl());
  EXPECT_TRUE(same_bits(bn->running_mean, zeros({4}))) << "tracing computes nothing";

  auto throwing = [&](const std::vector<Tensor>& in) -> std::vector<Tensor> {
    (*model)(in[0]);
    SMELT_CHECK(false) << "user error inside the traced function";
    return {};
  };
  testing::expect_error([&] { trace::trace_module(*model, throwing, {randn({2, 2, 4, 4})}); },
                        "user error inside");
  EXPECT_EQ(bn->running_mean.impl(), mean_before.impl());
  EXPECT_EQ(bn->weight.impl(), weight_before.impl());
}

TEST(TraceModule, MlpMatchesEagerInTrainAndEval) {
  for (bool training : {true, false}) {
    auto eager = make_mlp(3), traced = make_mlp(3);
    eager->train(training);
    traced->train(training);
    auto mg = trace::trace_module(*traced, forward_of(*traced), {randn({4, 5})});
    EXPECT_TRUE(mg.updated_buffers.empty());
    for (int step = 0; step < 3; ++step) {
      Tensor x = randn({4, 5});
      std::vector<Tensor> got = mg.run(*traced, {x});
      ASSERT_EQ(got.size(), 1u);
      NoGradGuard no_grad;
      EXPECT_TRUE(same_bits(got[0], (*eager)(x))) << "step " << step << " training " << training;
    }
  }
}

TEST(TraceModule, ConvBatchNormMatchesEagerOverSeveralStepsInTrainThenEval) {
  auto eager = make_conv_bn(4), traced = make_conv_bn(4);
  auto train_graph = trace::trace_module(*traced, forward_of(*traced), {randn({3, 2, 5, 5})});
  for (int step = 0; step < 4; ++step) {
    Tensor x = randn({3, 2, 5, 5});
    Tensor got = train_graph.run(*traced, {x})[0];
    NoGradGuard no_grad;
    EXPECT_TRUE(same_bits(got, (*eager)(x))) << "step " << step;
    expect_same_state(*traced, *eager);
  }
  auto* bn = dynamic_cast<nn::BatchNorm2d*>((*traced)[1].get());
  EXPECT_EQ(bn->num_batches_tracked.item(), 4.0);
  EXPECT_FALSE(same_bits(bn->running_var, ones({4}))) << "the statistics moved";

  eager->eval();
  traced->eval();
  auto eval_graph = trace::trace_module(*traced, forward_of(*traced), {randn({3, 2, 5, 5})});
  EXPECT_TRUE(eval_graph.updated_buffers.empty());
  for (int step = 0; step < 2; ++step) {
    Tensor x = randn({3, 2, 5, 5});
    Tensor got = eval_graph.run(*traced, {x})[0];
    NoGradGuard no_grad;
    EXPECT_TRUE(same_bits(got, (*eager)(x))) << "eval step " << step;
    expect_same_state(*traced, *eager);
  }
  // The training graph refuses to run an eval-mode module (it would update the statistics).
  testing::expect_error([&] { train_graph.run(*traced, {randn({3, 2, 5, 5})}); },
                        {"traced in training mode", "eval"});
}

// The point of inputs over constants: an optimizer step changes the parameters in place, and the
// next run reads them, with no retrace, also after the default pipeline (whose `fold` would have
// baked constant parameters into the graph).
TEST(TraceModule, OptimizerStepsAreSeenWithoutRetracing) {
  auto eager = make_conv_bn(5), traced = make_conv_bn(5);
  auto mg = trace::trace_module(*traced, forward_of(*traced), {randn({2, 2, 4, 4})});
  passes::run_pipeline(*mg.graph, passes::kDefaultPipeline);
  ir::verify(*mg.graph);
  optim::SGD eager_opt(eager->parameters(), {.lr = 0.1}), traced_opt(traced->parameters(), {.lr = 0.1});
  Tensor previous;
  for (int step = 0; step < 3; ++step) {
    Tensor x = randn({2, 2, 4, 4});
    Tensor got = mg.run(*traced, {x})[0];
    Tensor want;
    {
      NoGradGuard no_grad;
      want = (*eager)(x);
    }
    EXPECT_TRUE(same_bits(got, want)) << "step " << step;
    expect_same_state(*traced, *eager);
    // The same update on both: the gradient of an eager loss on a fixed probe.
    Tensor probe = randn({2, 2, 4, 4});
    for (auto* m : {eager.get(), traced.get()}) {
      m->eval();  // the probe must not move the running statistics
      sum((*m)(probe) * (*m)(probe)).backward();
      m->train();
    }
    eager_opt.step();
    traced_opt.step();
    eager_opt.zero_grad();
    traced_opt.zero_grad();
    if (previous.defined()) {
      EXPECT_FALSE(same_bits(got, previous)) << "the parameters changed";
    }
    previous = got;
  }
}

// The default pipeline (cse, fold, simplify, fold_batchnorm, ...) changes no bit of any result.
TEST(TraceModule, DefaultPipelineChangesNoResult) {
  for (bool training : {true, false}) {
    auto plain = make_conv_bn(6), optimized = make_conv_bn(6);
    plain->train(training);
    optimized->train(training);
    auto reference = trace::trace_module(*plain, forward_of(*plain), {randn({2, 2, 4, 4})});
    auto mg = trace::trace_module(*optimized, forward_of(*optimized), {randn({2, 2, 4, 4})});
    auto result = passes::run_pipeline(*mg.graph, passes::kDefaultPipeline);
    ASSERT_TRUE(result.converged) << result.report();
    ir::verify(*mg.graph);
    ASSERT_EQ(mg.graph->outputs().size(), reference.graph->outputs().size());
    for (int step = 0; step < 3; ++step) {
      Tensor x = randn({2, 2, 4, 4});
      EXPECT_TRUE(same_bits(mg.run(*optimized, {x})[0], reference.run(*plain, {x})[0]))
          << "step " << step << " training " << training << "\n" << ir::print(*mg.graph);
      expect_same_state(*optimized, *plain);
    }
  }
}

// Issue 7: "CSE on a graph with batch_norm in training mode: running_mean merged with a zero bias;
// results drift between runs; running stats never updated". The batch norm here has affine off,
// so its bias is a constant zeros(C), equal in bits to the initial running_mean.
TEST(TraceModule, CseOnBatchNormTrainingStepKeepsRunningStatistics) {
  auto make = [] {
    manual_seed(7);
    nn::BatchNorm2d::Options options;
    options.affine = false;
    return std::make_shared<nn::BatchNorm2d>(3, options);
  };
  auto eager = make(), traced = make();
  auto mg = trace::trace_module(*traced, forward_of(*traced), {randn({4, 3, 2, 2})});
  passes::cse(*mg.graph);
  passes::run_pipeline(*mg.graph, passes::kDefaultPipeline);
  ir::verify(*mg.graph);
  EXPECT_EQ(mg.updated_buffers.size(), 3u);
  for (int step = 0; step < 2; ++step) {
    Tensor x = randn({4, 3, 2, 2});
    Tensor got = mg.run(*traced, {x})[0];
    EXPECT_TRUE(same_bits(got, (*eager)(x))) << "step " << step;
    expect_same_state(*traced, *eager);
  }
  EXPECT_FALSE(same_bits(traced->running_mean, zeros({3}))) << "the running mean was updated";
  EXPECT_EQ(traced->num_batches_tracked.item(), 2.0);
}

TEST(TraceModule, TiedWeightsAreOneInput) {
  manual_seed(8);
  auto first = std::make_shared<nn::Linear>(4, 4, false), second = std::make_shared<nn::Linear>(4, 4, false);
  second->weight = first->weight;
  auto model = std::make_shared<nn::Sequential>(std::vector<nn::ModulePtr>{first, second});
  auto mg = trace::trace_module(*model, forward_of(*model), {randn({2, 4})});
  EXPECT_EQ(mg.params, (std::vector<std::string>{"0.weight"}));
  EXPECT_EQ(second->weight.impl(), first->weight.impl()) << "the tie survives the trace";
  Tensor x = randn({2, 4});
  NoGradGuard no_grad;
  EXPECT_TRUE(same_bits(mg.run(*model, {x})[0], (*model)(x)));
}

TEST(TraceModule, RunChecksTheModuleItIsGiven) {
  auto model = make_mlp(9);
  auto mg = trace::trace_module(*model, forward_of(*model), {randn({2, 5})});
  testing::expect_error([&] { mg.run(*model, {}); }, "traced with 1 inputs, got 0");
  auto other = std::make_shared<nn::Linear>(5, 3);
  testing::expect_error([&] { mg.run(*other, {randn({2, 5})}); }, {"no parameter '0.weight'"});
  auto wider = std::make_shared<nn::Sequential>(std::vector<nn::ModulePtr>{
      std::make_shared<nn::Linear>(5, 8), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(8, 3)});
  testing::expect_error([&] { mg.run(*wider, {randn({2, 5})}); }, {"'0.weight'", "retrace"});
}


// The joint graph of a training step: loss, one gradient per parameter, then the new running
// statistics, all as eager autograd and eager batch norm give them.
TEST(TraceModule, JointTrainingStepMatchesEagerAutograd) {
  auto eager = make_conv_bn(10), traced = make_conv_bn(10);
  auto loss_of = [](nn::Module& m) {
    return [&m](const std::vector<Tensor>& in) { return std::vector<Tensor>{mean(m(in[0]) * in[1])}; };
  };
  auto mg = trace::trace_module_joint(*traced, loss_of(*traced), {randn({2, 2, 4, 4}), randn({2, 4, 4, 4})});
  ir::verify(*mg.graph);
  EXPECT_EQ(mg.num_outputs, 1 + mg.params.size());
  EXPECT_EQ(mg.updated_buffers.size(), 3u);
  ASSERT_EQ(mg.graph->outputs().size(), mg.num_outputs + 3);
  for (int step = 0; step < 2; ++step) {
    Tensor x = randn({2, 2, 4, 4}), w = randn({2, 4, 4, 4});
    std::vector<Tensor> got = mg.run(*traced, {x, w});
    eager->zero_grad();
    Tensor loss = loss_of(*eager)({x, w})[0];
    loss.backward();
    EXPECT_TRUE(same_bits(got[0], loss)) << "step " << step;
    std::vector<Tensor> params = eager->parameters();
    ASSERT_EQ(got.size(), 1 + params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_TRUE(testing::all_close(got[1 + i], params[i].grad())) << mg.params[i];
    }
    expect_same_state(*traced, *eager);
  }
}

// Linear -> Dropout -> Linear: the traced graph draws its dropout mask from the default
// generator's state as a graph input and hands the advanced state back, so a seeded run draws
// the same masks as eager code and the next run (traced or eager) continues the same stream.
std::shared_ptr<nn::Sequential> make_dropout_mlp(uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<nn::Sequential>(std::vector<nn::ModulePtr>{
      std::make_shared<nn::Linear>(6, 8), std::make_shared<nn::Dropout>(0.5),
      std::make_shared<nn::Linear>(8, 2)});
}

TEST(TraceModule, DropoutDrawsTheEagerMasksAndAdvancesTheGenerator) {
  auto eager = make_dropout_mlp(3), traced = make_dropout_mlp(3);
  auto mg = trace::trace_module(*traced, forward_of(*traced), {randn({4, 6})});
  ir::verify(*mg.graph);
  EXPECT_TRUE(mg.random);
  EXPECT_EQ(mg.graph->inputs().size(), 1 + mg.params.size() + 1);
  EXPECT_EQ(mg.graph->inputs()[1 + mg.params.size()]->name, "rng_state");
  for (int step = 0; step < 3; ++step) {
    Tensor x = randn({4, 6});
    manual_seed(100 + step);
    // Traced then eager from the same seed: identical outputs and generator states.
    Tensor got = mg.run(*traced, {x})[0];
    const GeneratorState after_traced = default_generator().state();
    manual_seed(100 + step);
    Tensor want = (*eager)(x);
    EXPECT_TRUE(same_bits(got, want)) << "step " << step;
    EXPECT_TRUE(after_traced == default_generator().state()) << "step " << step;
    // A second traced run continues the stream: a different mask, as in eager code.
    EXPECT_FALSE(same_bits(mg.run(*traced, {x})[0], got)) << "step " << step;
  }
  // In eval mode dropout draws nothing: no generator state in the graph.
  traced->eval();
  auto eval_graph = trace::trace_module(*traced, forward_of(*traced), {randn({4, 6})});
  EXPECT_FALSE(eval_graph.random);
  EXPECT_EQ(eval_graph.graph->outputs().size(), 1u);
}

TEST(TraceModule, JointStepWithDropoutMatchesEagerAutograd) {
  auto eager = make_dropout_mlp(4), traced = make_dropout_mlp(4);
  auto loss_of = [](nn::Module& m) {
    return [&m](const std::vector<Tensor>& in) { return std::vector<Tensor>{mean(m(in[0]) * in[1])}; };
  };
  auto mg = trace::trace_module_joint(*traced, loss_of(*traced), {randn({4, 6}), randn({4, 2})});
  ir::verify(*mg.graph);
  EXPECT_TRUE(mg.random);
  for (int step = 0; step < 2; ++step) {
    Tensor x = randn({4, 6}), w = randn({4, 2});
    manual_seed(200 + step);
    std::vector<Tensor> got = mg.run(*traced, {x, w});
    manual_seed(200 + step);
    eager->zero_grad();
    Tensor loss = loss_of(*eager)({x, w})[0];
    loss.backward();
    EXPECT_TRUE(same_bits(got[0], loss)) << "step " << step;
    std::vector<Tensor> params = eager->parameters();
    ASSERT_EQ(got.size(), 1 + params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_TRUE(testing::all_close(got[1 + i], params[i].grad())) << mg.params[i];
    }
  }
}

// A forward that rebinds a parameter (instead of a buffer) cannot be captured faithfully.
class RebindsItsWeight : public nn::Module {
 public:
  RebindsItsWeight() {
    weight = ones({3});
    register_parameter("weight", weight);
  }
  Tensor forward(const Tensor& x) override {
    weight = weight * 2.0;
    return x * weight;
  }
  std::string type_name() const override { return "RebindsItsWeight"; }
  Tensor weight;
};

TEST(TraceModule, RebindingAParameterIsAClearError) {
  RebindsItsWeight module;
  const Tensor own = module.weight;
  testing::expect_error([&] { trace::trace_module(module, forward_of(module), {ones({3})}); },
                        {"replaced parameter 'weight'", "only buffers"});
  EXPECT_EQ(module.weight.impl(), own.impl());
}

}  // namespace
}  // namespace smelt
