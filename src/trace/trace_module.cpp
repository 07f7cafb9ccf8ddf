// trace_module: the module's state as named graph inputs and outputs. Built on trace::trace and
// trace::trace_joint: the buffers travel as extra example inputs, the parameters as parameters,
// and the function given to the tracer binds them to the module's member slots.
//
// (trace/ reads nn::Module here, a layer below it in docs/design.md "Layers": only its registry of
// member slots, the thing this capture is about.)
#include "trace/trace_module.h"

#include <map>
#include <unordered_map>
#include <utility>

#include "smelt/autograd.h"
#include "smelt/nn.h"
#include "trace/interpreter.h"
#include "trace/trace.h"

namespace smelt::trace {
namespace {

using Slots = std::vector<std::pair<std::string, Tensor*>>;

// One graph input per distinct tensor (tied weights share one), named after its first slot.
struct StateInput {
  std::string name;
  Tensor value;                // the module's own tensor when traced
  std::vector<Tensor*> slots;  // every member slot holding it
};

std::vector<StateInput> group_by_tensor(const Slots& slots) {
  std::vector<StateInput> inputs;
  std::unordered_map<const TensorImpl*, size_t> index;
  for (const auto& [name, slot] : slots) {
    auto [it, fresh] = index.emplace(slot->impl(), inputs.size());
    if (fresh) inputs.push_back({name, *slot, {}});
    inputs[it->second].slots.push_back(slot);
  }
  return inputs;
}

// Puts symbolic tensors into the member slots for the duration of a trace and the module's own
// tensors back when it ends (on an exception too): no symbolic tensor may outlive its trace.
class SlotBinding {
 public:
  SlotBinding(const std::vector<StateInput>& state, const std::vector<Tensor>& symbolic) {
    for (size_t i = 0; i < state.size(); ++i) {
      for (Tensor* slot : state[i].slots) {
        saved_.emplace_back(slot, *slot);
        *slot = symbolic[i];
      }
    }
  }
  // In reverse: a module registered twice (shared weights) shows the same slot under two names,
  // saved twice, the second time holding the symbolic tensor: the first saving restores last.
  ~SlotBinding() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) *it->first = it->second;
  }
  SlotBinding(const SlotBinding&) = delete;
  SlotBinding& operator=(const SlotBinding&) = delete;

 private:
  std::vector<std::pair<Tensor*, Tensor>> saved_;
};

