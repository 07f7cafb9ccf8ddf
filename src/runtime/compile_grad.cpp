// smelt::compile's differentiable calls (include/smelt/compile.h): when grad mode is on and a
// graph input requires grad, the call runs the forward half of the function's joint graph
// (trace::trace_vjp, split by passes::partition) and records one autograd node whose backward
// runs the compiled backward half on what the forward saved. Compiled and eager code then mix
// as eager code mixes with itself.
#include <algorithm>

#include "autograd/node.h"
#include "passes/partition.h"
#include "runtime/compile_impl.h"
#include "smelt/autograd.h"
#include "smelt/creation.h"
#include "trace/trace.h"

namespace smelt {
namespace compile_impl {
namespace {

// The backward of one compiled call: the backward plan on the tensors the forward saved and the
// gradients of the differentiated outputs; one gradient per input it differentiates (`next`).
class CompiledFunctionBackward final : public autograd::Node {
 public:
  CompiledFunctionBackward(std::shared_ptr<const Differentiable> d, std::vector<Tensor> saved,
                           uint32_t outputs)
      : Node(outputs), d_(std::move(d)), saved_(std::move(saved)) {
    for (const Tensor& t : saved_) versions_.push_back(t.storage()->version());
  }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    SMELT_CHECK(!autograd::grad_enabled())
        << "a higher-order gradient (create_graph) through a compiled function: its backward is "
           "a compiled plan, which records no history of its own; compute higher-order "
           "gradients with the function uncompiled";
    for (size_t k = 0; k < saved_.size(); ++k) {
      SMELT_CHECK(saved_[k].storage()->version() == versions_[k])
          << "backward through a compiled function: a tensor it saved for the backward, "
          << dtype_name(saved_[k].dtype()) << " " << shape_str(saved_[k].shape())
          << (d_->partition.saved[k].forward_input ? " (its input " : " (its output ")
          << d_->partition.saved[k].index << "), was changed in place after the call (version "
          << versions_[k] << " -> " << saved_[k].storage()->version()
          << "); eager autograd refuses the same; clone() it before changing it";
    }
    std::vector<Tensor> in = saved_;
    for (size_t t = 0; t < d_->tangent_of.size(); ++t) {
      const Tensor& g = grads[d_->tangent_of[t]];
      const ops::TensorMeta& m = d_->tangents[t];
      in.push_back(g.defined() ? g : zeros(m.shape, m.dtype));  // an output no gradient reached
    }
    return d_->backward.plan->run(in);
  }
  void release_saved() override {
    saved_.clear();
    saved_.shrink_to_fit();
  }
  const char* name() const override { return "CompiledFunctionBackward"; }

 private:
  std::shared_ptr<const Differentiable> d_;
  std::vector<Tensor> saved_;
  std::vector<uint64_t> versions_;
};

// Adds a plan's counts to `r` (a differentiable call reports its forward and backward plans).
void add_counts(CompileReport& r, const runtime::CompiledGraph& g) {
  const runtime::PlanStats& stats = g.plan->stats();
  r.nodes_traced += g.nodes_before;
  r.nodes_optimized += g.nodes_after;
  r.kernels += stats.kernels;
  r.op_steps += stats.op_steps;
  r.interpreted_groups += stats.interpreted;
  r.arena_bytes += stats.arena_bytes;
  r.naive_bytes += stats.naive_bytes;
  r.lower_bound_bytes += stats.lower_bound;
  r.compile_ms += g.compile_ms;
}

}  // namespace

std::vector<bool> grad_inputs(const std::vector<Tensor>& graph_inputs) {
  if (!autograd::grad_enabled()) return {};
  std::vector<bool> wrt;
  bool any = false;
  for (const Tensor& t : graph_inputs) {
    wrt.push_back(t.defined() && t.requires_grad() && dtype_is_floating(t.dtype()));
    any |= wrt.back();
  }
  if (!any) wrt.clear();
  return wrt;
}

void GradHistory::attach(std::vector<Tensor>& outs) const {
  if (!node) return;
  for (size_t k : outputs) {
    TensorImpl* o = outs[k].impl();
    // A fresh impl where the tensor is shared (an output that is the caller's own input, or a
    // view of it): the history is the output's own.
    if (o->ref_count() > 1 || o->requires_grad) {
      outs[k] = make_tensor(outs[k].storage(), o->shape, o->strides, o->offset, o->dtype);
    }
    outs[k].impl()->requires_grad = true;
    outs[k].impl()->grad_fn = Ref<GradNode>(node.get());
    outs[k].impl()->output_nr = uint32_t(k);
  }
}

}  // namespace compile_impl

