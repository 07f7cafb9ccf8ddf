// Dynamic batch with means (runtime/shape_fit.h, codegen/size_float.h): a mean's 1 / count is a
// number that follows the batch size — in the lowered mean (a kernel Constant) and in its gradient
// rule (an IR constant). Every batch size must give the bits a compile specialized on that size
// gives (CompileOptions::dynamic_batch = false), be close to eager, and compile only twice.
#include <cmath>
#include <cstdlib>
#include <functional>

#include "smelt/compile.h"
#include "smelt/nn.h"
#include "support/check.h"
#include "support/temp_dir.h"

namespace smelt {
namespace {

using Fn = CompiledFunction::Fn;

// 64 specializes, 128 builds the dynamic kernels, the rest re-instantiate them (64 again replays).
const std::vector<int64_t> kBatches = {64, 128, 1, 3, 257, 64};

Tensor input(int64_t batch, int64_t features, uint64_t seed) {
  return testing::random_tensor({batch, features}, -2, 2, seed).to(DType::Float32);
}

Tensor classes(int64_t batch, int64_t n, uint64_t seed) {
  return floor(testing::random_tensor({batch}, 0, double(n), seed)).to(DType::Int64);
}

class DynamicBatchMean : public testing::TempDirTest, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    setenv("SMELT_CACHE_DIR", dir_.c_str(), 1);
  }
  CompileOptions options(bool dynamic) const {
    CompileOptions o;
    o.backend = GetParam();
    o.dynamic_batch = dynamic;
    return o;
  }
};

TEST_P(DynamicBatchMean, InferenceMeanOverTheBatch) {
  // The batch as the reduced extent (count B), in a full mean (count 24 B), and subtracted back.
  Fn fn = [](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    return std::vector<Tensor>{mean(x * 2.0, {0}), mean(exp(x)), x - mean(x, {0}, /*keepdim=*/true),
                               mean(x, {1}) + 1.0};
  };
  CompiledFunction dynamic = compile(fn, options(true));
  CompiledFunction specialized = compile(fn, options(false));
  for (size_t i = 0; i < kBatches.size(); ++i) {
    const int64_t b = kBatches[i];
    Tensor x = input(b, 24, 20 + i);
    std::vector<Tensor> got = dynamic({x}), want = specialized({x}), eager = fn({x});
    ASSERT_EQ(got.size(), eager.size());
    for (size_t o = 0; o < got.size(); ++o) {
      EXPECT_TRUE(testing::same_bits(got[o], want[o])) << "batch " << b << " output " << o;
      EXPECT_TRUE(testing::all_close(got[o], eager[o], 1e-5, 1e-5)) << "batch " << b << " output " << o;
    }
    EXPECT_EQ(dynamic.report().dynamic_batch, i > 0 && i + 1 < kBatches.size())
        << "batch " << b << ": " << ::testing::PrintToString(dynamic.recompile_reasons());
  }
  EXPECT_EQ(dynamic.num_compiles(), 2) << ::testing::PrintToString(dynamic.recompile_reasons());
}

TEST_P(DynamicBatchMean, NumbersComputedFromTheBatchSize) {
  // n and 1 / n as graph constants, n affine in the batch size (B, 3 B + 1), in float32 and float64.
  Fn fn = [](const std::vector<Tensor>& in) {
    const double b = double(in[0].size(0));
    return std::vector<Tensor>{in[0] * b, in[0] * (1.0 / (3 * b + 1)), in[0].to(DType::Float64) / b};
  };
  CompiledFunction dynamic = compile(fn, options(true));
  CompiledFunction specialized = compile(fn, options(false));
  for (size_t i = 0; i < kBatches.size(); ++i) {
    const int64_t b = kBatches[i];
    Tensor x = input(b, 8, 80 + i);
    std::vector<Tensor> got = dynamic({x}), want = specialized({x}), eager = fn({x});
    for (size_t o = 0; o < got.size(); ++o) {
      EXPECT_TRUE(testing::same_bits(got[o], want[o])) << "batch " << b << " output " << o;
      EXPECT_TRUE(testing::same_bits(got[o], eager[o])) << "batch " << b << " output " << o;
    }
    EXPECT_EQ(dynamic.report().dynamic_batch, i > 0 && i + 1 < kBatches.size())
        << "batch " << b << ": " << ::testing::PrintToString(dynamic.recompile_reasons());
  }
  EXPECT_EQ(dynamic.num_compiles(), 2) << ::testing::PrintToString(dynamic.recompile_reasons());
}

using LossFn = std::function<Tensor(const Tensor& out, const Tensor& target)>;
using TargetFn = std::function<Tensor(int64_t batch, uint64_t seed)>;

