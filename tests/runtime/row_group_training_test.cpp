// Row groups in a compiled training step (fusion/fuse.h, broadcast epilogue): layer_norm's,
// softmax's and cross-entropy's (log_softmax's) backward rules each run as one row kernel in the
// joint graph, and the step's gradients match eager backward on both backends. The same step
// with row groups off (FusionOptions::row_groups, SMELT_FUSE_ROW_GROUPS=0) runs more kernels.
#include <cstdio>
#include <cstdlib>

#include "smelt/compile.h"
#include "smelt/nn.h"
#include "support/check.h"

namespace smelt {
namespace {

std::shared_ptr<nn::Sequential> make_row_group_model(uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<nn::Sequential>(std::vector<nn::ModulePtr>{
      std::make_shared<nn::Linear>(12, 24), std::make_shared<nn::LayerNorm>(Shape{24}), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(24, 10)});
}

// cross_entropy (log_softmax + nll) plus a softmax-weighted term: both backward rules appear.
CompiledFunction::Fn loss_of(nn::Module& m) {
  return [&m](const std::vector<Tensor>& in) {
    Tensor out = m(in[0]);
    Tensor weights = arange(0, 10, 1, DType::Float32) * 0.1 - 0.4;
    return std::vector<Tensor>{cross_entropy(out, in[1]) + sum(softmax(out, -1) * weights) * 0.01};
  };
}

int kernels_with_row_groups(const char* setting, const std::string& backend) {
  setenv("SMELT_FUSE_ROW_GROUPS", setting, 1);
  auto model = make_row_group_model(3);
  CompileOptions o;
  o.backend = backend;
  o.memory_budget = 1;  // no recomputation: the count is the backward rules' kernels alone
  CompiledFunction step = compile_training_step(*model, loss_of(*model), o);
  step({randn({16, 12}), from_vector(std::vector<int64_t>(16, 3), {16})});
  unsetenv("SMELT_FUSE_ROW_GROUPS");
  return step.report().kernels;
}

TEST(RowGroupTraining, GradientsMatchEagerOnBothBackends) {
  for (const std::string backend : {"interpreter", "cpp"}) {
    auto eager = make_row_group_model(3), compiled_model = make_row_group_model(3);
    CompileOptions o;
    o.backend = backend;
    CompiledFunction step = compile_training_step(*compiled_model, loss_of(*compiled_model), o);
    for (int i = 0; i < 2; ++i) {
      Tensor x = randn({16, 12});
      std::vector<int64_t> t(16);
      for (int64_t j = 0; j < 16; ++j) t[size_t(j)] = (j * 7 + i) % 10;
      Tensor target = from_vector(t, {16});
      for (auto* m : {eager.get(), compiled_model.get()}) {
        for (Tensor& p : m->parameters()) p.zero_grad();
      }
      Tensor want = loss_of(*eager)({x, target})[0];
      want.backward();
      Tensor got = step({x, target})[0];
      EXPECT_TRUE(testing::all_close(got, want, 1e-5, 1e-6)) << backend;
      std::vector<Tensor> pe = eager->parameters(), pc = compiled_model->parameters();
      for (size_t k = 0; k < pe.size(); ++k) {
        EXPECT_TRUE(testing::all_close(pc[k].grad(), pe[k].grad(), 1e-4, 1e-5)) << backend << " param " << k;
      }
    }
    EXPECT_EQ(step.report().interpreted_groups, 0) << backend;
  }
}

// Three backward rules (layer_norm, log_softmax via cross_entropy, softmax), each a reduction
// kernel plus a pointwise kernel without row groups: at least three kernels fewer with them.
TEST(RowGroupTraining, FewerKernelsThanWithoutRowGroups) {
  const int off = kernels_with_row_groups("0", "interpreter");
  const int on = kernels_with_row_groups("1", "interpreter");
  std::printf("kernels: %d with row groups, %d without\n", on, off);
  EXPECT_LE(on, off - 3);
}

}  // namespace
}  // namespace smelt
