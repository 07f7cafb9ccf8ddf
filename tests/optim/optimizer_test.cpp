// SGD, Adam and AdamW against PyTorch's update formulas, computed here by hand.
#include <cmath>

#include "kernels/optim.h"
#include "support/check.h"
#include "support/errors.h"

namespace smelt {
namespace {

using testing::all_close;
using testing::expect_error;

Tensor param_from(const std::vector<double>& v, DType dtype = DType::Float64) {
  Tensor p = from_vector(v, {int64_t(v.size())}, dtype);
  p.set_requires_grad();
  return p;
}

// The gradient for step k of a run: deterministic, varying in sign and size.
std::vector<double> grad_at(int64_t step, size_t n) {
  std::vector<double> g(n);
  for (size_t i = 0; i < n; ++i)
    g[i] = std::sin(double(step * 7 + int64_t(i) * 3)) * (1.0 + double(i % 3));
  return g;
}

void set_grad(Tensor& p, const std::vector<double>& g) {
  p.set_grad(from_vector(g, {int64_t(g.size())}, p.dtype()));
}

// ---- references: PyTorch's single-tensor update loops, one element at a time

struct SgdRef {
  double lr, momentum, dampening, wd;
  bool nesterov, maximize;
  std::vector<double> buf;
  void step(std::vector<double>& p, const std::vector<double>& grad) {
    bool first = buf.empty();
    if (momentum != 0 && first) buf.assign(p.size(), 0.0);
    for (size_t i = 0; i < p.size(); ++i) {
      double g = maximize ? -grad[i] : grad[i];
      g += wd * p[i];
      if (momentum != 0) {
        buf[i] = first ? g : momentum * buf[i] + (1 - dampening) * g;
        g = nesterov ? g + momentum * buf[i] : buf[i];
      }
      p[i] -= lr * g;
    }
  }
};

struct AdamRef {
  double lr, beta1, beta2, eps, wd;
  bool decoupled, amsgrad, maximize;
  std::vector<double> m, v, vmax;
  int64_t t = 0;
  void step(std::vector<double>& p, const std::vector<double>& grad) {
    if (m.empty()) m.assign(p.size(), 0.0), v.assign(p.size(), 0.0), vmax.assign(p.size(), 0.0);
    ++t;
    double bc1 = 1 - std::pow(beta1, double(t)), bc2 = 1 - std::pow(beta2, double(t));
    for (size_t i = 0; i < p.size(); ++i) {
      double g = maximize ? -grad[i] : grad[i];
      if (decoupled)
        p[i] *= 1 - lr * wd;
      else
        g += wd * p[i];
      m[i] = beta1 * m[i] + (1 - beta1) * g;
      v[i] = beta2 * v[i] + (1 - beta2) * g * g;
      double second = v[i];
      if (amsgrad) second = vmax[i] = std::max(vmax[i], v[i]);
      p[i] -= lr / bc1 * m[i] / (std::sqrt(second) / std::sqrt(bc2) + eps);
    }
  }
};

void expect_near_vec(const Tensor& t, const std::vector<double>& want, double tol) {
  std::vector<double> got = t.to_vector();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << i;
}

TEST(SGD, HandComputedMomentum) {
  // p = 1, g = 1 every step, lr 0.1, momentum 0.9:
  // buf 1, 1.9, 2.71 -> p 0.9, 0.71, 0.439
  Tensor p = param_from({1.0});
  optim::SGD opt({p}, {.lr = 0.1, .momentum = 0.9});
  const double want[] = {0.9, 0.71, 0.439};
  for (double w : want) {
    p.set_grad(ones({1}, DType::Float64));
    opt.step();
    EXPECT_NEAR(p.item(), w, 1e-12);
  }
}

TEST(SGD, HandComputedNesterovAndWeightDecay) {
  // p = 2, g = 0.5, wd 0.1 -> d = 0.7; nesterov step 1: buf = 0.7, update 0.7 + 0.9 * 0.7 = 1.33
  // -> p = 2 - 0.1 * 1.33 = 1.867
  Tensor p = param_from({2.0});
  optim::SGD opt({p}, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.1, .nesterov = true});
  p.set_grad(full({1}, 0.5, DType::Float64));
  opt.step();
  EXPECT_NEAR(p.item(), 1.867, 1e-12);
}

struct SgdCase {
  double lr, momentum, dampening, wd;
  bool nesterov, maximize;
};

TEST(SGD, MatchesReferenceOverSteps) {
  const SgdCase cases[] = {{0.1, 0, 0, 0, false, false},
                           {0.05, 0.9, 0, 0, false, false},
                           {0.05, 0.9, 0.3, 0.01, false, false},
                           {0.05, 0.8, 0, 0.02, true, false},
                           {0.1, 0.5, 0.1, 0.0, false, true}};
  for (const SgdCase& c : cases) {
    std::vector<double> ref = {0.5, -1.0, 2.0, 0.25, -0.75};
    Tensor p = param_from(ref);
    optim::SGD opt({p}, {.lr = c.lr,
                         .momentum = c.momentum,
                         .dampening = c.dampening,
                         .weight_decay = c.wd,
                         .nesterov = c.nesterov,
                         .maximize = c.maximize});
    SgdRef r{c.lr, c.momentum, c.dampening, c.wd, c.nesterov, c.maximize, {}};
    for (int64_t step = 0; step < 5; ++step) {
      std::vector<double> g = grad_at(step, ref.size());
      set_grad(p, g);
      opt.step();
      r.step(ref, g);
      expect_near_vec(p, ref, 1e-12);
    }
  }
}

struct AdamCase {
  double lr, beta1, beta2, eps, wd;
  bool amsgrad, maximize;
};

void run_adam_case(const AdamCase& c, bool decoupled, DType dtype, size_t n, double tol) {
  std::vector<double> ref(n);
  for (size_t i = 0; i < n; ++i) ref[i] = std::cos(double(i)) * 2.0;
  Tensor p = param_from(ref, dtype);
  optim::AdamOptions o{.lr = c.lr,
                       .beta1 = c.beta1,
                       .beta2 = c.beta2,
                       .eps = c.eps,
                       .weight_decay = c.wd,
                       .amsgrad = c.amsgrad,
                       .maximize = c.maximize};
  std::unique_ptr<optim::Optimizer> opt;
  if (decoupled)
    opt = std::make_unique<optim::AdamW>(std::vector<Tensor>{p}, o);
  else
    opt = std::make_unique<optim::Adam>(std::vector<Tensor>{p}, o);
  AdamRef r{c.lr, c.beta1, c.beta2, c.eps, c.wd, decoupled, c.amsgrad, c.maximize, {}, {}, {}};
  for (int64_t step = 0; step < 6; ++step) {
    std::vector<double> g = grad_at(step, n);
    set_grad(p, g);
    opt->step();
    r.step(ref, g);
    expect_near_vec(p, ref, tol);
  }
}

TEST(Adam, HandComputedFirstSteps) {
  // Constant g = 1: m_hat = v_hat = 1 at every step, so p moves by lr / (1 + eps) each step.
  Tensor p = param_from({1.0});
  optim::Adam opt({p}, {.lr = 0.01});
  for (int step = 1; step <= 3; ++step) {
    p.set_grad(ones({1}, DType::Float64));
    opt.step();
    EXPECT_NEAR(p.item(), 1.0 - step * 0.01 / (1 + 1e-8), 1e-12);
  }
  // g = 2 then g = 0 from p = 0, lr 0.1: step 1 m = 0.2, v = 0.004 -> p = -0.1 / (1 + 5e-9);
  // step 2 m = 0.18, v = 0.003996: m_hat = 0.18 / 0.19, v_hat = 0.003996 / 0.001999.
  Tensor q = param_from({0.0});
  optim::Adam opt2({q}, {.lr = 0.1, .eps = 0.0});
  q.set_grad(full({1}, 2.0, DType::Float64));
  opt2.step();
  EXPECT_NEAR(q.item(), -0.1, 1e-12);
  q.set_grad(zeros({1}, DType::Float64));
  opt2.step();
  double m_hat = 0.18 / (1 - 0.81), v_hat = 0.003996 / (1 - 0.998001);
  EXPECT_NEAR(q.item(), -0.1 - 0.1 * m_hat / std::sqrt(v_hat), 1e-12);
}

TEST(Adam, MatchesReferenceOverSteps) {
  const AdamCase cases[] = {{1e-2, 0.9, 0.999, 1e-8, 0.0, false, false},
                            {5e-2, 0.8, 0.99, 1e-6, 0.1, false, false},
                            {1e-2, 0.9, 0.999, 1e-8, 0.05, true, false},
                            {1e-2, 0.9, 0.95, 1e-8, 0.0, false, true}};
  for (const AdamCase& c : cases) {
    run_adam_case(c, /*decoupled=*/false, DType::Float64, 7, 1e-12);
    run_adam_case(c, /*decoupled=*/true, DType::Float64, 7, 1e-12);
  }
}

TEST(Adam, Float32AndParallelPathMatchReference) {
  const AdamCase c{1e-2, 0.9, 0.999, 1e-8, 0.01, true, false};
  // Above the kernels' thread grain, so the update runs in parallel chunks.
  run_adam_case(c, true, DType::Float32, size_t(3 * kernels::kOptimGrain + 17), 2e-5);
  run_adam_case(c, false, DType::Float64, size_t(3 * kernels::kOptimGrain + 17), 1e-12);
}

TEST(AdamW, HandComputedDecoupledDecay) {
  // g = 0 always: moments stay 0, so only the decay acts: p *= (1 - lr * wd) per step.
  Tensor p = param_from({3.0});
  optim::AdamW opt({p}, {.lr = 0.1});  // default weight_decay 1e-2
  EXPECT_EQ(opt.param_groups()[0].weight_decay, 1e-2);
  for (int step = 1; step <= 3; ++step) {
    p.set_grad(zeros({1}, DType::Float64));
    opt.step();
    EXPECT_NEAR(p.item(), 3.0 * std::pow(1 - 0.1 * 1e-2, step), 1e-12);
  }
  optim::Adam adam({param_from({1.0})});
  EXPECT_EQ(adam.param_groups()[0].weight_decay, 0.0);
  EXPECT_EQ(opt.type_name(), "AdamW");
  EXPECT_EQ(adam.type_name(), "Adam");
}

TEST(Optimizer, SkipsParametersWithoutGradient) {
  Tensor a = param_from({1.0, 2.0}), b = param_from({3.0});
  optim::SGD opt({a, b}, {.lr = 0.5});
  a.set_grad(ones({2}, DType::Float64));
  opt.step();
  expect_near_vec(a, {0.5, 1.5}, 0);
  expect_near_vec(b, {3.0}, 0);
  StateDict sd = opt.state_dict();
  EXPECT_TRUE(sd.count("state.0.step"));
  EXPECT_FALSE(sd.count("state.1.step"));
}

TEST(Optimizer, ParamGroupsHaveTheirOwnLrAndDecay) {
  Tensor a = param_from({1.0}), b = param_from({1.0});
  optim::SGD opt(
      std::vector<optim::ParamGroupOptions>{{{a}, std::nullopt, std::nullopt}, {{b}, 0.01, 0.5}},
      {.lr = 0.1, .weight_decay = 0.0});
  a.set_grad(ones({1}, DType::Float64));
  b.set_grad(ones({1}, DType::Float64));
  opt.step();
  EXPECT_NEAR(a.item(), 0.9, 1e-15);
  EXPECT_NEAR(b.item(), 1.0 - 0.01 * 1.5, 1e-15);
  opt.set_lr(0.2);
  EXPECT_EQ(opt.param_groups()[1].lr, 0.2);
}

TEST(Optimizer, ZeroGradDropsGradients) {
  Tensor a = param_from({1.0});
  optim::Adam opt({a});
  a.set_grad(ones({1}, DType::Float64));
  opt.zero_grad();
  EXPECT_FALSE(a.grad().defined());
}

TEST(Optimizer, BadArgumentsAreErrors) {
  Tensor a = param_from({1.0});
  expect_error([&] { optim::SGD({a}, {.lr = -1}); }, {"lr", "-1"});
  expect_error([&] { optim::SGD({a}, {.nesterov = true}); }, {"SGD", "nesterov"});
  expect_error([&] { optim::Adam({a}, {.beta1 = 1.0}); }, {"Adam", "betas"});
  expect_error([&] { optim::SGD({a, a}); }, {"more than once"});
  expect_error([&] { optim::SGD({from_vector(std::vector<float>{1}, {1})}); }, {"requires grad"});
  Tensor wrong_grad = param_from({1.0, 2.0});
  optim::SGD opt({wrong_grad});
  wrong_grad.set_grad(ones({3}, DType::Float64));
  expect_error([&] { opt.step(); }, {"SGD", "(3,)", "(2,)"});
}

TEST(Optimizer, StridedGradientIsRead) {
  // A broadcast (stride 0) gradient, as the engine may produce for expanded inputs.
  Tensor p = param_from({1.0, 2.0, 3.0});
  optim::SGD opt({p}, {.lr = 1.0});
  p.set_grad(full({1}, 0.5, DType::Float64).expand({3}));
  opt.step();
  expect_near_vec(p, {0.5, 1.5, 2.5}, 0);
}

// Runs `steps` steps of opt on p with the deterministic gradients, starting at step `first`.
void run_steps(optim::Optimizer& opt, Tensor& p, int64_t first, int64_t steps) {
  for (int64_t s = first; s < first + steps; ++s) {
    set_grad(p, grad_at(s, size_t(p.numel())));
    opt.step();
  }
}

TEST(Optimizer, StateDictRoundTripContinuesIdentically) {
  for (int kind = 0; kind < 3; ++kind) {
    auto make = [&](Tensor& p) -> std::unique_ptr<optim::Optimizer> {
      if (kind == 0)
        return std::make_unique<optim::SGD>(std::vector<Tensor>{p},
                                            optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
      if (kind == 1)
        return std::make_unique<optim::Adam>(std::vector<Tensor>{p},
                                             optim::AdamOptions{.lr = 0.05, .amsgrad = true});
      return std::make_unique<optim::AdamW>(std::vector<Tensor>{p}, optim::AdamOptions{.lr = 0.05});
    };
    Tensor a = param_from({0.5, -1.0, 2.0});
    auto opt_a = make(a);
    run_steps(*opt_a, a, 0, 3);
    StateDict sd = opt_a->state_dict();
    EXPECT_EQ(sd["state.0.step"].item(), 3.0);

    Tensor b = a.detach().clone();
    b.set_requires_grad();
    auto opt_b = make(b);
    opt_b->load_state_dict(sd);
    run_steps(*opt_a, a, 3, 2);
    run_steps(*opt_b, b, 3, 2);
    EXPECT_TRUE(all_close(a, b, 0, 0)) << opt_a->type_name();
    // The saved dict is a snapshot: later steps do not change it.
    EXPECT_EQ(sd["state.0.step"].item(), 3.0);
  }
}

TEST(Optimizer, LoadStateDictValidatesAndChangesNothingOnError) {
  Tensor a = param_from({1.0, 2.0});
  optim::Adam opt({a}, {.lr = 0.1});
  run_steps(opt, a, 0, 2);
  const StateDict good = opt.state_dict();

  Tensor b = param_from({1.0, 2.0});
  optim::Adam fresh({b}, {.lr = 0.3});
  auto broken = [&](auto edit, std::initializer_list<std::string> needles) {
    StateDict sd = good;
    edit(sd);
    expect_error([&] { fresh.load_state_dict(sd); }, needles);
    EXPECT_EQ(fresh.param_groups()[0].lr, 0.3);
    EXPECT_FALSE(fresh.state_dict().count("state.0.step"));
  };
  broken([](StateDict& sd) { sd["state.0.exp_avg"] = zeros({3}, DType::Float64); },
         {"Adam", "state.0.exp_avg", "(3,)", "(2,)"});
  broken([](StateDict& sd) { sd["state.0.velocity"] = zeros({2}, DType::Float64); },
         {"unexpected key", "state.0.velocity"});
  broken([](StateDict& sd) { sd["state.5.step"] = scalar_tensor(1, DType::Int64); },
         {"parameter 5"});
  broken([](StateDict& sd) { sd.erase("state.0.exp_avg_sq"); }, {"state.0.exp_avg_sq"});
  broken([](StateDict& sd) { sd.erase("state.0.step"); }, {"state.0.step"});
  broken([](StateDict& sd) { sd["state.0.step"] = scalar_tensor(-2, DType::Int64); },
         {"positive integer"});
  broken([](StateDict& sd) { sd["param_groups.1.lr"] = scalar_tensor(0.1, DType::Float64); },
         {"2 parameter groups", "has 1"});
  broken([](StateDict& sd) { sd["param_groups.0.num_params"] = scalar_tensor(3, DType::Int64); },
         {"group 0", "3 parameters"});
  broken([](StateDict& sd) { sd["junk"] = zeros({1}); }, {"unexpected key 'junk'"});
  broken([](StateDict& sd) { sd.erase("param_groups.0.weight_decay"); }, {"weight_decay"});
}

TEST(ClipGradNorm, ScalesToMaxNormAndReturnsTotal) {
  Tensor a = param_from({0, 0}), b = param_from({0});
  a.set_grad(from_vector(std::vector<double>{3.0, 4.0}, {2}));
  b.set_grad(from_vector(std::vector<double>{12.0}, {1}));
  double total = optim::clip_grad_norm_({a, b}, 6.5);
  EXPECT_NEAR(total, 13.0, 1e-12);
  double coef = 6.5 / (13.0 + 1e-6);
  expect_near_vec(a.grad(), {3 * coef, 4 * coef}, 1e-15);
  expect_near_vec(b.grad(), {12 * coef}, 1e-15);
  // Already small enough: untouched.
  Tensor before = a.grad();
  EXPECT_NEAR(optim::clip_grad_norm_({a, b}, 100.0), 6.5, 1e-5);
  EXPECT_TRUE(a.grad().same(before));
}

TEST(ClipGradNorm, BroadcastGradientIsNotScaledThroughItsAlias) {
  Tensor shared = full({1}, 2.0, DType::Float64);
  Tensor a = param_from({0, 0, 0, 0});
  a.set_grad(shared.expand({4}));  // norm sqrt(4 * 4) = 4
  EXPECT_NEAR(optim::clip_grad_norm_({a}, 1.0), 4.0, 1e-12);
  expect_near_vec(a.grad(), std::vector<double>(4, 0.5), 1e-6);
  EXPECT_EQ(shared.item(), 2.0);
}

TEST(ClipGradNorm, NonFiniteNorm) {
  Tensor a = param_from({0, 0});
  a.set_grad(from_vector(std::vector<double>{NAN, 1.0}, {2}));
  EXPECT_TRUE(std::isnan(optim::clip_grad_norm_({a}, 1.0)));
  expect_error([&] { optim::clip_grad_norm_({a}, 1.0, /*error_if_nonfinite=*/true); },
               {"clip_grad_norm_", "NaN"});
}

TEST(OptimKernels, SumOfSquaresLargeAndStrided) {
  const int64_t n = 5 * kernels::kOptimGrain + 3;
  Tensor t = arange(0, double(n), 1, DType::Float32) / double(n);
  double want = 0;
  for (int64_t i = 0; i < n; ++i) {
    double v = double(float(double(i)) / float(n));
    want += v * v;
  }
  EXPECT_NEAR(kernels::sum_of_squares(t), want, want * 1e-6);
  Tensor m = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}).t();  // strided
  EXPECT_NEAR(kernels::sum_of_squares(m), 91.0, 1e-12);
}

}  // namespace
}  // namespace smelt
