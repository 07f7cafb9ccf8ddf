#include "trace/trace.h"

#include <atomic>
#include <unordered_map>

#include "ops/dispatch.h"
#include "ops/views.h"
#include "smelt/autograd.h"
#include "smelt/creation.h"
#include "smelt/ops.h"
#include "tensor/capture.h"

namespace smelt::trace {
namespace {

// A symbolic tensor's trace_id is (trace number << 32) | value id. Value ids restart at 0 in
// every graph, so without the trace number a tensor kept from an earlier trace would name some
// unrelated value of the new graph and silently read it.
constexpr int kTraceNumberShift = 32;
static_assert(ir::kMaxValueId <= (int64_t(1) << kTraceNumberShift));
std::atomic<int64_t> g_trace_count{0};

// The dispatch hook that turns op calls into IR nodes. A tensor stands for a graph value when
// its trace_id names one of this graph's values; any other tensor with data is a constant.
class Tracer final : public ops::DispatchHook {
 public:
  // A tensor standing for `v`, laid out as eager code would lay it out (`strides`, or row-major
  // when empty): code that asks is_contiguous() while traced (contiguous(), view()) decides as
  // it would eagerly.
  Tensor symbolic(ir::Value* v, bool requires_grad, Shape strides = {}) {
    auto impl = make_ref<TensorImpl>();
    impl->shape = v->meta.shape;
    impl->strides = strides.empty() && !v->meta.shape.empty() ? contiguous_strides(v->meta.shape)
                                                              : std::move(strides);
    impl->dtype = v->meta.dtype;
    impl->trace_id = (trace_number_ << kTraceNumberShift) | v->id;
    impl->requires_grad = requires_grad;
    by_id_[v->id] = v;
    return Tensor(impl);
  }

  Tracer(ir::Graph* graph, Capture capture)
      : graph_(graph),
        trace_number_(++g_trace_count),
        captured_(capture.captured),
        frozen_(capture.frozen) {}

  ir::Value* value_of(const Tensor& t) {
    SMELT_CHECK(t.defined()) << "trace: an operand or output is an undefined tensor (Tensor()); "
                                "a traced function must compute and return defined tensors";
    int64_t id = t.impl()->trace_id;
    if (id >= 0) {
      const int64_t number = id >> kTraceNumberShift;
      const int64_t value_id = id & ((int64_t(1) << kTraceNumberShift) - 1);
      SMELT_CHECK(number == trace_number_)
          << "trace: a symbolic tensor " << dtype_name(t.dtype()) << " " << shape_str(t.shape())
          << " from an earlier trace (trace #" << number << ", value %" << value_id
          << ") was used in trace #" << trace_number_
          << "; symbolic tensors stand for values of their own graph only and must not outlive "
             "their trace. Valid here: the example inputs and parameters this trace passes to the "
             "function, tensors computed from them, and tensors with data (constants)";
      auto it = by_id_.find(value_id);
      SMELT_INTERNAL_CHECK(it != by_id_.end()) << "trace: unknown value %" << value_id;
      return it->second;
    }
    SMELT_CHECK(t.storage()) << "trace: an input tensor has no data and is not part of this trace";
    auto it = constants_.find(t.impl());
    if (it != constants_.end()) return it->second.second;
    ir::Value* c = nullptr;
    const bool outside = captured_ && detail::captured_from_outside(t.storage().get());
    // A joint trace differentiates its parameters only: a gradient through a tensor captured
    // from outside (a parameter held in a variable before the step was compiled) would be lost.
    SMELT_CHECK(!outside || !t.requires_grad() || !autograd::grad_enabled())
        << "compiled training step: the loss uses a tensor that requires grad, "
        << dtype_name(t.dtype()) << " " << shape_str(t.shape())
        << ", captured from outside the module (for instance a parameter kept in a variable); "
           "its gradient would be lost. Valid: reach parameters through the module, or detach() "
           "a tensor that needs no gradient";
    if (outside && frozen_ && t.storage()->owned()) {
      c = graph_->add_constant(t);
      frozen_->push_back(t);
    } else if (outside) {
      // Param: state that may change between calls (docs/design.md "Captured tensors")
      c = graph_->add_input({t.shape(), t.dtype()}, "captured." + std::to_string(captured_->size()),
                            ir::ValueKind::Param);
      captured_->push_back(t);
      captured_values_.push_back(c);
    } else {
      c = graph_->add_constant(t);
    }
    constants_[t.impl()] = {t, c};  // holding t keeps the impl address unique
    return c;
  }

