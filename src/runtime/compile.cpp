// smelt::compile (include/smelt/compile.h): traces the function once per input signature, runs the
// compile pipeline (runtime/pipeline.h) on the graph, and keeps one plan per signature.
#include "smelt/compile.h"

#include <chrono>
#include <list>
#include <map>
#include <mutex>
#include <optional>

#include "base/log.h"
#include "codegen/kernel_cache.h"
#include "ops/attrs.h"
#include "runtime/batch_graph.h"
#include "runtime/pipeline.h"
#include "smelt/creation.h"
#include "smelt/autograd.h"
#include "smelt/nn.h"
#include "trace/random_draws.h"
#include "trace/trace.h"
#include "trace/trace_module.h"

namespace smelt {
namespace {

// What a plan is specialized on: each input's dtype and shape (inputs are made contiguous, so
// strides add nothing).
struct Signature {
  std::vector<DType> dtypes;
  std::vector<Shape> shapes;
  int training = -1;  // a module's mode (-1 for a plain function): the graph differs per mode
  std::vector<bool> modes;  // and every submodule's (trace::module_modes)
  // A training step: each parameter's requires_grad (a frozen parameter has no gradient output).
  std::vector<std::pair<std::string, bool>> requires_grad;
  bool operator<(const Signature& o) const {
    return std::tie(dtypes, shapes, training, modes, requires_grad) <
           std::tie(o.dtypes, o.shapes, o.training, o.modes, o.requires_grad);
  }
  std::string str() const {
    std::string s;
    for (size_t i = 0; i < dtypes.size(); ++i) {
      s += (i ? ", " : "") + std::string(ops::dtype_short_name(dtypes[i])) + shape_str(shapes[i]);
    }
    return s;
  }
};

Signature signature_of(const std::vector<Tensor>& inputs) {
  Signature s;
  for (size_t i = 0; i < inputs.size(); ++i) {
    SMELT_CHECK(inputs[i].defined()) << "compiled function: input " << i << " is an undefined tensor";
    s.dtypes.push_back(inputs[i].dtype());
    s.shapes.push_back(inputs[i].shape());
  }
  return s;
}

// Why `now` differs from `before`: the first input that changed, e.g. "input 0 dim 0: 64 -> 128".
std::string difference(const Signature& before, const Signature& now) {
  if (before.training != now.training) {
    return std::string("module mode: ") + (before.training ? "training" : "eval") + " -> " +
           (now.training ? "training" : "eval");
  }
  if (before.modes != now.modes) return "a submodule's mode (training / eval) changed";
  if (before.requires_grad != now.requires_grad) {
    for (size_t i = 0; i < std::min(before.requires_grad.size(), now.requires_grad.size()); ++i) {
      if (before.requires_grad[i] != now.requires_grad[i]) {
        return "parameter '" + now.requires_grad[i].first + "' requires_grad: " +
               (before.requires_grad[i].second ? "true" : "false") + " -> " +
               (now.requires_grad[i].second ? "true" : "false");
      }
    }
    return "the module's parameters changed";
  }
  if (before.dtypes.size() != now.dtypes.size()) {
    return std::to_string(before.dtypes.size()) + " inputs -> " + std::to_string(now.dtypes.size());
  }
  for (size_t i = 0; i < now.dtypes.size(); ++i) {
    const std::string input = "input " + std::to_string(i);
    if (before.dtypes[i] != now.dtypes[i]) {
      return input + " dtype: " + dtype_name(before.dtypes[i]) + " -> " + dtype_name(now.dtypes[i]);
    }
    if (before.shapes[i].size() != now.shapes[i].size()) {
      return input + " rank: " + shape_str(before.shapes[i]) + " -> " + shape_str(now.shapes[i]);
    }
    for (size_t d = 0; d < now.shapes[i].size(); ++d) {
      if (before.shapes[i][d] != now.shapes[i][d]) {
        return input + " dim " + std::to_string(d) + ": " + std::to_string(before.shapes[i][d]) +
               " -> " + std::to_string(now.shapes[i][d]);
      }
    }
  }
  return "identical signature";
}

struct Compiled {
  runtime::CompiledGraph compiled;
  bool random = false;  // the graph takes and returns the generator state (last input/output)
  trace::RandomDraws draws;  // random: each call's blocks reserved from the default generator
  std::shared_ptr<trace::ModuleGraph> module_graph;  // how a module's state binds (module modes)
  CompileReport report;
};

// A dynamic batch (CompileOptions::dynamic_batch): how a signature differs from an earlier one
// when only the batch does — dim 0 of some inputs, all from one size to another.
struct BatchChange {
  std::vector<bool> batch_inputs;
  int64_t before = 0, now = 0;
};

std::optional<BatchChange> batch_change(const Signature& before, const Signature& now) {
  if (before.dtypes != now.dtypes || before.training != now.training || before.modes != now.modes ||
      before.requires_grad != now.requires_grad) {
    return std::nullopt;
  }
  BatchChange c;
  c.batch_inputs.assign(now.shapes.size(), false);
  for (size_t i = 0; i < now.shapes.size(); ++i) {
    const Shape &a = before.shapes[i], &b = now.shapes[i];
    if (a.size() != b.size()) return std::nullopt;
    for (size_t d = 1; d < a.size(); ++d) {
      if (a[d] != b[d]) return std::nullopt;
    }
    if (a.empty() || a[0] == b[0]) continue;
    if (c.before == 0) c.before = a[0], c.now = b[0];
    if (a[0] != c.before || b[0] != c.now || a[0] == 0 || b[0] == 0) return std::nullopt;
    c.batch_inputs[i] = true;
  }
  if (c.before == 0) return std::nullopt;
  return c;
}

// The probe batch sizes a dynamic batch is fitted (first two) and checked (third) at: distinct,
// and unlikely to equal (or divide) a model's other dims, which could change what the passes do.
constexpr int64_t kBatchProbes[3] = {17, 19, 23};

// One dynamic batch: the graph and kernels for every batch size of a signature, and the plans
// instantiated from them, one per batch size (an LRU).
struct DynamicBatch {
  Signature key;  // the signature with the batch dims as -1
  std::vector<bool> batch_inputs;
  std::string why_not;  // set: the function is not batch-independent (then kernels are specialized)
  std::optional<runtime::BatchGraph> graph;
  runtime::BatchKernels kernels;
  std::shared_ptr<trace::ModuleGraph> module_graph;
  std::list<std::pair<int64_t, std::shared_ptr<Compiled>>> plans;  // most recently used first

