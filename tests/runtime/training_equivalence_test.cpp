// Compiled training equals eager training (issue 23's tests): 100 steps of an MLP (SGD with
// momentum), a CNN (conv, BatchNorm in training mode, pooling, residual add; Adam) and a
// transformer encoder block (attention, layer norm, GELU MLP, residuals, dropout; AdamW), each at
// memory budgets 0, 0.5 and 1 (what the backward recomputes), compared with the same model trained
// eagerly: losses and every parameter after the steps, running statistics and the generator's
// state. Odd cases along the way: a last batch of another size, a frozen layer, a train/eval
// switch, a scheduler changing the rate every step. And the same with the optimizer's update
// (and gradient clipping) inside the plan: compile_step.
#include <cmath>
#include <functional>
#include <optional>
#include <vector>

#include "smelt/compile.h"
#include "smelt/smelt.h"
#include "support/check.h"

namespace smelt {
namespace {

using Loss = std::function<Tensor(nn::Module&, const Tensor&, const Tensor&)>;

// A residual convolution block: relu(bn(conv(x))) + x, then max pooling and a linear head.
class ResidualCnn : public nn::Module {
 public:
  ResidualCnn() {
    stem_ = register_module("stem", std::make_shared<nn::Conv2d>(1, 4, 3, nn::Conv2d::Options{.padding = {1, 1}}));
    // No bias before the batch norm (as ResNets have none): the norm removes it, so its gradient
    // is rounding noise that Adam, normalizing it, turns into full-size steps that differ
    // between any two summation orders (the running mean then drifts apart; found here).
    conv_ = register_module("conv", std::make_shared<nn::Conv2d>(4, 4, 3, nn::Conv2d::Options{.padding = {1, 1}, .bias = false}));
    bn_ = register_module("bn", std::make_shared<nn::BatchNorm2d>(4));
    head_ = register_module("head", std::make_shared<nn::Linear>(4 * 4 * 4, 3));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = relu((*stem_)(x));
    h = relu((*bn_)((*conv_)(h))) + h;
    return (*head_)(max_pool2d(h, 2).reshape({x.size(0), -1}));
  }
  std::string type_name() const override { return "ResidualCnn"; }

 private:
  std::shared_ptr<nn::Conv2d> stem_, conv_;
  std::shared_ptr<nn::BatchNorm2d> bn_;
  std::shared_ptr<nn::Linear> head_;
};

// A pre-norm encoder block: x + attention(ln(x)), then + mlp(ln(.)) with GELU and dropout.
class Encoder : public nn::Module {
 public:
  Encoder(int64_t d, int64_t heads) : d_(d), heads_(heads) {
    ln1_ = register_module("ln1", std::make_shared<nn::LayerNorm>(Shape{d}));
    qkv_ = register_module("qkv", std::make_shared<nn::Linear>(d, 3 * d));
    out_ = register_module("out", std::make_shared<nn::Linear>(d, d));
    ln2_ = register_module("ln2", std::make_shared<nn::LayerNorm>(Shape{d}));
    up_ = register_module("up", std::make_shared<nn::Linear>(d, 2 * d));
    down_ = register_module("down", std::make_shared<nn::Linear>(2 * d, d));
    drop_ = register_module("drop", std::make_shared<nn::Dropout>(0.1));
    head_ = register_module("head", std::make_shared<nn::Linear>(d, 3));
  }
  Tensor forward(const Tensor& x) override {  // (B, S, D) -> (B, 3)
    const int64_t b = x.size(0), s = x.size(1), hd = d_ / heads_;
    Tensor qkv = (*qkv_)((*ln1_)(x));
    auto heads = [&](int64_t part) {
      return qkv.slice(2, part * d_, (part + 1) * d_).reshape({b, s, heads_, hd}).permute({0, 2, 1, 3});
    };
    Tensor scores = matmul(heads(0), heads(1).transpose(2, 3)) * (1.0 / std::sqrt(double(hd)));
    Tensor context = matmul(softmax(scores, -1), heads(2)).permute({0, 2, 1, 3}).reshape({b, s, d_});
    Tensor y = x + (*out_)(context);
    y = y + (*drop_)((*down_)(gelu((*up_)((*ln2_)(y)))));
    return (*head_)(mean(y, {1}));
  }
  std::string type_name() const override { return "Encoder"; }

