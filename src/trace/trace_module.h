// Capture a module: its parameters and buffers become named graph inputs, read afresh on every
// run, instead of constants that hold the tensors of the moment (which `fold` would bake into the
// graph, so an optimizer step would never reach it). In training mode the buffers the forward
// replaces (BatchNorm2d's running statistics and num_batches_tracked) leave the graph as extra
// outputs, and ModuleGraph::run writes them back: the graph is functional, the module is updated
// as eager code updates it.
//
//   auto mg = trace::trace_module(model, [&](const std::vector<Tensor>& in) {
//     return std::vector<Tensor>{model(in[0])};
//   }, {x});
//   passes::run_pipeline(*mg.graph, passes::kDefaultPipeline);
//   Tensor y = mg.run(model, {x})[0];  // == model(x), running statistics updated alike
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "trace/random_draws.h"

namespace smelt::nn {
class Module;
}

namespace smelt::trace {

// What the module is asked to compute; it calls the module (captured) on the inputs.
using ModuleFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

// A traced module and how its graph's inputs and outputs map to the module's state.
//
// Graph inputs, in order: the user's inputs (`num_inputs`), the buffers (kind Input, named as in
// the state dict, `buffers`), the parameters (kind Param, `params`), the tensors the function
// captured from outside the module (`captured`, trace.h), `rng_state` when the module draws random
// numbers (`random`: dropout in training mode); a joint graph adds the loss tangent last. Graph
// outputs, in order: `num_outputs` outputs (the user's; joint: the loss, then one gradient per
// entry of `grad_params`), then the new value of each buffer in `updated_buffers` (printed as
// %<buffer>.new when it is a computed value), then the advanced generator state when `random`.
struct ModuleGraph {
  std::unique_ptr<ir::Graph> graph;
  bool joint = false;
  bool training = false;    // the module's mode when traced; run() requires the same mode
  std::vector<bool> modes;  // every submodule's mode too (module_modes): run() requires the same
  size_t num_inputs = 0;
  std::vector<std::string> buffers;
  std::vector<std::string> params;
  // Joint: the parameters (indices into `params`) with a gradient output, as eager backward()
  // gives them: those that required grad when traced and that the loss reaches.
  std::vector<size_t> grad_params;
  size_t num_outputs = 0;
  std::vector<std::string> updated_buffers;
  std::vector<Tensor> captured;  // read on every run, as the module's state is
  bool random = false;

  // Binds the module's current parameters and buffers (looked up by name) to the graph inputs,
  // runs the graph with the interpreter, copies the updated buffers into the module's tensors
  // (without recording gradients) and returns the first `num_outputs` outputs. A joint graph gets
  // a loss tangent of 1. A random graph draws from the default generator and advances it as eager
  // code would: the same seed gives the same dropout masks traced or eager.
  std::vector<Tensor> run(nn::Module& module, const std::vector<Tensor>& inputs) const;

  // run() with another executor of the same graph (a compiled plan): `execute` gets every graph
  // input of this call (checked against the module) and returns the graph's outputs; the updated
  // buffers are written back and the first `num_outputs` outputs returned. A random graph's draws
  // are one reservation from the default generator (trace/random_draws.h): calls on several
  // threads get disjoint masks.
  using Executor = std::function<std::vector<Tensor>(const std::vector<Tensor>& graph_inputs)>;
  std::vector<Tensor> run_with(nn::Module& module, const std::vector<Tensor>& inputs,
                               const Executor& execute) const;

 private:
  std::vector<Tensor> bind(nn::Module& module, const std::vector<Tensor>& inputs,
                           const Tensor& rng_state) const;
  std::vector<Tensor> finish(nn::Module& module, std::vector<Tensor> outputs) const;
  std::shared_ptr<RandomDraws> draws_ = std::make_shared<RandomDraws>();
};

// The train/eval flag of `module` and of every submodule, depth first: a submodule switched to
// eval on its own (a frozen BatchNorm) changes what a traced graph must do.
std::vector<bool> module_modes(const nn::Module& module);

// Traces `fn(example_inputs)` with the module's parameters and buffers symbolic. The module's
// members are restored to its own tensors afterwards, also when `fn` throws.
ModuleGraph trace_module(nn::Module& module, const ModuleFn& fn,
                         const std::vector<Tensor>& example_inputs);

// The joint forward+backward graph of a training step: `loss_fn` returns one scalar loss;
// gradients are taken with respect to every parameter of the module (see trace::trace_joint).
ModuleGraph trace_module_joint(nn::Module& module, const ModuleFn& loss_fn,
                               const std::vector<Tensor>& example_inputs);

}  // namespace smelt::trace
