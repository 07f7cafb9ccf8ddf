// smelt::compile's dynamic batch (CompileOptions::dynamic_batch): after a second batch size of a
// signature, one graph and one set of kernels for every batch size (runtime/batch_graph.h), and a
// plan per batch size instantiated from them.
#include <optional>

#include "base/log.h"
#include "codegen/kernel_cache.h"
#include "runtime/compile_impl.h"
#include "smelt/creation.h"

namespace smelt {

using namespace compile_impl;

namespace {

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

}  // namespace

// A plan for `sig` from a dynamic batch it belongs to, or from the second batch size of a signature
// compiled before (which builds the dynamic batch: its kernels compile once, for every size).
std::shared_ptr<Compiled> CompiledFunction::Impl::dynamic_plan(const Signature& sig,
                                                               const std::vector<Tensor>& inputs,
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
    c = instantiate(*d, b, sig, inputs);
  } catch (const Error& e) {
    if (e.internal()) throw;
    *note = std::string(" (batch not dynamic at this size: ") + e.what() + "; kernels specialized)";
    return nullptr;
  }
  const codegen::KernelCacheStats after = codegen::KernelCache::global().stats();
  reasons.push_back(change +
                    (built ? " (batch is dynamic: kernels compiled once for every batch size)"
                           : " (batch is dynamic: kernels reused, plan re-instantiated)"));
  debug_log(1, "recompiling: " + reasons.back());
  if (!built) {
    debug_log(1, "dynamic batch " + std::to_string(b) + ": plan in " +
                     std::to_string(c->report.compile_ms) + " ms, " +
                     std::to_string(c->report.kernels) + " kernels reused, " +
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

// Traces and optimizes the function at the three probe batch sizes and fits the optimized graph
// through the first two (checked against the third). Then fuses each probe with the cost model
// reading the sizes at the batch size of `inputs` (the same groups at every batch size, those a
// specialized compile at that size would choose), and fits the fused graphs and their kernels
// (lowered on the interpreter backend: no compiles) the same way. "" or why the function is not
// batch-independent.
std::string CompiledFunction::Impl::build_dynamic(DynamicBatch& d,
                                                  const std::vector<Tensor>& inputs) {
  int64_t batch = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (d.batch_inputs[i]) batch = inputs[i].size(0);
  }
  const std::array<int64_t, 3>& probe_sizes = options.batch_probes;  // checked by compile()
  std::vector<std::unique_ptr<ir::Graph>> traced, optimized;
  for (int64_t p : probe_sizes) {
    std::string why;
    traced.push_back(traced_at(d, inputs, p, &why));
    if (!traced.back()) return why;
    optimized.push_back(traced.back()->clone());
    runtime::optimize_graph(*optimized.back(), pipeline_options());
  }
  std::string why;
  d.traced = runtime::BatchGraph::fit(*traced[0], probe_sizes[0], *traced[1], probe_sizes[1], &why);
  if (!d.traced) return why;
  why = d.traced->compare(*traced[2], probe_sizes[2]);
  if (!why.empty()) return why;
  std::optional<runtime::BatchGraph> fit =
      runtime::BatchGraph::fit(*optimized[0], probe_sizes[0], *optimized[1], probe_sizes[1], &why);
  if (!fit) return why;
  why = fit->compare(*optimized[2], probe_sizes[2]);
  if (!why.empty()) return why;
  const std::unique_ptr<ir::Graph> cost_shapes = fit->at(batch);
  std::vector<runtime::CompiledGraph> probes;
  for (size_t i = 0; i < optimized.size(); ++i) {
    runtime::PipelineOptions pipeline = pipeline_options();
    pipeline.optimize = false;
    pipeline.fusion_cost_shapes = cost_shapes.get();
    pipeline.backend = runtime::KernelBackend::Interpreter;
    pipeline.lower = d.kernels.record(probe_sizes[i]);
    probes.push_back(runtime::compile_graph(std::move(optimized[i]), pipeline));
  }
  d.graph = runtime::BatchGraph::fit(*probes[0].graph, probe_sizes[0], *probes[1].graph,
                                     probe_sizes[1], &why);
  if (!d.graph) return why;
  why = d.graph->compare(*probes[2].graph, probe_sizes[2]);
  if (!why.empty()) return why;
  return d.kernels.fit();
}

std::unique_ptr<ir::Graph> CompiledFunction::Impl::traced_at(DynamicBatch& d,
                                                             const std::vector<Tensor>& inputs,
                                                             int64_t b, std::string* why) {
  std::vector<Tensor> in;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!d.batch_inputs[i]) {
      in.push_back(inputs[i]);
      continue;
    }
    // The trace reads shapes and layouts only: a tensor without data stands for the input at b.
    auto impl = make_ref<TensorImpl>();
    impl->shape = inputs[i].shape();
    impl->shape[0] = b;
    impl->strides = contiguous_strides(impl->shape);
    impl->dtype = inputs[i].dtype();
    in.push_back(Tensor(impl));
  }
  Compiled probe;
  std::unique_ptr<ir::Graph> graph = trace_graph(probe, in);
  if (probe.random) {
    *why = "the function draws random numbers (how many depends on the batch size)";
    return nullptr;
  }
  if (!d.module_graph) d.module_graph = probe.module_graph;
  // The plans bind what the probes captured: a trace that captures other tensors (a variable the
  // function captures was rebound) is not this dynamic batch's. (Found in review: such a call ran
  // with the new tensor, the sizes compiled before with the old one.)
  bool same = d.captured.empty() || d.captured.size() == probe.captured.size();
  for (size_t k = 0; same && !d.captured.empty() && k < d.captured.size(); ++k) {
    same = d.captured[k].impl() == probe.captured[k].impl();
  }
  if (!same) {
    *why = "it captures other tensors than when its batch was made dynamic (a captured variable "
           "was rebound?)";
    return nullptr;
  }
  d.captured = probe.captured;
  d.aliases = probe.aliases;
  // The versions the fit's constants were folded from: those of the first probe's trace.
  if (d.frozen.empty()) d.frozen = probe.frozen;
  return graph;
}