 private:
  int64_t d_, heads_;
  std::shared_ptr<nn::LayerNorm> ln1_, ln2_;
  std::shared_ptr<nn::Linear> qkv_, out_, up_, down_, head_;
  std::shared_ptr<nn::Dropout> drop_;
};

struct Case {
  std::function<std::shared_ptr<nn::Module>()> make;
  std::function<std::unique_ptr<optim::Optimizer>(nn::Module&)> optimizer;
  Shape input;  // per example
  double rtol;  // parameters after 100 steps (float32; the compiled kernels sum in their own order)
};

Tensor input_batch(const Shape& per_example, int64_t n, int step) {
  Shape shape{n};
  shape.insert(shape.end(), per_example.begin(), per_example.end());
  return testing::random_tensor(shape, -1, 1, uint64_t(1000 + step)).to(DType::Float32);
}

Tensor target_batch(int64_t n, int step) {
  std::vector<int64_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[size_t(i)] = (i * 7 + step) % 3;
  return from_vector(t, {n});
}

// 100 steps eager and compiled from the same initialization and generator state; every 10th step
// a batch of another size (the last batch of an epoch), step 50 in eval mode (then back), the
// rate changed every step.
// With `in_plan`, the step is compile_step's: the optimizer's update (and clipping) runs in the
// plan; eager clips with clip_grad_norm_ and steps.
void expect_compiled_equals_eager(const Case& c, double budget, const char* what,
                                  std::optional<StepOptions> in_plan = std::nullopt) {
  manual_seed(77);
  auto eager = c.make();
  manual_seed(77);
  auto compiled = c.make();
  auto opt_e = c.optimizer(*eager), opt_c = c.optimizer(*compiled);
  optim::StepLR sched_e(*opt_e, 1, 0.99), sched_c(*opt_c, 1, 0.99);
  CompileOptions o;
  o.backend = "interpreter";
  o.memory_budget = budget;
  auto loss_fn = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{cross_entropy((*compiled)(in[0]), in[1])}; };
  CompiledFunction step = in_plan ? compile_step(*compiled, loss_fn, *opt_c, *in_plan, o)
                                  : compile_training_step(*compiled, loss_fn, o);
  const double clip = in_plan ? in_plan->clip_grad_norm : 0;
  for (int s = 0; s < 100; ++s) {
    const int64_t n = s % 10 == 9 ? 3 : 8;
    const Tensor x = input_batch(c.input, n, s), t = target_batch(n, s);
    const bool train = s != 50;
    eager->train(train);
    compiled->train(train);
    const GeneratorState before = default_generator().state();
    opt_e->zero_grad();
    Tensor le = cross_entropy((*eager)(x), t);
    le.backward();
    const GeneratorState after_eager = default_generator().state();
    default_generator().set_state(before);  // the compiled step draws the same masks
    if (!in_plan) opt_c->zero_grad();
    Tensor lc = step({x, t})[0];
    EXPECT_EQ(default_generator().state().counter, after_eager.counter) << what << " step " << s;
    EXPECT_TRUE(testing::all_close(lc, le.detach(), 1e-4, 1e-5)) << what << " step " << s;
    if (clip > 0) optim::clip_grad_norm_(eager->parameters(), clip);
    opt_e->step();
    if (!in_plan) opt_c->step();
    sched_e.step();
    sched_c.step();
  }
  const auto pe = eager->named_parameters(), pc = compiled->named_parameters();
  for (size_t k = 0; k < pe.size(); ++k) {
    EXPECT_TRUE(testing::all_close(pc[k].second, pe[k].second, c.rtol, c.rtol * 0.1)) << what << " " << pe[k].first;
  }
  const auto be = eager->named_buffers(), bc = compiled->named_buffers();
  for (size_t k = 0; k < be.size(); ++k) {
    EXPECT_TRUE(testing::all_close(bc[k].second.to(DType::Float64), be[k].second.to(DType::Float64), 1e-4, 1e-5))
        << what << " buffer " << be[k].first;
  }
}

TEST(TrainingEquivalence, MlpSgdMomentumWithAFrozenLayer) {
  Case c{[] {
           auto m = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
               std::make_shared<nn::Linear>(10, 16), std::make_shared<nn::GELU>(), std::make_shared<nn::Linear>(16, 16),
               std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(16, 3)});
           std::vector<Tensor> params = m->parameters();
           params[2].set_requires_grad(false);  // the second layer's weight: frozen
           return std::static_pointer_cast<nn::Module>(m);
         },
         [](nn::Module& m) {
           std::vector<Tensor> trainable;
           for (const Tensor& p : m.parameters()) {
             if (p.requires_grad()) trainable.push_back(p);
           }
           return std::unique_ptr<optim::Optimizer>(new optim::SGD(trainable, optim::SGDOptions{.lr = 0.05, .momentum = 0.9}));
         },
         {10}, 1e-4};
  for (double budget : {0.0, 0.5, 1.0}) expect_compiled_equals_eager(c, budget, "mlp");
  expect_compiled_equals_eager(c, 0.0, "mlp, SGD in the plan", StepOptions{});
  expect_compiled_equals_eager(c, 1.0, "mlp, SGD in the plan, clipped", StepOptions{.clip_grad_norm = 0.5});
}

TEST(TrainingEquivalence, ResidualCnnWithBatchNormAdam) {
  Case c{[] { return std::static_pointer_cast<nn::Module>(std::make_shared<ResidualCnn>()); },
         [](nn::Module& m) {
           return std::unique_ptr<optim::Optimizer>(new optim::Adam(m.parameters(), optim::AdamOptions{.lr = 1e-2}));
         },
         {1, 8, 8}, 1e-3};
  for (double budget : {0.0, 1.0}) expect_compiled_equals_eager(c, budget, "cnn");
  expect_compiled_equals_eager(c, 0.0, "cnn, Adam in the plan, clipped", StepOptions{.clip_grad_norm = 1.0});
}

TEST(TrainingEquivalence, EncoderBlockWithDropoutAdamW) {
  Case c{[] { return std::static_pointer_cast<nn::Module>(std::make_shared<Encoder>(16, 2)); },
         [](nn::Module& m) {
           return std::unique_ptr<optim::Optimizer>(new optim::AdamW(m.parameters(), optim::AdamOptions{.lr = 3e-3}));
         },
         {6, 16}, 1e-3};
  for (double budget : {0.0, 1.0}) expect_compiled_equals_eager(c, budget, "encoder");
  expect_compiled_equals_eager(c, 1.0, "encoder, AdamW in the plan", StepOptions{});
}

}  // namespace
}  // namespace smelt
