// StateDict: a flat map from dotted names ("0.weight", "state.3.exp_avg") to tensors. What
// modules and optimizers export and import, and what checkpoints (safetensors) store.
#pragma once

#include <map>
#include <string>

#include "smelt/tensor.h"

namespace smelt {

using StateDict = std::map<std::string, Tensor>;

}  // namespace smelt
