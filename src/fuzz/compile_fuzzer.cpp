#include "fuzz/compile_fuzzer.h"

#include <chrono>
#include <cstring>
#include <sstream>

#include "codegen/decompose.h"
#include "fuzz/compare.h"
#include "ir/constant.h"
#include "ir/printer.h"
#include "passes/dce.h"
#include "trace/interpreter.h"

namespace smelt::fuzz {
namespace {

// ---------------------------------------------------------------------------------------------
// The comparison rule for compiled plans (the graph fuzzer's rule, compare.cpp, applied to a
// plan instead of an optimized graph):
//
// BIT-EXACT for every output that no lowered reduction reaches (NaN matching any NaN, the sign
// of zero checked, integers exact). A Kernel step evaluates the same scalar functions
// (kernels/scalar.h, through the elementwise table) as the eager kernels the interpreter runs, in
// both backends (generated C++ is built with -ffp-contract=off), and views are index maps, so
// elementwise results are the same bits; Op steps run the eager kernels themselves.
//
// TOLERANCE (|got - want| <= kAtol + kRtol |want|, NaN matching NaN, an infinity only the same
// infinity) for outputs that a group holding sum, mean, softmax, log_softmax or layer_norm
// can reach: the lowering folds a row in its own order (the interpreter: in inner
// order; generated C++: as the compiler vectorizes it) where the eager kernels sum in lanes. Both
// accumulate float32 in double and the row ops decompose into the eager kernels' arithmetic
// (codegen/decompose.h), so almost all of these outputs are still the same bits (the CLI counts
// those that are not); and for outputs fold_batchnorm may reach (compare.cpp). amax and amin are
// exact: the lowering folds with scalar maximum / minimum and the eager row kernels pick alike
// (+0 above -0, NaN wins), so any order of folding gives the same bits.
//
// Two ways a correct plan still differs, each re-checked before a case fails:
//   - layout: Op steps (matmul, conv, pools, unfused reductions) read contiguous arena slots and
//     contiguous copies of strided inputs, where the interpreter may hand the same eager kernel a
//     strided view, and their accumulation order follows the layout (compare.cpp). When every
//     difference is within the tolerance, the reference runs again with contiguous operands for
//     every reduction and contraction; matching it by the rule passes (layout_rounding).
//   - conditioning: a reordered sum of terms that cancel (1e30 + 1 - 1e30, FLT_MAX + FLT_MAX -
//     FLT_MAX), or a sum whose last bit a later cancellation magnifies (softplus(y) with beta 1
//     minus softplus(y) with beta 1 + 2^-52, then rsqrt), differs by far more than the
//     tolerance, or in being finite, in every correct order. When only tolerant outputs differ,
//     the reference runs again with its sums folded in another order (row ops decomposed, sum
//     operands transposed: with_reordered_sums); outputs that then move beyond the tolerance are
//     ones no reference pins down, and are left out if the rest match. Failing that, the case
//     runs again on ordinary inputs (the same shapes and layouts, no special values), judged the
//     same way. Either passes as ill_conditioned; the exact outputs were still compared bit for
//     bit on the special values.
// ---------------------------------------------------------------------------------------------

// `g` with its row ops decomposed into the eager kernels' arithmetic (codegen/decompose.h) and
// every floating operand of rank >= 2 of a sum or mean handed over transposed (permuted, copied,
// permuted back): the same function, its sums folded by the eager kernels in another order.
std::unique_ptr<ir::Graph> with_reordered_sums(const ir::Graph& g) {
  std::unique_ptr<ir::Graph> out = codegen::decompose_row_ops(g);
  std::vector<ir::Node*> order;
  for (const auto& n : out->nodes()) order.push_back(n.get());
  for (ir::Node* n : order) {
    if (n->op != ops::OpId::sum && n->op != ops::OpId::mean) continue;
    ir::Value* x = n->inputs[0];
    const int64_t rank = int64_t(x->meta.shape.size());
    if (rank < 2 || !dtype_is_floating(x->meta.dtype)) continue;
    std::vector<int64_t> reversed;  // its own inverse
    for (int64_t d = rank - 1; d >= 0; --d) reversed.push_back(d);
    ir::Value* t = out->insert_node(n, ops::OpId::permute, {x}, {{"dims", reversed}})->outputs[0];
    t = out->insert_node(n, ops::OpId::contiguous, {t}, {})->outputs[0];
    t = out->insert_node(n, ops::OpId::permute, {t}, {{"dims", reversed}})->outputs[0];
    out->set_input(n, 0, t);
  }
  return out;
}

// The same bytes, NaN payloads included: a plan is deterministic (DESIGN.md "Purity").
std::string same_bytes(const std::vector<Tensor>& got, const std::vector<Tensor>& want, const char* what) {
  if (got.size() != want.size()) return std::string(what) + ": different number of outputs";
  for (size_t i = 0; i < got.size(); ++i) {
    const std::string a = ir::constant_bytes(got[i]), b = ir::constant_bytes(want[i]);
    if (a != b) return std::string(what) + ": output " + std::to_string(i) + " differs";
  }
  return "";
}

// `got` with the outputs `keep` does not select replaced by `want`'s: compare() then judges only
// the selected outputs and still names them by their index.
std::vector<Tensor> only(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                         const std::vector<bool>& keep) {
  std::vector<Tensor> out = got;
  for (size_t i = 0; i < out.size() && i < want.size(); ++i) {
    if (!keep[i]) out[i] = want[i];
  }
  return out;
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// Byte patterns for the arena before each run: NaN / -1 everywhere, then finite garbage.
constexpr uint8_t kPoisonFirst = 0xff, kPoisonReplay = 0x5a, kPoisonUnplanned = 0xa5;

}  // namespace

const char* compile_backend_name(CompileBackend backend) {
  return backend == CompileBackend::Cpp ? "cpp" : "interpreter";
}

std::unique_ptr<PreparedCase> prepare_compiled(const ir::Graph& graph, const CompileCheckOptions& options) {
  auto p = std::make_unique<PreparedCase>();
  p->graph = graph.clone();
  p->options = options;
  const auto start = std::chrono::steady_clock::now();
  // Tiered: the generated kernels compile on the cache's pool while the caller prepares more.
  const runtime::KernelBackend backend =
      options.backend == CompileBackend::Cpp ? runtime::KernelBackend::Tiered : runtime::KernelBackend::Interpreter;
  try {
    runtime::PipelineOptions po;
    po.passes = options.passes;
    po.backend = backend;
    po.compile_after_runs = 1;  // compiles start now, so that wait_for_kernels() finds them
    p->compiled = runtime::compile_graph(graph.clone(), po);
    runtime::PlanOptions plan_options;
    plan_options.backend = backend;
    // These plans compile now too: compared byte for byte with the first, they must run the same
    // code (an interpreted kernel and a compiled one may differ in a NaN's sign: x * -1 is -x).
    plan_options.compile_after_runs = 1;
    if (options.edit_requests) {
      plan_options.edit_requests = options.edit_requests;
      p->compiled.plan = runtime::Plan::build(*p->compiled.graph, plan_options);
    }
    plan_options.memory_plan = false;
    plan_options.edit_requests = nullptr;
    p->unplanned = runtime::Plan::build(*p->compiled.graph, plan_options);
  } catch (const Error& e) {
    p->error = std::string("error in the compile pipeline: ") + e.what();  // any valid graph compiles
  }
  p->compile_ms = ms_since(start);
  return p;
}

CompileCaseResult check_prepared(PreparedCase& p, uint64_t input_seed) {
  CompileCaseResult r;
  r.compile_ms = p.compile_ms;
  auto fail = [&](std::string message) {
    r.passed = false;
    r.message = std::move(message);
    return r;
  };
  if (!p.error.empty()) return fail(p.error);
  runtime::Plan& planned = *p.compiled.plan;
  const runtime::PlanStats& stats = planned.stats();
  r.kernels = stats.kernels;
  r.op_steps = stats.op_steps;
  r.interpreted_groups = stats.interpreted;

  auto start = std::chrono::steady_clock::now();
  if (p.options.backend == CompileBackend::Cpp) {
    for (const runtime::Plan* plan : {&planned, p.unplanned.get()}) {
      const std::string why = plan->wait_for_kernels();
      if (!why.empty()) return fail("a generated kernel did not compile: " + why);
    }
  }
  r.wait_ms = ms_since(start);
  start = std::chrono::steady_clock::now();

  const std::vector<Tensor> inputs = random_inputs(*p.graph, input_seed);
  std::vector<bool> tolerant = outputs_with_tolerance(*p.graph, p.options.passes);
  const std::vector<bool> lowered = outputs_reached_by_lowered_reductions(*p.compiled.graph);
  for (size_t i = 0; i < tolerant.size() && i < lowered.size(); ++i) tolerant[i] = tolerant[i] || lowered[i];
  for (bool t : tolerant) (t ? r.tolerant_outputs : r.exact_outputs) += 1;

  // The plan three times: planned with a NaN-filled arena, replayed over finite garbage, and
  // unplanned. A graph may fail when run (an index out of range in its data): then the reference
  // must fail too (and, with errors only in dead code, may succeed: that code is gone).
  std::vector<Tensor> first, replay, unplanned, reference;
  std::string plan_error, reference_error;
  try {
    planned.fill_arena(kPoisonFirst);
    first = planned.run(inputs);
    planned.fill_arena(kPoisonReplay);
    replay = planned.run(inputs);
    p.unplanned->fill_arena(kPoisonUnplanned);
    unplanned = p.unplanned->run(inputs);
  } catch (const Error& e) {
    plan_error = e.what();
  }
  std::unique_ptr<ir::Graph> live = p.graph->clone();
  if (plan_error.empty()) passes::dce(*live);
  const ir::Graph& unoptimized = plan_error.empty() ? *live : *p.graph;
  try { reference = trace::interpret(unoptimized, inputs); } catch (const Error& e) { reference_error = e.what(); }
  r.run_ms = ms_since(start);
  if (!plan_error.empty() || !reference_error.empty()) {
    if (plan_error.empty()) {  // only the reference failed: accepted when the failing node is gone
      const ir::Node* failed = failing_node(unoptimized, inputs);
      if (failed && !still_holds(*p.compiled.graph, *failed)) return r;
    }
    if (plan_error.empty() || reference_error.empty()) {
      return fail("error in some runs only: interpreter: " + (reference_error.empty() ? "ok" : reference_error) +
                  "; compiled: " + (plan_error.empty() ? "ok" : plan_error));
    }
    r.runtime_error = true;
    return r;
  }
  std::string diff = same_bytes(replay, first, "replay vs first run (arena refilled)");
  if (diff.empty()) diff = same_bytes(unplanned, first, "memory plan off vs on");
  if (!diff.empty()) return fail(diff);

  // The rule at the top, for one set of inputs and one reference graph: `keep` selects the
  // outputs judged.
  std::vector<bool> exact(tolerant.size());
  for (size_t i = 0; i < tolerant.size(); ++i) exact[i] = !tolerant[i];
  const std::vector<bool> all_tolerant(tolerant.size(), true);
  auto judge = [&](const ir::Graph& ref_graph, const std::vector<Tensor>& in, const std::vector<Tensor>& got,
                   const std::vector<Tensor>& want, const std::vector<bool>& keep, int* rounded) {
    const std::vector<Tensor> mine = only(got, want, keep);
    std::string d = compare(mine, want, "compiled vs interpreter", tolerant, rounded);
    if (d.empty() || !compare(mine, want, "", all_tolerant).empty()) return d;
    try {
      const std::vector<Tensor> want_c = trace::interpret(*with_contiguous_operands(ref_graph), in);
      if (compare(only(got, want_c, keep), want_c, "", tolerant).empty()) {
        r.layout_rounding = true;
        return std::string();
      }
    } catch (const Error&) {
    }
    return d;
  };
  diff = judge(unoptimized, inputs, first, reference, exact, nullptr);
  if (!diff.empty()) return fail(diff);
  // The tolerant outputs; those that the reference itself cannot pin down within the tolerance
  // (they move beyond it when only the order of its sums changes) are left out.
  std::unique_ptr<ir::Graph> reordered;
  auto judge_tolerant = [&](const std::vector<Tensor>& in, const std::vector<Tensor>& got,
                            const std::vector<Tensor>& want, int* rounded) {
    std::string d = judge(unoptimized, in, got, want, tolerant, rounded);
    if (d.empty()) return d;
    if (!reordered) reordered = with_reordered_sums(unoptimized);
    const std::vector<Tensor> probe = trace::interpret(*reordered, in);
    std::vector<bool> stable = tolerant;
    for (size_t i = 0; i < tolerant.size(); ++i) {
      if (tolerant[i] && !compare({probe[i]}, {want[i]}, "", {true}).empty()) stable[i] = false;
    }
    if (stable != tolerant && judge(unoptimized, in, got, want, stable, nullptr).empty()) {
      r.ill_conditioned = true;
      return std::string();
    }
    return d;
  };
  try {
    diff = judge_tolerant(inputs, first, reference, &r.rounded_outputs);
    if (diff.empty()) return r;
    // Still beyond the tolerance: cancellation in a reordered sum, or a bug. The same case on
    // ordinary inputs tells them apart.
    const std::vector<Tensor> ordinary = random_inputs(*p.graph, input_seed, 0.0);
    const std::vector<Tensor> got = planned.run(ordinary);
    int rounded = 0;
    const std::string again = judge_tolerant(ordinary, got, trace::interpret(unoptimized, ordinary), &rounded);
    if (again.empty()) {
      r.ill_conditioned = true;
      return r;
    }
    return fail(diff + "; on ordinary inputs: " + again);
  } catch (const Error& e) {
    return fail(diff + "; then: " + e.what());
  }
}

CompileCaseResult check_compiled(const ir::Graph& graph, const CompileCheckOptions& options, uint64_t input_seed) {
  return check_prepared(*prepare_compiled(graph, options), input_seed);
}

std::string compiled_regression_text(const ir::Graph& graph, const CompileCheckOptions& options,
                                     uint64_t input_seed, const std::string& message) {
  std::ostringstream os;
  std::string commented = message;  // a multi-line message (a kernel's text) stays a comment
  for (size_t at = commented.find('\n'); at != std::string::npos; at = commented.find('\n', at + 3)) {
    commented.replace(at, 1, "\n# ");
  }
  os << "# Found by smelt fuzz --compile: " << commented << "\n";
  os << "# COMPILE: " << compile_backend_name(options.backend) << "\n";
  os << "# INPUT-SEED: " << input_seed << "\n";
  os << "# PIPELINE: " << options.passes << "\n";
  os << ir::print(graph);
  return os.str();
}

}  // namespace smelt::fuzz
