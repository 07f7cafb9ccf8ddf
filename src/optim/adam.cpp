// Adam and AdamW (PyTorch's semantics, bias-corrected, optional AMSGrad).
#include <cmath>
#include <sstream>

#include "kernels/optim.h"
#include "optim/one_group.h"
#include "smelt/creation.h"
#include "smelt/ops.h"
#include "smelt/optim.h"

namespace smelt::optim {

namespace {
AdamOptions resolved(AdamOptions options, bool decoupled) {
  if (!options.weight_decay) options.weight_decay = decoupled ? 1e-2 : 0.0;
  const char* who = decoupled ? "AdamW" : "Adam";
  SMELT_CHECK(options.lr >= 0) << who << ": lr must be >= 0, got " << options.lr;
  SMELT_CHECK(options.beta1 >= 0 && options.beta1 < 1 && options.beta2 >= 0 && options.beta2 < 1)
      << who << ": betas must be in [0, 1), got (" << options.beta1 << ", " << options.beta2 << ")";
  SMELT_CHECK(options.eps >= 0) << who << ": eps must be >= 0, got " << options.eps;
  SMELT_CHECK(*options.weight_decay >= 0)
      << who << ": weight_decay must be >= 0, got " << *options.weight_decay;
  return options;
}
}  // namespace

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : Adam(one_group(std::move(params)), options, false) {}
Adam::Adam(std::vector<ParamGroupOptions> groups, AdamOptions options)
    : Adam(std::move(groups), options, false) {}
Adam::Adam(std::vector<ParamGroupOptions> groups, AdamOptions options, bool decoupled)
    : Optimizer(std::move(groups), options.lr, *resolved(options, decoupled).weight_decay),
      options_(resolved(options, decoupled)),
      decoupled_(decoupled) {}

AdamW::AdamW(std::vector<Tensor> params, AdamOptions options)
    : Adam(one_group(std::move(params)), options, true) {}
AdamW::AdamW(std::vector<ParamGroupOptions> groups, AdamOptions options)
    : Adam(std::move(groups), options, true) {}

std::vector<std::string> Adam::buffer_names() const {
  if (options_.amsgrad) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  return {"exp_avg", "exp_avg_sq"};
}

void Adam::step() {
  for_each_param_with_grad([&](ParamGroup& group, Tensor& p, ParamState& state) {
    if (state.step == 0) {
      state.buffers = {zeros(p.shape(), p.dtype()), zeros(p.shape(), p.dtype())};
      if (options_.amsgrad) state.buffers.push_back(zeros(p.shape(), p.dtype()));
    }
    kernels::AdamHyper h;
    h.lr = group.lr;
    h.beta1 = options_.beta1;
    h.beta2 = options_.beta2;
    h.eps = options_.eps;
    h.weight_decay = group.weight_decay;
    h.decoupled_weight_decay = decoupled_;
    h.amsgrad = options_.amsgrad;
    h.maximize = options_.maximize;
    h.step = state.step + 1;
    kernels::adam_step(p, p.grad(), state.buffers[0], state.buffers[1],
                       options_.amsgrad ? state.buffers[2] : Tensor(), h);
    ++state.step;
  });
}

// The rule of adam_step (kernels/optim.h) as smelt ops, in its order of operations.
std::vector<double> Adam::update_scalars(const ParamGroup& group, int64_t step) const {
  const double bias1 = 1.0 - std::pow(options_.beta1, double(step));
  const double bias2_sqrt = std::sqrt(1.0 - std::pow(options_.beta2, double(step)));
  const double shrink = decoupled_ ? 1 - group.lr * group.weight_decay : 1.0;
  return {group.lr / bias1, 1.0 / bias2_sqrt, shrink};
}

std::string Adam::update_constants(const ParamGroup& group, bool) const {
  std::ostringstream key;
  key.precision(17);
  key << type_name() << " betas " << options_.beta1 << " " << options_.beta2 << " eps "
      << options_.eps << " weight_decay " << group.weight_decay << " amsgrad "
      << options_.amsgrad << " maximize " << options_.maximize;
  return key.str();
}

std::vector<Tensor> Adam::update(const Tensor& param, const Tensor& grad,
                                 const std::vector<Tensor>& state,
                                 const std::vector<Tensor>& scalars, const ParamGroup& group,
                                 bool) const {
  const Tensor &step_size = scalars.at(0), &inv_bias2_sqrt = scalars.at(1), &shrink = scalars.at(2);
  Tensor g = options_.maximize ? -grad : grad;
  Tensor p = param;
  if (group.weight_decay != 0) {
    if (decoupled_) {
      p = p * shrink;
    } else {
      g = g + param * group.weight_decay;
    }
  }
  Tensor m = state.at(0) * options_.beta1 + g * (1 - options_.beta1);
  Tensor v = state.at(1) * options_.beta2 + g * (1 - options_.beta2) * g;
  std::vector<Tensor> out = {Tensor(), m, v};
  Tensor denom_v = v;
  if (options_.amsgrad) {
    denom_v = maximum(state.at(2), v);
    out.push_back(denom_v);
  }
  out[0] = p - step_size * m / (sqrt(denom_v) * inv_bias2_sqrt + options_.eps);
  return out;
}

}  // namespace smelt::optim
