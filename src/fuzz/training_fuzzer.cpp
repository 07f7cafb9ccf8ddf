#include "fuzz/training_fuzzer.h"

#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <sstream>

#include "smelt/compile.h"
#include "smelt/smelt.h"

namespace smelt::fuzz {
namespace {

using Rng = std::mt19937_64;

int pick(Rng& rng, int n) { return int(rng() % uint64_t(n)); }
bool coin(Rng& rng, double p = 0.5) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; }

// x + inner(x).
class Residual : public nn::Module {
 public:
  explicit Residual(nn::ModulePtr inner) { inner_ = register_module("inner", std::move(inner)); }
  Tensor forward(const Tensor& x) override { return x + (*inner_)(x); }
  std::string type_name() const override { return "Residual"; }

 private:
  nn::ModulePtr inner_;
};

// (N, C * H * W) from (N, C, H, W).
class Flat : public nn::Module {
 public:
  Tensor forward(const Tensor& x) override { return x.reshape({x.size(0), -1}); }
  std::string type_name() const override { return "Flat"; }
};

nn::ModulePtr activation(Rng& rng) {
  switch (pick(rng, 6)) {
    case 0: return std::make_shared<nn::ReLU>();
    case 1: return std::make_shared<nn::GELU>(coin(rng) ? GeluApprox::None : GeluApprox::Tanh);
    case 2: return std::make_shared<nn::Tanh>();
    case 3: return std::make_shared<nn::Sigmoid>();
    case 4: return std::make_shared<nn::SiLU>();
    default: return std::make_shared<nn::LeakyReLU>(0.1);
  }
}

constexpr DType kF64 = DType::Float64;

// An MLP over `features` inputs ending in `outputs`.
std::shared_ptr<nn::Sequential> random_mlp(Rng& rng, int64_t features, int64_t outputs) {
  auto net = std::make_shared<nn::Sequential>();
  int64_t width = features;
  const int blocks = 1 + pick(rng, 3);
  for (int b = 0; b < blocks; ++b) {
    switch (pick(rng, 4)) {
      case 0: {
        const int64_t next = 2 + pick(rng, 12);
        net->push_back(std::make_shared<nn::Linear>(width, next, coin(rng, 0.8), kF64));
        width = next;
        break;
      }
      case 1: {
        auto inner = std::make_shared<nn::Sequential>();
        inner->push_back(activation(rng));
        inner->push_back(std::make_shared<nn::Linear>(width, width, true, kF64));
        auto block = std::make_shared<Residual>(inner);
        net->push_back(block);
        // Sometimes twice, the weights tied: the backward reads them for the earlier use after
        // the later use's gradient is complete.
        if (coin(rng, 0.4)) {
          net->push_back(activation(rng));
          net->push_back(block);
        }
        break;
      }
      case 2: net->push_back(std::make_shared<nn::LayerNorm>(Shape{width}, 1e-5, true, coin(rng), kF64)); break;
      default: net->push_back(std::make_shared<nn::Dropout>(0.25)); break;
    }
    net->push_back(activation(rng));
  }
  net->push_back(std::make_shared<nn::Linear>(width, outputs, true, kF64));
  return net;
}

// conv, batch norm, activation, a residual conv, pooling, a linear head; input (N, C, 6, 6).
std::shared_ptr<nn::Sequential> random_cnn(Rng& rng, int64_t channels, int64_t outputs) {
  auto net = std::make_shared<nn::Sequential>();
  const int64_t width = 2 + pick(rng, 3);
  nn::Conv2d::Options conv{.padding = {1, 1}, .bias = coin(rng), .dtype = kF64};
  net->push_back(std::make_shared<nn::Conv2d>(channels, width, 3, conv));
  if (coin(rng)) net->push_back(std::make_shared<nn::BatchNorm2d>(width, nn::BatchNorm2d::Options{.dtype = kF64}));
  net->push_back(activation(rng));
  if (coin(rng)) {
    auto inner = std::make_shared<nn::Sequential>();
    inner->push_back(std::make_shared<nn::Conv2d>(width, width, 3, conv));
    inner->push_back(activation(rng));
    net->push_back(std::make_shared<Residual>(inner));
  }
  if (coin(rng)) {
    net->push_back(std::make_shared<nn::MaxPool2d>(2));
  } else {
    net->push_back(std::make_shared<nn::AvgPool2d>(2));
  }
  net->push_back(std::make_shared<Flat>());
  net->push_back(std::make_shared<nn::Linear>(width * 9, outputs, true, kF64));
  return net;
}

struct Draw {
  bool cnn = false;
  int64_t features = 0, classes = 0, batch = 0;
  bool mse = false;
  int optimizer = 0;  // 0 SGD, 1 Adam, 2 AdamW
  optim::SGDOptions sgd;
  optim::AdamOptions adam;
  StepOptions step;
  double budget = 0;
  int penalty = -1;  // a parameter whose squares the loss adds (its backward reads it again)
  int frozen = -1;   // a parameter that requires no grad
  double poison = 0;  // non-zero: the second batch's first value (NaN or inf)
  int outside = -1;  // a parameter the optimizer does not hold
  std::string text;
};

Draw draw(Rng& rng) {
  Draw d;
  d.cnn = coin(rng, 0.3);
  d.features = d.cnn ? 1 + pick(rng, 2) : 2 + pick(rng, 10);
  d.classes = 2 + pick(rng, 4);
  d.batch = 1 + pick(rng, 6);
  d.mse = coin(rng, 0.3);
  d.optimizer = pick(rng, 3);
  const double wd = coin(rng) ? 0.0 : 0.01;
  const bool maximize = coin(rng, 0.15);
  if (d.optimizer == 0) {
    d.sgd.lr = 0.05;
    d.sgd.momentum = coin(rng) ? 0.0 : 0.9;
    d.sgd.nesterov = d.sgd.momentum > 0 && coin(rng, 0.3);
    d.sgd.dampening = d.sgd.momentum > 0 && !d.sgd.nesterov && coin(rng, 0.3) ? 0.2 : 0.0;
    d.sgd.weight_decay = wd;
    d.sgd.maximize = maximize;
  } else {
    d.adam.lr = 0.01;
    d.adam.weight_decay = wd;
    d.adam.amsgrad = coin(rng, 0.3);
    d.adam.maximize = maximize;
  }
  d.step.clip_grad_norm = coin(rng, 0.4) ? (coin(rng) ? 0.05 : 10.0) : 0.0;
  d.step.accumulation_steps = coin(rng, 0.25) ? 2 : 1;
  const double budgets[] = {0.0, 0.3, 1.0};
  d.budget = budgets[pick(rng, 3)];
  if (coin(rng, 0.4)) d.penalty = pick(rng, 64);
  if (coin(rng, 0.2)) d.frozen = pick(rng, 64);
  if (coin(rng, 0.1)) d.poison = coin(rng) ? NAN : -INFINITY;
  if (coin(rng, 0.2)) d.outside = pick(rng, 64);
  std::ostringstream os;
  os << (d.cnn ? "cnn" : "mlp") << " features " << d.features << " classes " << d.classes << " batch " << d.batch
     << (d.mse ? " mse" : " cross entropy") << "; "
     << (d.optimizer == 0 ? "SGD" : d.optimizer == 1 ? "Adam" : "AdamW");
  if (d.optimizer == 0) {
    os << " momentum " << d.sgd.momentum << " dampening " << d.sgd.dampening << (d.sgd.nesterov ? " nesterov" : "");
  } else {
    os << (d.adam.amsgrad ? " amsgrad" : "");
  }
  os << " weight_decay " << wd << (maximize ? " maximize" : "") << "; clip " << d.step.clip_grad_norm
     << ", accumulation " << d.step.accumulation_steps << ", memory_budget " << d.budget;
  if (d.penalty >= 0) os << "; an L2 penalty on parameter " << d.penalty << " (mod their count)";
  if (d.poison != 0) os << "; a " << d.poison << " in the second batch";
  d.text = os.str();
  return d;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const Draw& d, std::vector<Tensor> params) {
  if (d.optimizer == 0) return std::make_unique<optim::SGD>(std::move(params), d.sgd);
  if (d.optimizer == 1) return std::make_unique<optim::Adam>(std::move(params), d.adam);
  return std::make_unique<optim::AdamW>(std::move(params), d.adam);
}

// |a - b| <= 1e-7 (1 + |b|) everywhere (NaN where the other is NaN): "" or what differed.
std::string compare(const Tensor& got, const Tensor& want, const std::string& what) {
  if (!got.defined() || !want.defined()) {
    return got.defined() == want.defined() ? "" : what + ": defined on one side only";
  }
  if (got.shape() != want.shape()) return what + ": shape " + shape_str(got.shape()) + " vs " + shape_str(want.shape());
  const std::vector<double> a = got.to_vector(), b = want.to_vector();
  for (size_t i = 0; i < a.size(); ++i) {
    const bool both_nan = std::isnan(a[i]) && std::isnan(b[i]);
    if (both_nan || std::abs(a[i] - b[i]) <= 1e-7 * (1 + std::abs(b[i]))) continue;
    std::ostringstream os;
    os.precision(17);
    os << what << "[" << i << "]: compiled " << a[i] << ", eager " << b[i];
    return os.str();
  }
  return "";
}

}  // namespace