// A small MLP's training step with a mean loss: the compiled step on a dynamic batch, the same step
// specialized on each batch size, and eager backward(), each on its own copy of the model.
void expect_training_step_matches(const CompileOptions& dynamic_options, const LossFn& loss, const TargetFn& target,
                                  int64_t outputs) {
  auto make = [outputs] {
    manual_seed(5);
    return std::make_shared<nn::Sequential>(std::vector<nn::ModulePtr>{
        std::make_shared<nn::Linear>(12, 16), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(16, outputs)});
  };
  auto eager = make(), dynamic_model = make(), specialized_model = make();
  auto step_of = [&loss](nn::Module& m) {
    return [&m, &loss](const std::vector<Tensor>& in) { return std::vector<Tensor>{loss(m(in[0]), in[1])}; };
  };
  CompileOptions specialized_options = dynamic_options;
  specialized_options.dynamic_batch = false;
  CompiledFunction dynamic = compile_training_step(*dynamic_model, step_of(*dynamic_model), dynamic_options);
  CompiledFunction specialized =
      compile_training_step(*specialized_model, step_of(*specialized_model), specialized_options);
  for (size_t i = 0; i < kBatches.size(); ++i) {
    const int64_t b = kBatches[i];
    Tensor x = input(b, 12, 40 + i), t = target(b, 60 + i);
    for (auto* m : {eager.get(), dynamic_model.get(), specialized_model.get()}) m->zero_grad();
    Tensor want = step_of(*eager)({x, t})[0];
    want.backward();
    Tensor got = dynamic({x, t})[0], same = specialized({x, t})[0];
    EXPECT_TRUE(testing::same_bits(got, same)) << "batch " << b;
    EXPECT_TRUE(testing::all_close(got, want, 1e-5, 1e-5)) << "batch " << b;
    std::vector<Tensor> pe = eager->parameters(), pd = dynamic_model->parameters(), ps = specialized_model->parameters();
    for (size_t p = 0; p < pe.size(); ++p) {
      EXPECT_TRUE(testing::same_bits(pd[p].grad(), ps[p].grad())) << "batch " << b << " param " << p;
      EXPECT_TRUE(testing::all_close(pd[p].grad(), pe[p].grad(), 1e-4, 1e-5)) << "batch " << b << " param " << p;
    }
    EXPECT_EQ(dynamic.report().dynamic_batch, i > 0 && i + 1 < kBatches.size())
        << "batch " << b << ": " << ::testing::PrintToString(dynamic.recompile_reasons());
  }
  EXPECT_EQ(dynamic.num_compiles(), 2) << ::testing::PrintToString(dynamic.recompile_reasons());
}

TEST_P(DynamicBatchMean, TrainingStepCrossEntropy) {
  expect_training_step_matches(
      options(true), [](const Tensor& out, const Tensor& t) { return cross_entropy(out, t); },
      [](int64_t b, uint64_t seed) { return classes(b, 5, seed); }, 5);
}

TEST_P(DynamicBatchMean, TrainingStepMse) {
  expect_training_step_matches(
      options(true), [](const Tensor& out, const Tensor& t) { return mse_loss(out, t); },
      [](int64_t b, uint64_t seed) { return input(b, 3, seed); }, 3);
}

TEST_P(DynamicBatchMean, TrainingStepMeanOverTokens) {
  // (B, S) tokens, S = 7: the mean's count is 7 B in the loss and its gradient
  auto make = [] {
    manual_seed(9);
    return std::make_shared<nn::Sequential>(std::vector<nn::ModulePtr>{std::make_shared<nn::Linear>(12, 5)});
  };
  auto eager = make(), dynamic_model = make(), specialized_model = make();
  auto step_of = [](nn::Module& m) {
    return [&m](const std::vector<Tensor>& in) {
      const Tensor out = m(in[0]);  // (B, S, 5)
      return std::vector<Tensor>{cross_entropy(out.reshape({-1, 5}), in[1].reshape({-1})) * 0.1};
    };
  };
  CompileOptions specialized_options = options(false);
  CompiledFunction dynamic = compile_training_step(*dynamic_model, step_of(*dynamic_model), options(true));
  CompiledFunction specialized = compile_training_step(*specialized_model, step_of(*specialized_model), specialized_options);
  for (size_t i = 0; i < kBatches.size(); ++i) {
    const int64_t b = kBatches[i];
    Tensor x = testing::random_tensor({b, 7, 12}, -2, 2, 30 + i).to(DType::Float32);
    Tensor t = floor(testing::random_tensor({b, 7}, 0, 5.0, 50 + i)).to(DType::Int64);
    for (auto* m : {eager.get(), dynamic_model.get(), specialized_model.get()}) m->zero_grad();
    Tensor want = step_of(*eager)({x, t})[0];
    want.backward();
    Tensor got = dynamic({x, t})[0], same = specialized({x, t})[0];
    EXPECT_TRUE(testing::same_bits(got, same)) << "batch " << b;
    EXPECT_TRUE(testing::all_close(got, want, 1e-5, 1e-5)) << "batch " << b;
    std::vector<Tensor> pe = eager->parameters(), pd = dynamic_model->parameters(), ps = specialized_model->parameters();
    for (size_t p = 0; p < pe.size(); ++p) {
      EXPECT_TRUE(testing::same_bits(pd[p].grad(), ps[p].grad())) << "batch " << b << " param " << p;
      EXPECT_TRUE(testing::all_close(pd[p].grad(), pe[p].grad(), 1e-4, 1e-5)) << "batch " << b << " param " << p;
    }
    EXPECT_EQ(dynamic.report().dynamic_batch, i > 0 && i + 1 < kBatches.size())
        << "batch " << b << ": " << ::testing::PrintToString(dynamic.recompile_reasons());
  }
  EXPECT_EQ(dynamic.num_compiles(), 2) << ::testing::PrintToString(dynamic.recompile_reasons());
}

