// Small ready-made models used by the demo, the benchmarks and the tests.
#pragma once

#include "smelt/nn.h"

namespace smelt::models {

// The digits CNN: (N, 1, 8, 8) images -> (N, 10) logits.
//   Conv2d(1, 16, 3, padding 1) -> ReLU -> Conv2d(16, 32, 3, padding 1) -> ReLU -> MaxPool2d(2)
//   -> Flatten -> Linear(32*4*4, 64) -> ReLU -> Linear(64, 10)
std::shared_ptr<nn::Sequential> digits_cnn();

}  // namespace smelt::models