ModuleGraph trace_module_impl(nn::Module& module, const ModuleFn& fn,
                              const std::vector<Tensor>& example_inputs, bool joint) {
  const std::vector<StateInput> buffers = group_by_tensor(module.named_slots(false));
  const std::vector<StateInput> params = group_by_tensor(module.named_slots(true));
  for (const StateInput& p : params) {
    for (const StateInput& b : buffers) {
      SMELT_CHECK(p.value.impl() != b.value.impl())
          << "trace_module: the tensor '" << p.name << "' is both a parameter and a buffer ('"
          << b.name << "'); register it once";
    }
  }

  ModuleGraph result;
  result.joint = joint;
  result.training = module.is_training();
  result.modes = module_modes(module);
  result.num_inputs = example_inputs.size();
  for (const StateInput& b : buffers) result.buffers.push_back(b.name);
  for (const StateInput& p : params) result.params.push_back(p.name);

  std::vector<Tensor> inputs = example_inputs, param_values;
  for (const StateInput& b : buffers) inputs.push_back(b.value);
  for (const StateInput& p : params) param_values.push_back(p.value);

  size_t user_outputs = 0;
  auto bound_fn = [&](const std::vector<Tensor>& in, const std::vector<Tensor>& sym_params) {
    const size_t n = example_inputs.size();
    std::vector<Tensor> sym_buffers(in.begin() + std::ptrdiff_t(n), in.end());
    SlotBinding bind_params(params, sym_params);
    SlotBinding bind_buffers(buffers, sym_buffers);
    std::vector<Tensor> outs = fn(std::vector<Tensor>(in.begin(), in.begin() + std::ptrdiff_t(n)));
    user_outputs = outs.size();
    // A parameter slot the forward rebinds would be put back silently: the graph could not
    // reproduce what eager code does to the module.
    for (size_t i = 0; i < params.size(); ++i) {
      for (Tensor* slot : params[i].slots) {
        SMELT_CHECK(slot->impl() == sym_params[i].impl())
            << "trace_module: the forward replaced parameter '" << params[i].name
            << "' with another tensor; only buffers may be rebound while tracing (their new "
               "values become graph outputs); update parameters in place, outside the forward";
      }
    }
    // A buffer the forward replaced (a new value bound to its slot) leaves as an extra output.
    for (size_t i = 0; i < buffers.size(); ++i) {
      for (Tensor* slot : buffers[i].slots) {
        if (slot->impl() == sym_buffers[i].impl()) continue;
        SMELT_CHECK(slot->defined())
            << "trace_module: the forward left buffer '" << buffers[i].name << "' undefined";
        outs.push_back(*slot);
        result.updated_buffers.push_back(buffers[i].name);
        break;  // tied slots hold one tensor: one write-back
      }
    }
    return outs;
  };
  if (joint) {
    result.graph =
        trace_joint(bound_fn, inputs, param_values, &result.grad_params, {&result.captured});
    result.num_outputs = 1 + result.grad_params.size();  // the loss, then the gradients
    SMELT_CHECK(user_outputs == 1) << "trace_module_joint: the loss function must return one "
                                      "scalar loss, got "
                                   << user_outputs << " outputs";
  } else {
    result.graph = trace(bound_fn, inputs, param_values, {&result.captured});
    result.num_outputs = user_outputs;
  }
  // The tracer adds the generator state as an input after the parameters when fn drew random
  // numbers (and returns the advanced state last).
  const size_t state_inputs =
      result.num_inputs + buffers.size() + params.size() + result.captured.size() + (joint ? 1 : 0);
  result.random = result.graph->inputs().size() > state_inputs;
  SMELT_INTERNAL_CHECK(result.graph->inputs().size() == state_inputs + (result.random ? 1 : 0))
      << "trace_module: the graph has " << result.graph->inputs().size() << " inputs, expected "
      << state_inputs;
  // Name the state inputs as the state dict does: the printed graph says what each one is.
  for (size_t i = 0; i < buffers.size(); ++i)
    result.graph->inputs()[result.num_inputs + i]->name = buffers[i].name;
  for (size_t i = 0; i < params.size(); ++i) {
    result.graph->inputs()[result.num_inputs + buffers.size() + i]->name = params[i].name;
  }
  // And the new buffer values, so that the printed graph says which output updates which buffer.
  for (size_t k = 0; k < result.updated_buffers.size(); ++k) {
    ir::Value* v = result.graph->outputs()[result.num_outputs + k];
    if (v->kind == ir::ValueKind::Computed && v->name.empty())
      v->name = result.updated_buffers[k] + ".new";
  }
  return result;
}

// The module's tensor named `name` (a parameter when `parameter`), checked against the graph.
Tensor module_tensor(const std::map<std::string, Tensor*>& slots, const std::string& name,
                     const char* what, const ir::Value* input) {
  auto it = slots.find(name);
  SMELT_CHECK(it != slots.end() && it->second->defined())
      << "ModuleGraph::run: the module has no " << what << " '" << name
      << "', which the traced graph reads; run the graph with the module it was traced from";
  const Tensor& t = *it->second;
  SMELT_CHECK(t.shape() == input->meta.shape && t.dtype() == input->meta.dtype)
      << "ModuleGraph::run: " << what << " '" << name << "' is " << dtype_name(t.dtype()) << " "
      << shape_str(t.shape()) << " but was " << dtype_name(input->meta.dtype) << " "
      << shape_str(input->meta.shape) << " when traced; retrace the module";
  SMELT_CHECK(t.storage()) << "ModuleGraph::run: " << what << " '" << name
                           << "' is symbolic (the module is being traced); run it after the trace";
  return t;
}

std::map<std::string, Tensor*> slot_map(nn::Module& module, bool parameters) {
  std::map<std::string, Tensor*> out;
  for (const auto& [name, slot] : module.named_slots(parameters)) out.emplace(name, slot);
  return out;
}

}  // namespace

