// apply_function (smelt/custom_op.h): a function with a hand-written gradient, as PyTorch's
// torch.autograd.Function. The forward's ops run with grad mode off; one FunctionNode then stands
// for all of them in the autograd graph, its backward the user's.
#include <cstdint>

#include "autograd/node.h"
#include "ops/custom_ops.h"
#include "ops/dispatch.h"
#include "smelt/autograd.h"
#include "smelt/creation.h"
#include "smelt/custom_op.h"

namespace smelt {
namespace {

class FunctionNode final : public autograd::Node {
 public:
  FunctionNode(std::string name, FunctionBackward backward, std::vector<TensorMeta> inputs,
               std::vector<TensorMeta> outputs)
      : Node(uint32_t(outputs.size())), name_(std::move(name)), backward_(std::move(backward)),
        inputs_(std::move(inputs)), outputs_(std::move(outputs)) {}

  const char* name() const override { return name_.c_str(); }

  // The forward's own output tensors that something else holds (a closure, ctx.save_for_backward):
  // during backward they carry this node as their history, so that a create_graph backward
  // differentiates through them (d/dx of exp's backward, g * y, reaches x through y). Outside
  // backward they have none: a tensor saved by the node's own backward must not point back at it
  // (a reference cycle).
  void keep_output(size_t k, Ref<TensorImpl> raw) {
    if (raw_outputs_.size() <= k) raw_outputs_.resize(k + 1);
    raw_outputs_[k] = std::move(raw);
  }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    for (size_t k = 0; k < grads.size(); ++k) {
      if (!grads[k].defined()) grads[k] = zeros(outputs_[k].shape, outputs_[k].dtype);
    }
    std::vector<Tensor> result;
    const std::string where = "function '" + name_ + "': backward";
    struct OutputHistory {  // attached for the backward's duration, whatever it throws
      FunctionNode* node;
      explicit OutputHistory(FunctionNode* n) : node(n) {
        for (size_t k = 0; k < n->raw_outputs_.size(); ++k) {
          if (TensorImpl* t = n->raw_outputs_[k].get()) {
            t->requires_grad = true;
            t->grad_fn = Ref<GradNode>(n);
            t->output_nr = uint32_t(k);
          }
        }
      }
      ~OutputHistory() {
        for (const Ref<TensorImpl>& t : node->raw_outputs_) {
          if (!t) continue;
          t->grad_fn = Ref<GradNode>();
          t->requires_grad = false;
        }
      }
    };
    result = ops::with_context(where, [&] {
      OutputHistory history(this);
      return backward_(grads);
    });
    SMELT_CHECK(result.size() == inputs_.size())
        << where << " returned " << result.size() << " gradients for " << inputs_.size()
        << " tensor inputs (one per input; an undefined Tensor() for an input without one)";
    for (size_t i = 0; i < result.size(); ++i) {
      if (!result[i].defined() || !next[i].node) {
        result[i] = Tensor();
        continue;
      }
      result[i] = ops::checked_gradient(where, result[i], inputs_[i], i);
      if (result[i].shape() != inputs_[i].shape) result[i] = ops::sum_to(result[i], inputs_[i].shape);
    }
    return result;
  }

  // What the backward captured (saved tensors) goes with it.
  void release_saved() override {
    backward_ = nullptr;
    raw_outputs_.clear();
    released = true;
  }

