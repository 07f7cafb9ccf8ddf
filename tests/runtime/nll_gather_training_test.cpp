// cross_entropy's forward in a compiled training step (an MLP): log_softmax and nll_loss are one
// row kernel (fusion/fuse.h: nll_loss gathers in its log_softmax's row group), on both backends;
// the loss and the gradients match eager; with SMELT_FUSE_GATHERS=0 the step runs one kernel or
// op step more and gives the same loss bits (the gather reads exactly the log-probability the
// row kernel stores, and the fold sums the rows as the eager nll_loss kernel does). A target out
// of range fails with eager's message.
#include <cstdlib>
#include <cstring>

#include "smelt/compile.h"
#include "smelt/nn.h"
#include "support/check.h"

namespace smelt {
namespace {

std::shared_ptr<nn::Sequential> make_nll_model(uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<nn::Sequential>(std::vector<nn::ModulePtr>{
      std::make_shared<nn::Linear>(12, 32), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(32, 10)});
}

CompiledFunction::Fn loss_of(nn::Module& m, Reduction reduction) {
  return [&m, reduction](const std::vector<Tensor>& in) {
    Tensor loss = cross_entropy(m(in[0]), in[1], -100, 0.0, reduction);
    return std::vector<Tensor>{reduction == Reduction::None ? sum(loss) : loss};
  };
}

Tensor targets(int i) {
  std::vector<int64_t> t(16);
  for (int64_t j = 0; j < 16; ++j) t[size_t(j)] = j % 5 == 2 ? -100 : (j * 7 + i) % 10;  // some ignored
  return from_vector(t, {16});
}

bool has_nll_in_row_group(const CompiledFunction& step) {
  return step.report().fusion.find("row: ") != std::string::npos &&
         step.report().fusion.find("= nll_loss") != std::string::npos &&
         step.report().fusion.find("= nll_loss:") == std::string::npos;  // not among the unfused
}

TEST(NllGatherTraining, CrossEntropyStepMatchesEagerOnBothBackends) {
  for (const std::string backend : {"interpreter", "cpp"}) {
    for (Reduction reduction : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
      SCOPED_TRACE(backend + " reduction " + std::to_string(int(reduction)));
      auto eager = make_nll_model(5), compiled_model = make_nll_model(5);
      CompileOptions o;
      o.backend = backend;
      CompiledFunction step = compile_training_step(*compiled_model, loss_of(*compiled_model, reduction), o);
      for (int i = 0; i < 2; ++i) {
        Tensor x = randn({16, 12});
        for (auto* m : {eager.get(), compiled_model.get()}) {
          for (Tensor& p : m->parameters()) p.zero_grad();
        }
        Tensor want = loss_of(*eager, reduction)({x, targets(i)})[0];
        want.backward();
        Tensor got = step({x, targets(i)})[0];
        // the generated log_softmax sums each row in its own order (codegen/loop_kernel.h)
        EXPECT_TRUE(testing::all_close(got, want, 1e-6, 1e-7)) << got.item<float>() << " vs " << want.item<float>();
        std::vector<Tensor> pe = eager->parameters(), pc = compiled_model->parameters();
        for (size_t k = 0; k < pe.size(); ++k) {
          EXPECT_TRUE(testing::all_close(pc[k].grad(), pe[k].grad(), 1e-5, 1e-6)) << "param " << k;
        }
      }
      EXPECT_TRUE(has_nll_in_row_group(step)) << step.report().fusion;
      EXPECT_EQ(step.report().interpreted_groups, 0);
    }
  }
}

// The same step with and without the gather: one step fewer with it, and the same loss bits.
TEST(NllGatherTraining, SameLossBitsAsWithoutTheGather) {
  for (Reduction reduction : {Reduction::Mean, Reduction::Sum}) {
    float loss[2];
    int steps[2];
    for (int gathers = 0; gathers < 2; ++gathers) {
      setenv("SMELT_FUSE_GATHERS", gathers ? "1" : "0", 1);
      auto model = make_nll_model(9);
      CompileOptions o;
      o.backend = "interpreter";
      CompiledFunction step = compile_training_step(*model, loss_of(*model, reduction), o);
      manual_seed(11);
      loss[gathers] = step({randn({16, 12}), targets(1)})[0].item<float>();
      steps[gathers] = step.report().kernels + step.report().op_steps;
      EXPECT_EQ(has_nll_in_row_group(step), gathers == 1) << step.report().fusion;
      unsetenv("SMELT_FUSE_GATHERS");
    }
    EXPECT_EQ(steps[1], steps[0] - 1);
    EXPECT_EQ(std::memcmp(&loss[0], &loss[1], sizeof(float)), 0) << loss[0] << " vs " << loss[1];
  }
}

TEST(NllGatherTraining, TargetOutOfRangeFailsWithEagersMessage) {
  for (const std::string backend : {"interpreter", "cpp"}) {
    auto model = make_nll_model(5);
    CompileOptions o;
    o.backend = backend;
    CompiledFunction step = compile_training_step(*model, loss_of(*model, Reduction::Mean), o);
    step({randn({16, 12}), targets(0)});
    std::vector<int64_t> t(16, 1);
    t[6] = 10;
    std::string eager, compiled;
    try {
      loss_of(*model, Reduction::Mean)({randn({16, 12}), from_vector(t, {16})});
    } catch (const Error& e) {
      eager = e.what();
    }
    try {
      step({randn({16, 12}), from_vector(t, {16})});
    } catch (const Error& e) {
      compiled = e.what();
    }
    EXPECT_NE(eager.find("nll_loss: target 10 at flat index 6 is out of range for 10 classes"), std::string::npos)
        << eager;
    EXPECT_EQ(compiled, eager) << backend;
  }
}

}  // namespace
}  // namespace smelt
