// User-defined ops: a row of the op table supplied at run time.
//
// A registered op works where a built-in does: eagerly and under autograd, in traced graphs and
// the IR text (printed and parsed by its name), under smelt::compile (an opaque step of the plan,
// a fusion barrier, unless it has an expression: then it is replaced by that expression before
// optimization and fuses as its ops do), and in ONNX import (a node of `onnx_domain` whose op
// type is the op's name). docs/design.md "User-defined ops" says how.
//
//   smelt::OpDefinition def;
//   def.name = "swiglu";                       // an identifier: letters, digits, '_'
//   def.num_inputs = 2;
//   def.forward = [](const std::vector<Tensor>& in, const Attrs&, const std::vector<Tensor>& out) {
//     ... write out[0] from in[0], in[1] ...
//   };
//   def.backward = [](const GradContext& ctx) -> std::vector<Tensor> { ... smelt ops ... };
//   def.expression = [](const std::vector<Tensor>& in, const Attrs&) -> std::vector<Tensor> {
//     return {smelt::silu(in[0]) * in[1]};
//   };
//   smelt::CustomOp swiglu = smelt::register_op(def);
//   Tensor y = swiglu({a, b})[0];
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "smelt/op_types.h"
#include "smelt/tensor.h"

namespace smelt {

// Output metas from input metas and attributes. Throws smelt::Error for operands the op refuses.
using OpShapeRule = std::function<std::vector<TensorMeta>(const std::vector<TensorMeta>& inputs,
                                                          const Attrs& attrs)>;
// Writes every element of each out[k]: contiguous tensors of the shape rule's metas, whose memory
// holds anything beforehand (a memory plan hands in slots of its arena). Reads the inputs (any
// strides) without writing them (unless OpDefinition::writes names them). Runs with grad mode off.
// It must be deterministic and have no effects beyond its outputs (and `writes`): a compiled graph
// may merge two equal calls. It may raise (a validation op): compiled graphs keep every call, used
// or not, and never evaluate one ahead of time, so they raise where eager code does.
using OpKernel = std::function<void(const std::vector<Tensor>& inputs, const Attrs& attrs,
                                    const std::vector<Tensor>& outputs)>;
// One gradient per input (an undefined Tensor() for an input without one), written with smelt
// ops so that it runs eagerly, is recorded under tracing (compiled training), and differentiates
// again (higher-order gradients). A gradient may have a shape the input broadcasts to; it is
// summed down to the input's shape.
using OpBackward = std::function<std::vector<Tensor>(const GradContext& ctx)>;
// Where a view's elements lie in the memory it shares with its input: element i of the view is
// at offset + sum_d i[d] * strides[d], in elements from the start of the storage.
struct StridedLayout {
  Shape strides;
  int64_t offset = 0;
};
// A view op's layout: its output's strides and offset, given its input's shape, strides and
// offset and its output's shape (the shape rule's).
using OpViewRule = std::function<StridedLayout(const Shape& in_shape, const Shape& in_strides,
                                               int64_t in_offset, const Shape& out_shape,
                                               const Attrs& attrs)>;
// The op's outputs written with smelt ops (the same values as `forward`).
using OpExpression = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs,
                                                       const Attrs& attrs)>;

