#include "runtime/plan.h"

#include <cstring>
#include <sstream>

#include "kernels/conv.h"
#include "ops/dispatch.h"
#include "runtime/contraction_step.h"
#include "runtime/plan_impl.h"
#include "smelt/autograd.h"
#include "smelt/creation.h"
#include "trace/interpreter.h"

namespace smelt::runtime {

// Each slot's tensor and pointer for this run: arena and constant slots are fixed, inputs and
// outputs are this call's, aliases view their root with their own shape.
void Plan::Impl::bind(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) {
  for (size_t i = 0; i < slots.size(); ++i) {
    const Slot& s = slots[i];
    if (const InputSlot* in = s.as<InputSlot>()) {
      tensors[i] = inputs[size_t(in->index)];
    } else if (const ConstantSlot* c = s.as<ConstantSlot>()) {
      tensors[i] = c->value;
    } else if (s.as<ArenaSlot>()) {
      tensors[i] = arena_tensors[i];
    } else if (const OutputSlot* out = s.as<OutputSlot>()) {
      tensors[i] = outputs[size_t(out->index)];
    } else if (const AliasSlot* a = s.as<AliasSlot>()) {  // follows the slot it aliases
      const Tensor& base = tensors[size_t(a->of)];
      tensors[i] = make_tensor(base.storage(), s.meta.shape, contiguous_strides(s.meta.shape),
                               base.offset() + a->offset, s.meta.dtype);
    } else if (const ViewSlot* v = s.as<ViewSlot>()) {  // plan_views.cpp: the op's own view kernel
      const Tensor& base = tensors[size_t(v->of)];
      tensors[i] = ops::compute(v->op, {base}, v->attrs, {s.meta})[0];
      SMELT_INTERNAL_CHECK(tensors[i].storage() == base.storage()) << "plan: a strided alias became a copy";
    }
    pointers[i] = tensors[i].raw_data();
  }
}

void Plan::Impl::run_step(Step& step) {
  switch (step.kind) {
    case StepKind::Kernel: {
      step.kernel->run(pointers, step.arg_slots);
      return;
    }
    case StepKind::Op: {
      std::vector<Tensor> in, out;
      for (int s : step.in_slots) in.push_back(tensors[size_t(s)]);
      for (int s : step.out_slots) out.push_back(tensors[size_t(s)]);
      if (step.op == ops::OpId::contiguous) {
        out[0].copy_(in[0]);
      } else {
        ops::call_into(step.op, in, step.attrs, out);
      }
      return;
    }
    case StepKind::TiledContraction: {
      std::vector<Tensor> in;
      for (int s : step.op_slots) in.push_back(tensors[size_t(s)]);
      step.kernel->bind(pointers, step.arg_slots);
      const kernels::EpilogueAsPostOps* post_ops = step.post_ops ? &step.post_ops->ops : nullptr;
      kernels::EpilogueAsPostOps with_residual;
      if (post_ops && step.post_ops->residual_input >= 0) {  // bound here: a graph input's memory changes
        with_residual = *post_ops;
        const Tensor& r = tensors[size_t(step.in_slots[size_t(step.post_ops->residual_input)])];
        with_residual.residual = r.is_contiguous() ? r.data<float>() : nullptr;
        post_ops = with_residual.residual ? &with_residual : nullptr;
      }
      run_tiled_contraction(step.op, step.attrs, in, tensors[size_t(step.product_slot)], *step.kernel, post_ops);
      return;
    }
    case StepKind::Interpret: {
      std::vector<Tensor> in;
      for (int s : step.in_slots) in.push_back(tensors[size_t(s)]);
      std::vector<Tensor> results = trace::interpret(*step.body, in);
      for (size_t k = 0; k < results.size(); ++k) tensors[size_t(step.out_slots[k])].copy_(results[k]);
      return;
    }
  }
}

Plan::Plan(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Plan::~Plan() = default;

std::unique_ptr<Plan> Plan::build(const ir::Graph& graph, const PlanOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->stats.hoisted = options.hoisted;
  impl->build(graph);
  impl->instantiate();
  if (options.backend != KernelBackend::Interpreter && !impl->defer_compile()) {
    impl->request_kernels();
    if (options.backend == KernelBackend::Compiled) {
      for (const Step& s : impl->steps) {
        if (s.kernel) s.kernel->handle()->wait();
      }
    }
  }
  return std::unique_ptr<Plan>(new Plan(std::move(impl)));
}

std::vector<Tensor> Plan::run(const std::vector<Tensor>& inputs) {
  Impl& p = *impl_;
  SMELT_CHECK(inputs.size() == p.input_metas.size())
      << "compiled plan: expected " << p.input_metas.size() << " inputs, got " << inputs.size();
  std::vector<Tensor> in(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ops::TensorMeta& m = p.input_metas[i];
    SMELT_CHECK(inputs[i].defined() && inputs[i].shape() == m.shape && inputs[i].dtype() == m.dtype)
        << "compiled plan: input " << i << " must be " << dtype_name(m.dtype) << " " << shape_str(m.shape)
        << ", got " << (inputs[i].defined() ? dtype_name(inputs[i].dtype()) + std::string(" ") + shape_str(inputs[i].shape())
                                            : std::string("an undefined tensor"));
    SMELT_CHECK(inputs[i].storage()) << "compiled plan: input " << i << " has no data (a symbolic tensor)";
    in[i] = inputs[i].is_contiguous() ? inputs[i] : inputs[i].contiguous();
  }
  // An input updated in place whose memory another input shares (the same tensor passed twice)
  // is updated in a private copy: the other input must read the old values to the end.
  for (size_t e = 0; e < p.updates.size(); ++e) {
    const size_t updated = p.updates[e].second;
    for (size_t i = 0; i < in.size() && p.update_in_place[e]; ++i) {
      if (i != updated && in[i].storage() == in[updated].storage()) {
        in[updated] = in[updated].clone();
        break;
      }
    }
  }
  std::lock_guard<std::mutex> lock(p.mutex);
  NoGradGuard no_grad;  // a plan computes values; autograd of compiled code is the joint graph's
  std::vector<Tensor> outputs;
  for (int s : p.output_slots) {
    const Slot& slot = p.slots[size_t(s)];
    // An output updated in place (plan_updates.cpp) is its input's memory.
    outputs.push_back(slot.as<OutputSlot>() ? empty(slot.meta.shape, slot.meta.dtype) : Tensor());
  }
  if (++p.runs == p.options.compile_after_runs && p.defer_compile()) p.request_kernels();
  p.bind(in, outputs);
  // Steps pass facts about what they wrote to the next step (a conv's input known to be moderate).
  kernels::PlanStepScope step_facts;
  if (!p.profile.enabled()) {
    for (Step& step : p.steps) {
      kernels::PlanStepScope::next();
      p.run_step(step);
    }
  } else {
    for (size_t i = 0; i < p.steps.size(); ++i) {
      kernels::PlanStepScope::next();
      ProfileScope timed(p.profile, p.step_profile_id[i], p.step_bytes[i], p.step_flops[i]);
      p.run_step(p.steps[i]);
    }
  }
  p.finish_updates(inputs, in, outputs);
  return outputs;
}

std::string Plan::wait_for_kernels() const {
  // The handles are read under the run lock (a run may be switching steps to compiled code); the
  // waits happen outside it, so runs go on while the compiler works.
  std::vector<std::pair<std::string, std::shared_ptr<codegen::KernelHandle>>> handles;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    for (const Step& s : impl_->steps) {
      if (s.kernel) handles.emplace_back(s.what, s.kernel->handle());
    }
  }
  for (const auto& [what, handle] : handles) {
    const std::string why = KernelStep::wait_compiled(handle);
    if (!why.empty()) return what + ": " + why;
  }
  return "";
}

void Plan::fill_arena(uint8_t byte) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  std::memset(impl_->arena->data(), byte, impl_->arena->nbytes());
}

