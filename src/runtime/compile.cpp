// smelt::compile (include/smelt/compile.h): traces the function once per input signature, runs the
// compile pipeline (runtime/pipeline.h) on the graph, and keeps one plan per signature (or, for
// dynamic dims, per size: runtime/compile_dynamic.cpp).
#include "smelt/compile.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "autograd/node.h"
#include "base/log.h"
#include "nn/mode_reads.h"
#include "ops/attrs.h"
#include "ops/dispatch.h"
#include "runtime/compile_impl.h"
#include "smelt/autograd.h"
#include "smelt/nn.h"
#include "trace/interpreter.h"
#include "trace/random_draws.h"
#include "trace/trace.h"
#include "trace/trace_module.h"

namespace smelt {
namespace compile_impl {

std::string difference(const Signature& before, const Signature& now) {
  if (before.training != now.training) {
    return std::string("module mode: ") + (before.training ? "training" : "eval") + " -> " +
           (now.training ? "training" : "eval");
  }
  if (before.modes != now.modes) {
    if (before.training >= 0) return "a submodule's mode (training / eval) changed";
    // a function: the modes of the modules its traces read, in the order first read
    for (size_t i = 0; i < std::min(before.modes.size(), now.modes.size()); ++i) {
      if (before.modes[i] != now.modes[i]) {
        return "module mode: the " + std::to_string(i + 1) + ". module the function reads the mode of: " +
               (before.modes[i] ? "training" : "eval") + " -> " + (now.modes[i] ? "training" : "eval");
      }
    }
    return "the modules the function calls";
  }
  if (before.requires_grad != now.requires_grad) {
    for (size_t i = 0; i < std::min(before.requires_grad.size(), now.requires_grad.size()); ++i) {
      if (before.requires_grad[i] != now.requires_grad[i]) {
        return "parameter '" + now.requires_grad[i].first +
               "' requires_grad: " + (before.requires_grad[i].second ? "true" : "false") + " -> " +
               (now.requires_grad[i].second ? "true" : "false");
      }
    }
    return "the module's parameters changed";
  }
  if (before.update != now.update) {
    if (before.update.empty() || now.update.empty())
      return now.update.empty() ? "a call that accumulates gradients (StepOptions::accumulation_steps)"
                                : "a call that updates the parameters";
    // The first part that differs: "the update of 'fc.weight': ... -> ..." (step_key's parts).
    auto parts = [](const std::string& key) {
      std::vector<std::string> out(1);
      for (char ch : key) {
        if (ch == '|') {
          out.emplace_back();
        } else {
          out.back().push_back(ch);
        }
      }
      return out;
    };
    const std::vector<std::string> a = parts(before.update), b = parts(now.update);
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
      if (a[i] != b[i]) return "the update: " + a[i] + " -> " + b[i];
    }
    return "the parameters the optimizer updates";
  }
  if (before.dtypes.size() != now.dtypes.size()) {
    return std::to_string(before.dtypes.size()) + " inputs -> " + std::to_string(now.dtypes.size());
  }
  // Every input that changed, and in each every dim that changed: "input 0 dim 1: 16 -> 32".
  std::string changes;
  for (size_t i = 0; i < now.dtypes.size(); ++i) {
    const std::string input =
        std::string(changes.empty() ? "" : "; ") + "input " + std::to_string(i);
    if (before.dtypes[i] != now.dtypes[i]) {
      changes +=
          input + " dtype: " + dtype_name(before.dtypes[i]) + " -> " + dtype_name(now.dtypes[i]);
    } else if (before.shapes[i].size() != now.shapes[i].size()) {
      changes +=
          input + " rank: " + shape_str(before.shapes[i]) + " -> " + shape_str(now.shapes[i]);
    } else {
      std::string dims;
      for (size_t d = 0; d < now.shapes[i].size(); ++d) {
        if (before.shapes[i][d] == now.shapes[i][d]) continue;
        dims += std::string(dims.empty() ? " dim " : ", dim ") + std::to_string(d) + ": " +
                std::to_string(before.shapes[i][d]) + " -> " + std::to_string(now.shapes[i][d]);
      }
      if (!dims.empty()) changes += input + dims;
    }
  }
  return changes.empty() ? "identical signature" : changes;
}

void add_recomputation(CompileReport& r, const passes::Recomputation& recomputation) {
  r.saved_bytes = recomputation.saved_bytes;
  r.saved_bytes_no_recompute = recomputation.saved_bytes_no_recompute;
  r.partition = recomputation.explain();
}

void fill_report(Compiled& c, const Signature& sig) {
  const runtime::PlanStats& stats = c.compiled.plan->stats();
  CompileReport& r = c.report;
  r.signature = sig.str();
  r.nodes_traced = c.compiled.nodes_before;
  r.nodes_optimized = c.compiled.nodes_after;
  r.kernels = stats.kernels;
  r.op_steps = stats.op_steps;
  r.interpreted_groups = stats.interpreted;
  r.arena_bytes = stats.arena_bytes;
  r.naive_bytes = stats.naive_bytes;
  r.lower_bound_bytes = stats.lower_bound;
  r.compile_ms = c.compiled.compile_ms;
  r.inputs_updated = stats.updates;
  r.inputs_updated_in_place = stats.updates_in_place;
  r.fusion = c.compiled.fusion_explain;
  r.plan = c.compiled.plan->describe() + c.compiled.plan->memory_report();
}

}  // namespace compile_impl