struct OpDefinition {
  std::string name;     // an identifier, unique among built-in and registered ops
  int num_inputs = 1;   // -1: any number, at least one
  int num_outputs = 1;
  // Empty: one output with input 0's shape and dtype.
  OpShapeRule shape;
  // The kernel. Empty when `expression` is given (the expression's ops then compute eagerly too),
  // and for a view op (`view`).
  OpKernel forward;
  // Empty: the op is not differentiable; backward through it is an error naming the op.
  OpBackward backward;
  // What the backward reads: the inputs, the outputs (as GradContext holds them). Tensors not
  // saved arrive as stand-ins with shape and dtype but no data.
  bool backward_reads_inputs = true;
  bool backward_reads_outputs = true;
  // Optional: compile replaces the op by this before optimizing, so elementwise expressions fuse
  // into the kernels around them; ONNX export writes an op without `onnx_domain` as these ops.
  // The outputs must match the shape rule's, and it is a function of the inputs and attributes
  // only: a tensor it captured from outside is an error when compiled (pass it as an input).
  OpExpression expression;
  // Optional: the op is a view, as reshape, permute, slice and expand are. It computes nothing:
  // its one output shares its one input's memory (same dtype), laid out as `view` says, so a
  // write through either reaches the other and autograd follows it (an in-place op on the view
  // gives the input the history a built-in view would). Compiled, it fuses into the kernels
  // around it as index arithmetic. The rule must be affine, as every strided view is: each output
  // stride a sum of input strides times non-negative integers, the offset in_offset plus such a
  // sum (a diagonal of a square matrix: strides {s[0] + s[1]}, offset in_offset). Each call
  // checks that (it asks the rule at a stride of 1 in each input dim as well) and that every
  // element of the view lies within the input. No forward, expression or writes; one input, one
  // output. The backward is a function as any op's; if it needs only the input's shape, set
  // backward_reads_inputs and backward_reads_outputs false, so that writes through the view
  // after the call do not invalidate the saved input.
  OpViewRule view;
  // Inputs the forward writes in place (a state update: a counter, a cache). Such an op runs
  // eagerly only: its written inputs must be concrete tensors that may be changed in place (not a
  // leaf that requires grad, not an expanded view), their versions are bumped (a tensor autograd
  // saved from them is refused at backward), it records no gradient (an input requiring grad is an
  // error), and tracing it (smelt::compile, Graph::trace, ONNX import) is an error: graphs are
  // functional. Passes keep such a node in place (never merged, moved past its readers or fused).
  std::vector<int> writes;
  // ONNX: a node of this domain (e.g. "com.example") whose op type is `name` imports as this op,
  // its attributes passed as they are, and export writes the op so. Empty: none.
  std::string onnx_domain;
  // Every call (eager, and each run of a compiled plan's step) checks that `forward` left its
  // inputs as they were: a hash of their bytes before and after, one more read of each input.
  // Turn off once the kernel is trusted.
  bool check_inputs_unchanged = true;
  // Where a compiled plan runs the op. Anywhere: where the graph's order puts it. Early: as soon
  // as its inputs are computed (an op that starts background work, such as a collective). Late:
  // right before the first step that reads its outputs (an op that waits for such work). The
  // steps between overlap with the background work.
  enum class Placement { Anywhere, Early, Late };
  Placement placement = Placement::Anywhere;
};

// A registered op: call it like a function.
class CustomOp {
 public:
  CustomOp() = default;
  const std::string& name() const { return name_; }
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs, const Attrs& attrs = {}) const;

 private:
  friend CustomOp register_op(OpDefinition definition);
  friend CustomOp find_op(const std::string& name);
  explicit CustomOp(std::string name, uint16_t id) : name_(std::move(name)), id_(id) {}
  std::string name_;
  uint16_t id_ = 0;
};

// Adds the op for the rest of the process. A name that is not an identifier, or that a built-in
// or registered op already has, a missing forward (and expression, and view rule), or arities out
// of range are errors. Thread-safe; ops registered are never removed.
CustomOp register_op(OpDefinition definition);
// The registered op called `name` (errors when there is none).
CustomOp find_op(const std::string& name);
bool is_registered_op(const std::string& name);
// Calls a registered op by name.
std::vector<Tensor> call_op(const std::string& name, const std::vector<Tensor>& inputs,
                            const Attrs& attrs = {});

// A function with a hand-written gradient, as PyTorch's torch.autograd.Function: `forward` runs
// with gradients off (its ops record no history of their own) and returns the outputs; when grad
// mode is on and an input requires grad, the outputs get one autograd node whose backward is
// `backward(grads of the outputs)` -> one gradient per input (an undefined Tensor() where there
// is none; shape as for OpBackward). Traced (smelt::compile) the forward's ops are recorded as
// they run and the backward runs under the tracer in compiled training, so both must use smelt
// ops there; a compiled call that must differentiate the function itself (its inputs require
// grad) refuses, naming it. An output of `forward` that the backward holds (a saved output, as
// exp's backward reads exp(x)) carries the node's history while the backward runs, so a
// create_graph backward differentiates through it. `name` names the node in errors.
using FunctionForward = std::function<std::vector<Tensor>()>;
using FunctionBackward = std::function<std::vector<Tensor>(const std::vector<Tensor>& grads)>;
std::vector<Tensor> apply_function(const std::string& name, const std::vector<Tensor>& inputs,
                                   const FunctionForward& forward, FunctionBackward backward);

}  // namespace smelt
