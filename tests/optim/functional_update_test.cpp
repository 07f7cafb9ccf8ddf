// Optimizer::update (the rule as smelt ops, which compile_step traces into its plan) against
// Optimizer::step (the fused kernels of kernels/optim.h): every option of SGD, Adam and AdamW,
// float32 and float64, five steps from the same start, with a scheduler changing the rate.
#include <cmath>
#include <functional>
#include <memory>

#include "smelt/optim.h"
#include "support/check.h"
#include "support/errors.h"

namespace smelt {
namespace {

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

// Runs five updates both ways on two copies of the same parameters; the functional side keeps its
// own state buffers and step counts, as a compiled step does (ensure_state, param_state).
void expect_update_matches_step(const MakeOptimizer& make, DType dtype, const std::string& what) {
  std::vector<Tensor> fused, functional;
  for (int i = 0; i < 2; ++i) {
    Tensor p = testing::random_tensor({5, 7}, -1, 1, uint64_t(10 + i)).to(dtype);
    Tensor a = p.clone(), b = p.clone();
    a.set_requires_grad();
    b.set_requires_grad();
    fused.push_back(a);
    functional.push_back(b);
  }
  auto eager = make(fused), traced = make(functional);
  for (int step = 0; step < 5; ++step) {
    for (auto* opt : {eager.get(), traced.get()}) opt->set_lr(0.1 / (1 + step));
    for (size_t i = 0; i < fused.size(); ++i) {
      Tensor g = testing::random_tensor({5, 7}, -2, 2, uint64_t(100 * step + i)).to(dtype);
      fused[i].set_grad(g);
      optim::Optimizer::ParamState& state = traced->param_state(i);
      const bool first = state.step == 0;
      traced->ensure_state(i);
      std::vector<Tensor> scalars;
      for (double v : traced->update_scalars(traced->group_of(i), state.step + 1))
        scalars.push_back(scalar_tensor(v, dtype));
      std::vector<Tensor> out;
      {
        NoGradGuard no_grad;
        out = traced->update(functional[i], g, state.buffers, scalars, traced->group_of(i), first);
      }
      ASSERT_EQ(out.size(), 1 + state.buffers.size()) << what;
      NoGradGuard no_grad;
      functional[i].copy_(out[0]);
      for (size_t b = 0; b < state.buffers.size(); ++b) state.buffers[b].copy_(out[1 + b]);
      ++state.step;
    }
    eager->step();
    // Same operations in the same order: equal up to the rounding of a contracted multiply-add.
    const double tol = dtype == DType::Float32 ? 2e-6 : 1e-14;
    for (size_t i = 0; i < fused.size(); ++i) {
      EXPECT_TRUE(testing::all_close(functional[i], fused[i], tol, tol)) << what << " step " << step;
    }
  }
  const StateDict a = eager->state_dict(), b = traced->state_dict();
  for (const auto& [key, value] : a) {
    ASSERT_TRUE(b.count(key)) << what << " " << key;
    EXPECT_TRUE(testing::all_close(b.at(key).to(DType::Float64), value.to(DType::Float64), 1e-5, 1e-6))
        << what << " " << key;
  }
}

TEST(FunctionalUpdate, SgdEveryOption) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (double momentum : {0.0, 0.9}) {
      for (double dampening : {0.0, 0.3}) {
        for (bool nesterov : {false, true}) {
          if (nesterov && (momentum == 0 || dampening != 0)) continue;
          for (bool maximize : {false, true}) {
            for (double wd : {0.0, 0.01}) {
              optim::SGDOptions o{.lr = 0.1, .momentum = momentum, .dampening = dampening,
                                  .weight_decay = wd, .nesterov = nesterov, .maximize = maximize};
              expect_update_matches_step(
                  [&](std::vector<Tensor> p) { return std::make_unique<optim::SGD>(std::move(p), o); }, dtype,
                  "SGD momentum " + std::to_string(momentum) + " dampening " + std::to_string(dampening) +
                      (nesterov ? " nesterov" : "") + (maximize ? " maximize" : "") + " wd " + std::to_string(wd));
            }
          }
        }
      }
    }
  }
}

TEST(FunctionalUpdate, AdamAndAdamWEveryOption) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (bool decoupled : {false, true}) {
      for (bool amsgrad : {false, true}) {
        for (bool maximize : {false, true}) {
          for (double wd : {0.0, 0.05}) {
            optim::AdamOptions o{.lr = 0.1, .weight_decay = wd, .amsgrad = amsgrad, .maximize = maximize};
            expect_update_matches_step(
                [&](std::vector<Tensor> p) -> std::unique_ptr<optim::Optimizer> {
                  if (decoupled) return std::make_unique<optim::AdamW>(std::move(p), o);
                  return std::make_unique<optim::Adam>(std::move(p), o);
                },
                dtype,
                std::string(decoupled ? "AdamW" : "Adam") + (amsgrad ? " amsgrad" : "") +
                    (maximize ? " maximize" : "") + " wd " + std::to_string(wd));
          }
        }
      }
    }
  }
}

// AMSGrad's running maximum propagates NaN, as torch.maximum does in PyTorch's rule: the fused
// kernel kept the old maximum where the new second moment was NaN (std::max), the traced rule did
// not (found by fuzz --training with a NaN batch).
TEST(FunctionalUpdate, AmsgradMaximumPropagatesNaN) {
  Tensor p = from_vector(std::vector<float>{1, 2, 3}, {3});
  p.set_requires_grad();
  optim::Adam adam({p}, optim::AdamOptions{.lr = 0.1, .amsgrad = true});
  p.set_grad(from_vector(std::vector<float>{0.5f, 0.5f, 0.5f}, {3}));
  adam.step();
  p.set_grad(from_vector(std::vector<float>{NAN, 0.25f, 0.25f}, {3}));
  adam.step();
  const std::vector<double> vmax = adam.param_state(0).buffers[2].to_vector();
  EXPECT_TRUE(std::isnan(vmax[0]));
  EXPECT_FALSE(std::isnan(vmax[1]));
  EXPECT_TRUE(std::isnan(p.detach().to_vector()[0]));
}

// What the update compiles in: a change of any constant is a different key; the step count and
// the rate are not in it (they are the update's scalar inputs).
TEST(FunctionalUpdate, ConstantsKeyTheUpdateButTheRateDoesNot) {
  Tensor p = testing::random_tensor({3}, -1, 1, 1);
  p.set_requires_grad();
  optim::SGD sgd({p}, optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  const std::string before = sgd.update_constants(sgd.group_of(0), false);
  sgd.set_lr(0.5);
  EXPECT_EQ(sgd.update_constants(sgd.group_of(0), false), before);
  EXPECT_EQ(sgd.update_constants(sgd.group_of(0), true), before);  // undampened: the same rule
  sgd.param_groups()[0].weight_decay = 0.1;
  EXPECT_NE(sgd.update_constants(sgd.group_of(0), false), before);
  optim::SGD dampened({p}, optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.5});
  EXPECT_NE(dampened.update_constants(dampened.group_of(0), true),
            dampened.update_constants(dampened.group_of(0), false));
  optim::Adam adam({p});
  EXPECT_EQ(adam.update_scalars(adam.group_of(0), 1).size(), 3u);
  EXPECT_NE(adam.update_scalars(adam.group_of(0), 1)[0], adam.update_scalars(adam.group_of(0), 2)[0]);
  testing::expect_error([&] { adam.group_of(1); }, {"parameter 1 out of range"});
}

}  // namespace
}  // namespace smelt