using namespace compile_impl;

namespace {

// The outputs among `graph`'s first `outputs` that alias one of its first `inputs` inputs
// (AliasOutput). They stay in the graph (its outputs keep the function's positions, which tools
// and the fuzzers read); each call puts the caller's views in their places.
std::vector<AliasOutput> alias_outputs(const ir::Graph& graph, size_t outputs, size_t inputs) {
  std::vector<AliasOutput> aliases;
  for (size_t k = 0; k < outputs; ++k) {
    const ir::Value* v = graph.outputs()[k];
    AliasOutput alias;
    alias.output = k;
    while (v->producer && ops::is_view_op(v->producer->op) &&
           ops::aliases(v->producer->op, 0) == 0) {
      alias.views.emplace_back(v->producer->op, v->producer->attrs);
      v = v->producer->inputs[0];
    }
    const auto first = graph.inputs().begin(), last = first + std::ptrdiff_t(inputs);
    const auto input = std::find(first, last, v);
    if (input == last) continue;
    alias.input = size_t(input - first);
    std::reverse(alias.views.begin(), alias.views.end());
    aliases.push_back(std::move(alias));
  }
  return aliases;
}

// The function's outputs: the plan's, with the aliased ones replaced by views of the caller's
// tensors, made as eager code makes them.
std::vector<Tensor> with_aliases(std::vector<Tensor> outs, const std::vector<AliasOutput>& aliases,
                                 const std::vector<Tensor>& graph_inputs) {
  NoGradGuard no_grad;  // the history is the compiled call's (GradHistory), not the views'
  for (const AliasOutput& a : aliases) {
    Tensor t = graph_inputs[a.input];
    if (!t.is_contiguous()) continue;  // traced as contiguous: the plan's copy (AliasOutput)
    for (const auto& [op, attrs] : a.views) {
      // contiguous() was traced only where its operand was strided (it returns a contiguous one)
      t = op == ops::OpId::contiguous ? smelt::contiguous(t) : ops::call1(op, {t}, attrs);
    }
    outs[a.output] = t;
  }
  return outs;
}

// What changed in place among the tensors `c` froze, or "".
std::string frozen_change(const Compiled& c) {
  for (const auto& [t, version] : c.frozen) {
    if (t.storage()->version() != version) {
      return "a frozen captured tensor " + std::string(dtype_name(t.dtype())) + " " +
             shape_str(t.shape()) + " changed in place (version " + std::to_string(version) +
             " -> " + std::to_string(t.storage()->version()) + ")";
    }
  }
  return "";
}

Signature signature_of(const std::vector<Tensor>& inputs) {
  Signature s;
  for (size_t i = 0; i < inputs.size(); ++i) {
    SMELT_CHECK(inputs[i].defined())
        << "compiled function: input " << i << " is an undefined tensor";
    s.dtypes.push_back(inputs[i].dtype());
    s.shapes.push_back(inputs[i].shape());
  }
  return s;
}

}  // namespace

