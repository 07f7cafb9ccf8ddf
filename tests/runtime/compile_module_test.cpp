// compile_module and compile_training_step against eager execution of the same module: outputs,
// running statistics, gradients, and parameters an optimizer changes between calls.
#include <cmath>

#include "smelt/compile.h"
#include "smelt/nn.h"
#include "smelt/optim.h"
#include "support/check.h"
#include "support/helpers.h"

namespace smelt {
namespace {

using testing::interpreter_backend;

// conv -> batch norm -> relu -> flatten -> linear: every kind of group, buffers updated in
// training mode.
std::shared_ptr<nn::Sequential> make_model(uint64_t seed) {
  manual_seed(seed);
  nn::Conv2d::Options conv;
  conv.padding = {1, 1};
  return std::make_shared<nn::Sequential>(std::vector<nn::ModulePtr>{
      std::make_shared<nn::Conv2d>(2, 4, std::vector<int64_t>{3, 3}, conv),
      std::make_shared<nn::BatchNorm2d>(4), std::make_shared<nn::ReLU>(), std::make_shared<nn::Flatten>(),
      std::make_shared<nn::Linear>(4 * 5 * 5, 3)});
}

void expect_same_state(nn::Module& got, nn::Module& want) {
  StateDict a = got.state_dict(), b = want.state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : b) EXPECT_TRUE(testing::all_close(a.at(name), t, 1e-5, 1e-6)) << name;
}

TEST(CompileModule, ForwardMatchesEagerInTrainAndEvalAndUpdatesRunningStatistics) {
  auto eager = make_model(1), compiled_model = make_model(1);
  CompiledFunction f = compile_module(
      *compiled_model, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{(*compiled_model)(in[0])}; },
      interpreter_backend());
  for (int step = 0; step < 3; ++step) {
    if (step == 2) {
      eager->eval();
      compiled_model->eval();
    }
    Tensor x = randn({2, 2, 5, 5});
    Tensor got = f({x})[0];
    Tensor want = (*eager)(x);
    EXPECT_TRUE(testing::all_close(got, want, 1e-5, 1e-5)) << "step " << step;
    expect_same_state(*compiled_model, *eager);
  }
  EXPECT_EQ(f.num_compiles(), 2);  // training, then eval
  EXPECT_EQ(f.recompile_reasons().back(), "module mode: training -> eval");
}

TEST(CompileModule, ASubmoduleSwitchedToEvalRecompiles) {
  // Found in review: only the root's mode keyed the plans, so a BatchNorm frozen on its own kept
  // normalizing with batch statistics and updating its running statistics.
  auto eager = make_model(6), compiled_model = make_model(6);
  CompiledFunction f = compile_module(
      *compiled_model, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{(*compiled_model)(in[0])}; },
      interpreter_backend());
  Tensor x = randn({2, 2, 5, 5});
  f({x});
  (*eager)(x);
  eager->named_children()[1].second->eval();
  compiled_model->named_children()[1].second->eval();
  Tensor y = randn({2, 2, 5, 5});
  EXPECT_TRUE(testing::all_close(f({y})[0], (*eager)(y), 1e-5, 1e-5));
  expect_same_state(*compiled_model, *eager);
  EXPECT_EQ(f.num_compiles(), 2);
  EXPECT_EQ(f.recompile_reasons().back(), "a submodule's mode (training / eval) changed");
}

TEST(CompileModule, TrainingStepMatchesEagerBackwardAcrossOptimizerSteps) {
  auto eager = make_model(2), compiled_model = make_model(2);
  auto loss_of = [](nn::Module& m) {
    return [&m](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{cross_entropy(m(in[0]), in[1])};
    };
  };
  CompiledFunction step_fn = compile_training_step(*compiled_model, loss_of(*compiled_model), interpreter_backend());
  optim::SGDOptions sgd;
  sgd.lr = 0.1;
  optim::SGD eager_opt(eager->parameters(), sgd), compiled_opt(compiled_model->parameters(), sgd);
  for (int step = 0; step < 3; ++step) {
    Tensor x = randn({4, 2, 5, 5});
    Tensor target = from_vector(std::vector<int64_t>{0, 2, 1, 2}, {4});
    eager_opt.zero_grad();
    compiled_opt.zero_grad();
    Tensor want = loss_of(*eager)({x, target})[0];
    want.backward();
    std::vector<Tensor> got = step_fn({x, target});
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(testing::all_close(got[0], want, 1e-5, 1e-6)) << "step " << step;
    std::vector<Tensor> pe = eager->parameters(), pc = compiled_model->parameters();
    for (size_t i = 0; i < pe.size(); ++i) {
      EXPECT_TRUE(testing::all_close(pc[i].grad(), pe[i].grad(), 1e-4, 1e-5)) << "param " << i << " step " << step;
    }
    eager_opt.step();
    compiled_opt.step();
    expect_same_state(*compiled_model, *eager);
  }
  EXPECT_EQ(step_fn.num_compiles(), 1);  // the optimizer's updates reach the plan without a recompile
}

TEST(CompileModule, GradientsAccumulateLikeBackward) {
  auto model = make_model(3);
  auto loss_fn = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{mean((*model)(in[0]))}; };
  CompiledFunction step_fn = compile_training_step(*model, loss_fn, interpreter_backend());
  model->eval();  // no running-statistic updates: two identical steps
  Tensor x = randn({2, 2, 5, 5});
  step_fn({x});
  std::vector<Tensor> once;
  for (const Tensor& p : model->parameters()) once.push_back(p.grad().clone());
  step_fn({x});
  std::vector<Tensor> params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(testing::all_close(params[i].grad(), once[i] * 2.0, 1e-6, 1e-7)) << "param " << i;
  }
}

