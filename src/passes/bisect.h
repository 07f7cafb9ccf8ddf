// Finding the pass that broke a graph: runs a pipeline like run_pipeline (to a fixed point), one
// pass application at a time, and after every application that changed the graph compares the
// graph's results on random inputs with the original graph's (both run by the interpreter). The
// first application whose results differ, or that throws, is reported with the IR before and
// after it. Random ops draw from the default generator, re-seeded before each run.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/pass_manager.h"

namespace smelt::passes {

struct BisectOptions {
  uint64_t seed = 0;      // for the random inputs
  double rtol = 1e-4;     // |got - want| <= atol + rtol * |want|, NaN equal to NaN
  double atol = 1e-5;
  int max_iterations = 20;
  std::set<std::string> disabled;
};

struct BisectResult {
  bool found = false;      // a pass application changed the results (or failed)
  std::string pass;        // its name
  int iteration = 0;       // of the pipeline, from 1
  int application = 0;     // pass runs so far, counting this one, from 1
  std::string reason;      // which output differs and where, or the error
  std::string ir_before;
  std::string ir_after;    // empty when the pass threw
  int applications = 0;    // pass runs done in all
};

BisectResult bisect(const ir::Graph& graph, const std::vector<const PassInfo*>& passes,
                    const BisectOptions& options = {});

// Random values for the graph's inputs: floats uniform in [-2, 2), int64 in [0, 3), bool/u8 0 or 1.
std::vector<Tensor> random_inputs(const ir::Graph& graph, uint64_t seed);

}  // namespace smelt::passes