runtime::PipelineOptions CompiledFunction::Impl::pipeline_options() const {
  runtime::PipelineOptions pipeline;
  pipeline.passes = options.passes;
  pipeline.fuse = options.fuse;
  pipeline.backend = runtime::backend_from_name(options.backend);
  pipeline.memory_plan = options.memory_plan;
  return pipeline;
}

std::unique_ptr<ir::Graph> CompiledFunction::Impl::trace_graph(Compiled& c,
                                                               const std::vector<Tensor>& inputs) {
  std::unique_ptr<ir::Graph> graph;
  if (mode == Mode::Function) {
    std::vector<Tensor> frozen;
    nn::ModeReads modes;
    graph = trace::trace(
        [&](const std::vector<Tensor>& in, const std::vector<Tensor>&) { return fn(in); }, inputs,
        {}, {&c.captured, options.freeze ? &frozen : nullptr});
    for (const auto& r : modes.reads) {
      if (std::find(mode_reads.begin(), mode_reads.end(), r) == mode_reads.end()) mode_reads.push_back(r);
    }
    for (const Tensor& t : frozen) c.frozen.emplace_back(t, t.storage()->version());
    c.random = graph->inputs().size() > inputs.size() + c.captured.size();
    c.aliases = alias_outputs(*graph, graph->outputs().size() - (c.random ? 1 : 0),
                              inputs.size() + c.captured.size());
  } else {
    c.module_graph = std::make_shared<trace::ModuleGraph>(
        mode == Mode::Module ? trace::trace_module(*module, fn, inputs)
                             : trace::trace_module_joint(*module, fn, inputs));
    graph = c.module_graph->graph->clone();  // the module graph keeps the traced one to bind with
    c.random = c.module_graph->random;
  }
  return graph;
}

namespace {

// After the graph's own outputs (the plan's last ones; run_module takes them off): each
// gradient's sum of squares, for CompileOptions::gradient_norms.
void add_gradient_norms(ir::Graph& graph, size_t grads) {
  for (size_t k = 1; k <= grads; ++k) {
    ir::Value* g = graph.outputs()[k];
    std::vector<int64_t> dims(g->meta.shape.size());
    for (size_t d = 0; d < dims.size(); ++d) dims[d] = int64_t(d);
    ir::Value* squares = graph.add_node(ops::OpId::mul, {g, g})->outputs[0];
    graph.add_output(graph.add_node(ops::OpId::sum, {squares}, {{"dims", dims}, {"keepdim", int64_t(0)}})->outputs[0]);
  }
}

}  // namespace

std::shared_ptr<Compiled> CompiledFunction::Impl::compile(const Signature& sig,
                                                          const std::vector<Tensor>& inputs) {
  auto c = std::make_shared<Compiled>();
  std::unique_ptr<ir::Graph> graph = trace_graph(*c, inputs);
  if (mode != Mode::TrainingStep) c->traced = graph->clone();  // for differentiable calls
  if (!sig.update.empty()) {
    graph = update_graph(*c, *graph);  // compile_step.cpp (the gradient norms with it)
  } else if (mode == Mode::TrainingStep && options.gradient_norms) {
    add_gradient_norms(*graph, c->module_graph->grad_params.size());
  }
  runtime::PipelineOptions pipeline = pipeline_options();
  const std::optional<passes::Recomputation> recomputation =
      optimize(*graph, c->module_graph ? std::optional<size_t>(c->module_graph->graph->inputs().size() - 1)
                                       : std::nullopt);
  pipeline.optimize = false;
  c->compiled = runtime::compile_graph(std::move(graph), pipeline);
  c->compiled.plan->set_profiling(options.profile);
  fill_report(*c, sig);
  if (recomputation) add_recomputation(c->report, *recomputation);
  return c;
}

