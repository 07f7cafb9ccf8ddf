// compile_step: the optimizer's update inside the training step's plan. The parameters and the
// optimizer's state are updated in place (their memory is the plan's), the rate and the step count
// are read on every call, gradient accumulation, clipping, parameters the optimizer does not
// hold, and the errors. (The long equivalence runs with BatchNorm and dropout are in
// training_equivalence_test.cpp.)
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "smelt/compile.h"
#include "smelt/smelt.h"
#include "support/check.h"
#include "support/errors.h"

namespace smelt {
namespace {

std::shared_ptr<nn::Sequential> mlp() {
  return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(12, 32), std::make_shared<nn::Tanh>(), std::make_shared<nn::Linear>(32, 4)});
}

Tensor batch(int64_t n, uint64_t seed) { return testing::random_tensor({n, 12}, -1, 1, seed).to(DType::Float32); }
Tensor targets(int64_t n, int step) {
  std::vector<int64_t> t(size_t(n), 0);
  for (int64_t i = 0; i < n; ++i) t[size_t(i)] = (i + step) % 4;
  return from_vector(t, {n});
}

void expect_same_parameters(nn::Module& a, nn::Module& b, double rtol, const std::string& what) {
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t k = 0; k < pa.size(); ++k) {
    EXPECT_TRUE(testing::all_close(pb[k].second, pa[k].second, rtol, rtol * 0.1)) << what << " " << pa[k].first;
  }
}

CompileOptions options() {
  CompileOptions o;
  o.backend = "interpreter";
  return o;
}

TEST(CompileStep, UpdatesParametersAndStateInTheirOwnMemory) {
  manual_seed(3);
  auto model = mlp();
  optim::Adam opt(model->parameters(), optim::AdamOptions{.lr = 1e-2});
  CompiledFunction step = compile_step(
      *model, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{cross_entropy((*model)(in[0]), in[1])}; },
      opt, {}, options());
  std::vector<const void*> memory;
  std::vector<uint64_t> versions;
  for (const Tensor& p : model->parameters()) {
    memory.push_back(p.raw_data());
    versions.push_back(p.storage()->version());
  }
  const Tensor before = model->parameters()[0].clone();
  for (int s = 0; s < 3; ++s) step({batch(16, uint64_t(s)), targets(16, s)});
  const std::vector<Tensor> params = model->parameters();
  for (size_t k = 0; k < params.size(); ++k) {
    EXPECT_EQ(params[k].raw_data(), memory[k]) << "parameter " << k << " was replaced, not updated";
    EXPECT_GT(params[k].storage()->version(), versions[k]) << "parameter " << k;
    EXPECT_FALSE(params[k].grad().defined()) << "the step's gradients live in its arena";
    EXPECT_EQ(opt.param_state(k).step, 3);
  }
  EXPECT_FALSE(testing::all_close(params[0], before, 0, 0)) << "the step did not move the weight";
  const std::string plan = step.report().plan;
  // Four parameters, two Adam moments each: twelve inputs updated, each by its own kernel.
  EXPECT_NE(plan.find("inputs updated: 12, 12 in place"), std::string::npos) << plan;
  EXPECT_EQ(step.num_compiles(), 1);
}

