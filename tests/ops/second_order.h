// Second-order gradient check for the nn op tests: gradcheck of a scalar made of the
// create_graph gradients of f, so every gradient rule is itself differentiated and compared
// against finite differences.
#pragma once

#include "support/check.h"

namespace smelt::testing {

inline ::testing::AssertionResult gradgradcheck(
    const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs) {
  Shape out_shape;
  {
    NoGradGuard guard;
    out_shape = f(inputs).shape();
  }
  Generator gen(91);
  Tensor w = uniform(out_shape, 0.5, 1.5, DType::Float64, &gen);
  std::vector<Tensor> v;
  for (const Tensor& x : inputs) v.push_back(uniform(x.shape(), -1.0, 1.0, DType::Float64, &gen));

  auto weighted_first_grads = [&](const std::vector<Tensor>& xs) {
    autograd::EnableGradGuard on;  // gradcheck evaluates the perturbed points without grad
    std::vector<Tensor> leaves;
    for (const Tensor& x : xs) {
      if (x.requires_grad()) {
        leaves.push_back(x);
      } else {
        Tensor leaf = x.detach();
        leaf.set_requires_grad();
        leaves.push_back(leaf);
      }
    }
    std::vector<Tensor> g = autograd::grad({sum(f(leaves) * w)}, leaves, {}, /*retain_graph=*/true,
                                           /*create_graph=*/true, /*allow_unused=*/true);
    Tensor total = zeros({}, DType::Float64);
    for (size_t k = 0; k < leaves.size(); ++k) {
      total = total + 0.0 * sum(leaves[k]);  // keeps a zero second derivative connected
      if (g[k].defined()) total = total + sum(g[k] * v[k]);
    }
    return total;
  };
  return gradcheck(weighted_first_grads, inputs);
}

}  // namespace smelt::testing
