// The parameter groups of an optimizer built from a plain list of parameters: one group, with the
// optimizer's own options (no per-group learning rate or weight decay).
#pragma once

#include <utility>
#include <vector>

#include "smelt/optim.h"

namespace smelt::optim {

inline std::vector<ParamGroupOptions> one_group(std::vector<Tensor> params) {
  return {ParamGroupOptions{std::move(params), std::nullopt, std::nullopt}};
}

}  // namespace smelt::optim
