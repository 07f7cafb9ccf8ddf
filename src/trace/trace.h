// Capture: run a C++ callable with symbolic tensors and record the ops it performs into a Graph,
// through the same dispatcher as eager mode (shape rules only, no compute).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace smelt::trace {

using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs,
                                             const std::vector<Tensor>& params)>;

// Graph inputs: one per example input, then one per parameter (kind Param). Tensors the callable
// creates itself (constants, numbers) become constants of the graph.
// Random ops (dropout) make the generator state explicit: the first one adds an input `rng_state`
// (Int64 [2] = {seed, counter}, see generator_state_tensor) after the parameters, each one passes
// the advanced state to the next, and the last state is the graph's last output. Replaying with
// generator_state_tensor(default_generator().state()) draws what eager code would, and feeding
// the output state into the next run draws fresh numbers.
//
// With `captured` (smelt::compile's traces), tensors the function captured from outside instead
// of creating them while traced (tensor/capture.h) are not constants but graph inputs (kind Param,
// named captured.K), read on every call: they follow the parameters (before rng_state and the
// loss tangent), and `*captured` receives the tensors, in the order of those inputs. Their values
// must not be read while tracing, nor changed in place (an error says so). With `frozen` too
// (CompileOptions::freeze), captured tensors in memory smelt owns stay constants, listed in
// `*frozen` for the caller to guard by version; memory smelt does not own (from_blob, NumPy) can
// change unseen, so it is still an input.
struct Capture {
  std::vector<Tensor>* captured = nullptr;
  std::vector<Tensor>* frozen = nullptr;
};
std::unique_ptr<ir::Graph> trace(const Fn& fn, const std::vector<Tensor>& example_inputs,
                                 const std::vector<Tensor>& params = {}, Capture capture = {});

// The joint forward+backward graph (ahead-of-time autograd): `fn` returns a scalar loss, then
// optionally auxiliary outputs that are not differentiated (new batch-norm statistics, metrics).
// Graph inputs: the example inputs, the parameters, `rng_state` when fn draws random numbers, then
// the loss tangent (a scalar, 1 for plain training). Graph outputs: the loss, d loss / d param for
// each parameter, the auxiliary outputs, then the final generator state when fn draws random
// numbers. The backward part is recorded by running smelt's own gradient rules under the tracer.
// A parameter the loss does not use gets a zero gradient. With `grads_for`, gradients are taken
// as eager backward() takes them instead: only for the parameters that require grad and that the
// loss reaches; `grads_for` receives their indices into `params`, in the order of the outputs.
std::unique_ptr<ir::Graph> trace_joint(const Fn& fn, const std::vector<Tensor>& example_inputs,
                                       const std::vector<Tensor>& params,
                                       std::vector<size_t>* grads_for = nullptr,
                                       Capture capture = {});

// The vector-Jacobian product of a traced graph: ahead-of-time autograd for the calls of
// smelt::compile whose inputs require grad. `forward` (a traced graph, not fused) is replayed op
// by op under the tracer with grad mode on, its inputs where `wrt` is true requiring grad; then
// smelt's own gradient rules run backward from the outputs where `differentiable` is true and
// that depend on a `wrt` input, each weighted by a tangent (an input of the output's shape).
// Graph inputs: `forward`'s inputs, then the tangents. Graph outputs: `forward`'s outputs, then
// one gradient per `wrt` input that a differentiated output reaches. passes/partition.h splits it
// into a forward and a backward graph.
struct Vjp {
  std::unique_ptr<ir::Graph> graph;
  std::vector<size_t> tangent_of;  // per tangent input: the forward output it weights
  std::vector<size_t> grad_of;     // per gradient output: the forward input it is for
};
Vjp trace_vjp(const ir::Graph& forward, const std::vector<bool>& wrt,
              const std::vector<bool>& differentiable);

// A graph that computes what `base` computes and more: `base` (a traced graph, not fused) is
// replayed op by op under the tracer, gradients off; then `more` gets symbolic tensors for
// base's inputs followed by the `extra_inputs` (new graph inputs, named), and for base's outputs,
// and returns tensors to add as outputs. Graph inputs: base's, then the extra ones. Graph outputs:
// base's where `keep` is true (all of them when `keep` is empty), then `more`'s. Tensors `more`
// creates are constants. (A training step's optimizer update, after the joint graph.)
using ExtendFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs,
                                                   const std::vector<Tensor>& outputs)>;
std::unique_ptr<ir::Graph> extend(const ir::Graph& base,
                                  const std::vector<std::pair<std::string, ops::TensorMeta>>& extra_inputs,
                                  const std::vector<bool>& keep, const ExtendFn& more);

}  // namespace smelt::trace