  static Signature erase(Signature s, const std::vector<bool>& batch_inputs) {
    for (size_t i = 0; i < s.shapes.size(); ++i) {
      if (batch_inputs[i]) s.shapes[i][0] = -1;
    }
    return s;
  }
  // The batch size of `sig` when it belongs here, else 0.
  int64_t batch_of(const Signature& sig) const {
    if (sig.shapes.size() != batch_inputs.size()) return 0;
    int64_t b = 0;
    for (size_t i = 0; i < batch_inputs.size(); ++i) {
      if (!batch_inputs[i]) continue;
      if (sig.shapes[i].empty() || (b != 0 && sig.shapes[i][0] != b)) return 0;
      b = sig.shapes[i][0];
    }
    const Signature erased = erase(sig, batch_inputs);
    return b > 0 && !(erased < key) && !(key < erased) ? b : 0;
  }
};

enum class Mode { Function, Module, TrainingStep };

}  // namespace

struct CompiledFunction::Impl {
  Mode mode = Mode::Function;
  nn::Module* module = nullptr;  // module modes
  Fn fn;
  CompileOptions options;
  std::mutex mutex;
  std::map<Signature, std::shared_ptr<Compiled>> plans;
  std::vector<Signature> order;  // signatures compiled, in the order they were first seen
  std::optional<Signature> last_sig;  // the latest new signature (for the recompile reasons)
  std::vector<std::unique_ptr<DynamicBatch>> dynamic;
  std::vector<std::string> reasons;
  const CompileReport* last = nullptr;
  std::shared_ptr<Compiled> last_compiled;
  bool warned_limit = false;

