// SGD with momentum, dampening, Nesterov momentum and weight decay (PyTorch's semantics).
#include "kernels/optim.h"
#include "smelt/creation.h"
#include "smelt/optim.h"

namespace smelt::optim {

namespace {
std::vector<ParamGroupOptions> one_group(std::vector<Tensor> params) {
  return {ParamGroupOptions{std::move(params), std::nullopt, std::nullopt}};
}
}  // namespace

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : SGD(one_group(std::move(params)), options) {}

SGD::SGD(std::vector<ParamGroupOptions> groups, SGDOptions options)
    : Optimizer(std::move(groups), options.lr, options.weight_decay), options_(options) {
  SMELT_CHECK(options.lr >= 0) << "SGD: lr must be >= 0, got " << options.lr;
  SMELT_CHECK(options.momentum >= 0) << "SGD: momentum must be >= 0, got " << options.momentum;
  SMELT_CHECK(options.weight_decay >= 0)
      << "SGD: weight_decay must be >= 0, got " << options.weight_decay;
  SMELT_CHECK(!options.nesterov || (options.momentum > 0 && options.dampening == 0))
      << "SGD: nesterov momentum needs momentum > 0 and dampening == 0, got momentum "
      << options.momentum << " and dampening " << options.dampening;
}

std::vector<std::string> SGD::buffer_names() const {
  if (options_.momentum == 0) return {};
  return {"momentum_buffer"};
}

void SGD::step() {
  const bool use_momentum = options_.momentum != 0;
  for_each_param_with_grad([&](ParamGroup& group, Tensor& p, ParamState& state) {
    const bool first = state.step == 0;
    if (use_momentum && first) state.buffers = {empty(p.shape(), p.dtype())};
    kernels::SgdHyper h;
    h.lr = group.lr;
    h.momentum = options_.momentum;
    h.dampening = options_.dampening;
    h.weight_decay = group.weight_decay;
    h.nesterov = options_.nesterov;
    h.maximize = options_.maximize;
    kernels::sgd_step(p, p.grad(), use_momentum ? state.buffers[0] : Tensor(), first, h);
    ++state.step;
  });
}

}  // namespace smelt::optim