// The rate (a scheduler's) and the step count are inputs: no recompile; a constant is compiled in.
TEST(CompileStep, SchedulersNeedNoRecompileButNewConstantsDo) {
  manual_seed(4);
  auto eager = mlp();
  manual_seed(4);
  auto model = mlp();
  optim::SGD opt_e(eager->parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
  optim::SGD opt(model->parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
  optim::CosineAnnealingLR sched_e(opt_e, 10), sched(opt, 10);
  CompiledFunction step = compile_step(
      *model, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{cross_entropy((*model)(in[0]), in[1])}; },
      opt, {}, options());
  for (int s = 0; s < 12; ++s) {
    if (s == 8) {  // weight decay from now on: compiled in
      opt_e.param_groups()[0].weight_decay = 1e-3;
      opt.param_groups()[0].weight_decay = 1e-3;
    }
    const Tensor x = batch(8, uint64_t(s)), t = targets(8, s);
    opt_e.zero_grad();
    cross_entropy((*eager)(x), t).backward();
    opt_e.step();
    sched_e.step();
    step({x, t});
    sched.step();
  }
  expect_same_parameters(*eager, *model, 1e-5, "cosine rate, nesterov");
  EXPECT_EQ(step.num_compiles(), 2);
  ASSERT_EQ(step.recompile_reasons().size(), 1u);
  EXPECT_NE(step.recompile_reasons()[0].find("weight_decay"), std::string::npos) << step.recompile_reasons()[0];
}

// Accumulation over 3 micro-batches (the loss scaled by 1/3), clipped: as eager backward() three
// times, clip_grad_norm_, step, zero_grad.
TEST(CompileStep, AccumulatesMicroBatchesAndClips) {
  manual_seed(5);
  auto eager = mlp();
  manual_seed(5);
  auto model = mlp();
  optim::AdamW opt_e(eager->parameters(), optim::AdamOptions{.lr = 1e-2});
  optim::AdamW opt(model->parameters(), optim::AdamOptions{.lr = 1e-2});
  auto loss_of = [](nn::Module& m, const Tensor& x, const Tensor& t) { return cross_entropy(m.forward(x), t) * (1.0 / 3); };
  CompiledFunction step = compile_step(
      *model, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{loss_of(*model, in[0], in[1])}; }, opt,
      StepOptions{.clip_grad_norm = 0.05, .accumulation_steps = 3}, options());
  for (int s = 0; s < 12; ++s) {
    const Tensor x = batch(6, uint64_t(40 + s)), t = targets(6, s);
    Tensor le = loss_of(*eager, x, t);
    le.backward();
    Tensor lc = step({x, t})[0];
    EXPECT_TRUE(testing::all_close(lc, le.detach(), 1e-5, 1e-6)) << "call " << s;
    if (s % 3 != 2) {  // accumulating: the gradient so far is in .grad, as eager's
      for (size_t k = 0; k < model->parameters().size(); ++k) {
        EXPECT_TRUE(testing::all_close(model->parameters()[k].grad(), eager->parameters()[k].grad(), 1e-4, 1e-6));
      }
      continue;
    }
    const double total = optim::clip_grad_norm_(eager->parameters(), 0.05);
    EXPECT_GT(total, 0.05) << "the test means to clip";
    opt_e.step();
    opt_e.zero_grad();
    for (const Tensor& p : model->parameters()) EXPECT_FALSE(p.grad().defined());
    expect_same_parameters(*eager, *model, 1e-4, "after call " + std::to_string(s));
  }
  EXPECT_EQ(opt.param_state(0).step, 4);
}

// Parameters the optimizer does not hold get their gradients in .grad; frozen ones nothing.
TEST(CompileStep, OtherParametersKeepEagerGradients) {
  manual_seed(6);
  auto model = mlp();
  std::vector<Tensor> params = model->parameters();
  params[1].set_requires_grad(false);  // the first bias: frozen
  optim::SGD opt({params[2], params[3]}, optim::SGDOptions{.lr = 0.1});  // the head only
  const Tensor w0 = params[0].clone(), b0 = params[1].clone(), w1 = params[2].clone();
  CompiledFunction step = compile_step(
      *model, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{cross_entropy((*model)(in[0]), in[1])}; },
      opt, {}, options());
  const Tensor x = batch(8, 9), t = targets(8, 0);
  step({x, t});
  EXPECT_TRUE(testing::all_close(params[0], w0, 0, 0)) << "not the optimizer's: unchanged";
  ASSERT_TRUE(params[0].grad().defined()) << "but it has its gradient, as backward() gives it";
  EXPECT_FALSE(params[1].grad().defined());
  EXPECT_TRUE(testing::all_close(params[1], b0, 0, 0));
  EXPECT_FALSE(testing::all_close(params[2], w1, 0, 0));
  // The gradient equals eager's.
  manual_seed(6);
  auto eager = mlp();
  eager->parameters()[1].set_requires_grad(false);
  cross_entropy((*eager)(x), t).backward();
  EXPECT_TRUE(testing::all_close(params[0].grad(), eager->parameters()[0].grad(), 1e-5, 1e-7));
}

