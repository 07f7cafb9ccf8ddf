// compile_step (include/smelt/compile.h): a training step whose plan also clips the gradients
// and runs the optimizer's update. The joint forward+backward graph (trace/trace_module.h) is
// extended with the update as the optimizer writes it in smelt ops (optim::Optimizer::update),
// traced; each new parameter and state buffer is a graph output marked as the new value of its
// input (ir::Graph::set_output_updates), which the plan writes in place (runtime/plan.h). The
// gradients of the updated parameters stop being outputs: they live in the arena only.
#include <cmath>
#include <map>
#include <set>

#include "runtime/compile_impl.h"
#include "smelt/creation.h"
#include "smelt/nn.h"
#include "smelt/ops.h"
#include "smelt/optim.h"
#include "trace/trace.h"

namespace smelt {

using namespace compile_impl;

namespace {

// The optimizer's parameter index of each tensor it holds.
std::map<const TensorImpl*, size_t> optimizer_index(const optim::Optimizer& opt) {
  std::map<const TensorImpl*, size_t> index;
  for (size_t i = 0; i < opt.num_params(); ++i) index.emplace(opt.param(i).impl(), i);
  return index;
}

// Sum of squares of `g` in float64 (as optim::clip_grad_norm_ accumulates), a 0-dim tensor.
Tensor sum_of_squares(const Tensor& g) {
  Tensor wide = g.to(DType::Float64);
  return sum(wide * wide);
}

}  // namespace

// "clip 1|fc.weight +grad SGD momentum 0.9 ...|fc.bias ...": every parameter of the module the
// optimizer updates (requires grad), whether it brings a .grad, and the update's constants.
std::string CompiledFunction::Impl::step_key() const {
  const optim::Optimizer& opt = *step->optimizer;
  const std::map<const TensorImpl*, size_t> index = optimizer_index(opt);
  std::string key = "clip " + std::to_string(step->options.clip_grad_norm);
  std::set<size_t> found;
  for (const auto& [name, slot] : module->named_slots(true)) {
    auto it = index.find(slot->impl());
    if (it == index.end()) continue;
    found.insert(it->second);
    if (!slot->requires_grad()) continue;
    const Tensor& p = *slot;
    const int64_t steps = opt.param_state(it->second).step;
    key += "|'" + name + "'" + (p.grad().defined() ? " with .grad " : " ") +
           opt.update_constants(opt.group_of(it->second), steps == 0);
  }
  for (size_t i = 0; i < opt.num_params(); ++i) {
    SMELT_CHECK(found.count(i))
        << "compile_step: the optimizer's parameter " << i << " (" << dtype_name(opt.param(i).dtype())
        << " " << shape_str(opt.param(i).shape())
        << ") is not a parameter of the module; give the optimizer the module's parameters()";
  }
  return key;
}

std::unique_ptr<ir::Graph> CompiledFunction::Impl::update_graph(Compiled& c, const ir::Graph& joint) {
  const trace::ModuleGraph& mg = *c.module_graph;
  const optim::Optimizer& opt = *step->optimizer;
  const std::map<const TensorImpl*, size_t> index = optimizer_index(opt);
  std::map<std::string, Tensor*> slots;
  for (const auto& [name, slot] : module->named_slots(true)) slots.emplace(name, slot);
  auto layout = std::make_shared<UpdateLayout>();
  layout->kept.assign(joint.outputs().size(), true);
  layout->norms = options.gradient_norms;
  std::vector<std::pair<std::string, ops::TensorMeta>> extra;
  std::vector<size_t> param_input;  // per updated parameter: its joint graph input
  for (size_t k = 0; k < mg.grad_params.size(); ++k) {
    const std::string& name = mg.params[mg.grad_params[k]];
    const Tensor& p = *slots.at(name);
    auto it = index.find(p.impl());
    if (it == index.end()) continue;  // not the optimizer's: its gradient goes to .grad
    UpdateLayout::Param u;
    u.grad_output = 1 + k;
    u.optimizer_index = it->second;
    u.grad_in = p.grad().defined();
    layout->kept[u.grad_output] = false;
    layout->params.push_back(u);
    param_input.push_back(mg.num_inputs + mg.buffers.size() + mg.grad_params[k]);
    const ops::TensorMeta meta{p.shape(), p.dtype()};
    if (u.grad_in) extra.emplace_back(name + ".grad", meta);
    for (const std::string& b : opt.buffer_names()) extra.emplace_back(name + "." + b, meta);
    const size_t scalars = opt.update_scalars(opt.group_of(u.optimizer_index), 1).size();
    for (size_t j = 0; j < scalars; ++j)
      extra.emplace_back(name + ".scalar" + std::to_string(j), ops::TensorMeta{{}, p.dtype()});
  }
  const size_t buffers = opt.buffer_names().size();
  const double max_norm = step->options.clip_grad_norm;
  std::vector<std::pair<size_t, size_t>> updates;  // (graph output, graph input)
  auto graph = trace::extend(joint, extra, layout->kept, [&](const std::vector<Tensor>& in,
                                                              const std::vector<Tensor>& out) {
    // Each gradient, with the .grad it brings added first (as backward() accumulates).
    std::vector<Tensor> grads;
    std::vector<size_t> first_input;  // per updated parameter: its first extra input
    size_t next = joint.inputs().size();
    for (const UpdateLayout::Param& u : layout->params) {
      Tensor g = out[u.grad_output];
      if (u.grad_in) g = g + in[next++];
      grads.push_back(g);
      first_input.push_back(next);
      next += buffers + opt.update_scalars(opt.group_of(u.optimizer_index), 1).size();
    }
    if (step->options.reduce_gradients && !grads.empty()) {
      std::vector<Tensor> reduced = step->options.reduce_gradients(grads);
      SMELT_CHECK(reduced.size() == grads.size())
          << "compile_step: StepOptions::reduce_gradients returned " << reduced.size() << " tensors for "
          << grads.size() << " gradients; return one per gradient";
      for (size_t i = 0; i < grads.size(); ++i) {
        SMELT_CHECK(reduced[i].defined() && reduced[i].shape() == grads[i].shape() &&
                    reduced[i].dtype() == grads[i].dtype())
            << "compile_step: StepOptions::reduce_gradients returned for gradient " << i << " ("
            << dtype_name(grads[i].dtype()) << " " << shape_str(grads[i].shape()) << ") "
            << (reduced[i].defined() ? dtype_name(reduced[i].dtype()) + std::string(" ") + shape_str(reduced[i].shape())
                                     : std::string("an undefined tensor"))
            << "; each must keep its gradient's shape and dtype";
      }
      grads = std::move(reduced);
    }
    // Clipping by the total norm, as optim::clip_grad_norm_: scale when above max_norm and finite.
    if (max_norm > 0 && !grads.empty()) {
      Tensor total_sq = sum_of_squares(grads[0]);
      for (size_t i = 1; i < grads.size(); ++i) total_sq = total_sq + sum_of_squares(grads[i]);
      const Tensor total = sqrt(total_sq);
      const Tensor coef = max_norm / (total + 1e-6);
      const Tensor one = scalar_tensor(1.0, DType::Float64);
      const Tensor scale = where(abs(total) < INFINITY, where(coef < 1.0, coef, one), one);
      for (Tensor& g : grads) g = g * scale.to(g.dtype());
    }
    std::vector<Tensor> more;  // `updates` count their outputs among these first
    for (size_t i = 0; i < layout->params.size(); ++i) {
      const UpdateLayout::Param& u = layout->params[i];
      const optim::ParamGroup& group = opt.group_of(u.optimizer_index);
      const size_t b0 = first_input[i], s0 = b0 + buffers;
      const size_t scalars = opt.update_scalars(group, 1).size();
      const std::vector<Tensor> state(in.begin() + std::ptrdiff_t(b0), in.begin() + std::ptrdiff_t(s0));
      const std::vector<Tensor> scalar(in.begin() + std::ptrdiff_t(s0),
                                       in.begin() + std::ptrdiff_t(s0 + scalars));
      const int64_t steps = opt.param_state(u.optimizer_index).step;
      std::vector<Tensor> updated =
          opt.update(in[param_input[i]], grads[i], state, scalar, group, steps == 0);
      SMELT_INTERNAL_CHECK(updated.size() == 1 + buffers)
          << opt.type_name() << "::update returned " << updated.size() << " tensors, expected " << 1 + buffers;
      updates.emplace_back(more.size(), param_input[i]);
      for (size_t b = 0; b < buffers; ++b) updates.emplace_back(more.size() + 1 + b, b0 + b);
      more.insert(more.end(), updated.begin(), updated.end());
    }
    if (layout->norms) {  // every gradient's, in the joint graph's order (the monitor's)
      size_t u = 0;
      for (size_t k = 0; k < mg.grad_params.size(); ++k) {
        const bool mine = u < layout->params.size() && layout->params[u].grad_output == 1 + k;
        const Tensor g = mine ? grads[u++] : out[1 + k];
        more.push_back(sum(g * g));
      }
    }
    size_t kept = 0;
    for (bool k : layout->kept) kept += k ? 1 : 0;
    for (auto& [o, i] : updates) o += kept;
    return more;
  });
  for (const auto& [o, i] : updates) graph->set_output_updates(o, i);
  c.update = std::move(layout);
  return graph;
}

std::vector<Tensor> CompiledFunction::Impl::run_update(Compiled& c, const std::vector<Tensor>& graph_inputs) {
  const UpdateLayout& layout = *c.update;
  optim::Optimizer& opt = *step->optimizer;
  std::vector<Tensor> in = graph_inputs;
  for (const UpdateLayout::Param& u : layout.params) {
    const Tensor& p = opt.param(u.optimizer_index);
    if (u.grad_in) {
      SMELT_CHECK(p.grad().defined())
          << "compile_step: a parameter's .grad was dropped while the step was being called";
      in.push_back(p.grad());
    }
    opt.ensure_state(u.optimizer_index);
    const optim::Optimizer::ParamState& state = opt.param_state(u.optimizer_index);
    in.insert(in.end(), state.buffers.begin(), state.buffers.end());
    for (double v : opt.update_scalars(opt.group_of(u.optimizer_index), state.step + 1))
      in.push_back(scalar_tensor(v, p.dtype()));
  }
  std::vector<Tensor> outs = c.compiled.plan->run(in);
  // The plan wrote the parameters and the state in place (or copied them there: runtime/plan.h).
  size_t next = 0;
  std::vector<Tensor> joint;  // the joint graph's outputs, the updated gradients undefined
  for (bool kept : layout.kept) joint.push_back(kept ? outs[next++] : Tensor());
  const size_t buffers = opt.buffer_names().size();
  for (const UpdateLayout::Param& u : layout.params) {
    Tensor p = opt.param(u.optimizer_index);
    SMELT_INTERNAL_CHECK(outs[next].storage() == p.storage())
        << "compile_step: the plan did not update a parameter in its memory";
    next += 1 + buffers;
    ++opt.param_state(u.optimizer_index).step;
    p.zero_grad();  // the .grad it brought was consumed
  }
  joint.insert(joint.end(), outs.begin() + std::ptrdiff_t(next), outs.end());  // the norms
  return joint;
}

}  // namespace smelt
