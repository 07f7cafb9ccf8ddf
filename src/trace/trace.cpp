#include "trace/trace.h"

#include <atomic>
#include <unordered_map>

#include "ops/dispatch.h"
#include "smelt/autograd.h"
#include "smelt/creation.h"
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
  explicit Tracer(ir::Graph* graph) : graph_(graph), trace_number_(++g_trace_count) {}

  Tensor symbolic(ir::Value* v, bool requires_grad) {
    auto impl = make_ref<TensorImpl>();
    impl->shape = v->meta.shape;
    impl->strides = contiguous_strides(v->meta.shape);
    impl->dtype = v->meta.dtype;
    impl->trace_id = (trace_number_ << kTraceNumberShift) | v->id;
    impl->requires_grad = requires_grad;
    by_id_[v->id] = v;
    return Tensor(impl);
  }

  ir::Value* value_of(const Tensor& t) {
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
    ir::Value* c = graph_->add_constant(t);
    constants_[t.impl()] = {t, c};  // holding t keeps the impl address unique
    return c;
  }

  std::vector<Tensor> record(ops::OpId op, const std::vector<Tensor>& inputs, const ops::Attrs& attrs,
                             const std::vector<ops::TensorMeta>&) override {
    std::vector<ir::Value*> values;
    for (const Tensor& t : inputs) values.push_back(value_of(t));
    ir::Node* node = graph_->add_node(op, values, attrs);
    std::vector<Tensor> outputs;
    for (ir::Value* v : node->outputs) outputs.push_back(symbolic(v, false));
    return outputs;
  }

  // The first random op makes the generator state a graph input; later ones read the state the
  // previous one returned.
  Tensor random_state() override {
    if (!rng_state_.defined()) {
      rng_state_ = symbolic(graph_->add_input({{2}, DType::Int64}, "rng_state"), false);
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
};

// Installs a hook for a scope and removes it even when the traced code throws; random creation
// functions refuse to run meanwhile (tensor/capture.h).
class HookScope {
 public:
  explicit HookScope(ops::DispatchHook* hook) : prev_(ops::set_dispatch_hook(hook)) {}
  ~HookScope() { ops::set_dispatch_hook(prev_); }

 private:
  ops::DispatchHook* prev_;
  detail::CaptureScope capturing_;
};

}  // namespace

namespace {

std::unique_ptr<ir::Graph> run_trace(const Fn& fn, const std::vector<Tensor>& example_inputs,
                                     const std::vector<Tensor>& params, bool joint,
                                     std::vector<size_t>* grads_for = nullptr) {
  auto graph = std::make_unique<ir::Graph>();
  Tracer tracer(graph.get());
  std::vector<Tensor> inputs, sym_params;
  for (const Tensor& x : example_inputs) {
    inputs.push_back(tracer.symbolic(graph->add_input({x.shape(), x.dtype()}), false));
  }
  for (const Tensor& p : params) {
    ir::Value* v = graph->add_input({p.shape(), p.dtype()}, "", ir::ValueKind::Param);
    // With grads_for, a parameter that does not require grad is a plain input of the graph.
    sym_params.push_back(tracer.symbolic(v, joint && (!grads_for || p.requires_grad())));
  }
  HookScope scope(&tracer);
  if (!joint) {
    NoGradGuard no_grad;  // a forward-only trace records no autograd nodes
    for (const Tensor& out : fn(inputs, sym_params)) graph->add_output(tracer.value_of(out));
    if (tracer.final_random_state().defined()) {
      graph->add_output(tracer.value_of(tracer.final_random_state()));
    }
    return graph;
  }
  autograd::EnableGradGuard grad_on;
  std::vector<Tensor> outs = fn(inputs, sym_params);
  SMELT_CHECK(!outs.empty() && outs[0].numel() == 1)
      << "trace_joint: the function must return a scalar loss first, got "
      << (outs.empty() ? std::string("no outputs") : "a first output of shape " + shape_str(outs[0].shape()));
  Tensor loss = outs[0];
  SMELT_CHECK(loss.requires_grad()) << "trace_joint: the loss does not depend on any parameter";
  ir::Value* tangent_value = graph->add_input({loss.shape(), loss.dtype()}, "", ir::ValueKind::Input);
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
  for (size_t k = 1; k < outs.size(); ++k) graph->add_output(tracer.value_of(outs[k]));
  if (tracer.final_random_state().defined()) {
    graph->add_output(tracer.value_of(tracer.final_random_state()));
  }
  return graph;
}

}  // namespace

std::unique_ptr<ir::Graph> trace(const Fn& fn, const std::vector<Tensor>& example_inputs,
                                 const std::vector<Tensor>& params) {
  return run_trace(fn, example_inputs, params, false);
}

std::unique_ptr<ir::Graph> trace_joint(const Fn& fn, const std::vector<Tensor>& example_inputs,
                                       const std::vector<Tensor>& params, std::vector<size_t>* grads_for) {
  return run_trace(fn, example_inputs, params, true, grads_for);
}

}  // namespace smelt::trace