std::vector<bool> module_modes(const nn::Module& module) {
  std::vector<bool> modes{module.is_training()};
  for (const auto& [name, child] : module.named_children()) {
    const std::vector<bool> sub = module_modes(*child);
    modes.insert(modes.end(), sub.begin(), sub.end());
  }
  return modes;
}

ModuleGraph trace_module(nn::Module& module, const ModuleFn& fn,
                         const std::vector<Tensor>& example_inputs) {
  return trace_module_impl(module, fn, example_inputs, false);
}

ModuleGraph trace_module_joint(nn::Module& module, const ModuleFn& loss_fn,
                               const std::vector<Tensor>& example_inputs) {
  return trace_module_impl(module, loss_fn, example_inputs, true);
}

std::vector<Tensor> ModuleGraph::bind(nn::Module& module, const std::vector<Tensor>& inputs,
                                      const Tensor& rng_state) const {
  SMELT_CHECK(graph) << "ModuleGraph::run: no graph (a moved-from or default ModuleGraph)";
  SMELT_CHECK(inputs.size() == num_inputs) << "ModuleGraph::run: the graph was traced with "
                                           << num_inputs << " inputs, got " << inputs.size();
  SMELT_CHECK(module.is_training() == training)
      << "ModuleGraph::run: the module was traced in " << (training ? "training" : "eval")
      << " mode and is now in " << (module.is_training() ? "training" : "eval")
      << " mode; the graph keeps the traced mode's behaviour (batch statistics, dropout), so "
         "trace the module again in this mode";
  const std::map<std::string, Tensor*> buffer_slots = slot_map(module, false);
  const std::map<std::string, Tensor*> param_slots = slot_map(module, true);
  std::vector<Tensor> all = inputs;
  const std::vector<ir::Value*>& graph_inputs = graph->inputs();
  for (size_t i = 0; i < buffers.size(); ++i) {
    all.push_back(module_tensor(buffer_slots, buffers[i], "buffer", graph_inputs[all.size()]));
  }
  for (size_t i = 0; i < params.size(); ++i) {
    all.push_back(module_tensor(param_slots, params[i], "parameter", graph_inputs[all.size()]));
  }
  all.insert(all.end(), captured.begin(), captured.end());
  // After the state checks: a module of another structure is reported as such first.
  SMELT_CHECK(module_modes(module) == modes)
      << "ModuleGraph::run: a submodule was switched between training and eval since the trace; "
         "the graph keeps the traced modes' behaviour (batch statistics, dropout), so trace again";
  if (random) all.push_back(rng_state);
  if (joint) all.push_back(ones(graph_inputs.back()->meta.shape, graph_inputs.back()->meta.dtype));
  return all;
}

std::vector<Tensor> ModuleGraph::finish(nn::Module& module, std::vector<Tensor> outs) const {
  SMELT_CHECK(outs.size() == num_outputs + updated_buffers.size() + (random ? 1 : 0))
      << "ModuleGraph::run: the graph has " << outs.size() << " outputs, expected " << num_outputs
      << " and " << updated_buffers.size() << " updated buffers"
      << (random ? " and the generator state" : "");
  const std::map<std::string, Tensor*> buffer_slots = slot_map(module, false);
  NoGradGuard no_grad;
  for (size_t k = 0; k < updated_buffers.size(); ++k) {
    buffer_slots.at(updated_buffers[k])->copy_(outs[num_outputs + k]);
  }
  outs.resize(num_outputs);
  return outs;
}

std::vector<Tensor> ModuleGraph::run_with(nn::Module& module, const std::vector<Tensor>& inputs,
                                          const Executor& execute) const {
  if (!random) return finish(module, execute(bind(module, inputs, Tensor())));
  return finish(module, draws_->run([&](const Tensor& state) {
    return execute(bind(module, inputs, state));
  }));
}

std::vector<Tensor> ModuleGraph::run(nn::Module& module, const std::vector<Tensor>& inputs) const {
  return run_with(module, inputs,
                  [&](const std::vector<Tensor>& all) { return interpret(*graph, all); });
}

}  // namespace smelt::trace