  std::shared_ptr<Compiled> compile(const Signature& sig, const std::vector<Tensor>& inputs);
  runtime::PipelineOptions pipeline_options() const;
  std::unique_ptr<ir::Graph> trace_graph(Compiled& c, const std::vector<Tensor>& inputs);
  // A dynamic batch's plan for `sig`, or null (then `note` says why the batch is not dynamic,
  // when that is the reason). compile_dynamic.cpp.
  std::shared_ptr<Compiled> dynamic_plan(const Signature& sig, const std::vector<Tensor>& inputs, std::string* note);
  std::string build_dynamic(DynamicBatch& d, const std::vector<Tensor>& inputs);
  std::shared_ptr<Compiled> instantiate(DynamicBatch& d, int64_t b, const Signature& sig);
};

runtime::PipelineOptions CompiledFunction::Impl::pipeline_options() const {
  runtime::PipelineOptions pipeline;
  pipeline.passes = options.passes;
  pipeline.fuse = options.fuse;
  pipeline.backend = runtime::backend_from_name(options.backend);
  pipeline.memory_plan = options.memory_plan;
  return pipeline;
}

std::unique_ptr<ir::Graph> CompiledFunction::Impl::trace_graph(Compiled& c, const std::vector<Tensor>& inputs) {
  std::unique_ptr<ir::Graph> graph;
  if (mode == Mode::Function) {
    graph = trace::trace([&](const std::vector<Tensor>& in, const std::vector<Tensor>&) { return fn(in); }, inputs);
    c.random = graph->inputs().size() > inputs.size();
  } else {
    c.module_graph = std::make_shared<trace::ModuleGraph>(mode == Mode::Module ? trace::trace_module(*module, fn, inputs)
                                                                               : trace::trace_module_joint(*module, fn, inputs));
    graph = c.module_graph->graph->clone();  // the module graph keeps the traced one to bind with
    c.random = c.module_graph->random;
  }
  return graph;
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
  r.fusion = c.compiled.fusion_explain;
  r.plan = c.compiled.plan->describe() + c.compiled.plan->memory_report();
}

std::shared_ptr<Compiled> CompiledFunction::Impl::compile(const Signature& sig,
                                                          const std::vector<Tensor>& inputs) {
  auto c = std::make_shared<Compiled>();
  std::unique_ptr<ir::Graph> graph = trace_graph(*c, inputs);
  c->compiled = runtime::compile_graph(std::move(graph), pipeline_options());
  c->compiled.plan->set_profiling(options.profile);
  fill_report(*c, sig);
  return c;
}

// A plan for `sig` from a dynamic batch it belongs to, or from the second batch size of a signature
// compiled before (which builds the dynamic batch: its kernels compile once, for every size).
std::shared_ptr<Compiled> CompiledFunction::Impl::dynamic_plan(const Signature& sig, const std::vector<Tensor>& inputs,
                                                               std::string* note) {
  DynamicBatch* d = nullptr;
  int64_t b = 0;
  for (auto& entry : dynamic) {
    if ((b = entry->batch_of(sig)) != 0) {
      d = entry.get();
      break;
    }
  }
  const std::string change = last_sig ? difference(*last_sig, sig) : "batch " + std::to_string(b);
  bool built = false;
  if (!d) {
    std::optional<BatchChange> bc;
    for (const Signature& s : order) {
      if ((bc = batch_change(s, sig))) break;
    }
    if (!bc) return nullptr;
    auto entry = std::make_unique<DynamicBatch>();
    entry->batch_inputs = bc->batch_inputs;
    entry->key = DynamicBatch::erase(sig, bc->batch_inputs);
    try {
      entry->why_not = build_dynamic(*entry, inputs);
    } catch (const Error& e) {
      if (e.internal()) throw;
      entry->why_not = e.what();
    }
    d = entry.get();
    b = bc->now;
    dynamic.push_back(std::move(entry));
    built = true;
  }
  if (!d->why_not.empty()) {
    *note = " (batch not dynamic: " + d->why_not + "; kernels specialized)";
    return nullptr;
  }
  for (auto it = d->plans.begin(); it != d->plans.end(); ++it) {
    if (it->first != b) continue;
    d->plans.splice(d->plans.begin(), d->plans, it);  // evicted from `plans` only by the LRU
    last_sig = sig;
    return it->second;
  }
  const codegen::KernelCacheStats before = codegen::KernelCache::global().stats();
  std::shared_ptr<Compiled> c;
  try {
    c = instantiate(*d, b, sig);
  } catch (const Error& e) {
    if (e.internal()) throw;
    *note = std::string(" (batch not dynamic at this size: ") + e.what() + "; kernels specialized)";
    return nullptr;
  }
  const codegen::KernelCacheStats after = codegen::KernelCache::global().stats();
  reasons.push_back(change + (built ? " (batch is dynamic: kernels compiled once for every batch size)"
                                    : " (batch is dynamic: kernels reused, plan re-instantiated)"));
  debug_log(1, "recompiling: " + reasons.back());
  if (!built) {
    debug_log(1, "dynamic batch " + std::to_string(b) + ": plan in " + std::to_string(c->report.compile_ms) +
                     " ms, " + std::to_string(c->report.kernels) + " kernels reused, " +
                     std::to_string(after.compiler_runs - before.compiler_runs) +
                     " compiler runs (compiler runs saved: a specialized plan compiles " +
                     std::to_string(c->report.kernels) + " kernels anew)");
  }
  if (built) order.push_back(sig);
  last_sig = sig;
  d->plans.emplace_front(b, c);
  while (int(d->plans.size()) > options.batch_plans) d->plans.pop_back();
  return c;
}

// Traces and optimizes the function at the three probe batch sizes (no kernel compiles: the
// interpreter backend), fits the graph and kernels through the first two and checks them against
// the third; "" or why the function is not batch-independent.
std::string CompiledFunction::Impl::build_dynamic(DynamicBatch& d, const std::vector<Tensor>& inputs) {
  std::vector<runtime::CompiledGraph> probes;
  for (int64_t p : kBatchProbes) {
    std::vector<Tensor> in;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!d.batch_inputs[i]) {
        in.push_back(inputs[i]);
        continue;
      }
      Shape shape = inputs[i].shape();
      shape[0] = p;
      in.push_back(zeros(shape, inputs[i].dtype()));
    }
    Compiled probe;
    std::unique_ptr<ir::Graph> graph = trace_graph(probe, in);
    if (probe.random) return "the function draws random numbers (how many depends on the batch size)";
    if (!d.module_graph) d.module_graph = probe.module_graph;
    runtime::PipelineOptions pipeline = pipeline_options();
    pipeline.backend = runtime::KernelBackend::Interpreter;
    pipeline.lower = d.kernels.record(p);
    probes.push_back(runtime::compile_graph(std::move(graph), pipeline));
  }
  std::string why;
  d.graph = runtime::BatchGraph::fit(*probes[0].graph, kBatchProbes[0], *probes[1].graph, kBatchProbes[1], &why);
  if (!d.graph) return why;
  why = d.graph->compare(*probes[2].graph, kBatchProbes[2]);
  if (!why.empty()) return why;
  return d.kernels.fit();
}

