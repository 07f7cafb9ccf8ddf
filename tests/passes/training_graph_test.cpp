// The "done when" for training graphs: a joint forward+backward graph traced from smelt's
// nn modules loses its dead and duplicate nodes under the default pipeline, and still computes
// the loss and the gradients of the unoptimized interpreter and of eager autograd.
#include <set>
#include <tuple>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass_manager.h"
#include "smelt/autograd.h"
#include "smelt/nn.h"
#include "support/check.h"
#include "trace/interpreter.h"
#include "trace/trace_module.h"

namespace smelt {
namespace {

using ops::OpId;
using testing::all_close;

struct TrainingCase {
  std::shared_ptr<nn::Sequential> model;
  Tensor x, target;  // target: Int64 class indices
};

constexpr double kWeightDecay = 1e-3;

// A training step's loss: cross entropy plus L2 weight decay on every parameter. It also computes
// the batch accuracy, as training loops do for logging; the joint graph returns only the loss
// and the gradients, so the accuracy nodes are dead. The weight decay p * p makes the backward
// compute g * p twice (mul's rule gives one product per operand): duplicate nodes.
Tensor training_loss(nn::Sequential& model, const Tensor& x, const Tensor& target, Tensor* accuracy) {
  Tensor logits = model(x);
  *accuracy = mean(cast(eq(argmax(logits, 1), target), logits.dtype()));
  Tensor loss = cross_entropy(logits, target);
  for (const Tensor& p : model.parameters()) loss = loss + sum(p * p) * kWeightDecay;
  return loss;
}

// The joint graph of a training step; the model's parameters are its named inputs.
trace::ModuleGraph trace_training_step(nn::Sequential& model, const Tensor& x, const Tensor& target) {
  auto step = [&model](const std::vector<Tensor>& in) {
    Tensor accuracy;
    return std::vector<Tensor>{training_loss(model, in[0], in[1], &accuracy)};
  };
  return trace::trace_module_joint(model, step, {x, target});
}

TrainingCase mlp() {
  manual_seed(3);
  auto model = std::make_shared<nn::Sequential>(std::vector<nn::ModulePtr>{
      std::make_shared<nn::Linear>(4, 8, true, DType::Float64), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(8, 8, true, DType::Float64), std::make_shared<nn::Tanh>(),
      std::make_shared<nn::Linear>(8, 3, true, DType::Float64)});
  Generator gen(4);
  return {model, uniform({6, 4}, -2, 2, DType::Float64, &gen), randint(0, 3, {6}, &gen)};
}

TrainingCase cnn() {
  manual_seed(5);
  nn::Conv2d::Options conv_options;
  conv_options.padding = {1, 1};
  conv_options.dtype = DType::Float64;
  auto model = std::make_shared<nn::Sequential>(std::vector<nn::ModulePtr>{
      std::make_shared<nn::Conv2d>(1, 4, std::vector<int64_t>{3, 3}, conv_options),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(std::vector<int64_t>{2, 2}),
      std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(36, 3, true, DType::Float64)});
  Generator gen(6);
  return {model, uniform({2, 1, 6, 6}, -2, 2, DType::Float64, &gen), randint(0, 3, {2}, &gen)};
}

// Nodes no graph output depends on.
int dead_nodes(const ir::Graph& g) {
  std::set<const ir::Value*> live(g.outputs().begin(), g.outputs().end());
  int dead = 0;
  for (auto it = g.nodes().rbegin(); it != g.nodes().rend(); ++it) {
    const ir::Node& n = **it;
    bool used = false;
    for (const ir::Value* out : n.outputs) used |= live.count(out) > 0;
    if (!used) {
      ++dead;
      continue;
    }
    live.insert(n.inputs.begin(), n.inputs.end());
  }
  return dead;
}

// Nodes that repeat an earlier node: same op, same input values, same attributes.
int duplicate_nodes(const ir::Graph& g) {
  std::set<std::tuple<ops::OpId, std::vector<const ir::Value*>, std::string>> seen;
  int duplicates = 0;
  for (const auto& n : g.nodes()) {
    std::string attrs;
    for (const auto& [name, value] : n->attrs.items()) attrs += name + "=" + ops::attr_value_str(value) + ";";
    auto key = std::make_tuple(n->op, std::vector<const ir::Value*>(n->inputs.begin(), n->inputs.end()), attrs);
    duplicates += !seen.insert(key).second;
  }
  return duplicates;
}

// Constants equal to an earlier constant (same dtype, shape and values): the zeros and ones
// that gradient rules create one by one.
int duplicate_constants(const ir::Graph& g) {
  std::set<std::tuple<DType, Shape, std::vector<double>>> seen;
  int duplicates = 0;
  for (const ir::Value* c : g.constants()) {
    duplicates += !seen.insert({c->meta.dtype, c->meta.shape, c->constant.to_vector()}).second;
  }
  return duplicates;
}

// permute(permute(x)): the backward transposing again the weight transpose of the forward.
int transposes_of_transposes(const ir::Graph& g) {
  int n = 0;
  for (const auto& node : g.nodes()) {
    const ir::Value* in = node->inputs.empty() ? nullptr : node->inputs[0];
    n += node->op == OpId::permute && in->producer && in->producer->op == OpId::permute;
  }
  return n;
}

// Nodes of op `op` reading `v` (a node reading it twice counts once).
int uses_by(const ir::Value* v, OpId op) {
  std::set<const ir::Node*> readers;
  for (const ir::Use& u : v->uses) {
    if (u.node->op == op) readers.insert(u.node);
  }
  return int(readers.size());
}

void check_training_graph(TrainingCase c) {
  std::vector<Tensor> params = c.model->parameters();
  trace::ModuleGraph step = trace_training_step(*c.model, c.x, c.target);
  ASSERT_TRUE(step.buffers.empty() && step.updated_buffers.empty());
  ASSERT_EQ(step.params.size(), params.size());
  const std::unique_ptr<ir::Graph>& graph = step.graph;
  ir::verify(*graph);
  const std::string before_text = ir::print(*graph);

  // What the trace leaves for the pipeline to clean up; each must be there for this test to mean
  // anything.
  EXPECT_GT(dead_nodes(*graph), 0) << before_text;
  EXPECT_GT(duplicate_nodes(*graph), 0) << before_text;
  EXPECT_GT(duplicate_constants(*graph), 0) << before_text;
  EXPECT_GT(transposes_of_transposes(*graph), 0) << before_text;
  const ir::Value* first_weight = graph->inputs()[2];  // after x and target
  EXPECT_EQ(first_weight->name, "0.weight");
  EXPECT_EQ(first_weight->kind, ir::ValueKind::Param);
  EXPECT_EQ(uses_by(first_weight, OpId::mul), 3) << "w * w, then g * w twice\n" << before_text;

  auto optimized = graph->clone();
  passes::PassOptions options;
  options.verify = true;
  auto result = passes::run_pipeline(*optimized, passes::kDefaultPipeline, options);
  ASSERT_TRUE(result.converged) << result.report();
  const std::string after_text = ir::print(*optimized);
  ::testing::Test::RecordProperty("nodes_before", int(graph->num_nodes()));
  ::testing::Test::RecordProperty("nodes_after", int(optimized->num_nodes()));
  const size_t removed = size_t(dead_nodes(*graph) + duplicate_nodes(*graph));
  EXPECT_LE(optimized->num_nodes() + removed, graph->num_nodes()) << result.report() << after_text;
  EXPECT_EQ(dead_nodes(*optimized), 0) << after_text;
  EXPECT_EQ(duplicate_nodes(*optimized), 0) << after_text;
  EXPECT_EQ(duplicate_constants(*optimized), 0) << after_text;
  EXPECT_EQ(transposes_of_transposes(*optimized), 0) << after_text;
  for (const ir::Value* p : optimized->inputs()) {
    EXPECT_LE(uses_by(p, OpId::permute), 1) << "one transpose per weight: " << ir::value_ref(p) << "\n" << after_text;
  }
  EXPECT_EQ(uses_by(optimized->inputs()[2], OpId::mul), 2) << "w * w, g * w once\n" << after_text;
  for (const auto& n : optimized->nodes()) EXPECT_NE(n->op, OpId::argmax) << "the accuracy is dead";

  // Same loss and gradients: optimized graph, unoptimized graph, eager autograd.
  std::vector<Tensor> inputs{c.x, c.target};
  inputs.insert(inputs.end(), params.begin(), params.end());
  inputs.push_back(ones({}, DType::Float64));  // the loss tangent
  std::vector<Tensor> reference = trace::interpret(*graph, inputs);
  std::vector<Tensor> got = trace::interpret(*optimized, inputs);
  c.model->zero_grad();
  Tensor accuracy;
  Tensor loss = training_loss(*c.model, c.x, c.target, &accuracy);
  loss.backward();
  ASSERT_EQ(got.size(), params.size() + 1);
  EXPECT_TRUE(all_close(got[0], reference[0], 1e-12, 1e-12));
  EXPECT_TRUE(all_close(got[0], loss, 1e-12, 1e-12));
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(all_close(got[i + 1], reference[i + 1], 1e-12, 1e-12)) << "gradient " << i;
    EXPECT_TRUE(all_close(got[i + 1], params[i].grad(), 1e-12, 1e-12)) << "gradient " << i;
  }
}

TEST(TrainingGraph, MlpLosesDeadAndDuplicateNodes) { check_training_graph(mlp()); }

TEST(TrainingGraph, CnnLosesDeadAndDuplicateNodes) { check_training_graph(cnn()); }

}  // namespace
}  // namespace smelt