std::optional<passes::Recomputation> CompiledFunction::Impl::optimize(ir::Graph& graph,
                                                                     std::optional<size_t> tangent) const {
  runtime::optimize_graph(graph, pipeline_options());
  if (mode != Mode::TrainingStep) return std::nullopt;
  // The loss tangent is the joint graph's last input (trace/trace_module.h), before an update's.
  return passes::recompute_in_backward(graph, tangent ? *tangent : graph.inputs().size() - 1,
                                       options.memory_budget);
}
namespace {

// A module's state in, the plan, updated buffers and the generator back; a training step adds
// each parameter's gradient into its .grad as backward() would, and returns the loss.
std::vector<Tensor> run_module(CompiledFunction::Impl& f, Compiled& c,
                               const std::vector<Tensor>& inputs) {
  const trace::ModuleGraph& mg = *c.module_graph;
  const bool norms = f.mode == Mode::TrainingStep && f.options.gradient_norms;
  std::vector<std::pair<std::string, double>> norm_of;
  std::string origin;
  auto run_plan = [&](const std::vector<Tensor>& all) {
    return c.update ? f.run_update(c, all) : c.compiled.plan->run(all);
  };
  std::vector<Tensor> outs = mg.run_with(*f.module, inputs, [&](const std::vector<Tensor>& all) {
    const std::vector<bool> wrt = f.mode == Mode::Module ? grad_inputs(all) : std::vector<bool>{};
    if (norms) {
      std::vector<Tensor> outs = run_plan(all);
      const size_t first = outs.size() - mg.grad_params.size();
      bool finite = true;
      for (size_t k = 0; k < mg.grad_params.size(); ++k) {
        const double n = std::sqrt(outs[first + k].to(DType::Float64).item());
        norm_of.emplace_back(mg.params[mg.grad_params[k]], n);
        finite = finite && std::isfinite(n);
      }
      outs.resize(first);
      if (!finite) origin = trace::first_non_finite(*mg.graph, all);  // only then: the graph again
      return outs;
    }
    if (wrt.empty()) return run_plan(all);
    GradHistory history;  // the parameters' (and inputs') gradients, through the module's outputs
    std::vector<Tensor> outs = f.run_with_grad(c, all, wrt, mg.num_outputs, &history);
    history.attach(outs);
    return outs;
  });
  if (norms) {
    std::lock_guard<std::mutex> lock(f.mutex);
    f.last_norms = std::move(norm_of);
    f.last_origin = std::move(origin);
  }
  if (f.mode == Mode::Module) return outs;
  std::map<std::string, Tensor*> params;
  for (const auto& [name, slot] : f.module->named_slots(true)) params.emplace(name, slot);
  NoGradGuard no_grad;
  for (size_t k = 0; k < mg.grad_params.size(); ++k) {
    Tensor& p = *params.at(mg.params[mg.grad_params[k]]);
    const Tensor& g = outs[1 + k];
    if (!g.defined()) continue;  // consumed by the step's update (compile_step)
    p.set_grad(p.grad().defined() ? p.grad() + g : g);
  }
  return {outs[0]};
}

CompiledFunction make(Mode mode, nn::Module* module, CompiledFunction::Fn fn,
                      CompileOptions options, std::shared_ptr<StepSpec> step = nullptr) {
  SMELT_CHECK(fn) << "compile: the function is empty";
  SMELT_CHECK(options.recompile_limit >= 1)
      << "compile: recompile_limit must be >= 1, got " << options.recompile_limit;
  SMELT_CHECK(options.batch_plans >= 1)
      << "compile: batch_plans must be >= 1, got " << options.batch_plans;
  runtime::backend_from_name(
      options.backend);  // an unknown name is an error now, not at the first call
  const std::array<int64_t, 4>& probes = options.dynamic_probes;
  const std::set<int64_t> distinct(probes.begin(), probes.end());
  SMELT_CHECK(distinct.size() == probes.size() && *distinct.begin() > 0 && *distinct.rbegin() <= (1 << 20))
      << "compile: CompileOptions::dynamic_probes is " << probes[0] << ", " << probes[1] << ", "
      << probes[2] << ", " << probes[3] << "; valid: four distinct positive sizes up to 2^20";
  SMELT_CHECK(options.memory_budget >= 0 && options.memory_budget <= 1)
      << "compile: CompileOptions::memory_budget is " << options.memory_budget
      << "; valid: 0 (keep the least) to 1 (recompute nothing)";
  SMELT_CHECK(options.dynamic_dims.empty() || options.dynamic_batch)
      << "compile: CompileOptions::dynamic_dims needs dynamic_batch (true by default)";
  auto impl = std::make_shared<CompiledFunction::Impl>();
  impl->mode = mode;
  impl->module = module;
  impl->fn = std::move(fn);
  impl->options = std::move(options);
  impl->step = std::move(step);
  return CompiledFunction(std::move(impl));
}

}  // namespace