// The plan at batch `b`: the fitted graph at b, planned anew (memory, bindings), its kernels the
// dynamic-batch ones (the same cache keys at every size).
std::shared_ptr<Compiled> CompiledFunction::Impl::instantiate(DynamicBatch& d, int64_t b, const Signature& sig) {
  auto c = std::make_shared<Compiled>();
  c->module_graph = d.module_graph;
  runtime::PipelineOptions pipeline = pipeline_options();
  pipeline.lower = d.kernels.replay(b);
  c->compiled = runtime::plan_graph(d.graph->at(b), pipeline);
  c->compiled.plan->set_profiling(options.profile);
  fill_report(*c, sig);
  c->report.dynamic_batch = true;
  return c;
}

namespace {

// A module's state in, the plan, updated buffers and the generator back; a training step adds
// each parameter's gradient into its .grad as backward() would, and returns the loss.
std::vector<Tensor> run_module(CompiledFunction::Impl& f, Compiled& c, const std::vector<Tensor>& inputs) {
  const trace::ModuleGraph& mg = *c.module_graph;
  std::vector<Tensor> outs =
      mg.run_with(*f.module, inputs, [&](const std::vector<Tensor>& all) { return c.compiled.plan->run(all); });
  if (f.mode == Mode::Module) return outs;
  std::map<std::string, Tensor*> params;
  for (const auto& [name, slot] : f.module->named_slots(true)) params.emplace(name, slot);
  NoGradGuard no_grad;
  for (size_t k = 0; k < mg.grad_params.size(); ++k) {
    Tensor& p = *params.at(mg.params[mg.grad_params[k]]);
    const Tensor& g = outs[1 + k];
    p.set_grad(p.grad().defined() ? p.grad() + g : g);
  }
  return {outs[0]};
}

CompiledFunction make(Mode mode, nn::Module* module, CompiledFunction::Fn fn, CompileOptions options) {
  SMELT_CHECK(fn) << "compile: the function is empty";
  SMELT_CHECK(options.recompile_limit >= 1) << "compile: recompile_limit must be >= 1, got "
                                            << options.recompile_limit;
  SMELT_CHECK(options.batch_plans >= 1) << "compile: batch_plans must be >= 1, got " << options.batch_plans;
  runtime::backend_from_name(options.backend);  // an unknown name is an error now, not at the first call
  auto impl = std::make_shared<CompiledFunction::Impl>();
  impl->mode = mode;
  impl->module = module;
  impl->fn = std::move(fn);
  impl->options = std::move(options);
  return CompiledFunction(std::move(impl));
}

}  // namespace

