// Reverse-mode autograd: grad mode, gradients of outputs with respect to inputs.
//
// Tensor::backward() accumulates into leaves' `.grad`; autograd::grad() returns gradients
// without touching `.grad`. With create_graph the backward pass is itself recorded, so gradients
// can be differentiated again.
#pragma once

#include <functional>
#include <vector>

#include "smelt/tensor.h"

namespace smelt::autograd {

bool grad_enabled();
void set_grad_enabled(bool on);

// Turns gradient recording off for a scope.
class NoGradGuard {
 public:
  NoGradGuard() : prev_(grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// Turns gradient recording on for a scope (inside a NoGradGuard, say).
class EnableGradGuard {
 public:
  EnableGradGuard() : prev_(grad_enabled()) { set_grad_enabled(true); }
  ~EnableGradGuard() { set_grad_enabled(prev_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool prev_;
};

// Runs backward from `outputs` (each paired with its gradient; an undefined gradient means
// ones for a one-element output) and accumulates into the leaves' `.grad`.
void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs = {},
              bool retain_graph = false, bool create_graph = false);

// d(outputs)/d(inputs), weighted by grad_outputs. An input that no output depends on gets an
// undefined tensor when allow_unused, an error otherwise. `.grad` is not touched.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool create_graph = false, bool allow_unused = false);

// From a hook while a backward runs on this thread: `callback` runs once that backward has sent
// every gradient (all .grad accumulated), before backward() returns, on the same thread; in queue
// order, a callback may queue another. A backward that throws drops its callbacks. Anywhere else
// it is an error. (Data-parallel training waits for its all-reduces there.)
void queue_callback(std::function<void()> callback);

}  // namespace smelt::autograd

namespace smelt {
using autograd::NoGradGuard;
}