// Found in review: the joint graph gave every parameter a gradient, so a frozen parameter
// (requires_grad false) and one the loss never reads got a .grad (zeros) where eager backward()
// leaves it undefined, and an optimizer then moved them (weight decay, momentum).
TEST(CompileModule, FrozenAndUnusedParametersGetNoGradientAsInEagerBackward) {
  auto make = [] {
    manual_seed(8);
    return std::make_shared<nn::Sequential>(std::vector<nn::ModulePtr>{
        std::make_shared<nn::Linear>(6, 5), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(5, 3),
        std::make_shared<nn::Linear>(3, 3)});  // the last layer is never called
  };
  auto eager = make(), compiled_model = make();
  auto loss_of = [](nn::Sequential& m) {
    return [&m](const std::vector<Tensor>& in) {
      Tensor h = (*m[2])((*m[1])((*m[0])(in[0])));
      return std::vector<Tensor>{mean(h * h)};
    };
  };
  CompiledFunction step_fn = compile_training_step(*compiled_model, loss_of(*compiled_model), interpreter_backend());
  auto param = [](nn::Module& m, const std::string& name) -> Tensor& {
    for (const auto& [n, slot] : m.named_slots(true)) {
      if (n == name) return *slot;
    }
    throw std::runtime_error("no parameter " + name);
  };
  for (nn::Sequential* m : {eager.get(), compiled_model.get()}) param(*m, "0.bias").set_requires_grad(false);
  Tensor x = randn({4, 6});
  Tensor want = loss_of(*eager)({x})[0];
  want.backward();
  Tensor got = step_fn({x})[0];
  EXPECT_TRUE(testing::all_close(got, want, 1e-6, 1e-7));
  for (const auto& [name, p] : eager->named_parameters()) {
    const Tensor g = param(*compiled_model, name).grad();
    EXPECT_EQ(g.defined(), p.grad().defined()) << name;
    if (g.defined() && p.grad().defined()) {
      EXPECT_TRUE(testing::all_close(g, p.grad(), 1e-5, 1e-6)) << name;
    }
  }
  EXPECT_FALSE(param(*compiled_model, "0.bias").grad().defined());
  EXPECT_FALSE(param(*compiled_model, "3.weight").grad().defined());
  // Unfreezing changes the graph (one more gradient): a new plan, and the reason says why.
  param(*compiled_model, "0.bias").set_requires_grad(true);
  step_fn({x});
  EXPECT_TRUE(param(*compiled_model, "0.bias").grad().defined());
  EXPECT_EQ(step_fn.num_compiles(), 2);
  EXPECT_EQ(step_fn.recompile_reasons().back(), "parameter '0.bias' requires_grad: false -> true");
}

// Every parameter frozen: eager backward() has nothing to differentiate and fails; so does the
// compiled step, with a message saying why, and the module is left as it was.
TEST(CompileModule, ATrainingStepWithEveryParameterFrozenIsAnError) {
  auto model = make_model(9);
  for (const auto& [name, slot] : model->named_slots(true)) slot->set_requires_grad(false);
  auto loss_fn = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{mean((*model)(in[0]))}; };
  CompiledFunction step_fn = compile_training_step(*model, loss_fn, interpreter_backend());
  const StateDict before = model->state_dict();
  Tensor x = randn({2, 2, 5, 5});
  EXPECT_THROW(loss_fn({x})[0].backward(), Error);
  model->load_state_dict(before);
  try {
    step_fn({x});
    ADD_FAILURE() << "a training step without trainable parameters ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not depend on any parameter"), std::string::npos) << e.what();
  }
  for (const auto& [name, slot] : model->named_slots(true)) EXPECT_FALSE(slot->grad().defined()) << name;
}

// The bar for the memory planner on real models: the planned arena within 10% of the
// lower bound (the most bytes live at one step), far below one allocation per buffer.
TEST(CompileModule, ArenaOfTrainingStepsIsNearTheLowerBound) {
  auto cnn = make_model(4);
  manual_seed(5);
  auto mlp = std::make_shared<nn::Sequential>(std::vector<nn::ModulePtr>{
      std::make_shared<nn::Linear>(64, 128), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(128, 128),
      std::make_shared<nn::GELU>(), std::make_shared<nn::Linear>(128, 3)});
  Tensor target = from_vector(std::vector<int64_t>{0, 2, 1, 2, 1, 0, 2, 1}, {8});
  struct Case {
    std::shared_ptr<nn::Sequential> model;
    Tensor x;
  };
  for (const Case& c : {Case{cnn, randn({8, 2, 5, 5})}, Case{mlp, randn({8, 64})}}) {
    nn::Module& m = *c.model;
    CompiledFunction step = compile_training_step(
        m, [&m](const std::vector<Tensor>& in) { return std::vector<Tensor>{cross_entropy(m(in[0]), in[1])}; },
        interpreter_backend());
    step({c.x, target});
    const CompileReport& r = step.report();
    EXPECT_GT(r.lower_bound_bytes, 0);
    EXPECT_LE(double(r.arena_bytes), 1.10 * double(r.lower_bound_bytes)) << r.plan;
    EXPECT_LT(r.arena_bytes, r.naive_bytes) << r.plan;
  }
}

}  // namespace
}  // namespace smelt