// A batch holding NaN or inf: the total norm is not finite, so clipping leaves the gradients as
// they are (as clip_grad_norm_ does) and the parameters go NaN where eager's do, no further.
TEST(CompileStep, NonFiniteGradientsUnderClippingAsEager) {
  for (float bad : {NAN, INFINITY}) {
    manual_seed(11);
    auto eager = mlp();
    manual_seed(11);
    auto model = mlp();
    optim::SGD opt_e(eager->parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
    optim::SGD opt(model->parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
    CompiledFunction step = compile_step(
        *model, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{cross_entropy((*model)(in[0]), in[1])}; },
        opt, StepOptions{.clip_grad_norm = 0.5}, options());
    for (int s = 0; s < 3; ++s) {
      Tensor x = batch(4, uint64_t(60 + s));
      if (s == 1) x = x * from_vector(std::vector<float>{1, 1, 1, 1}, {4, 1}).where(
                              from_vector(std::vector<float>{1, 0, 1, 1}, {4, 1}) > 0.5f,
                              full({4, 1}, bad));  // row 1 scaled by the bad value
      const Tensor t = targets(4, s);
      opt_e.zero_grad();
      cross_entropy((*eager)(x), t).backward();
      optim::clip_grad_norm_(eager->parameters(), 0.5);
      opt_e.step();
      step({x, t});
    }
    const auto pe = eager->named_parameters(), pc = model->named_parameters();
    bool any_nan = false;
    for (size_t k = 0; k < pe.size(); ++k) {
      const std::vector<double> a = pc[k].second.to_vector(), b = pe[k].second.to_vector();
      for (size_t i = 0; i < a.size(); ++i) {
        any_nan = any_nan || std::isnan(b[i]);
        ASSERT_EQ(std::isnan(a[i]), std::isnan(b[i])) << pe[k].first << "[" << i << "] bad " << bad;
        if (!std::isnan(b[i])) {
          EXPECT_NEAR(a[i], b[i], 1e-5 * (1 + std::abs(b[i]))) << pe[k].first;
        }
      }
    }
    EXPECT_TRUE(any_nan) << "the bad value " << bad << " reached no parameter: the case tests nothing";
  }
}

TEST(CompileStep, Errors) {
  auto model = mlp();
  Tensor stranger = testing::random_tensor({3}, -1, 1, 1);
  stranger.set_requires_grad();
  optim::SGD opt({model->parameters()[0], stranger});
  auto loss = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{cross_entropy((*model)(in[0]), in[1])}; };
  CompiledFunction step = compile_step(*model, loss, opt, {}, options());
  testing::expect_error([&] { step({batch(4, 1), targets(4, 0)}); },
                        {"compile_step", "optimizer's parameter 1", "not a parameter of the module"});
  optim::SGD fine(model->parameters());
  testing::expect_error([&] { compile_step(*model, loss, fine, StepOptions{.accumulation_steps = 0}); },
                        {"accumulation_steps must be >= 1"});
  testing::expect_error([&] { compile_step(*model, loss, fine, StepOptions{.clip_grad_norm = -1}); },
                        {"clip_grad_norm"});
}

// A .grad left by eager code is added in before the update (as backward() then step() would).
TEST(CompileStep, AddsAGradientAlreadyThere) {
  manual_seed(7);
  auto eager = mlp();
  manual_seed(7);
  auto model = mlp();
  optim::SGD opt_e(eager->parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.5, .dampening = 0.25});
  optim::SGD opt(model->parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.5, .dampening = 0.25});
  CompiledFunction step = compile_step(
      *model, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{cross_entropy((*model)(in[0]), in[1])}; },
      opt, {}, options());
  for (int s = 0; s < 4; ++s) {
    const Tensor x = batch(5, uint64_t(70 + s)), t = targets(5, s);
    const Tensor extra = batch(3, uint64_t(80 + s));
    sum((*eager)(extra)).backward();
    sum((*model)(extra)).backward();
    cross_entropy((*eager)(x), t).backward();
    opt_e.step();
    opt_e.zero_grad();
    step({x, t});
  }
  expect_same_parameters(*eager, *model, 1e-5, "dampened momentum, gradients already there");
  // The first update of a dampened momentum is another rule: compiled once more, and said why.
  EXPECT_EQ(step.num_compiles(), 2);
}