CompiledFunction::CompiledFunction(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::vector<Tensor> CompiledFunction::operator()(const std::vector<Tensor>& inputs) {
  Impl& f = *impl_;
  if (ops::dispatch_hook()) {
    // Called while another function is traced (a compiled function inside a compiled function,
    // or inside Graph::trace): the function is inlined into that trace, as eager code would run.
    SMELT_CHECK(f.mode != Mode::TrainingStep)
        << "a compiled training step was called while another function is being traced (inside "
           "a compiled function or Graph::trace); call the step outside, where it can update "
           "the parameters' .grad";
    return f.fn(inputs);
  }
  Signature sig = signature_of(inputs);
  if (f.mode != Mode::Function) {
    sig.training = f.module->is_training() ? 1 : 0;
    sig.modes = trace::module_modes(*f.module);
  }
  if (f.mode == Mode::TrainingStep) {
    SMELT_CHECK(autograd::grad_enabled())
        << "a compiled training step was called with grad mode off (inside a NoGradGuard): "
           "eager training would fail there too (its loss would not require grad, so "
           "backward() could not run); call the step with grad mode on";
    for (const auto& [name, slot] : f.module->named_slots(true))
      sig.requires_grad.emplace_back(name, slot->requires_grad());
  }
  std::shared_ptr<Compiled> c;
  // compile_step: the calls serialize (each reads the state the previous one wrote).
  std::unique_lock<std::mutex> step_lock;
  if (f.step) {
    step_lock = std::unique_lock<std::mutex>(f.step_mutex);
    if ((f.step->calls + 1) % f.step->options.accumulation_steps == 0) sig.update = f.step_key();
  }
  {
    std::lock_guard<std::mutex> lock(f.mutex);
    if (f.mode == Mode::Function) sig.modes = f.modes_now();  // of the modules it read when traced
    auto it = f.plans.find(sig);
    std::string note;
    if (it != f.plans.end()) {
      c = it->second;
    } else {
      // (An updating step's graph is built per signature: compile_step.cpp.)
      if (f.options.dynamic_batch && sig.update.empty()) c = f.dynamic_plan(sig, inputs, &note);
    }
    if (c) {
      const std::string changed = frozen_change(*c);
      if (!changed.empty()) {  // every plan folded the old values
        f.plans.clear();
        f.dynamic.clear();
        c = nullptr;
        f.reasons.push_back(
            changed +
            " (CompileOptions::freeze: a frozen captured tensor recompiles when it changes)");
        debug_log(1, "recompiling: " + f.reasons.back());
        f.last_sig.reset();  // the reason is given
      }
    }
    if (!c) {
      if (f.last_sig) {
        f.reasons.push_back(difference(*f.last_sig, sig) + note);
        debug_log(1, "recompiling: " + f.reasons.back());
      }
      if (int(f.order.size()) >= f.options.recompile_limit && !f.warned_limit) {
        f.warned_limit = true;
        warn("a compiled function has seen " + std::to_string(f.order.size() + 1) +
             " input signatures (recompile_limit " + std::to_string(f.options.recompile_limit) +
             "); each compiles anew — mark varying inputs or pad them to fewer shapes");
      }
      c = f.compile(sig, inputs);
      if (f.mode == Mode::Function) sig.modes = f.modes_now();  // with those this trace read first
      f.plans[sig] = c;
      f.order.push_back(sig);
      f.last_sig = sig;
    }
    f.last = &c->report;
    f.last_compiled = c;
  }
  if (f.mode != Mode::Function) {
    std::vector<Tensor> outs = run_module(f, *c, inputs);
    if (f.step) ++f.step->calls;
    return outs;
  }
  std::vector<Tensor> all = inputs;
  all.insert(all.end(), c->captured.begin(), c->captured.end());
  // The plan, or with inputs that require grad its differentiable variant (compile_grad.cpp).
  GradHistory history;
  const size_t outputs = c->traced->outputs().size() - (c->random ? 1 : 0);
  auto execute = [&](const std::vector<Tensor>& graph_inputs) {
    const std::vector<bool> wrt = grad_inputs(graph_inputs);
    if (wrt.empty()) return c->compiled.plan->run(graph_inputs);
    return f.run_with_grad(*c, graph_inputs, wrt, outputs, &history);
  };
  std::vector<Tensor> outs;
  if (!c->random) {
    outs = with_aliases(execute(all), c->aliases, all);
  } else {
    outs = c->draws.run([&](const Tensor& state) {
      std::vector<Tensor> with_state = all;
      with_state.push_back(state);
      return execute(with_state);
    });
    outs.pop_back();  // the advanced generator state (reserved by draws.run)
    outs = with_aliases(std::move(outs), c->aliases, all);
  }
  history.attach(outs);
  return outs;
}

int CompiledFunction::num_compiles() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return int(impl_->order.size());
}