TrainingCaseResult check_training_case(uint64_t seed, const TrainingFuzzOptions& options) {
  Rng rng(seed * 0x9E3779B97F4A7C15ull + 1);
  const Draw d = draw(rng);
  TrainingCaseResult result;
  result.description = d.text;
  const uint64_t model_seed = rng();
  auto build = [&] {
    manual_seed(model_seed);
    Rng shape_rng(model_seed);  // the same architecture for both copies
    return d.cnn ? random_cnn(shape_rng, d.features, d.classes) : random_mlp(shape_rng, d.features, d.classes);
  };
  auto eager = build(), compiled = build();
  auto setup = [&](nn::Module& m) {
    std::vector<Tensor> params, held;
    for (const Tensor& p : m.parameters()) {  // tied weights once
      bool seen = false;
      for (const Tensor& q : params) seen = seen || q.impl() == p.impl();
      if (!seen) params.push_back(p);
    }
    for (size_t i = 0; i < params.size(); ++i) {
      if (int(i) == d.frozen % int(params.size())) {
        params[i].set_requires_grad(false);
        continue;
      }
      if (d.outside >= 0 && int(i) == d.outside % int(params.size())) continue;
      held.push_back(params[i]);
    }
    for (size_t i = 0; held.empty() && i < params.size(); ++i) {  // an optimizer needs a parameter
      if (params[i].requires_grad()) held.push_back(params[i]);
    }
    return make_optimizer(d, held);
  };
  auto opt_e = setup(*eager), opt_c = setup(*compiled);
  auto loss_of = [&](nn::Module& m, const Tensor& x, const Tensor& t) {
    Tensor y = m.forward(x);
    Tensor loss = d.mse ? mean(pow(y - one_hot(t, d.classes).to(kF64), 2.0)) : cross_entropy(y, t);
    if (d.penalty >= 0) {
      const std::vector<Tensor> params = m.parameters();
      const Tensor& p = params[size_t(d.penalty) % params.size()];
      loss = loss + sum(p * p) * 1e-3;
    }
    return d.step.accumulation_steps > 1 ? loss * 0.5 : loss;
  };
  CompileOptions copt;
  copt.backend = options.backend;
  copt.memory_budget = d.budget;
  CompiledFunction step = compile_step(
      *compiled, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{loss_of(*compiled, in[0], in[1])}; },
      *opt_c, d.step, copt);
  auto fail = [&](const std::string& message) {
    result.passed = false;
    result.message = message;
    return result;
  };
  try {
    for (int s = 0; s < options.steps; ++s) {
      const Shape shape = d.cnn ? Shape{d.batch, d.features, 6, 6} : Shape{d.batch, d.features};
      Tensor x = randn(shape, kF64);
      if (s == 1 && d.poison != 0) {  // gradients go non-finite: clipping and the monitor's edge
        std::vector<double> v = x.to_vector();
        v[0] = d.poison;
        x = from_vector(v, shape, kF64);
      }
      const Tensor t = randint(0, d.classes, {d.batch});
      const GeneratorState before = default_generator().state();
      Tensor le = loss_of(*eager, x, t);
      le.backward();
      const bool update = (s + 1) % d.step.accumulation_steps == 0;
      if (update) {
        if (d.step.clip_grad_norm > 0) optim::clip_grad_norm_(opt_e->param_groups()[0].params, d.step.clip_grad_norm);
        opt_e->step();
        opt_e->zero_grad();
        ++result.updates;
      }
      const GeneratorState after = default_generator().state();
      default_generator().set_state(before);  // the same dropout masks
      Tensor lc = step({x, t})[0];
      if (default_generator().state().counter != after.counter) return fail("step " + std::to_string(s) + ": the generator advanced differently");
      std::string diff = compare(lc, le.detach(), "step " + std::to_string(s) + " loss");
      if (!diff.empty()) return fail(diff);
      if (update) result.in_place = step.report().inputs_updated_in_place;
    }
    const auto pe = eager->named_parameters(), pc = compiled->named_parameters();
    for (size_t k = 0; k < pe.size(); ++k) {
      std::string diff = compare(pc[k].second, pe[k].second, "parameter " + pe[k].first);
      if (diff.empty()) diff = compare(pc[k].second.grad(), pe[k].second.grad(), "gradient of " + pe[k].first);
      if (!diff.empty()) return fail(diff);
    }
    const auto be = eager->named_buffers(), bc = compiled->named_buffers();
    for (size_t k = 0; k < be.size(); ++k) {
      const std::string diff = compare(bc[k].second, be[k].second, "buffer " + be[k].first);
      if (!diff.empty()) return fail(diff);
    }
    const StateDict se = opt_e->state_dict(), sc = opt_c->state_dict();
    for (const auto& [key, value] : se) {
      auto it = sc.find(key);
      if (it == sc.end()) return fail("optimizer state " + key + " missing from the compiled side");
      const std::string diff = compare(it->second, value, "optimizer state " + key);
      if (!diff.empty()) return fail(diff);
    }
  } catch (const std::exception& e) {
    return fail(std::string("error: ") + e.what());
  }
  return result;
}

}  // namespace smelt::fuzz
