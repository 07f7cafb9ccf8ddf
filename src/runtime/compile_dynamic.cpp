// smelt::compile's dynamic dims (CompileOptions::dynamic_batch, dynamic_dims): after a call that
// differs from a compiled signature in some dims, one graph and one set of kernels for every size
// of those dims (runtime/shape_fit.h), and a plan per size instantiated from them.
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "base/log.h"
#include "codegen/kernel_cache.h"
#include "runtime/compile_impl.h"
#include "smelt/creation.h"

namespace smelt {

using namespace compile_impl;
using codegen::SymbolPoint;

namespace {

// The dims of `now` that become symbols against `before` (a signature compiled before, or a
// dynamic entry's key, whose dynamic dims are -1 with their symbols in `before_symbols`): those
// whose size changed, and those already symbolic. Dims share a symbol when their sizes were equal
// in both (as torch.compile's duck sizing: the batch of x and of its mask). nullopt when the
// signatures differ in more than dims (dtypes, ranks, modes) or in no dim, or a size is 0 (empty
// tensors are specialized); `why` set when too many dims vary.
std::optional<Symbols> symbols_between(const Signature& before, const Symbols* before_symbols,
                                       const Signature& now, std::string* why) {
  if (before.dtypes != now.dtypes || before.training != now.training || before.modes != now.modes ||
      before.requires_grad != now.requires_grad || before.shapes.size() != now.shapes.size()) {
    return std::nullopt;
  }
  Symbols out(now.shapes.size());
  std::map<std::pair<int64_t, int64_t>, int> groups;  // (size before, or -1 - symbol; size now)
  for (size_t i = 0; i < now.shapes.size(); ++i) {
    const Shape &a = before.shapes[i], &b = now.shapes[i];
    if (a.size() != b.size()) return std::nullopt;
    out[i].assign(b.size(), -1);
    for (size_t d = 0; d < b.size(); ++d) {
      const int prior = before_symbols ? (*before_symbols)[i][d] : -1;
      if (prior < 0 && a[d] == b[d]) continue;
      if (b[d] <= 0 || (prior < 0 && a[d] <= 0)) return std::nullopt;
      const int64_t label = prior >= 0 ? -1 - prior : a[d];
      out[i][d] = groups.emplace(std::pair{label, b[d]}, int(groups.size())).first->second;
    }
  }
  if (groups.empty()) return std::nullopt;
  if (int(groups.size()) > codegen::kMaxSymbols) {
    *why = std::to_string(groups.size()) + " sizes vary; at most " + std::to_string(codegen::kMaxSymbols) +
           " can be symbolic";
    return std::nullopt;
  }
  return out;
}

// CompileOptions::dynamic_dims at the first call: the marked dims, equal sizes sharing a symbol.
Symbols marked_symbols(const std::vector<std::pair<int, int>>& marked, const Signature& sig) {
  Symbols out(sig.shapes.size());
  for (size_t i = 0; i < sig.shapes.size(); ++i) out[i].assign(sig.shapes[i].size(), -1);
  std::map<int64_t, int> groups;
  for (auto [i, d] : marked) {
    const int rank = i >= 0 && size_t(i) < sig.shapes.size() ? int(sig.shapes[size_t(i)].size()) : 0;
    SMELT_CHECK(i >= 0 && size_t(i) < sig.shapes.size() && d >= -rank && d < rank)
        << "compile: CompileOptions::dynamic_dims names input " << i << " dim " << d << ", but the call's inputs are "
        << sig.str() << "; valid: (input, dim) pairs of the inputs given (a negative dim counts from the end)";
    if (d < 0) d += rank;
    const int64_t v = sig.shapes[size_t(i)][size_t(d)];
    SMELT_CHECK(v >= 1) << "compile: CompileOptions::dynamic_dims marks input " << i << " dim " << d
                        << ", which has size " << v << "; valid: dims of size >= 1 at the first call";
    out[size_t(i)][size_t(d)] = groups.emplace(v, int(groups.size())).first->second;
  }
  SMELT_CHECK(int(groups.size()) <= codegen::kMaxSymbols)
      << "compile: CompileOptions::dynamic_dims gives " << groups.size() << " different sizes; valid: at most "
      << codegen::kMaxSymbols << " symbols (dims of equal size share one)";
  return out;
}

// The probe grid for `count` symbols from CompileOptions::dynamic_probes: symbol s takes the
// first three values shifted by s times their span (so no two symbols are equal at a probe: a
// pass might simplify a reshape from [B, S] to [S, B] where B == S), its check the fourth. The
// span is rounded up to even, so that the shifted probes keep their parity (odd defaults stay
// odd: no power of two, where a pass may rewrite a graph otherwise).
codegen::SymbolGrid probe_grid(const std::array<int64_t, 4>& probes, int count) {
  int64_t lo = probes[0], hi = probes[0];
  for (int64_t p : probes) lo = std::min(lo, p), hi = std::max(hi, p);
  const int64_t span = (hi - lo + 2) / 2 * 2;
  codegen::SymbolGrid grid;
  for (int s = 0; s < count; ++s) {
    const int64_t shift = s * span;
    grid.axes.push_back({probes[0] + shift, probes[1] + shift, probes[2] + shift});
    grid.check.push_back(probes[3] + shift);
  }
  return grid;
}

}  // namespace

// A plan for `sig` from dynamic dims it belongs to, or from dims in which it differs from a
// signature compiled before (or from dynamic dims, adding more): that builds the dynamic dims,
// whose kernels compile once, for every size.
std::shared_ptr<Compiled> CompiledFunction::Impl::dynamic_plan(const Signature& sig,
                                                               const std::vector<Tensor>& inputs,
                                                               std::string* note) {
  DynamicDims* d = nullptr;
  SymbolPoint p;
  Signature now = sig;  // (its modes updated by a build's traces)
  // An entry whose dims changed the graph matches too, but it is the answer only when no other
  // choice of dims is left (below): the same batch at a new sequence length may still be dynamic.
  DynamicDims* failed_match = nullptr;
  for (auto& entry : dynamic) {
    if (std::optional<SymbolPoint> q = entry->point_of(sig)) {
      if (!entry->why_not.empty()) {
        if (!failed_match) failed_match = entry.get();
        continue;
      }
      d = entry.get();
      p = *q;
      break;
    }
  }
  bool built = false;
  if (!d) {
    std::optional<Symbols> symbols;
    std::string why;
    if (order.empty() && !options.dynamic_dims.empty()) {
      symbols = marked_symbols(options.dynamic_dims, sig);
    }
    // The (input, dim) pairs a choice makes symbolic; a choice holding all the dims of an entry
    // that changed the graph would change it again, and is not tried.
    auto dims_of = [](const Symbols& s) {
      std::set<std::pair<size_t, size_t>> out;
      for (size_t i = 0; i < s.size(); ++i) {
        for (size_t k = 0; k < s[i].size(); ++k) {
          if (s[i][k] >= 0) out.insert({i, k});
        }
      }
      return out;
    };
    auto failed_before = [&](const Symbols& s) {
      const auto dims = dims_of(s);
      for (const auto& entry : dynamic) {
        const auto bad = dims_of(entry->symbols);
        if (!entry->why_not.empty() && std::includes(dims.begin(), dims.end(), bad.begin(), bad.end())) return true;
      }
      return false;
    };
    // More dims of an entry made before (its symbols stay symbols), else the fewest dims that
    // differ from a signature compiled before (an LSTM's batch at a sequence length seen before,
    // though its sequence length unrolls the graph).
    for (size_t k = 0; !symbols && k < dynamic.size(); ++k) {
      if (!dynamic[k]->why_not.empty()) continue;
      std::optional<Symbols> more = symbols_between(dynamic[k]->key, &dynamic[k]->symbols, sig, &why);
      if (more && !failed_before(*more)) symbols = std::move(more);
    }
    if (!symbols) {
      // The most recent first: ties go to the call nearest this one (the same sequence length).
      for (auto it = order.rbegin(); it != order.rend(); ++it) {
        std::optional<Symbols> fewer = symbols_between(*it, nullptr, sig, &why);
        if (fewer && !failed_before(*fewer) && (!symbols || dims_of(*fewer).size() < dims_of(*symbols).size())) {
          symbols = std::move(fewer);
        }
      }
    }
    if (!symbols && failed_match) {
      *note = " (not dynamic (" + failed_match->describe() + "): " + failed_match->why_not + "; kernels specialized)";
      return nullptr;
    }
    if (!symbols) {
      if (!why.empty()) *note = " (not dynamic: " + why + "; kernels specialized)";
      return nullptr;
    }
    auto entry = std::make_unique<DynamicDims>();
    entry->symbols = *symbols;
    entry->key = DynamicDims::erase(sig, *symbols);
    for (const auto& dims : *symbols) {
      for (int s : dims) entry->count = std::max(entry->count, s + 1);
    }
    entry->grid = probe_grid(options.dynamic_probes, entry->count);
    p = *entry->point_of(sig);
    try {
      entry->why_not = build_dynamic(*entry, p, inputs);
    } catch (const Error& e) {
      if (e.internal()) throw;
      entry->why_not = e.what();
    } catch (const std::exception& e) {
      // The function traced at sizes the user never passed may fail in its own code (a table
      // indexed by the sequence length, a Python exception): that is no reason to fail the call.
      entry->why_not = std::string("the function fails at a probe size: ") + e.what();
    }
    // The probe traces may have read module modes first seen now (nn/mode_reads.h): the key
    // holds them, as a specialized compile's signature does after its trace. (Found in review:
    // with dynamic_dims, the entry's key had no modes and the next call never matched it.)
    if (mode == Mode::Function) now.modes = modes_now();
    entry->key = DynamicDims::erase(now, *symbols);
    d = entry.get();
    dynamic.push_back(std::move(entry));
    built = true;
  }
  if (!d->why_not.empty()) {
    *note = " (not dynamic (" + d->describe() + "): " + d->why_not + "; kernels specialized)";
    return nullptr;
  }
  for (auto it = d->plans.begin(); it != d->plans.end(); ++it) {
    if (it->first != p) continue;
    d->plans.splice(d->plans.begin(), d->plans, it);  // evicted from `plans` only by the LRU
    last_sig = now;
    return it->second;
  }
  const codegen::KernelCacheStats before = codegen::KernelCache::global().stats();
  std::shared_ptr<Compiled> c;
  try {
    c = instantiate(*d, p, now, inputs);
  } catch (const Error& e) {
    if (e.internal()) throw;
    *note = std::string(" (not dynamic at this size: ") + e.what() + "; kernels specialized)";
    return nullptr;
  }
  const codegen::KernelCacheStats after = codegen::KernelCache::global().stats();
  if (last_sig) {  // (the first call, with CompileOptions::dynamic_dims, is no recompile)
    reasons.push_back(difference(*last_sig, now) + " (dynamic " + d->describe() +
                      (built ? ": kernels compiled once for every size)" : ": kernels reused, plan re-instantiated)"));
    debug_log(1, "recompiling: " + reasons.back());
  }
  if (!built) {
    debug_log(1, "dynamic sizes " + codegen::point_str(p) + ": plan in " + std::to_string(c->report.compile_ms) +
                     " ms, " + std::to_string(c->report.kernels) + " kernels reused, " +
                     std::to_string(after.compiler_runs - before.compiler_runs) +
                     " compiler runs (compiler runs saved: a specialized plan compiles " +
                     std::to_string(c->report.kernels) + " kernels anew)");
  }
  if (built) order.push_back(now);
  last_sig = now;
  d->plans.emplace_front(p, c);
  while (int(d->plans.size()) > options.batch_plans) d->plans.pop_back();
  return c;
}

// Traces and optimizes the function at every probe (the grid's points, then its check point) and
// fits the optimized graph through the grid (checked at the check point). Then fuses each probe
// with the cost model reading the sizes at `now` (the same groups at every size, those a
// specialized compile at `now` would choose), and fits the fused graphs and their kernels
// (lowered on the interpreter backend: no compiles) the same way. "" or why the function's graph
// is not polynomial in the sizes.
std::string CompiledFunction::Impl::build_dynamic(DynamicDims& d, const SymbolPoint& now,
                                                  const std::vector<Tensor>& inputs) {
  std::vector<SymbolPoint> probes = d.grid.points();
  probes.push_back(d.grid.check);
  const size_t n = probes.size() - 1;  // grid points; the last probe checks
  std::vector<std::unique_ptr<ir::Graph>> traced, optimized;
  for (const SymbolPoint& p : probes) {
    std::string why;
    traced.push_back(traced_at(d, inputs, p, &why));
    if (!traced.back()) return why;
    optimized.push_back(traced.back()->clone());
    optimize(*optimized.back());
  }
  auto fit = [&](const std::vector<std::unique_ptr<ir::Graph>>& graphs, std::optional<runtime::GraphFit>* out) {
    std::vector<const ir::Graph*> grid_graphs;
    for (size_t i = 0; i < n; ++i) grid_graphs.push_back(graphs[i].get());
    std::string why;
    *out = runtime::GraphFit::fit(grid_graphs, d.grid, &why);
    if (!*out) return why;
    return (*out)->compare(*graphs[n], d.grid.check);
  };
  std::string why = fit(traced, &d.traced);
  if (!why.empty()) return why;
  std::optional<runtime::GraphFit> optimized_fit;
  why = fit(optimized, &optimized_fit);
  if (!why.empty()) return why;
  const std::unique_ptr<ir::Graph> cost_shapes = optimized_fit->at(now);
  std::vector<std::unique_ptr<ir::Graph>> fused;
  for (size_t i = 0; i < optimized.size(); ++i) {
    runtime::PipelineOptions pipeline = pipeline_options();
    pipeline.optimize = false;
    pipeline.fusion_cost_shapes = cost_shapes.get();
    pipeline.backend = runtime::KernelBackend::Interpreter;
    pipeline.lower = d.kernels.record(probes[i]);
    fused.push_back(std::move(runtime::compile_graph(std::move(optimized[i]), pipeline).graph));
  }
  why = fit(fused, &d.graph);
  if (!why.empty()) return why;
  return d.kernels.fit(d.grid);
}

std::unique_ptr<ir::Graph> CompiledFunction::Impl::traced_at(DynamicDims& d,
                                                             const std::vector<Tensor>& inputs,
                                                             const SymbolPoint& p, std::string* why) {
  std::vector<Tensor> in;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<int>& symbols = d.symbols[i];
    if (std::all_of(symbols.begin(), symbols.end(), [](int s) { return s < 0; })) {
      in.push_back(inputs[i]);
      continue;
    }
    // The trace reads shapes and layouts only: a tensor without data stands for the input at p.
    auto impl = make_ref<TensorImpl>();
    impl->shape = inputs[i].shape();
    for (size_t k = 0; k < symbols.size(); ++k) {
      if (symbols[k] >= 0) impl->shape[k] = p[size_t(symbols[k])];
    }
    impl->strides = contiguous_strides(impl->shape);
    impl->dtype = inputs[i].dtype();
    in.push_back(Tensor(impl));
  }
  Compiled probe;
  std::unique_ptr<ir::Graph> graph = trace_graph(probe, in);
  if (probe.random) {
    *why = "the function draws random numbers (how many depends on the sizes)";
    return nullptr;
  }
  if (!d.module_graph) d.module_graph = probe.module_graph;
  // The plans bind what the probes captured: a trace that captures other tensors (a variable the
  // function captures was rebound) is not this entry's. (Found in review: such a call ran with
  // the new tensor, the sizes compiled before with the old one.)
  bool same = d.captured.empty() || d.captured.size() == probe.captured.size();
  for (size_t k = 0; same && !d.captured.empty() && k < d.captured.size(); ++k) {
    same = d.captured[k].impl() == probe.captured[k].impl();
  }
  if (!same) {
    *why = "it captures other tensors than when its dims were made dynamic (a captured variable "
           "was rebound?)";
    return nullptr;
  }
  d.captured = probe.captured;
  d.aliases = probe.aliases;
  // The versions the fit's constants were folded from: those of the first probe's trace.
  if (d.frozen.empty()) d.frozen = probe.frozen;
  return graph;
}