const PlanStats& Plan::stats() const { return impl_->stats; }

std::vector<const codegen::LoopKernel*> Plan::kernels() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  std::vector<const codegen::LoopKernel*> out;
  for (const Step& s : impl_->steps) {
    if (s.kernel) out.push_back(&s.kernel->kernel());
  }
  return out;
}

void Plan::set_profiling(bool on) { impl_->profile.set_enabled(on); }
const Profile& Plan::profile() const { return impl_->profile; }
std::string Plan::memory_report() const { return memory_plan_report(impl_->requests, impl_->memory); }
std::string Plan::arena_svg() const { return memory_plan_svg(impl_->requests, impl_->memory); }

std::string Plan::describe() const {
  const Impl& p = *impl_;
  std::lock_guard<std::mutex> lock(p.mutex);
  std::ostringstream os;
  auto slot_text = [&](int s) {
    const Slot& slot = p.slots[size_t(s)];
    static const char* kinds[] = {"in", "const", "arena", "out", "alias", "alias"};  // by alternative
    std::ostringstream t;
    t << kinds[slot.source.index()];
    if (const InputSlot* in = slot.as<InputSlot>()) t << in->index;
    if (const OutputSlot* out = slot.as<OutputSlot>()) t << out->index;
    if (const ArenaSlot* a = slot.as<ArenaSlot>()) t << "@" << a->offset;
    if (const AliasSlot* a = slot.as<AliasSlot>(); a && a->offset != 0) t << "+" << a->offset;
    t << ":" << ops::dtype_short_name(slot.meta.dtype) << shape_str(slot.meta.shape);
    return t.str();
  };
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const Step& s = p.steps[i];
    static const char* kinds[] = {"kernel", "op", "interpret", "contraction"};
    os << "step " << i << " " << kinds[int(s.kind)] << " " << s.what << " (";
    for (size_t k = 0; k < s.in_slots.size(); ++k) os << (k ? ", " : "") << slot_text(s.in_slots[k]);
    os << ") -> (";
    for (size_t k = 0; k < s.out_slots.size(); ++k) os << (k ? ", " : "") << slot_text(s.out_slots[k]);
    os << ")";
    if (s.kernel) os << " [" << s.kernel->backend_name() << "]";
    os << "\n";
  }
  os << "arena: " << p.stats.arena_bytes << " bytes planned, " << p.stats.naive_bytes
     << " naive, lower bound " << p.stats.lower_bound << "\n";
  os << "kernels " << p.stats.kernels << ", op steps " << p.stats.op_steps << ", interpreted groups "
     << p.stats.interpreted << ", nodes computed once at build " << p.stats.hoisted << "\n";
  if (p.stats.updates > 0) {
    os << "inputs updated: " << p.stats.updates << ", " << p.stats.updates_in_place
       << " in place by the step that computes them";
    for (size_t e = 0; e < p.updates.size(); ++e) {
      if (!p.update_in_place[e]) os << "; output " << p.updates[e].first << " copied";
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace smelt::runtime
