// The gradient health monitor (include/smelt/monitor.h): norms equal the gradients' own, a NaN
// appearing in step 37 is named with its parameters and the op that produced it (eager through
// anomaly detection, compiled from the norms its plan computes), exploding norms warn once.
#include <cmath>
#include <vector>

#include "smelt/compile.h"
#include "smelt/monitor.h"
#include "smelt/smelt.h"
#include "support/check.h"
#include "support/errors.h"

namespace smelt {
namespace {

std::shared_ptr<nn::Sequential> model_of(uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(6, 8), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(8, 3)});
}

// log(x + 2) of the input first: finite for inputs above -2; step 37's batch holds -5 (a NaN).
Tensor loss_of(nn::Module& m, const Tensor& x, const Tensor& target) {
  return cross_entropy(m(log(x + 2.0)), target);
}

Tensor batch(int step) {
  Tensor x = testing::random_tensor({4, 6}, -1, 1, uint64_t(step)).to(DType::Float32);
  if (step == 37) x = x - (arange(0, 24, 1, DType::Float32).reshape({4, 6}) == 5.0).to(DType::Float32) * 10.0;
  return x;
}

const Tensor kTarget = from_vector(std::vector<int64_t>{0, 2, 1, 2}, {4});

TEST(GradientMonitor, NormsMatchTheGradientsAndANaNInStep37IsNamedEager) {
  auto model = model_of(1);
  GradientMonitor monitor(*model);
  optim::SGD opt(model->parameters(), optim::SGDOptions{.lr = 1e-2});
  for (int step = 1; step <= 40; ++step) {
    opt.zero_grad();
    loss_of(*model, batch(step), kTarget).backward();
    const GradientStep& s = monitor.check();
    ASSERT_EQ(s.norms.size(), 4u);
    if (step < 37) {
      EXPECT_TRUE(s.non_finite.empty()) << step;
      const auto params = model->named_parameters();
      for (size_t k = 0; k < params.size(); ++k) {
        const Tensor g = params[k].second.grad().to(DType::Float64);
        EXPECT_NEAR(s.norms[k].second, std::sqrt(sum(g * g).item()), 1e-9) << params[k].first;
      }
    }
    if (step == 37) {
      // the weight that multiplies the NaN, and what it reaches (relu's gradient stops some)
      ASSERT_FALSE(s.non_finite.empty());
      EXPECT_EQ(s.non_finite[0], "0.weight");
      EXPECT_NE(s.origin.find("log"), std::string::npos) << s.origin;
      ASSERT_FALSE(s.warnings.empty());
      EXPECT_NE(s.warnings[0].find("step 37"), std::string::npos) << s.warnings[0];
      return;  // the weights are NaN from here on
    }
    opt.step();
  }
}

TEST(GradientMonitor, ANaNInStep37IsNamedFromACompiledStepsOwnNorms) {
  auto eager = model_of(2), compiled = model_of(2);
  CompileOptions o;
  o.backend = "interpreter";
  o.gradient_norms = true;
  CompiledFunction step = compile_training_step(
      *compiled, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{loss_of(*compiled, in[0], in[1])}; },
      o);
  GradientMonitor monitor(*compiled, {.detect_anomaly = false});
  optim::SGD opt_c(compiled->parameters(), optim::SGDOptions{.lr = 1e-2});
  optim::SGD opt_e(eager->parameters(), optim::SGDOptions{.lr = 1e-2});
  for (int s = 1; s <= 37; ++s) {
    opt_c.zero_grad();
    opt_e.zero_grad();
    step({batch(s), kTarget});
    loss_of(*eager, batch(s), kTarget).backward();
    const GradientStep& r = monitor.check(step);
    ASSERT_EQ(r.norms.size(), 4u);
    if (s < 37) {
      EXPECT_TRUE(r.non_finite.empty()) << s;
      EXPECT_EQ(r.origin, "");
      const auto params = eager->named_parameters();
      for (size_t k = 0; k < params.size(); ++k) {
        EXPECT_EQ(r.norms[k].first, params[k].first);
        const Tensor g = params[k].second.grad().to(DType::Float64);
        EXPECT_NEAR(r.norms[k].second, std::sqrt(sum(g * g).item()), 1e-4 * (1 + r.norms[k].second)) << s;
      }
      opt_c.step();
      opt_e.step();
    } else {  // the same parameters as eager's gradients say
      std::vector<std::string> want;
      for (const auto& [name, p] : eager->named_parameters()) {
        if (!std::isfinite(sum(p.grad().to(DType::Float64)).item())) want.push_back(name);
      }
      EXPECT_FALSE(want.empty());
      EXPECT_EQ(r.non_finite, want);
      EXPECT_NE(r.origin.find("log"), std::string::npos) << r.origin;
    }
  }
  // a step compiled without the option has no norms to give
  nn::Linear plain(3, 2);
  CompiledFunction other = compile_training_step(
      plain, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{mean(plain(in[0]))}; });
  testing::expect_error([&] { monitor.check(other); }, "gradient_norms");
}

TEST(GradientMonitor, ExplodingAndVanishingNormsWarnOncePerParameter) {
  auto model = model_of(3);
  GradientMonitor monitor(*model, {.exploding = 1e3, .vanishing = 1e-12});
  int warnings = 0;
  for (int step = 1; step <= 3; ++step) {
    model->zero_grad();
    (loss_of(*model, batch(step), kTarget) * 1e6).backward();  // norms far above 1e3
    const GradientStep& s = monitor.check();
    warnings += int(s.warnings.size());
    if (step == 1) {
      ASSERT_FALSE(s.warnings.empty());
      EXPECT_NE(s.warnings[0].find("exploding"), std::string::npos) << s.warnings[0];
      EXPECT_NE(s.warnings[0].find("'0.weight'"), std::string::npos) << s.warnings[0];
    }
  }
  EXPECT_EQ(warnings, 4);  // once for each of the four parameters, in the first step
  testing::expect_error([&] { GradientMonitor bad(*model, {.exploding = 1, .vanishing = 2}); }, "valid");
}

}  // namespace
}  // namespace smelt
