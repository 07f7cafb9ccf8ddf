// The pass pipeline: a registry table name -> pass, pipelines given as strings
// ("dce,cse,fold,simplify"), and a fixed-point driver that repeats the pipeline until no pass
// changes the graph (bounded; reports when it does not converge).
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace smelt::passes {

// A pass rewrites the graph in place and returns whether it changed anything.
using PassFn = bool (*)(ir::Graph& graph);

struct PassInfo {
  const char* name;
  const char* description;  // one line
  PassFn run;
};

// Every pass, in the order `smelt opt --list-passes` shows them.
const std::vector<PassInfo>& pass_registry();
// Adds a pass of the user's (or a test's) to the registry; its name must be new.
void register_pass(const PassInfo& pass);
const PassInfo* find_pass(const std::string& name);
// Splits "a,b,c" and checks every name; error lists the valid names.
std::vector<const PassInfo*> parse_pipeline(const std::string& pipeline);

struct PassStats {
  std::string name;
  int runs = 0;
  int changes = 0;           // runs that changed the graph
  size_t nodes_before = 0;   // at the first run
  size_t nodes_after = 0;    // at the last run
  double milliseconds = 0;   // over all runs
};

struct PassOptions {
  int max_iterations = 20;
  bool verify = true;            // verifier after every pass (on unless turned off)
  std::string print_ir_after;    // "", "all" or a pass name: print the IR after it when it changed
  std::set<std::string> disabled;
  std::ostream* log = nullptr;   // where printed IR goes (stderr when null)
  size_t print_max_constant_elements = SIZE_MAX;  // printed IR: larger constants elided (ir/printer.h)
};

// Options with SMELT_PRINT_IR_AFTER and SMELT_DISABLE_PASSES applied (see docs/env.md).
PassOptions options_from_env();

struct PipelineResult {
  bool converged = false;
  int iterations = 0;
  std::vector<PassStats> stats;  // one per pass in the pipeline, in order
  std::string report() const;    // a table: pass, runs, changes, nodes before -> after, time
};

// Runs the pipeline repeatedly until an iteration changes nothing, or max_iterations.
PipelineResult run_pipeline(ir::Graph& graph, const std::string& pipeline,
                            const PassOptions& options = options_from_env());

// The canonical pipeline used by the compiler: user-defined ops with an expression inlined first,
// so that everything after sees built-in ops; dce so later passes see only live nodes,
// canonicalize before cse so operand order does not hide duplicates, fold and simplify, and dce
// last to drop what they replaced.
inline constexpr const char* kDefaultPipeline =
    "inline_custom,dce,canonicalize,cse,fold_qdq,fold,simplify,sink_dequantize,expand_quantize,fold_batchnorm,blocked_layout,transpose_sink,transpose_normalize,dce";

}  // namespace smelt::passes