  // The graph inputs in their documented order (trace.h): the example inputs and parameters as
  // first added, the captured tensors, then rng_state and `last` (the loss tangent) when given.
  void order_inputs(size_t example_and_params, ir::Value* last) {
    std::vector<ir::Value*> order(graph_->inputs().begin(),
                                  graph_->inputs().begin() + std::ptrdiff_t(example_and_params));
    order.insert(order.end(), captured_values_.begin(), captured_values_.end());
    if (rng_state_input_) order.push_back(rng_state_input_);
    if (last) order.push_back(last);
    graph_->reorder_inputs(order);
  }

  std::vector<Tensor> record(ops::OpId op, const std::vector<Tensor>& inputs,
                             const ops::Attrs& attrs,
                             const std::vector<ops::TensorMeta>&) override {
    std::vector<ir::Value*> values;
    for (const Tensor& t : inputs) values.push_back(value_of(t));
    ir::Node* node = graph_->add_node(op, values, attrs);
    std::vector<Tensor> outputs;
    for (size_t k = 0; k < node->outputs.size(); ++k) {
      ir::Value* v = node->outputs[k];
      // A view op's output has the layout its eager view kernel would give (ops/views.h).
      const int in = ops::aliases(op, int(k));
      std::optional<ops::ViewLayout> layout;
      if (in >= 0) {
        const Tensor& x = inputs[size_t(in)];
        layout = ops::view_layout(op, attrs, x.shape(), x.strides(), 0, v->meta.shape);
      }
      outputs.push_back(symbolic(v, false, layout ? layout->strides : Shape{}));
    }
    return outputs;
  }

  // The first random op makes the generator state a graph input; later ones read the state the
  // previous one returned.
  Tensor random_state() override {
    if (!rng_state_.defined()) {
      rng_state_input_ = graph_->add_input({{2}, DType::Int64}, "rng_state");
      rng_state_ = symbolic(rng_state_input_, false);
    }
    return rng_state_;
  }
  void set_random_state(const Tensor& state) override { rng_state_ = state; }
  // The state after the last random op, to return from the graph; undefined when none ran.
  const Tensor& final_random_state() const { return rng_state_; }

 private:
  ir::Graph* graph_;
  Tensor rng_state_;
  int64_t trace_number_;
  std::unordered_map<int64_t, ir::Value*> by_id_;
  std::unordered_map<const TensorImpl*, std::pair<Tensor, ir::Value*>> constants_;
  std::vector<Tensor>* captured_ = nullptr;  // null: captured tensors are constants
  std::vector<Tensor>* frozen_ = nullptr;
  std::vector<ir::Value*> captured_values_;
  ir::Value* rng_state_input_ = nullptr;
};

// Installs a hook for a scope and removes it even when the traced code throws; random creation
// functions refuse to run meanwhile (tensor/capture.h).
class HookScope {
 public:
  HookScope(ops::DispatchHook* hook, bool lift_captured)
      : prev_(ops::set_dispatch_hook(hook)), capturing_(lift_captured) {}
  ~HookScope() { ops::set_dispatch_hook(prev_); }

