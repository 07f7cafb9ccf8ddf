// Private to smelt::compile (runtime/compile.cpp: signatures, tracing, the API;
// runtime/compile_dynamic.cpp: the dynamic batch): what a compiled function keeps per signature.
#pragma once

#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/batch_graph.h"
#include "runtime/pipeline.h"
#include "smelt/compile.h"
#include "trace/random_draws.h"
#include "trace/trace_module.h"

namespace smelt {
namespace compile_impl {

// What a plan is specialized on: each input's dtype and shape (the trace and the plan see every
// input contiguous, so strides add nothing).
struct Signature {
  std::vector<DType> dtypes;
  std::vector<Shape> shapes;
  int training = -1;        // a module's mode (-1 for a plain function): the graph differs per mode
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

// Why `now` differs from `before`: the first input that changed, e.g. "input 0 dim 0: 64 -> 128".
std::string difference(const Signature& before, const Signature& now);

// A function output that eager code would alias with an input: the input itself or view ops
// of it (reshape, permute, slice, expand, contiguous). The plan returns a copy, so each call
// applies the view ops to the caller's tensor instead and returns that: the output aliases it as
// eager's does. Only for a contiguous input, the layout the function was traced with: a strided
// input's outputs stay the plan's copies (the same values; no view of the caller's tensor).
struct AliasOutput {
  size_t output = 0;  // among the function's outputs
  size_t input = 0;   // among the graph's inputs (the user's, then the captured tensors)
  std::vector<std::pair<ops::OpId, ops::Attrs>> views;  // applied in this order
};

struct Compiled {
  runtime::CompiledGraph compiled;
  // Function mode: the tensors the function captured (trace.h), graph inputs after the user's.
  std::vector<Tensor> captured;
  // CompileOptions::freeze: the captured tensors folded in as constants, and their storage
  // versions when traced; a call that finds one changed recompiles.
  std::vector<std::pair<Tensor, uint64_t>> frozen;
  std::vector<AliasOutput> aliases;  // Function mode
  bool random = false;       // the graph takes and returns the generator state (last input/output)
  trace::RandomDraws draws;  // random: each call's blocks reserved from the default generator
  std::shared_ptr<trace::ModuleGraph> module_graph;  // how a module's state binds (module modes)
  CompileReport report;
};

// The report of a plan just compiled or instantiated for `sig`.
void fill_report(Compiled& c, const Signature& sig);

// One dynamic batch: the graph and kernels for every batch size of a signature, and the plans
// instantiated from them, one per batch size (an LRU).
struct DynamicBatch {
  Signature key;  // the signature with the batch dims as -1
  std::vector<bool> batch_inputs;
  std::string why_not;  // set: the function is not batch-independent (then kernels are specialized)
  // The fit of the function's traces (before the passes): each new batch size is traced and
  // checked against it before its plan is instantiated (a fit through three probes is a guess:
  // x[:100] gives B rows at every probe; a constant c / B may have two fits).
  std::optional<runtime::BatchGraph> traced;
  std::optional<runtime::BatchGraph> graph;  // the fused graphs' fit: what plans are made from
  runtime::BatchKernels kernels;
  std::shared_ptr<trace::ModuleGraph> module_graph;
  std::vector<Tensor> captured;  // what the latest trace captured (Compiled::captured)
  std::vector<std::pair<Tensor, uint64_t>> frozen;  // and froze (Compiled::frozen)
  std::vector<AliasOutput> aliases;  // and which outputs alias inputs (Compiled::aliases)
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

}  // namespace compile_impl

struct CompiledFunction::Impl {
  using Signature = compile_impl::Signature;
  using Compiled = compile_impl::Compiled;
  using DynamicBatch = compile_impl::DynamicBatch;
  using Mode = compile_impl::Mode;

  Mode mode = Mode::Function;
  nn::Module* module = nullptr;  // module modes
  Fn fn;
  CompileOptions options;
  std::mutex mutex;
  std::map<Signature, std::shared_ptr<Compiled>> plans;
  std::vector<Signature> order;       // signatures compiled, in the order they were first seen
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
  std::shared_ptr<Compiled> dynamic_plan(const Signature& sig, const std::vector<Tensor>& inputs,
                                         std::string* note);
  std::string build_dynamic(DynamicBatch& d, const std::vector<Tensor>& inputs);
  std::shared_ptr<Compiled> instantiate(DynamicBatch& d, int64_t b, const Signature& sig,
                                        const std::vector<Tensor>& inputs);
  // The function traced at batch `b` (inputs of `d`'s batch dims set to b); null with `why` when
  // it draws random numbers.
  std::unique_ptr<ir::Graph> traced_at(DynamicBatch& d, const std::vector<Tensor>& inputs,
                                       int64_t b, std::string* why);
};

}  // namespace smelt