CompiledFunction::CompiledFunction(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::vector<Tensor> CompiledFunction::operator()(const std::vector<Tensor>& inputs) {
  Impl& f = *impl_;
  Signature sig = signature_of(inputs);
  if (f.mode != Mode::Function) {
    sig.training = f.module->is_training() ? 1 : 0;
    sig.modes = trace::module_modes(*f.module);
  }
  if (f.mode == Mode::TrainingStep) {
    for (const auto& [name, slot] : f.module->named_slots(true)) sig.requires_grad.emplace_back(name, slot->requires_grad());
  }
  std::shared_ptr<Compiled> c;
  {
    std::lock_guard<std::mutex> lock(f.mutex);
    auto it = f.plans.find(sig);
    std::string note;
    if (it != f.plans.end()) {
      c = it->second;
    } else {
      if (f.options.dynamic_batch) c = f.dynamic_plan(sig, inputs, &note);
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
      c = f.plans.emplace(sig, f.compile(sig, inputs)).first->second;
      f.order.push_back(sig);
      f.last_sig = sig;
    }
    f.last = &c->report;
    f.last_compiled = c;
  }
  if (f.mode != Mode::Function) return run_module(f, *c, inputs);
  if (!c->random) return c->compiled.plan->run(inputs);
  std::vector<Tensor> outs = c->draws.run([&](const Tensor& state) {
    std::vector<Tensor> all = inputs;
    all.push_back(state);
    return c->compiled.plan->run(all);
  });
  outs.pop_back();  // the advanced generator state (reserved by draws.run)
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
  SMELT_CHECK(impl_->last) << "CompiledFunction::report: nothing compiled yet; call the function first";
  return *impl_->last;
}

namespace {

const runtime::Plan& last_plan(const CompiledFunction::Impl& f, const char* what) {
  SMELT_CHECK(f.last_compiled) << "CompiledFunction::" << what << ": nothing compiled yet; call the function first";
  return *f.last_compiled->compiled.plan;
}

}  // namespace

std::string CompiledFunction::profile_table() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const runtime::Plan& plan = last_plan(*impl_, "profile_table");
  SMELT_CHECK(plan.profile().enabled()) << "CompiledFunction::profile_table: compile with CompileOptions::profile = true";
  return plan.profile().table();
}

void CompiledFunction::write_chrome_trace(const std::string& path) const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const runtime::Plan& plan = last_plan(*impl_, "write_chrome_trace");
  SMELT_CHECK(plan.profile().enabled()) << "CompiledFunction::write_chrome_trace: compile with CompileOptions::profile = true";
  plan.profile().write_chrome_trace(path);
}

std::string CompiledFunction::arena_svg() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return last_plan(*impl_, "arena_svg").arena_svg();
}

CompiledFunction compile(CompiledFunction::Fn fn, CompileOptions options) {
  return make(Mode::Function, nullptr, std::move(fn), std::move(options));
}

CompiledFunction compile_module(nn::Module& module, CompiledFunction::Fn fn, CompileOptions options) {
  return make(Mode::Module, &module, std::move(fn), std::move(options));
}

CompiledFunction compile_training_step(nn::Module& module, CompiledFunction::Fn loss_fn,
                                       CompileOptions options) {
  return make(Mode::TrainingStep, &module, std::move(loss_fn), std::move(options));
}

}  // namespace smelt