 private:
  ops::DispatchHook* prev_;
  detail::CaptureScope capturing_;
};

}  // namespace

namespace {

// Adds the function's outputs to the graph (an undefined one is an error that names it).
void add_outputs(ir::Graph& graph, Tracer& tracer, const std::vector<Tensor>& outs, size_t first) {
  for (size_t k = first; k < outs.size(); ++k) {
    SMELT_CHECK(outs[k].defined()) << "trace: output " << k
                                   << " of the traced function is an undefined tensor (Tensor()); "
                                      "return only defined tensors";
    graph.add_output(tracer.value_of(outs[k]));
  }
}

std::unique_ptr<ir::Graph> run_trace(const Fn& fn, const std::vector<Tensor>& example_inputs,
                                     const std::vector<Tensor>& params, bool joint,
                                     std::vector<size_t>* grads_for, Capture capture) {
  auto graph = std::make_unique<ir::Graph>();
  if (capture.captured) capture.captured->clear();
  if (capture.frozen) capture.frozen->clear();
  Tracer tracer(graph.get(), capture);
  std::vector<Tensor> inputs, sym_params;
  for (const Tensor& x : example_inputs) {  // contiguous, as a plan reads its inputs
    inputs.push_back(tracer.symbolic(graph->add_input({x.shape(), x.dtype()}), false));
  }
  for (const Tensor& p : params) {
    ir::Value* v = graph->add_input({p.shape(), p.dtype()}, "", ir::ValueKind::Param);
    // With grads_for, a parameter that does not require grad is a plain input of the graph.
    sym_params.push_back(tracer.symbolic(v, joint && (!grads_for || p.requires_grad())));
  }
  const size_t declared_inputs = graph->inputs().size();
  HookScope scope(&tracer, capture.captured != nullptr);
  if (!joint) {
    NoGradGuard no_grad;  // a forward-only trace records no autograd nodes
    add_outputs(*graph, tracer, fn(inputs, sym_params), 0);
    if (tracer.final_random_state().defined()) {
      graph->add_output(tracer.value_of(tracer.final_random_state()));
    }
    tracer.order_inputs(declared_inputs, nullptr);
    return graph;
  }
  autograd::EnableGradGuard grad_on;
  std::vector<Tensor> outs = fn(inputs, sym_params);
  SMELT_CHECK(!outs.empty() && outs[0].defined() && outs[0].numel() == 1)
      << "trace_joint: the function must return a scalar loss first, got "
      << (outs.empty()         ? std::string("no outputs")
          : !outs[0].defined() ? std::string("an undefined tensor (Tensor())")
                               : "a first output of shape " + shape_str(outs[0].shape()));
  Tensor loss = outs[0];
  SMELT_CHECK(loss.requires_grad()) << "trace_joint: the loss does not depend on any parameter";
  ir::Value* tangent_value =
      graph->add_input({loss.shape(), loss.dtype()}, "", ir::ValueKind::Input);
  Tensor tangent = tracer.symbolic(tangent_value, false);
  std::vector<size_t> wrt;  // the parameters differentiated
  std::vector<Tensor> wrt_params;
  for (size_t i = 0; i < sym_params.size(); ++i) {
    if (sym_params[i].requires_grad()) {
      wrt.push_back(i);
      wrt_params.push_back(sym_params[i]);
    }
  }
  std::vector<Tensor> grads = autograd::grad({loss}, wrt_params, {tangent}, false, false, true);
  graph->add_output(tracer.value_of(loss));
  if (grads_for) grads_for->clear();
  for (size_t k = 0; k < grads.size(); ++k) {
    if (grads_for) {
      // Only the gradients eager backward() gives: the loss reaches the parameter.
      if (!grads[k].defined()) continue;
      grads_for->push_back(wrt[k]);
    }
    // Without grads_for, a parameter the loss does not use gets a zero gradient, as a constant.
    graph->add_output(tracer.value_of(grads[k].defined() ? grads[k] : zeros_like(params[wrt[k]])));
  }
  add_outputs(*graph, tracer, outs, 1);
  if (tracer.final_random_state().defined()) {
    graph->add_output(tracer.value_of(tracer.final_random_state()));
  }
  tracer.order_inputs(declared_inputs, tangent_value);
  return graph;
}

// Runs `graph`'s nodes through the dispatcher (so under the installed tracer, recording them
// again), reading their operands from `env` (which holds the inputs) and adding their outputs.
void replay(const ir::Graph& graph, std::unordered_map<const ir::Value*, Tensor>& env, const char* who) {
  for (const ir::Value* c : graph.constants()) env[c] = c->constant;
  for (const auto& node : graph.nodes()) {
    SMELT_INTERNAL_CHECK(!node->body) << who << ": the graph is fused (group node)";
    std::vector<Tensor> args;
    for (const ir::Value* v : node->inputs) args.push_back(env.at(v));
    std::vector<Tensor> outs = ops::call(node->op, args, node->attrs);
    for (size_t k = 0; k < outs.size(); ++k) env[node->outputs[k]] = outs[k];
  }
}

}  // namespace

std::unique_ptr<ir::Graph> trace(const Fn& fn, const std::vector<Tensor>& example_inputs,
                                 const std::vector<Tensor>& params, Capture capture) {
  return run_trace(fn, example_inputs, params, false, nullptr, capture);
}

std::unique_ptr<ir::Graph> trace_joint(const Fn& fn, const std::vector<Tensor>& example_inputs,
                                       const std::vector<Tensor>& params,
                                       std::vector<size_t>* grads_for, Capture capture) {
  return run_trace(fn, example_inputs, params, true, grads_for, capture);
}

Vjp trace_vjp(const ir::Graph& forward, const std::vector<bool>& wrt,
              const std::vector<bool>& differentiable) {
  const std::vector<ir::Value*>& inputs = forward.inputs();
  SMELT_INTERNAL_CHECK(wrt.size() == inputs.size() &&
                       differentiable.size() == forward.outputs().size())
      << "trace_vjp: " << wrt.size() << " wrt flags for " << inputs.size() << " inputs, "
      << differentiable.size() << " output flags for " << forward.outputs().size() << " outputs";
  Vjp vjp;
  vjp.graph = std::make_unique<ir::Graph>();
  ir::Graph& graph = *vjp.graph;
  Tracer tracer(&graph, {});
  std::unordered_map<const ir::Value*, Tensor> env;
  std::vector<Tensor> wrt_tensors;
  std::vector<size_t> wrt_index;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::Value* v = inputs[i];
    Tensor t = tracer.symbolic(graph.add_input(v->meta, v->name, v->kind), wrt[i]);
    if (wrt[i]) {
      wrt_tensors.push_back(t);
      wrt_index.push_back(i);
    }
    env[v] = t;
  }
  HookScope scope(&tracer, false);
  autograd::EnableGradGuard grad_on;
  replay(forward, env, "trace_vjp");
  // The outputs differentiated, each once (an output listed twice gets the sum of its tangents).
  std::vector<Tensor> roots, tangents;
  std::unordered_map<const ir::Value*, size_t> root_of;
  for (size_t k = 0; k < forward.outputs().size(); ++k) {
    const ir::Value* out = forward.outputs()[k];
    const Tensor& t = env.at(out);
    graph.add_output(tracer.value_of(t));
    if (!differentiable[k] || !t.requires_grad() || !dtype_is_floating(t.dtype())) continue;
    Tensor tangent = tracer.symbolic(graph.add_input(out->meta, "tangent." + std::to_string(k)),
                                     false);
    vjp.tangent_of.push_back(k);
    auto [it, fresh] = root_of.emplace(out, roots.size());
    if (fresh) {
      roots.push_back(t);
      tangents.push_back(tangent);
    } else {
      tangents[it->second] = tangents[it->second] + tangent;
    }
  }
  if (roots.empty()) return vjp;
  const std::vector<Tensor> grads =
      autograd::grad(roots, wrt_tensors, tangents, false, false, true);
  for (size_t j = 0; j < grads.size(); ++j) {
    if (!grads[j].defined()) continue;  // no differentiated output reaches this input
    graph.add_output(tracer.value_of(grads[j]));
    vjp.grad_of.push_back(wrt_index[j]);
  }
  return vjp;
}