// The plan at sizes `p`: the fitted graph at p, planned anew (memory, bindings), its kernels the
// dynamic-shape ones (the same cache keys at every size). First the function is traced at p and
// its graph checked against the fit of the traces at the probes (every integer and float bit for
// bit; before the passes, which may rewrite a graph differently at sizes like 1 or a power of
// two and stay right): a difference is an error, and the caller compiles p specialized. (No
// compiler runs: a trace costs little next to compiling kernels.)
std::shared_ptr<Compiled> CompiledFunction::Impl::instantiate(DynamicDims& d, const SymbolPoint& p,
                                                              const Signature& sig,
                                                              const std::vector<Tensor>& inputs) {
  std::string why;
  std::unique_ptr<ir::Graph> traced = traced_at(d, inputs, p, &why);
  if (traced) why = d.traced->compare(*traced, p);
  SMELT_CHECK(why.empty()) << "dynamic shapes: the function traced at " << codegen::point_str(p)
                           << " is not the graph fitted at the probe sizes: " << why
                           << "; valid: functions whose graph is polynomial in the sizes";
  auto c = std::make_shared<Compiled>();
  c->traced = std::move(traced);  // for differentiable calls
  c->module_graph = d.module_graph;
  c->captured = d.captured;  // the trace at p's
  c->aliases = d.aliases;
  c->frozen = d.frozen;
  runtime::PipelineOptions pipeline = pipeline_options();
  std::shared_ptr<const size_t> used;
  pipeline.lower = d.kernels.replay(p, &used);
  c->compiled = runtime::plan_graph(d.graph->at(p), pipeline);
  SMELT_CHECK(*used == d.kernels.size())
      << "dynamic shapes: at " << codegen::point_str(p) << " the plan lowers " << *used
      << " groups where the probe sizes lowered " << d.kernels.size()
      << "; valid: a plan with the same groups at every size";
  c->compiled.plan->set_profiling(options.profile);
  fill_report(*c, sig);
  c->report.dynamic_batch = true;
  return c;
}

}  // namespace smelt