std::vector<std::string> CompiledFunction::recompile_reasons() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->reasons;
}

const CompileReport& CompiledFunction::report() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  SMELT_CHECK(impl_->last)
      << "CompiledFunction::report: nothing compiled yet; call the function first";
  return *impl_->last;
}

namespace {

const runtime::Plan& last_plan(const CompiledFunction::Impl& f, const char* what) {
  SMELT_CHECK(f.last_compiled) << "CompiledFunction::" << what
                               << ": nothing compiled yet; call the function first";
  return *f.last_compiled->compiled.plan;
}

}  // namespace

std::string CompiledFunction::profile_table() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const runtime::Plan& plan = last_plan(*impl_, "profile_table");
  SMELT_CHECK(plan.profile().enabled())
      << "CompiledFunction::profile_table: compile with CompileOptions::profile = true";
  return plan.profile().table();
}

void CompiledFunction::write_chrome_trace(const std::string& path) const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const runtime::Plan& plan = last_plan(*impl_, "write_chrome_trace");
  SMELT_CHECK(plan.profile().enabled())
      << "CompiledFunction::write_chrome_trace: compile with CompileOptions::profile = true";
  plan.profile().write_chrome_trace(path);
}

std::string CompiledFunction::arena_svg() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return last_plan(*impl_, "arena_svg").arena_svg();
}

std::vector<std::pair<std::string, double>> CompiledFunction::gradient_norms() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  SMELT_CHECK(impl_->mode == Mode::TrainingStep && impl_->options.gradient_norms)
      << "CompiledFunction::gradient_norms: compile a training step with CompileOptions::gradient_norms = true";
  return impl_->last_norms;
}

std::string CompiledFunction::non_finite_origin() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->last_origin;
}

Graph CompiledFunction::compiled_graph() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  last_plan(*impl_, "compiled_graph");
  return Graph(impl_->last_compiled->compiled.graph->clone());
}

CompiledFunction compile(CompiledFunction::Fn fn, CompileOptions options) {
  return make(Mode::Function, nullptr, std::move(fn), std::move(options));
}

CompiledFunction compile_module(nn::Module& module, CompiledFunction::Fn fn,
                                CompileOptions options) {
  return make(Mode::Module, &module, std::move(fn), std::move(options));
}

CompiledFunction compile_training_step(nn::Module& module, CompiledFunction::Fn loss_fn,
                                       CompileOptions options) {
  return make(Mode::TrainingStep, &module, std::move(loss_fn), std::move(options));
}

CompiledFunction compile_step(nn::Module& module, CompiledFunction::Fn loss_fn,
                              optim::Optimizer& optimizer, StepOptions step, CompileOptions options) {
  SMELT_CHECK(step.accumulation_steps >= 1)
      << "compile_step: StepOptions::accumulation_steps must be >= 1, got " << step.accumulation_steps;
  SMELT_CHECK(step.clip_grad_norm >= 0 && std::isfinite(step.clip_grad_norm))
      << "compile_step: StepOptions::clip_grad_norm must be a finite number >= 0 (0: no clipping), got "
      << step.clip_grad_norm;
  auto spec = std::make_shared<StepSpec>();
  spec->optimizer = &optimizer;
  spec->options = step;
  return make(Mode::TrainingStep, &module, std::move(loss_fn), std::move(options), std::move(spec));
}

}  // namespace smelt
