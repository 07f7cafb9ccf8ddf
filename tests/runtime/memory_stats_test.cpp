// smelt::memory_stats and LeakScope (include/smelt/memory.h): storages, bytes and autograd nodes
// are counted as they come and go; a leaked tensor is reported with the op that allocated it;
// and 1,000 training steps, eager and compiled (a training step, and a compiled forward with an
// eager loss), leave the counts where the first steps left them.
#include <vector>

#include "smelt/compile.h"
#include "smelt/memory.h"
#include "smelt/smelt.h"
#include "support/check.h"

namespace smelt {
namespace {

TEST(MemoryStats, CountsStoragesBytesAndNodes) {
  const MemoryStats before = memory_stats();
  {
    Tensor x = zeros({16, 16});
    const MemoryStats now = memory_stats();
    EXPECT_EQ(now.storages - before.storages, 1);
    EXPECT_EQ(now.bytes - before.bytes, 16 * 16 * 4);
    Tensor w = ones({16}).set_requires_grad();
    Tensor y = x * w;  // one node (mul) and w's accumulator once backward asks for it
    EXPECT_GE(memory_stats().autograd_nodes - before.autograd_nodes, 1);
  }
  const MemoryStats after = memory_stats();
  EXPECT_EQ(after.storages, before.storages);
  EXPECT_EQ(after.bytes, before.bytes);
  EXPECT_EQ(after.autograd_nodes, before.autograd_nodes);
}

TEST(MemoryStats, ALeakScopeNamesWhatItLeaked) {
  set_alloc_tracking(true);
  static std::vector<Tensor> kept;  // the leak
  std::string report;
  {
    LeakScope scope;
    Tensor a = randn({32, 32});
    for (int i = 0; i < 3; ++i) {
      Tensor t = a * 2.0;  // freed at once
      if (i == 1) kept.push_back(matmul(a, a));
    }
    EXPECT_EQ(scope.grown().storages, 2);  // a and the kept product, until a goes
    report = scope.report();
  }
  set_alloc_tracking(false);
  EXPECT_NE(report.find("by matmul"), std::string::npos) << report;
  EXPECT_NE(report.find(std::to_string(32 * 32 * 4) + " bytes"), std::string::npos) << report;
  // nothing alive from a scope that keeps nothing
  LeakScope clean;
  { Tensor t = randn({8}) + 1.0; }
  EXPECT_EQ(clean.report(), "");
  kept.clear();
}

std::shared_ptr<nn::Sequential> small_mlp() {
  manual_seed(11);
  return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(8, 16), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(16, 4)});
}

// Runs `step` 1,000 times; the counts after step 10 and after step 1,000 are equal.
void expect_no_growth(const std::function<void()>& step, const char* what) {
  for (int i = 0; i < 10; ++i) step();
  const MemoryStats warm = memory_stats();
  for (int i = 10; i < 1000; ++i) step();
  const MemoryStats end = memory_stats();
  EXPECT_EQ(end.storages, warm.storages) << what;
  EXPECT_EQ(end.bytes, warm.bytes) << what;
  EXPECT_EQ(end.autograd_nodes, warm.autograd_nodes) << what;
}

TEST(MemoryStats, ThousandTrainingStepsLeakNothing) {
  const Tensor x = randn({12, 8});
  const Tensor target = randint(0, 4, {12});
  {  // eager
    auto model = small_mlp();
    optim::Adam opt(model->parameters(), optim::AdamOptions{.lr = 1e-3});
    expect_no_growth([&] {
      opt.zero_grad();
      cross_entropy((*model)(x), target).backward();
      opt.step();
    }, "eager");
  }
  {  // a compiled training step
    auto model = small_mlp();
    optim::Adam opt(model->parameters(), optim::AdamOptions{.lr = 1e-3});
    CompileOptions o;
    o.backend = "interpreter";
    CompiledFunction step = compile_training_step(
        *model, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{cross_entropy((*model)(in[0]), in[1])}; },
        o);
    expect_no_growth([&] {
      opt.zero_grad();
      step({x, target});
      opt.step();
    }, "compiled training step");
  }
  {  // a compiled forward, differentiated, with an eager loss
    auto model = small_mlp();
    optim::SGD opt(model->parameters(), optim::SGDOptions{.lr = 1e-2});
    CompileOptions o;
    o.backend = "interpreter";
    CompiledFunction forward = compile_module(
        *model, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{(*model)(in[0])}; }, o);
    expect_no_growth([&] {
      opt.zero_grad();
      cross_entropy(forward({x})[0], target).backward();
      opt.step();
    }, "compiled forward, eager loss");
  }
}

}  // namespace
}  // namespace smelt
