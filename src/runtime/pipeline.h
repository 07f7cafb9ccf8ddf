// The compile pipeline, one named stage after another (docs/design.md "The compile pipeline"):
//
//   verify -> canonical passes to a fixed point -> fusion -> schedule (the graph's node order)
//   -> memory plan + kernels (lowering, backend) -> Plan
//
// smelt::compile runs it on a traced graph; `smelt compile FILE.ir` and `smelt fuzz --compile`
// on graphs from text or from the random-graph builder.
#pragma once

#include <memory>
#include <string>

#include "ir/graph.h"
#include "runtime/plan.h"

namespace smelt::runtime {

struct PipelineOptions {
  std::string passes;  // empty: the default pipeline
  bool fuse = true;
  KernelBackend backend = KernelBackend::Tiered;
  bool memory_plan = true;  // and SMELT_NO_MEMPLAN unset
  int compile_after_runs = 0;  // Tiered: see PlanOptions; 0: SMELT_COMPILE_AFTER (default 2)
  LowerFn lower;  // PlanOptions::lower (a dynamic batch's, runtime/shape_fit.h)
  bool optimize = true;  // false: the graph comes optimized (optimize_graph), compile_graph fuses and plans
  const ir::Graph* fusion_cost_shapes = nullptr;  // fusion::FusionOptions::cost_shapes (a dynamic batch's)
  // Follow the tuning file's layout choice for this graph (runtime/layout_choice.h): a recorded
  // "plain" drops blocked_layout from the pipeline. False: the pipeline as given (the tuner's own
  // compiles, which measure both).
  bool follow_layout_tuning = true;
};

struct CompiledGraph {
  std::unique_ptr<ir::Graph> graph;  // after passes and fusion: what the plan runs
  std::unique_ptr<Plan> plan;
  size_t nodes_before = 0;
  size_t nodes_after = 0;
  std::string fusion_summary;  // one line: fusion rate, kernels before -> after, bytes saved
  std::string fusion_explain;  // groups, every unfused node and why
  double compile_ms = 0;
};

// Stages 1 and 2 alone: verifies `graph` and runs the passes on it (a dynamic batch fits the
// optimized graphs of its probe batch sizes before it fuses them).
void optimize_graph(ir::Graph& graph, const PipelineOptions& options);
// Runs the pipeline on `graph` (consumed). SMELT_DEBUG=1 logs a line, 2 the fusion groups, 4 the
// IR after each stage.
CompiledGraph compile_graph(std::unique_ptr<ir::Graph> graph, const PipelineOptions& options);
// The last stage alone: the plan of a graph already optimized and fused (a dynamic batch's graph
// at a new batch size, runtime/shape_fit.h). Logs as compile_graph at SMELT_DEBUG=1.
CompiledGraph plan_graph(std::unique_ptr<ir::Graph> fused, const PipelineOptions& options);

// "auto" (Tiered), "interpreter", "cpp" (Compiled); anything else is a smelt::Error.
KernelBackend backend_from_name(const std::string& name);

}  // namespace smelt::runtime
