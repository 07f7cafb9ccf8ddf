// Private to smelt::compile (runtime/compile.cpp: signatures, tracing, the API;
// runtime/compile_dynamic.cpp: dynamic dims): what a compiled function keeps per signature.
#pragma once

#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "autograd/node.h"
#include "passes/partition.h"
#include "runtime/shape_fit.h"
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
  // compile_step's updating calls: what the update compiles in (runtime/compile_step.cpp:
  // step_key); empty for every other call.
  std::string update;
  bool operator<(const Signature& o) const {
    return std::tie(dtypes, shapes, training, modes, requires_grad, update) <
           std::tie(o.dtypes, o.shapes, o.training, o.modes, o.requires_grad, o.update);
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

// A signature's plans for the calls that differentiate some of its graph inputs
// (runtime/compile_grad.cpp): the forward half of the joint graph, which also returns what the
// backward saves, and the backward half.
struct Differentiable {
  runtime::CompiledGraph forward;
  runtime::CompiledGraph backward;
  passes::Partition partition;  // where each saved value comes from, and what it explains
  std::vector<size_t> tangent_of;  // the outputs differentiated (trace::Vjp)
  std::vector<ops::TensorMeta> tangents;  // and their metas
  std::vector<size_t> grad_of;     // the graph inputs that get a gradient
  size_t outputs = 0;              // the traced graph's outputs (the forward plan returns more)
  CompileReport report;
};

// The autograd node a differentiable call's outputs share, and which outputs get it.
struct GradHistory {
  Ref<autograd::Node> node;
  std::vector<size_t> outputs;
  void attach(std::vector<Tensor>& outs) const;
};

// Which of a call's graph inputs it differentiates (grad mode on, the input requires grad and is
// floating), or empty when none.
std::vector<bool> grad_inputs(const std::vector<Tensor>& graph_inputs);

// compile_step (runtime/compile_step.cpp): the optimizer and what the calls have done.
struct StepSpec {
  optim::Optimizer* optimizer = nullptr;
  StepOptions options;
  int64_t calls = 0;  // finished calls (guarded by the function's mutex)
};

// An updating step's graph: the joint graph's outputs but the updated parameters' gradients, then
// per updated parameter its new value and new state buffers, then (CompileOptions::gradient_norms)
// every gradient's sum of squares. Its inputs: the joint graph's, then per updated parameter its
// .grad (when it had one), its state buffers and its update scalars.
struct UpdateLayout {
  struct Param {
    size_t grad_output = 0;  // its gradient among the joint graph's outputs
    size_t optimizer_index = 0;
    bool grad_in = false;
  };
  std::vector<Param> params;
  std::vector<bool> kept;  // per joint graph output: whether the plan returns it
  bool norms = false;
};

struct Compiled {
  runtime::CompiledGraph compiled;
  std::shared_ptr<const UpdateLayout> update;  // compile_step's updating plans
  // The traced graph (before the passes), for the differentiable variants, which are built on
  // the first call that needs each: by which graph inputs they differentiate.
  std::shared_ptr<const ir::Graph> traced;
  std::map<std::vector<bool>, std::shared_ptr<const Differentiable>> differentiable;
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
// And what its backward keeps and recomputes.
void add_recomputation(CompileReport& r, const passes::Recomputation& recomputation);

// Per input, per dim: the symbol (S0, S1, ...: codegen/size_poly.h) of a dynamic dim, -1 for a
// dim every call of the entry shares.
using Symbols = std::vector<std::vector<int>>;

// One set of dynamic dims (runtime/compile_dynamic.cpp): the graph and kernels for every size of
// them, and the plans instantiated from those, one per point (an LRU).
struct DynamicDims {
  Signature key;  // the signature with the dynamic dims as -1
  Symbols symbols;
  int count = 0;              // symbols
  codegen::SymbolGrid grid;   // the probe sizes
  std::string why_not;  // set: the function's graph is not polynomial in the sizes (then kernels are specialized)
  // The fit of the function's traces (before the passes): each new point is traced and checked
  // against it before its plan is instantiated (a fit through a grid of probes is a guess:
  // x[:100] gives B rows at every probe; a constant c / B may have two fits).
  std::optional<runtime::GraphFit> traced;
  std::optional<runtime::GraphFit> graph;  // the fused graphs' fit: what plans are made from
  runtime::KernelFit kernels;
  std::shared_ptr<trace::ModuleGraph> module_graph;
  std::vector<Tensor> captured;  // what the latest trace captured (Compiled::captured)
  std::vector<std::pair<Tensor, uint64_t>> frozen;  // and froze (Compiled::frozen)
  std::vector<AliasOutput> aliases;  // and which outputs alias inputs (Compiled::aliases)
  std::list<std::pair<codegen::SymbolPoint, std::shared_ptr<Compiled>>> plans;  // most recently used first

  static Signature erase(Signature s, const Symbols& symbols) {
    for (size_t i = 0; i < s.shapes.size(); ++i) {
      for (size_t d = 0; d < s.shapes[i].size(); ++d) {
        if (symbols[i][d] >= 0) s.shapes[i][d] = -1;
      }
    }
    return s;
  }
  // The symbols' sizes in `sig` when it belongs here (every dim of a symbol the same size, >= 1;
  // the other dims as in `key`), else nullopt.
  std::optional<codegen::SymbolPoint> point_of(const Signature& sig) const {
    if (sig.shapes.size() != symbols.size()) return std::nullopt;
    codegen::SymbolPoint p(size_t(count), 0);
    for (size_t i = 0; i < symbols.size(); ++i) {
      if (sig.shapes[i].size() != symbols[i].size()) return std::nullopt;
      for (size_t d = 0; d < symbols[i].size(); ++d) {
        const int s = symbols[i][d];
        const int64_t v = sig.shapes[i][d];
        if (s < 0) continue;
        if (v < 1 || (p[size_t(s)] != 0 && p[size_t(s)] != v)) return std::nullopt;
        p[size_t(s)] = v;
      }
    }
    const Signature erased = erase(sig, symbols);
    if (erased < key || key < erased) return std::nullopt;
    return p;
  }
  // "S0 = input 0 dim 0 and input 1 dim 0, S1 = input 0 dim 1"
  std::string describe() const {
    std::string out;
    for (int s = 0; s < count; ++s) {
      out += (s ? ", S" : "S") + std::to_string(s) + " = ";
      std::string dims;
      for (size_t i = 0; i < symbols.size(); ++i) {
        for (size_t d = 0; d < symbols[i].size(); ++d) {
          if (symbols[i][d] != s) continue;
          dims += (dims.empty() ? "input " : " and input ") + std::to_string(i) + " dim " + std::to_string(d);
        }
      }
      out += dims;
    }
    return out;
  }
};

enum class Mode { Function, Module, TrainingStep };

}  // namespace compile_impl

struct CompiledFunction::Impl {
  using Signature = compile_impl::Signature;
  using Compiled = compile_impl::Compiled;
  using DynamicDims = compile_impl::DynamicDims;
  using Mode = compile_impl::Mode;

  Mode mode = Mode::Function;
  nn::Module* module = nullptr;  // module modes
  std::shared_ptr<compile_impl::StepSpec> step;  // compile_step
  Fn fn;
  CompileOptions options;
  std::mutex mutex;
  std::mutex step_mutex;  // compile_step: one call at a time (each reads what the last wrote)
  std::map<Signature, std::shared_ptr<Compiled>> plans;
  std::vector<Signature> order;       // signatures compiled, in the order they were first seen
  std::optional<Signature> last_sig;  // the latest new signature (for the recompile reasons)
  std::vector<std::unique_ptr<DynamicDims>> dynamic;
  // Function mode: the modes of the modules its traces read (nn/mode_reads.h), in first-read
  // order; their values now are the signature's `modes`.
  std::vector<std::shared_ptr<const bool>> mode_reads;
  std::vector<bool> modes_now() const {
    std::vector<bool> m;
    for (const auto& r : mode_reads) m.push_back(*r);
    return m;
  }
  std::vector<std::string> reasons;
  const CompileReport* last = nullptr;
  std::shared_ptr<Compiled> last_compiled;
  // A training step with CompileOptions::gradient_norms: the last call's norms and the op that
  // made one non-finite.
  std::vector<std::pair<std::string, double>> last_norms;
  std::string last_origin;
  bool warned_limit = false;

  std::shared_ptr<Compiled> compile(const Signature& sig, const std::vector<Tensor>& inputs);
  runtime::PipelineOptions pipeline_options() const;
  std::unique_ptr<ir::Graph> trace_graph(Compiled& c, const std::vector<Tensor>& inputs);
  // The canonical passes, and for a training step the recomputation its backward does (passes/
  // partition.h: recompute_in_backward), whose choice it returns.
  std::optional<passes::Recomputation> optimize(ir::Graph& graph,
                                                std::optional<size_t> tangent = std::nullopt) const;
  // compile_step (compile_step.cpp): what an updating call's plan compiles in; the joint graph
  // extended with the update; an updating call's run, returning the joint graph's outputs (the
  // updated parameters' gradients undefined) and the gradient norms when the layout has them.
  std::string step_key() const;
  std::unique_ptr<ir::Graph> update_graph(Compiled& c, const ir::Graph& joint);
  std::vector<Tensor> run_update(Compiled& c, const std::vector<Tensor>& graph_inputs);
  // The differentiable variant of `c` for the graph inputs `wrt`, whose first `outputs` outputs
  // are differentiated (built on first use), and a call of it: the traced graph's outputs, with
  // `history` to attach to them. compile_grad.cpp.
  std::shared_ptr<const compile_impl::Differentiable> differentiable(Compiled& c, const std::vector<bool>& wrt,
                                                                     size_t outputs);
  std::vector<Tensor> run_with_grad(Compiled& c, const std::vector<Tensor>& graph_inputs,
                                    const std::vector<bool>& wrt, size_t outputs,
                                    compile_impl::GradHistory* history);
  // A plan for `sig` from dynamic dims, or null (then `note` says why its dims are not dynamic,
  // when that is the reason). compile_dynamic.cpp.
  std::shared_ptr<Compiled> dynamic_plan(const Signature& sig, const std::vector<Tensor>& inputs,
                                         std::string* note);
  std::string build_dynamic(DynamicDims& d, const codegen::SymbolPoint& now,
                            const std::vector<Tensor>& inputs);
  std::shared_ptr<Compiled> instantiate(DynamicDims& d, const codegen::SymbolPoint& p,
                                        const Signature& sig, const std::vector<Tensor>& inputs);
  // The function traced at sizes `p` (the inputs' dynamic dims set to their symbol's size); null
  // with `why` when it draws random numbers or captures other tensors.
  std::unique_ptr<ir::Graph> traced_at(DynamicDims& d, const std::vector<Tensor>& inputs,
                                       const codegen::SymbolPoint& p, std::string* why);
};

}  // namespace smelt
