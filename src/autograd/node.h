// The autograd graph: a Node is a backward function plus what it saved and where its input
// gradients go. The engine knows nothing of specific ops; ops/ subclasses Node.
#pragma once

#include <cstdint>
#include <vector>

#include "smelt/tensor.h"

namespace smelt::autograd {

class Node;

// Where a gradient goes: output slot `slot` of `node` (slot 0 for a leaf's accumulator).
struct Edge {
  Ref<Node> node;
  uint32_t slot = 0;
};

class Node : public GradNode {
 public:
  explicit Node(uint32_t num_outputs) : hooks(num_outputs) {}

  // Gradients of this node's outputs (undefined where none flowed) -> gradients for each edge in
  // `next` (undefined where there is none).
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grads) = 0;
  // Frees saved tensors after a backward without retain_graph.
  virtual void release_saved() {}
  // True once release_saved() ran: another backward through this node is an error.
  bool released = false;

  uint32_t num_outputs() const { return static_cast<uint32_t>(hooks.size()); }

  std::vector<Edge> next;                  // one per differentiable input
  std::vector<std::vector<GradHook>> hooks;  // per output, run on the summed gradient

  // Nodes come from a pooled arena: training allocates and frees thousands per step.
  static void* operator new(size_t size);
  static void operator delete(void* p, size_t size);

 protected:
  void destroy() override;
};

// The node at the bottom of a leaf: adds the incoming gradient into the leaf's `.grad`.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Ref<TensorImpl> leaf);
  ~AccumulateGrad() override;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  const char* name() const override { return "AccumulateGrad"; }
  TensorImpl* leaf() const { return leaf_.get(); }

 private:
  Ref<TensorImpl> leaf_;
};

// The edge a gradient for `t` should follow: its grad_fn, or its (created on demand) leaf
// accumulator; an empty edge when `t` does not require grad.
Edge gradient_edge(const Tensor& t);

// How a view whose base was rebased by an in-place op rebuilds its history (ops/ replays the
// view's ops on the base). Set by ops/ at start-up; gradient_edge calls it first.
using ViewHistoryRefresher = void (*)(TensorImpl* view);
void set_view_history_refresher(ViewHistoryRefresher refresher);
// Runs the refresher on `t` when it is a view.
void refresh_view_history(const Tensor& t);

// How the engine sums two gradients. Set by ops/ at start-up (autograd sits below ops, so it
// cannot call `add` directly); the sum is itself recorded when create_graph is on.
using GradientAdder = Tensor (*)(const Tensor& a, const Tensor& b);
void set_gradient_adder(GradientAdder adder);
Tensor add_gradients(const Tensor& a, const Tensor& b);

}  // namespace smelt::autograd
