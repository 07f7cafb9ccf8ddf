#include "runtime/pipeline.h"

#include <chrono>
#include <sstream>

#include "base/env.h"
#include "base/log.h"
#include "codegen/kernel_cache.h"
#include "codegen/lower.h"
#include "codegen/lower_contraction.h"
#include "fusion/fuse.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/dce.h"
#include "passes/fold.h"
#include "passes/pass_manager.h"
#include "runtime/layout_choice.h"
#include "runtime/memory_plan.h"
#include "runtime/schedule_placement.h"
#include "runtime/schedule_updates.h"

namespace smelt::runtime {

KernelBackend backend_from_name(const std::string& name) {
  if (name == "auto") return KernelBackend::Tiered;
  if (name == "interpreter") return KernelBackend::Interpreter;
  if (name == "cpp") return KernelBackend::Compiled;
  SMELT_CHECK(false) << "compile: unknown backend '" << name << "'; valid: auto, interpreter, cpp";
  return KernelBackend::Tiered;
}

namespace {
void plan_stage(CompiledGraph& c, const PipelineOptions& options, std::chrono::steady_clock::time_point start);
}  // namespace

void optimize_graph(ir::Graph& graph, const PipelineOptions& options) {
  // Stage 1: the captured graph must be well formed before anything trusts it.
  ir::verify(graph);
  // (Printing a graph costs as much as its constants' text: only at the level that shows it.)
  if (debug_level() >= 4) debug_log(4, "IR before the pipeline:\n" + ir::print(graph));
  // Stage 2: the canonical passes to a fixed point; the blocked layout as tuned for this graph.
  std::string pipeline = options.passes.empty() ? passes::kDefaultPipeline : options.passes;
  const std::string plain = pipeline_without(pipeline, "blocked_layout");
  if (options.follow_layout_tuning && plain != pipeline && tuned_layout(graph) == LayoutChoice::Plain) pipeline = plain;
  passes::run_pipeline(graph, pipeline);
  if (debug_level() >= 4) debug_log(4, "IR after passes:\n" + ir::print(graph));
}

CompiledGraph compile_graph(std::unique_ptr<ir::Graph> graph, const PipelineOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  CompiledGraph c;
  c.graph = std::move(graph);
  c.nodes_before = c.graph->num_nodes();
  if (options.optimize) optimize_graph(*c.graph, options);
  // Stage 3: fusion into group nodes.
  if (options.fuse) {
    fusion::FusionOptions fusion_options = fusion::fusion_options_from_env();
    fusion_options.cost_shapes = options.fusion_cost_shapes;
    fusion_options.lowers = [](const ir::Graph& body, fusion::Pattern pattern) {
      codegen::LowerResult lowered =
          pattern == fusion::Pattern::Contraction
              ? codegen::lower(*codegen::contraction_epilogue_body(body), "fusion_check", codegen::LowerOptions{})
              : codegen::lower(body, "fusion_check", codegen::LowerOptions{});
      return lowered.kernel ? std::string() : lowered.reason;
    };
    fusion::FusionReport report = fusion::fuse(*c.graph, fusion_options);
    c.fusion_summary = report.summary();
    c.fusion_explain = report.explain();
    debug_log(2, "fusion:\n" + c.fusion_explain);
    if (debug_level() >= 4) debug_log(4, "IR after fusion:\n" + ir::print(*c.graph));
  }
  c.nodes_after = c.graph->num_nodes();
  // Stage 4: schedule (the node order fusion left), memory plan and kernels: the plan.
  plan_stage(c, options, start);
  return c;
}

CompiledGraph plan_graph(std::unique_ptr<ir::Graph> fused, const PipelineOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  CompiledGraph c;
  c.graph = std::move(fused);
  c.nodes_before = c.nodes_after = c.graph->num_nodes();
  plan_stage(c, options, start);
  return c;
}

namespace {

void plan_stage(CompiledGraph& c, const PipelineOptions& options, std::chrono::steady_clock::time_point start) {
  PlanOptions plan_options;
  plan_options.lower = options.lower;
  plan_options.backend = options.backend;
  plan_options.memory_plan = options.memory_plan && memory_plan_options_from_env().enabled;
  plan_options.compile_after_runs = options.compile_after_runs > 0
                                        ? options.compile_after_runs
                                        : int(env_int("SMELT_COMPILE_AFTER", 2, 1, 1 << 30));
  plan_options.epilogue_in_tile = env_int("SMELT_NO_EPILOGUE_IN_TILE", 0, 0, 1) == 0;
  plan_options.cat_in_place = env_int("SMELT_NO_CAT_IN_PLACE", 0, 0, 1) == 0;
  // Hoisting: a node or group that reads only constants is computed now, once (passes/fold.h's
  // hoist mode, with fold's error policy), so that the plan has nothing to run for it.
  passes::FoldOptions hoist;
  hoist.hoist = true;
  hoist.folded = &plan_options.hoisted;
  if (passes::fold(*c.graph, hoist)) passes::dce(*c.graph);
  // Schedule: the node order fusion left, with each update's writer after the other readers of
  // the input it updates, so that the plan can write it in place (runtime/schedule_updates.h).
  schedule_updates(*c.graph);
  // Ops that start background work run as early as they can, those that wait for it as late
  // (runtime/schedule_placement.h).
  schedule_placement(*c.graph);
  const codegen::KernelCacheStats cache_before = codegen::KernelCache::global().stats();
  c.plan = Plan::build(*c.graph, plan_options);
  const codegen::KernelCacheStats cache_after = codegen::KernelCache::global().stats();
  c.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const PlanStats& s = c.plan->stats();
  std::ostringstream line;
  line << "compiled in " << c.compile_ms << " ms: " << c.nodes_before << " nodes -> " << c.nodes_after
       << " after passes and fusion; " << s.kernels << " kernels, " << s.op_steps << " op steps, "
       << s.interpreted << " interpreted groups; arena " << s.arena_bytes << " bytes (naive "
       << s.naive_bytes << ", lower bound " << s.lower_bound << "); kernel cache: "
       << cache_after.memory_hits - cache_before.memory_hits << " memory hits, "
       << cache_after.disk_hits - cache_before.disk_hits << " disk hits, "
       << cache_after.misses - cache_before.misses << " compiles started";
  debug_log(1, line.str());
}

}  // namespace

}  // namespace smelt::runtime
