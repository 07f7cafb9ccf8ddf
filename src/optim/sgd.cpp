// SGD with momentum, dampening, Nesterov momentum and weight decay (PyTorch's semantics).
#include <sstream>

#include "kernels/optim.h"
#include "optim/one_group.h"
#include "smelt/creation.h"
#include "smelt/ops.h"
#include "smelt/optim.h"

namespace smelt::optim {

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

// The rule of sgd_step (kernels/optim.h) as smelt ops, in its order of operations.
std::vector<double> SGD::update_scalars(const ParamGroup& group, int64_t) const { return {group.lr}; }

// The first update sets the momentum buffer to the gradient; a later one with dampening 0 gives
// the same from a zero buffer (momentum * 0 + 1 * d), so only a dampened rule tells them apart.
std::string SGD::update_constants(const ParamGroup& group, bool first_step) const {
  std::ostringstream key;
  key.precision(17);
  key << "SGD momentum " << options_.momentum << " dampening " << options_.dampening
      << " weight_decay " << group.weight_decay << " nesterov " << options_.nesterov
      << " maximize " << options_.maximize;
  if (options_.momentum != 0 && options_.dampening != 0 && first_step) key << " first step";
  return key.str();
}

std::vector<Tensor> SGD::update(const Tensor& param, const Tensor& grad,
                                const std::vector<Tensor>& state,
                                const std::vector<Tensor>& scalars, const ParamGroup& group,
                                bool first_step) const {
  const Tensor& lr = scalars.at(0);
  Tensor d = options_.maximize ? -grad : grad;
  if (group.weight_decay != 0) d = d + param * group.weight_decay;
  if (options_.momentum == 0) return {param - lr * d};
  Tensor b = first_step && options_.dampening != 0
                 ? d
                 : state.at(0) * options_.momentum + d * (1 - options_.dampening);
  Tensor step = options_.nesterov ? d + b * options_.momentum : b;
  return {param - lr * step, b};
}

}  // namespace smelt::optim
