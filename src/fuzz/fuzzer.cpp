#include "fuzz/fuzzer.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "fuzz/compare.h"
#include "ir/constant.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "ops/dispatch.h"
#include "passes/dce.h"
#include "passes/pass_manager.h"
#include "smelt/autograd.h"
#include "smelt/creation.h"
#include "smelt/ops.h"
#include "trace/interpreter.h"

namespace smelt::fuzz {
namespace {

// Runs the graph op by op through the public dispatcher (eager mode).
std::vector<Tensor> run_eager(const ir::Graph& g, const std::vector<Tensor>& inputs) {
  NoGradGuard no_grad;
  return call_graph(g, inputs);
}

}  // namespace

CaseResult check_graph(const ir::Graph& graph, const std::string& pipeline, uint64_t input_seed) {
  CaseResult r;
  auto fail = [&](std::string message) {
    r.passed = false;
    r.message = std::move(message);
    return r;
  };
  std::vector<Tensor> inputs;
  std::unique_ptr<ir::Graph> optimized;
  std::vector<bool> tolerant;
  try {
    inputs = random_inputs(graph, input_seed);
    tolerant = outputs_with_tolerance(graph, pipeline);
    optimized = graph.clone();
    passes::PassOptions options;
    options.verify = true;
    std::ostringstream log;
    options.log = &log;
    passes::run_pipeline(*optimized, pipeline, options);
  } catch (const Error& e) {
    return fail(std::string("error in the pipeline: ") + e.what());  // passes must accept any valid graph
  }
  for (bool t : tolerant) (t ? r.tolerant_outputs : r.exact_outputs) += 1;

  // A graph may fail when run (an integer division by zero in the data): then every way of
  // running it must fail too; a pass must not turn an error into a result or the reverse, not
  // even where it makes the failing node unread (x - x -> 0 over an index_select out of range):
  // such a node must run (ir::Node::must_run), as in eager.
  std::vector<Tensor> reference, eager, opt;
  std::string reference_error, eager_error, opt_error;
  try { opt = trace::interpret(*optimized, inputs); } catch (const Error& e) { opt_error = e.what(); }
  const ir::Graph& unoptimized = graph;
  try { reference = trace::interpret(unoptimized, inputs); } catch (const Error& e) { reference_error = e.what(); }
  try { eager = run_eager(unoptimized, inputs); } catch (const Error& e) { eager_error = e.what(); }
  if (!reference_error.empty() || !eager_error.empty() || !opt_error.empty()) {
    if (reference_error.empty() || eager_error.empty() || opt_error.empty()) {
      return fail("error in some runs only: interpreter: " + (reference_error.empty() ? "ok" : reference_error) +
                  "; eager: " + (eager_error.empty() ? "ok" : eager_error) +
                  "; optimized: " + (opt_error.empty() ? "ok" : opt_error));
    }
    r.runtime_error = true;
    return r;
  }
  std::string diff = compare(eager, reference, "eager vs interpreter");
  if (!diff.empty()) return fail(diff);
  diff = compare(opt, reference, "optimized vs interpreter", tolerant, &r.rounded_outputs);
  if (diff.empty()) return r;
  // Differing outputs: the same comparison with canonical layouts for the accumulating ops (see
  // the rule at the top). Passing then means the layout changed only the accumulation order, if
  // the difference was a rounding one: a kernel wrong on strided operands differs by more.
  const std::vector<bool> all_tolerant(opt.size(), true);
  if (!compare(opt, reference, "", all_tolerant).empty()) return fail(diff);
  try {
    std::vector<Tensor> reference_c = trace::interpret(*with_contiguous_operands(unoptimized), inputs);
    std::vector<Tensor> opt_c = trace::interpret(*with_contiguous_operands(*optimized), inputs);
    int rounded = 0;
    if (compare(opt_c, reference_c, "", tolerant, &rounded).empty()) {
      r.layout_rounding = true;
      return r;
    }
  } catch (const Error&) {
  }
  return fail(diff);
}

std::unique_ptr<ir::Graph> minimize(const ir::Graph& failing, const std::string& pipeline,
                                    uint64_t input_seed) {
  return minimize(failing, [&](const ir::Graph& g) { return !check_graph(g, pipeline, input_seed).passed; });
}

std::unique_ptr<ir::Graph> minimize(const ir::Graph& failing,
                                    const std::function<bool(const ir::Graph&)>& still_fails) {
  auto best = failing.clone();
  bool progress = true;
  while (progress) {
    progress = false;
    // 1. keep a single output
    for (size_t i = 0; best->outputs().size() > 1 && i < best->outputs().size(); ++i) {
      auto trial = best->clone();
      trial->set_outputs({trial->outputs()[i]});
      passes::dce(*trial);
      if (still_fails(*trial)) {
        best = std::move(trial);
        progress = true;
        break;
      }
    }
    // 2. bypass a node: its first output's uses read one of its same-typed inputs instead
    for (const auto& n : best->nodes()) {
      bool done = false;
      for (ir::Value* in : n->inputs) {
        if (!(in->meta == n->outputs[0]->meta)) continue;
        auto trial = best->clone();
        ir::Node* tn = nullptr;
        for (const auto& m : trial->nodes()) {
          if (m->outputs[0]->id == n->outputs[0]->id) tn = m.get();
        }
        ir::Value* tin = nullptr;
        for (ir::Value* v : tn->inputs) if (v->id == in->id) tin = v;
        trial->replace_all_uses(tn->outputs[0], tin);
        passes::dce(*trial);
        if (trial->num_nodes() < best->num_nodes() && still_fails(*trial)) {
          best = std::move(trial);
          progress = done = true;
          break;
        }
      }
      if (done) break;
    }
  }
  return best;
}

std::string regression_text(const ir::Graph& graph, const std::string& pipeline, uint64_t input_seed,
                            const std::string& message) {
  std::ostringstream os;
  os << "# Found by smelt fuzz: " << message << "\n";
  os << "# INPUT-SEED: " << input_seed << "\n";
  os << "# PIPELINE: " << pipeline << "\n";
  os << ir::print(graph);
  return os.str();
}

}  // namespace smelt::fuzz
