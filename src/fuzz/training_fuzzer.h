// The compiled-training fuzzer (smelt fuzz --training): random small float64 models trained a few
// steps with compile_step (forward, backward, clipping and the optimizer's update in one plan, at
// a random memory budget) and the same steps eagerly; losses and every parameter, buffer and
// optimizer state must agree.
//
// A case draws: a model (an MLP of Linear layers, activations, LayerNorm, Dropout and residual
// blocks, or a small CNN with Conv2d, BatchNorm2d in training mode, pooling and a residual add),
// its loss (cross entropy or mean squared error), an optimizer (SGD with or without momentum,
// dampening, Nesterov, weight decay, maximize; Adam or AdamW with or without amsgrad, weight
// decay, maximize), a frozen parameter and a parameter the optimizer does not hold sometimes,
// gradient clipping, gradient accumulation, a memory budget and the batch size. Dropout's masks
// come from the same generator state on both sides.
//
// Tolerance: float64, |compiled - eager| <= 1e-7 (1 + |eager|): the plan sums in its own order
// (~1e-16 relative per op), and Adam divides by a root of the gradient's square, which keeps
// relative errors, never amplifies them past that bound in a few steps; a wrong gradient, a lost
// update or a recomputation that changes a value is far outside it.
#pragma once

#include <cstdint>
#include <string>

namespace smelt::fuzz {

struct TrainingFuzzOptions {
  int steps = 4;                         // calls of the step per case
  std::string backend = "interpreter";   // CompileOptions::backend
};

struct TrainingCaseResult {
  bool passed = true;
  std::string message;      // what differed, for a failure
  std::string description;  // the model, optimizer and options drawn
  int updates = 0;          // optimizer updates the case made
  int in_place = 0;         // inputs the plan updated in place (of its last updating call)
};

TrainingCaseResult check_training_case(uint64_t seed, const TrainingFuzzOptions& options = {});

}  // namespace smelt::fuzz
