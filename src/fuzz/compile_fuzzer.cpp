#include "fuzz/compile_fuzzer.h"

#include <chrono>
#include <cstring>
#include <sstream>

#include "fuzz/compare.h"
#include "fuzz/judge.h"
#include "ir/constant.h"
#include "ir/printer.h"
#include "trace/interpreter.h"

namespace smelt::fuzz {
namespace {

// The same bytes, NaN payloads included: a plan is deterministic (docs/design.md "Runtime: plans
// and memory").
std::string same_bytes(const std::vector<Tensor>& got, const std::vector<Tensor>& want, const char* what) {
  if (got.size() != want.size()) return std::string(what) + ": different number of outputs";
  for (size_t i = 0; i < got.size(); ++i) {
    const std::string a = ir::constant_bytes(got[i]), b = ir::constant_bytes(want[i]);
    if (a != b) return std::string(what) + ": output " + std::to_string(i) + " differs";
  }
  return "";
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
  // must fail too, even where the failing node is unread (ir::Node::must_run: it runs, as in eager).
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
  const ir::Graph& unoptimized = *p.graph;
  try { reference = trace::interpret(unoptimized, inputs); } catch (const Error& e) { reference_error = e.what(); }
  r.run_ms = ms_since(start);
  if (!plan_error.empty() || !reference_error.empty()) {
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

  // The rule (judge.h), with its re-checks: the same case on ordinary inputs tells a cancellation
  // in a reordered sum from a bug.
  Judge judge(unoptimized, tolerant);
  try {
    diff = judge.verdict(inputs, first, reference, [&](const std::vector<Tensor>& in) { return planned.run(in); },
                         random_inputs(*p.graph, input_seed, 0.0), &r.rounded_outputs);
  } catch (const Error& e) {
    diff = judge.first_difference() + "; then: " + e.what();
  }
  r.layout_rounding = judge.layout_rounding();
  r.ill_conditioned = judge.ill_conditioned();
  if (!diff.empty()) return fail(diff);
  return r;
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
