#include "fuzz/fuzzer.h"

#include <cmath>
#include <sstream>
#include <unordered_map>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "ops/dispatch.h"
#include "passes/dce.h"
#include "passes/pass_manager.h"
#include "smelt/autograd.h"
#include "smelt/creation.h"
#include "trace/interpreter.h"

namespace smelt::fuzz {
namespace {

// float32 results of the same math in a different order may differ by a few ulp; passes here
// do not reassociate, so the tolerance only absorbs libm-vs-folded differences.
constexpr double kRtol = 1e-4, kAtol = 1e-5;

std::vector<Tensor> random_inputs(const ir::Graph& g, uint64_t seed) {
  std::vector<Tensor> inputs;
  Generator gen(seed);
  for (const ir::Value* v : g.inputs()) inputs.push_back(uniform(v->meta.shape, -2.0, 2.0, v->meta.dtype, &gen));
  return inputs;
}

// Runs the graph op by op through the public dispatcher (eager mode).
std::vector<Tensor> run_eager(const ir::Graph& g, const std::vector<Tensor>& inputs) {
  NoGradGuard no_grad;
  std::unordered_map<const ir::Value*, Tensor> env;
  for (size_t i = 0; i < inputs.size(); ++i) env[g.inputs()[i]] = inputs[i];
  for (const ir::Value* c : g.constants()) env[c] = c->constant;
  for (const auto& n : g.nodes()) {
    std::vector<Tensor> args;
    for (const ir::Value* v : n->inputs) args.push_back(env.at(v));
    std::vector<Tensor> outs = ops::call(n->op, args, n->attrs);
    for (size_t k = 0; k < outs.size(); ++k) env[n->outputs[k]] = outs[k];
  }
  std::vector<Tensor> results;
  for (const ir::Value* v : g.outputs()) results.push_back(env.at(v));
  return results;
}

// Empty when equal within tolerance, else a description of the first difference.
std::string compare(const std::vector<Tensor>& got, const std::vector<Tensor>& want, const char* what) {
  if (got.size() != want.size()) return std::string(what) + ": different number of outputs";
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].shape() != want[i].shape() || got[i].dtype() != want[i].dtype()) {
      return std::string(what) + ": output " + std::to_string(i) + " has shape " + shape_str(got[i].shape()) +
             ", expected " + shape_str(want[i].shape());
    }
    std::vector<double> a = got[i].to_vector(), b = want[i].to_vector();
    for (size_t k = 0; k < a.size(); ++k) {
      bool both_nan = std::isnan(a[k]) && std::isnan(b[k]);
      bool close = a[k] == b[k] || std::fabs(a[k] - b[k]) <= kAtol + kRtol * std::fabs(b[k]);
      if (!both_nan && !close) {
        std::ostringstream os;
        os.precision(9);
        os << what << ": output " << i << " element " << k << " is " << a[k] << ", expected " << b[k];
        return os.str();
      }
    }
  }
  return "";
}

}  // namespace

CaseResult check_graph(const ir::Graph& graph, const std::string& pipeline, uint64_t input_seed) {
  CaseResult r;
  try {
    std::vector<Tensor> inputs = random_inputs(graph, input_seed);
    std::vector<Tensor> reference = trace::interpret(graph, inputs);
    std::string diff = compare(run_eager(graph, inputs), reference, "eager vs interpreter");
    if (diff.empty()) {
      auto optimized = graph.clone();
      passes::PipelineOptions options;
      options.verify = true;
      std::ostringstream log;
      options.log = &log;
      passes::run_pipeline(*optimized, pipeline, options);
      diff = compare(trace::interpret(*optimized, inputs), reference, "optimized vs interpreter");
    }
    if (!diff.empty()) {
      r.passed = false;
      r.message = diff;
    }
  } catch (const Error& e) {
    r.passed = false;
    r.message = std::string("error: ") + e.what();
  }
  return r;
}

std::unique_ptr<ir::Graph> minimize(const ir::Graph& failing, const std::string& pipeline,
                                    uint64_t input_seed) {
  auto best = failing.clone();
  auto still_fails = [&](const ir::Graph& g) { return !check_graph(g, pipeline, input_seed).passed; };
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
