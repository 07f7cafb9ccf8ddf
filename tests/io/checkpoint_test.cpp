// Saving and loading module and optimizer state through safetensors files.
#include "support/check.h"
#include "support/errors.h"
#include "support/temp_dir.h"

namespace smelt {
namespace {

using testing::all_close;
using testing::expect_error;

using CheckpointTest = testing::TempDirTest;

// Linear + BatchNorm-like buffers without needing the ops of other branches.
std::shared_ptr<nn::Sequential> model(uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<nn::Sequential>(
      std::vector<nn::ModulePtr>{std::make_shared<nn::Linear>(4, 3), std::make_shared<nn::ReLU>(),
                                 std::make_shared<nn::BatchNorm2d>(3)});
}

void expect_same_state(const nn::Module& a, const nn::Module& b) {
  StateDict sa = a.state_dict(), sb = b.state_dict();
  ASSERT_EQ(sa.size(), sb.size());
  for (const auto& [name, t] : sa) EXPECT_TRUE(all_close(t, sb.at(name), 0, 0)) << name;
}

TEST_F(CheckpointTest, ModuleRoundTrip) {
  auto a = model(1), b = model(2);
  {
    NoGradGuard no_grad;
    static_cast<nn::BatchNorm2d&>(*(*a)[2]).num_batches_tracked.fill_(17);
  }
  io::save_module(path("m.safetensors"), *a, {{"epoch", "3"}});
  io::load_module(path("m.safetensors"), *b);
  expect_same_state(*a, *b);
  EXPECT_EQ(static_cast<nn::BatchNorm2d&>(*(*b)[2]).num_batches_tracked.item(), 17.0);
}

TEST_F(CheckpointTest, ModuleMismatchNamesFileAndKey) {
  auto a = model(1);
  io::save_module(path("m.safetensors"), *a);
  nn::Sequential other(std::vector<nn::ModulePtr>{std::make_shared<nn::Linear>(4, 3)});
  expect_error([&] { io::load_module(path("m.safetensors"), other); },
               {"load_module", "m.safetensors", "unexpected keys", "'2.running_mean'"});
  nn::Sequential wider(std::vector<nn::ModulePtr>{std::make_shared<nn::Linear>(5, 3)});
  expect_error([&] { io::load_module(path("m.safetensors"), wider, /*strict=*/false); },
               {"'0.weight'", "(3, 4)", "(3, 5)"});
}

void train_steps(nn::Module& m, optim::Optimizer& opt, int steps) {
  for (int s = 0; s < steps; ++s) {
    Generator gen(uint64_t(100 + s));
    Tensor x = uniform({5, 4}, -1, 1, DType::Float32, &gen);
    auto& lin = static_cast<nn::Linear&>(*static_cast<nn::Sequential&>(m)[0]);
    opt.zero_grad();
    Tensor loss = sum(relu(lin(x)) * relu(lin(x)));
    loss.backward();
    opt.step();
  }
}

TEST_F(CheckpointTest, OptimizerRoundTripResumesIdentically) {
  auto a = model(1);
  optim::AdamW opt_a(a->parameters(), {.lr = 0.01});
  train_steps(*a, opt_a, 3);
  io::save_module(path("m.safetensors"), *a);
  io::save_optimizer(path("o.safetensors"), opt_a);

  auto b = model(9);
  optim::AdamW opt_b(b->parameters(), {.lr = 0.5});
  io::load_module(path("m.safetensors"), *b);
  io::load_optimizer(path("o.safetensors"), opt_b);
  EXPECT_EQ(opt_b.param_groups()[0].lr, 0.01);
  train_steps(*a, opt_a, 2);
  train_steps(*b, opt_b, 2);
  expect_same_state(*a, *b);
}

TEST_F(CheckpointTest, CombinedCheckpointIsAllOrNothing) {
  auto a = model(1);
  optim::SGD opt_a(a->parameters(), {.lr = 0.1, .momentum = 0.9});
  train_steps(*a, opt_a, 2);
  io::save_checkpoint(path("c.safetensors"), *a, opt_a, {{"step", "2"}});

  auto b = model(5);
  optim::SGD opt_b(b->parameters(), {.lr = 0.1, .momentum = 0.9});
  io::Metadata meta;
  io::load_checkpoint(path("c.safetensors"), *b, opt_b, &meta);
  expect_same_state(*a, *b);
  EXPECT_EQ(meta.at("step"), "2");

  // An optimizer that cannot take the state (different groups) leaves the module as it was.
  auto c = model(6);
  StateDict before = c->state_dict();
  for (auto& [_, t] : before) t = t.clone();
  optim::SGD opt_c(
      std::vector<optim::ParamGroupOptions>{{{c->parameters()[0]}}, {{c->parameters()[1]}}},
      {.lr = 0.1, .momentum = 0.9});
  expect_error([&] { io::load_checkpoint(path("c.safetensors"), *c, opt_c); },
               {"load_checkpoint", "c.safetensors", "parameter groups"});
  for (const auto& [name, t] : c->state_dict())
    EXPECT_TRUE(all_close(t, before.at(name), 0, 0)) << name;
}

TEST_F(CheckpointTest, ForeignEntriesInACheckpointAreErrors) {
  StateDict sd;
  sd["model.0.weight"] = zeros({3, 4});
  sd["stray"] = zeros({1});
  io::save_safetensors(path("c.safetensors"), sd);
  auto m = model(1);
  optim::SGD opt(m->parameters());
  expect_error([&] { io::load_checkpoint(path("c.safetensors"), *m, opt); }, {"'stray'"});
}

}  // namespace
}  // namespace smelt