TEST_P(DynamicBatchMean, ScaledNumbersComputedFromTheBatchSize) {
  // -1 / n, c / n and c * n (n affine in the batch size), in float32 and float64, as a loss's
  // gradient, a loss scale over the batch or a clamp bound make them
  Fn fn = [](const std::vector<Tensor>& in) {
    const double b = double(in[0].size(0));
    const Tensor& x = in[0];
    return std::vector<Tensor>{x * (-1.0 / b), x * (2.0 / (3 * b)), x.to(DType::Float64) * (0.1 / (b + 2)),
                               clamp(x * b, -(b - 1) * 0.5, 2.5 * b)};
  };
  CompiledFunction dynamic = compile(fn, options(true));
  CompiledFunction specialized = compile(fn, options(false));
  for (size_t i = 0; i < kBatches.size(); ++i) {
    const int64_t b = kBatches[i];
    Tensor x = input(b, 8, 90 + i);
    std::vector<Tensor> got = dynamic({x}), want = specialized({x}), eager = fn({x});
    for (size_t o = 0; o < got.size(); ++o) {
      EXPECT_TRUE(testing::same_bits(got[o], want[o])) << "batch " << b << " output " << o;
      EXPECT_TRUE(testing::same_bits(got[o], eager[o])) << "batch " << b << " output " << o;
    }
    EXPECT_EQ(dynamic.report().dynamic_batch, i > 0 && i + 1 < kBatches.size())
        << "batch " << b << ": " << ::testing::PrintToString(dynamic.recompile_reasons());
  }
  EXPECT_EQ(dynamic.num_compiles(), 2) << ::testing::PrintToString(dynamic.recompile_reasons());
}

TEST_P(DynamicBatchMean, AConstantThatIsNoFunctionOfTheBatchFallsBack) {
  // sqrt(B) follows the batch but in no form that is fitted; 1 / B^3 fits the three probes (as
  // a polynomial of degree 2), not the check; a count of traces is no function of the batch size
  // at all. (1 / B^2 is dynamic: a polynomial count.) Each compiles specialized
  // per batch size, with the reason, and stays correct.
  for (int which = 0; which < 3; ++which) {
    auto traces = std::make_shared<int>(0);
    Fn fn = [which, traces](const std::vector<Tensor>& in) {
      const double b = double(in[0].size(0));
      const double c = which == 0 ? std::sqrt(b) : which == 1 ? 1.0 / (b * b * b) : double(++*traces);
      return std::vector<Tensor>{in[0] * c};
    };
    CompiledFunction dynamic = compile(fn, options(true));
    for (size_t i = 0; i < kBatches.size(); ++i) {
      const int64_t b = kBatches[i];
      Tensor x = input(b, 8, 110 + i);
      std::vector<Tensor> got = dynamic({x});
      if (which != 2) {
        EXPECT_TRUE(testing::same_bits(got[0], fn({x})[0])) << "case " << which << " batch " << b;
      }
      EXPECT_FALSE(dynamic.report().dynamic_batch) << "case " << which << " batch " << b;
    }
    const std::vector<std::string> reasons = dynamic.recompile_reasons();
    ASSERT_FALSE(reasons.empty()) << "case " << which;
    EXPECT_NE(reasons[0].find("constant"), std::string::npos) << "case " << which << ": " << reasons[0];
    EXPECT_EQ(dynamic.num_compiles(), 5) << "case " << which << ": " << ::testing::PrintToString(reasons);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, DynamicBatchMean, ::testing::Values("interpreter", "cpp"));

}  // namespace
}  // namespace smelt