// The plan at batch `b`: the fitted graph at b, planned anew (memory, bindings), its kernels the
// dynamic-batch ones (the same cache keys at every size). First the function is traced at b and
// its graph checked against the fit of the traces at the probes (every integer and float bit for
// bit; before the passes, which may rewrite a graph differently at sizes like 1 or a power of
// two and stay right): a difference is an error, and the caller compiles b specialized. (No
// compiler runs: a trace costs little next to compiling kernels.)
std::shared_ptr<Compiled> CompiledFunction::Impl::instantiate(DynamicBatch& d, int64_t b,
                                                              const Signature& sig,
                                                              const std::vector<Tensor>& inputs) {
  std::string why;
  const std::unique_ptr<ir::Graph> traced = traced_at(d, inputs, b, &why);
  if (traced) why = d.traced->compare(*traced, b);
  SMELT_CHECK(why.empty()) << "dynamic batch: the function traced at batch " << b
                           << " is not the graph fitted at the probe batch sizes: " << why
                           << "; valid: functions whose graph is affine in the batch size";
  auto c = std::make_shared<Compiled>();
  c->module_graph = d.module_graph;
  c->captured = d.captured;  // the trace at b's
  c->aliases = d.aliases;
  c->frozen = d.frozen;
  runtime::PipelineOptions pipeline = pipeline_options();
  std::shared_ptr<const size_t> used;
  pipeline.lower = d.kernels.replay(b, &used);
  c->compiled = runtime::plan_graph(d.graph->at(b), pipeline);
  SMELT_CHECK(*used == d.kernels.size())
      << "dynamic batch: at batch " << b << " the plan lowers " << *used
      << " groups where the probe batch sizes lowered " << d.kernels.size()
      << "; valid: a plan with the same groups at every batch size";
  c->compiled.plan->set_profiling(options.profile);
  fill_report(*c, sig);
  c->report.dynamic_batch = true;
  return c;
}

}  // namespace smelt
