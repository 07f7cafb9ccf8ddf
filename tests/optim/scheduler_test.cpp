// Learning-rate schedules against PyTorch's formulas.
#include <cmath>

#include "support/check.h"
#include "support/errors.h"

namespace smelt {
namespace {

using testing::expect_error;

Tensor leaf() {
  Tensor p = zeros({1});
  p.set_requires_grad();
  return p;
}

// The lr of group 0 after construction (epoch 0) and after each of `steps` steps.
std::vector<double> lr_sequence(optim::Optimizer& opt, optim::LRScheduler& sched, int steps) {
  std::vector<double> out{opt.param_groups()[0].lr};
  for (int i = 0; i < steps; ++i) {
    sched.step();
    out.push_back(opt.param_groups()[0].lr);
  }
  return out;
}

void expect_sequence(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "epoch " << i;
}

TEST(StepLR, DecaysEveryStepSize) {
  optim::SGD opt({leaf()}, {.lr = 0.8});
  optim::StepLR sched(opt, 3, 0.5);
  expect_sequence(lr_sequence(opt, sched, 9), {0.8, 0.8, 0.8, 0.4, 0.4, 0.4, 0.2, 0.2, 0.2, 0.1});
  EXPECT_EQ(sched.last_epoch(), 9);
}

TEST(CosineAnnealingLR, FollowsTheClosedForm) {
  optim::SGD opt({leaf()}, {.lr = 0.1});
  optim::CosineAnnealingLR sched(opt, 10, 0.001);
  std::vector<double> want;
  for (int e = 0; e <= 14; ++e)
    want.push_back(0.001 + (0.1 - 0.001) * (1 + std::cos(M_PI * e / 10.0)) / 2);
  std::vector<double> got = lr_sequence(opt, sched, 14);
  expect_sequence(got, want);
  EXPECT_NEAR(got[10], 0.001, 1e-15);  // the minimum at t_max
  EXPECT_NEAR(got[5], (0.1 + 0.001) / 2, 1e-15);
}

TEST(LinearLR, WarmsUpLinearly) {
  optim::SGD opt({leaf()}, {.lr = 1.0});
  optim::LinearLR sched(opt, 0.25, 1.0, 4);
  expect_sequence(lr_sequence(opt, sched, 6), {0.25, 0.4375, 0.625, 0.8125, 1.0, 1.0, 1.0});
}

TEST(SequentialLR, WarmupThenCosine) {
  optim::AdamW opt({leaf()}, {.lr = 0.01});
  optim::LinearLR warmup(opt, 0.1, 1.0, 3);
  optim::CosineAnnealingLR cosine(opt, 5);
  optim::SequentialLR sched(opt, {&warmup, &cosine}, {3});
  std::vector<double> want = {0.001, 0.004, 0.007};
  for (int e = 0; e <= 6; ++e) want.push_back(0.01 * (1 + std::cos(M_PI * e / 5.0)) / 2);
  expect_sequence(lr_sequence(opt, sched, 9), want);
  expect_error(
      [&] {
        optim::SequentialLR(opt, {&warmup, &cosine}, {});
      },
      {"SequentialLR", "milestone"});
}

TEST(LRScheduler, EveryGroupScalesFromItsOwnBase) {
  Tensor a = leaf(), b = leaf();
  optim::SGD opt(
      std::vector<optim::ParamGroupOptions>{{{a}, 1.0, std::nullopt}, {{b}, 0.1, std::nullopt}});
  optim::StepLR sched(opt, 1, 0.5);
  sched.step();
  sched.step();
  EXPECT_EQ(sched.get_last_lr(), (std::vector<double>{0.25, 0.025}));
  EXPECT_EQ(opt.param_groups()[1].initial_lr, 0.1);
  // Resuming at an epoch applies it directly.
  sched.set_epoch(1);
  EXPECT_EQ(sched.get_last_lr(), (std::vector<double>{0.5, 0.05}));
  // initial_lr travels with the optimizer's state dict.
  EXPECT_EQ(opt.state_dict()["param_groups.1.initial_lr"].item(), 0.1);
}

TEST(LRScheduler, BadArgumentsAreErrors) {
  optim::SGD opt({leaf()});
  expect_error([&] { optim::StepLR(opt, 0); }, {"StepLR", "step_size"});
  expect_error([&] { optim::CosineAnnealingLR(opt, 0); }, {"CosineAnnealingLR", "t_max"});
  expect_error([&] { optim::LinearLR(opt, 0.0); }, {"LinearLR", "start_factor"});
  optim::StepLR ok(opt, 2);
  expect_error([&] { ok.set_epoch(-1); }, {"set_epoch"});
}

}  // namespace
}  // namespace smelt