using namespace compile_impl;

std::shared_ptr<const Differentiable> CompiledFunction::Impl::differentiable(
    Compiled& c, const std::vector<bool>& wrt, size_t outputs) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = c.differentiable.find(wrt);
  if (it != c.differentiable.end()) return it->second;
  SMELT_INTERNAL_CHECK(c.traced) << "compile: no traced graph kept to differentiate";
  const ir::Graph& traced = *c.traced;
  std::vector<bool> differentiated(traced.outputs().size(), false);
  std::fill(differentiated.begin(), differentiated.begin() + std::ptrdiff_t(outputs), true);
  trace::Vjp vjp = trace::trace_vjp(traced, wrt, differentiated);
  passes::Partition part = passes::partition(*vjp.graph, traced.inputs().size(),
                                             traced.outputs().size(), options.memory_budget);
  auto d = std::make_shared<Differentiable>();
  d->tangent_of = vjp.tangent_of;
  d->grad_of = vjp.grad_of;
  d->outputs = traced.outputs().size();
  for (size_t k : d->tangent_of) d->tangents.push_back(traced.outputs()[k]->meta);
  d->forward = runtime::compile_graph(std::move(part.forward), pipeline_options());
  d->backward = runtime::compile_graph(std::move(part.backward), pipeline_options());
  d->forward.plan->set_profiling(options.profile);
  d->backward.plan->set_profiling(options.profile);
  // The report: both plans' counts and what the backward keeps.
  CompileReport& r = d->report;
  r.signature = c.report.signature;
  r.dynamic_batch = c.report.dynamic_batch;
  add_counts(r, d->forward);
  add_counts(r, d->backward);
  r.fusion = "forward:\n" + d->forward.fusion_explain + "backward:\n" + d->backward.fusion_explain;
  r.plan = "forward:\n" + d->forward.plan->describe() + d->forward.plan->memory_report() +
           "backward:\n" + d->backward.plan->describe() + d->backward.plan->memory_report();
  r.differentiable = true;
  add_recomputation(r, part);
  part.forward.reset();
  part.backward.reset();
  d->partition = std::move(part);
  c.differentiable.emplace(wrt, d);
  return d;
}

std::vector<Tensor> CompiledFunction::Impl::run_with_grad(Compiled& c,
                                                          const std::vector<Tensor>& graph_inputs,
                                                          const std::vector<bool>& wrt,
                                                          size_t outputs, GradHistory* history) {
  const std::shared_ptr<const Differentiable> d = differentiable(c, wrt, outputs);
  {
    std::lock_guard<std::mutex> lock(mutex);
    last = &d->report;
  }
  std::vector<Tensor> outs = d->forward.plan->run(graph_inputs);
  std::vector<Tensor> saved;
  for (const passes::SavedValue& s : d->partition.saved) {
    saved.push_back(s.forward_input ? graph_inputs[s.index] : outs[s.index]);
  }
  outs.resize(d->outputs);
  history->outputs = d->tangent_of;
  if (d->tangent_of.empty()) return outs;  // nothing the inputs reach is differentiable
  Ref<CompiledFunctionBackward> node(
      new CompiledFunctionBackward(d, std::move(saved), uint32_t(outs.size())));
  for (size_t i : d->grad_of) node->next.push_back(autograd::gradient_edge(graph_inputs[i]));
  history->node = Ref<autograd::Node>(node.get());
  return outs;
}

}  // namespace smelt
