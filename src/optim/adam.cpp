// Adam and AdamW (PyTorch's semantics, bias-corrected, optional AMSGrad).
#include "kernels/optim.h"
#include "smelt/creation.h"
#include "smelt/optim.h"

namespace smelt::optim {

namespace {
std::vector<ParamGroupOptions> one_group(std::vector<Tensor> params) {
  return {ParamGroupOptions{std::move(params), std::nullopt, std::nullopt}};
}

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

}  // namespace smelt::optim