std::unique_ptr<ir::Graph> extend(const ir::Graph& base,
                                  const std::vector<std::pair<std::string, ops::TensorMeta>>& extra_inputs,
                                  const std::vector<bool>& keep, const ExtendFn& more) {
  SMELT_INTERNAL_CHECK(keep.empty() || keep.size() == base.outputs().size())
      << "trace::extend: " << keep.size() << " keep flags for " << base.outputs().size() << " outputs";
  auto graph = std::make_unique<ir::Graph>();
  Tracer tracer(graph.get(), {});
  std::unordered_map<const ir::Value*, Tensor> env;
  std::vector<Tensor> inputs, outputs;
  for (const ir::Value* v : base.inputs()) {
    inputs.push_back(tracer.symbolic(graph->add_input(v->meta, v->name, v->kind), false));
    env[v] = inputs.back();
  }
  for (const auto& [name, meta] : extra_inputs) {
    inputs.push_back(tracer.symbolic(graph->add_input(meta, name), false));
  }
  HookScope scope(&tracer, false);
  NoGradGuard no_grad;
  replay(base, env, "trace::extend");
  for (size_t k = 0; k < base.outputs().size(); ++k) {
    outputs.push_back(env.at(base.outputs()[k]));
    if (keep.empty() || keep[k]) graph->add_output(tracer.value_of(outputs.back()));
  }
  add_outputs(*graph, tracer, more(inputs, outputs), 0);
  return graph;
}

}  // namespace smelt::trace
