#include "passes/bisect.h"

#include <cmath>
#include <sstream>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "smelt/creation.h"
#include "smelt/ops.h"
#include "trace/interpreter.h"

namespace smelt::passes {
namespace {

std::vector<Tensor> run(const ir::Graph& graph, const std::vector<Tensor>& inputs, uint64_t seed) {
  manual_seed(seed);  // random ops draw the same numbers on every run
  return trace::interpret(graph, inputs);
}

// Empty when `got` matches `want`; otherwise says where they differ.
std::string difference(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                       const BisectOptions& options) {
  std::ostringstream os;
  if (got.size() != want.size()) {
    os << "the graph returns " << got.size() << " outputs instead of " << want.size();
    return os.str();
  }
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i].shape() != want[i].shape() || got[i].dtype() != want[i].dtype()) {
      os << "output " << i << " is " << dtype_name(got[i].dtype()) << " " << shape_str(got[i].shape())
         << " instead of " << dtype_name(want[i].dtype()) << " " << shape_str(want[i].shape());
      return os.str();
    }
    std::vector<double> g = got[i].to_vector(), w = want[i].to_vector();
    for (size_t k = 0; k < w.size(); ++k) {
      bool both_nan = std::isnan(g[k]) && std::isnan(w[k]);
      bool close = g[k] == w[k] || std::fabs(g[k] - w[k]) <= options.atol + options.rtol * std::fabs(w[k]);
      if (!both_nan && !close) {
        os << "output " << i << " differs at element " << k << ": " << g[k] << " instead of " << w[k];
        return os.str();
      }
    }
  }
  return "";
}

}  // namespace

std::vector<Tensor> random_inputs(const ir::Graph& graph, uint64_t seed) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const ops::TensorMeta& m = graph.inputs()[i]->meta;
    Generator gen(seed * 7919 + i);
    if (dtype_is_floating(m.dtype)) inputs.push_back(uniform(m.shape, -2.0, 2.0, m.dtype, &gen));
    else if (m.dtype == DType::Int64) inputs.push_back(randint(0, 3, m.shape, &gen));
    else inputs.push_back(cast(randint(0, 2, m.shape, &gen), m.dtype));
  }
  return inputs;
}

BisectResult bisect(const ir::Graph& original, const std::vector<const PassInfo*>& passes,
                    const BisectOptions& options) {
  std::vector<Tensor> inputs = random_inputs(original, options.seed);
  std::vector<Tensor> want = run(original, inputs, options.seed);
  auto graph = original.clone();
  BisectResult result;
  for (int iter = 1; iter <= options.max_iterations; ++iter) {
    bool changed_any = false;
    for (const PassInfo* pass : passes) {
      if (options.disabled.count(pass->name)) continue;
      ++result.applications;
      std::string before = ir::print(*graph);
      auto fail = [&](const std::string& reason, const std::string& after) {
        result = {true, pass->name, iter, result.applications, reason, before, after, result.applications};
      };
      bool changed = false;
      try {
        changed = pass->run(*graph);
        if (!changed) continue;
        ir::verify(*graph);
      } catch (const Error& e) {
        fail(std::string("the pass failed: ") + e.what(), changed ? ir::print(*graph) : "");
        return result;
      }
      changed_any = true;
      std::string diff;
      try {
        diff = difference(run(*graph, inputs, options.seed), want, options);
      } catch (const Error& e) {
        diff = std::string("the graph no longer runs: ") + e.what();
      }
      if (!diff.empty()) {
        fail(diff, ir::print(*graph));
        return result;
      }
    }
    if (!changed_any) break;
  }
  return result;
}

}  // namespace smelt::passes