 private:
  std::string name_;
  FunctionBackward backward_;
  std::vector<TensorMeta> inputs_;
  std::vector<TensorMeta> outputs_;
  std::vector<Ref<TensorImpl>> raw_outputs_;
};

// Under a trace that records no autograd (smelt::compile traces its function so), each floating
// output of a function goes through this op, the identity of its first input (the output; the
// function's inputs follow, so that a gradient path exists even where the forward's ops have no
// gradient, as round's): compiled inference inlines it away (its
// expression is the input), while differentiating the traced graph later (a compiled call whose
// inputs require grad replays the graph under autograd) meets its gradient rule, an error, instead
// of silently differentiating the forward's ops in place of the hand-written backward. Training
// steps (compile_step) trace with autograd on: there the function's own node is recorded.
const CustomOp& untraced_backward_marker() {
  static const CustomOp op = [] {
    OpDefinition def;
    def.name = "autograd_function";
    def.num_inputs = -1;  // the output, then the function's inputs: the path a gradient would take
    def.forward = [](const std::vector<Tensor>& in, const Attrs&, const std::vector<Tensor>& out) {
      NoGradGuard no_grad;
      Tensor target = out[0];
      target.copy_(in[0]);
    };
    def.expression = [](const std::vector<Tensor>& in, const Attrs&) { return std::vector<Tensor>{in[0]}; };
    def.backward = [](const GradContext& c) -> std::vector<Tensor> {
      SMELT_CHECK(false) << "function '" << c.attrs.get_string("function") << "' has a hand-written "
                         << "backward that a compiled call cannot replay: the call traced its "
                         << "forward without autograd. Differentiate it eagerly, train it with "
                         << "compile_step (which records the backward), or register it as an op "
                         << "(smelt::register_op) whose backward the compiler can trace";
      return {};
    };
    def.backward_reads_inputs = false;
    def.backward_reads_outputs = false;
    return register_op(def);
  }();
  return op;
}

// Registered when the library loads, so that IR text holding the marker parses in any process and
// no user op can take its name first.
[[maybe_unused]] const bool kMarkerRegistered = (untraced_backward_marker(), true);

}  // namespace

std::vector<Tensor> apply_function(const std::string& name, const std::vector<Tensor>& inputs,
                                   const FunctionForward& forward, FunctionBackward backward) {
  SMELT_CHECK(bool(forward) && bool(backward)) << "apply_function '" << name << "': give a forward and a backward";
  bool any_requires_grad = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    SMELT_CHECK(inputs[i].defined()) << "apply_function '" << name << "': input " << i << " is undefined";
    any_requires_grad |= inputs[i].requires_grad();
  }
  const bool record = any_requires_grad && autograd::grad_enabled();
  std::vector<Tensor> outputs;
  {
    NoGradGuard no_grad;
    outputs = ops::with_context("function '" + name + "': forward", forward);
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    SMELT_CHECK(outputs[k].defined()) << "function '" << name << "': forward returned an undefined output " << k;
  }
  if (!record) {
    if (ops::dispatch_hook()) {
      for (Tensor& t : outputs) {
        if (!dtype_is_floating(t.dtype())) continue;
        std::vector<Tensor> marked{t};
        marked.insert(marked.end(), inputs.begin(), inputs.end());
        t = untraced_backward_marker()(marked, {{"function", name}})[0];
      }
    }
    return outputs;
  }

  std::vector<TensorMeta> in_metas, out_metas;
  for (const Tensor& t : inputs) in_metas.push_back(ops::meta_of(t));
  for (const Tensor& t : outputs) out_metas.push_back(ops::meta_of(t));
  Ref<FunctionNode> node(new FunctionNode(name, std::move(backward), std::move(in_metas), out_metas));
  for (const Tensor& t : inputs) node->next.push_back(autograd::gradient_edge(t));
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (!dtype_is_floating(outputs[k].dtype())) continue;  // integer outputs carry no gradient
    // A fresh impl, so that an input returned as it is, or a tensor held elsewhere, keeps its own
    // history (as the dispatcher does for view outputs).
    TensorImpl* o = outputs[k].impl();
    if (o->ref_count() > 1 && !o->requires_grad) node->keep_output(k, Ref<TensorImpl>(o));  // held elsewhere too
    Tensor fresh = make_tensor(outputs[k].storage(), o->shape, o->strides, o->offset, o->dtype);
    fresh.impl()->trace_id = o->trace_id;
    fresh.impl()->requires_grad = true;
    fresh.impl()->grad_fn = Ref<GradNode>(node.get());
    fresh.impl()->output_nr = uint32_t(k);
    outputs[k] = fresh;
  }
  return outputs;
}

}  // namespace smelt