// One block registered twice (shared weights, as ALBERT shares its layers): the trace binds the
// same member slot under two names and must leave the module's own tensors in it (a symbolic
// weight was left behind once, found by the training fuzzer).
TEST(CompileStep, ASubmoduleRegisteredTwiceSharesItsWeights) {
  auto build = [] {
    manual_seed(8);
    auto block = std::make_shared<nn::Linear>(12, 12);
    return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
        block, std::make_shared<nn::Tanh>(), block, std::make_shared<nn::Linear>(12, 4)});
  };
  auto eager = build(), model = build();
  auto unique = [](nn::Module& m) {
    std::vector<Tensor> out;
    for (const Tensor& p : m.parameters()) {
      bool seen = false;
      for (const Tensor& q : out) seen = seen || q.impl() == p.impl();
      if (!seen) out.push_back(p);
    }
    return out;
  };
  optim::SGD opt_e(unique(*eager), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  optim::SGD opt(unique(*model), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  CompiledFunction step = compile_step(
      *model, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{cross_entropy((*model)(in[0]), in[1])}; },
      opt, {}, options());
  for (int s = 0; s < 3; ++s) {
    const Tensor x = batch(6, uint64_t(90 + s)), t = targets(6, s);
    opt_e.zero_grad();
    cross_entropy((*eager)(x), t).backward();
    opt_e.step();
    step({x, t});
    for (const Tensor& p : model->parameters()) ASSERT_TRUE(p.storage()) << "a symbolic tensor left in the module";
  }
  expect_same_parameters(*eager, *model, 1e-5, "shared block");
}


// StepOptions::reduce_gradients is traced between the backward and the update (data-parallel
// training all-reduces there): here it scales each gradient and adds the parameter's index, which
// eager code does by hand between backward() and step(). Its mistakes are errors.
TEST(CompileStep, ReduceGradientsRunsBetweenBackwardAndUpdate) {
  manual_seed(12);
  auto eager = mlp();
  manual_seed(12);
  auto model = mlp();
  optim::SGD opt_e(eager->parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  optim::SGD opt(model->parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  auto loss = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{cross_entropy((*model)(in[0]), in[1])}; };
  StepOptions step_options;
  int traced = 0;
  step_options.reduce_gradients = [&traced](const std::vector<Tensor>& grads) {
    ++traced;
    std::vector<Tensor> out;
    for (size_t i = 0; i < grads.size(); ++i) out.push_back(grads[i] * 0.25 + double(i) * 1e-3);
    return out;
  };
  CompiledFunction step = compile_step(*model, loss, opt, step_options, options());
  for (int s = 0; s < 4; ++s) {
    const Tensor x = batch(8, uint64_t(120 + s)), t = targets(8, s);
    opt_e.zero_grad();
    cross_entropy((*eager)(x), t).backward();
    const std::vector<Tensor> params = eager->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      Tensor p = params[i];
      p.set_grad(p.grad() * 0.25 + double(i) * 1e-3);
    }
    opt_e.step();
    step({x, t});
  }
  expect_same_parameters(*eager, *model, 1e-5, "reduced gradients");
  EXPECT_EQ(traced, 1) << "traced once, replayed after";

  for (int mistake = 0; mistake < 2; ++mistake) {
    StepOptions bad;
    bad.reduce_gradients = [mistake](const std::vector<Tensor>& grads) {
      if (mistake == 0) return std::vector<Tensor>(grads.begin(), grads.end() - 1);
      std::vector<Tensor> out = grads;
      out[1] = sum(out[1]);
      return out;
    };
    manual_seed(12);
    auto m = mlp();
    optim::SGD o(m->parameters(), optim::SGDOptions{.lr = 0.1});
    CompiledFunction f = compile_step(
        *m, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{cross_entropy((*m)(in[0]), in[1])}; }, o,
        bad, options());
    testing::expect_error([&] { f({batch(4, 1), targets(4, 0)}); },
                          mistake == 0 ? std::initializer_list<std::string>{"returned 3 tensors for 4 gradients"}
                                       : std::initializer_list<std::string>{"for gradient 1", "each must keep"});
  }
}

}  // namespace
}  // namespace smelt
