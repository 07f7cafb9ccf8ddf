// The compile fuzzer: a random graph through the whole compile pipeline (passes, fusion,
// lowering, memory plan, kernels on the interpreter or as generated C++: runtime/pipeline.h), its
// Plan run on random inputs with special values, compared with the unoptimized graph on the IR
// interpreter (trace::interpret). The comparison rule is written out in compile_fuzzer.cpp:
// bit for bit, except for outputs that a lowered reduction or a rounding-changing pass reaches.
//
// Every case also checks the memory plan and replay: the plan runs twice, its arena filled with a
// different byte pattern before each run (NaN, then finite garbage), and once more with planning
// off (every buffer its own region); all three must give the same bytes. A step reading memory
// its run never wrote, or two live buffers sharing memory (a planner or lifetime bug), changes
// one of them.
//
// Cases with generated C++ compile their kernels on the kernel cache's background pool:
// prepare_compiled() returns at once with the compiles queued, check_prepared() waits for them,
// so a caller prepares a batch of cases and then checks each (kernels with the same text are
// compiled once, and the disk cache keeps them across runs).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "passes/pass_manager.h"
#include "runtime/pipeline.h"

namespace smelt::fuzz {

enum class CompileBackend : uint8_t { Interpreter, Cpp };
const char* compile_backend_name(CompileBackend backend);  // "interpreter", "cpp"

struct CompileCheckOptions {
  std::string passes = passes::kDefaultPipeline;  // before fusion (compile_graph fuses after them)
  CompileBackend backend = CompileBackend::Interpreter;
  // For the fuzzer's own tests: edits the planned plan's buffer requests (runtime/plan.h), as a
  // bug in the lifetimes would.
  std::function<void(std::vector<runtime::BufferRequest>&)> edit_requests;
};

struct CompileCaseResult {
  bool passed = true;
  std::string message;          // what differed, for a failure
  int exact_outputs = 0;        // outputs compared bit for bit
  int tolerant_outputs = 0;     // outputs a lowered reduction or fold_batchnorm reaches
  int rounded_outputs = 0;      // ... of which differed in some bits (within the tolerance)
  bool layout_rounding = false;  // matched only against a reference with contiguous operands
  bool ill_conditioned = false;  // tolerant outputs beyond the tolerance on the special-value
                                 // inputs (cancellation), within it on ordinary inputs
  bool runtime_error = false;    // every run failed alike (an index out of range in the data)
  int kernels = 0;               // the plan's Kernel steps, Op steps and interpreted groups
  int op_steps = 0;
  int interpreted_groups = 0;
  double compile_ms = 0;  // passes, fusion, lowering and plans
  double wait_ms = 0;     // waiting for generated kernels (cpp)
  double run_ms = 0;      // the plan runs and the reference
};

// One case compiled, its kernels possibly still compiling.
struct PreparedCase {
  std::unique_ptr<ir::Graph> graph;  // the unoptimized graph
  CompileCheckOptions options;
  runtime::CompiledGraph compiled;           // planned (memory plan on)
  std::unique_ptr<runtime::Plan> unplanned;  // the same graph, every buffer its own region
  std::string error;                         // the pipeline refused the graph
  double compile_ms = 0;
};

std::unique_ptr<PreparedCase> prepare_compiled(const ir::Graph& graph, const CompileCheckOptions& options);
// Runs the plans on inputs drawn from `input_seed` and compares (see the top).
CompileCaseResult check_prepared(PreparedCase& prepared, uint64_t input_seed);
// prepare_compiled + check_prepared.
CompileCaseResult check_compiled(const ir::Graph& graph, const CompileCheckOptions& options, uint64_t input_seed);

// A regression file for a compile case: "# COMPILE: <backend>", "# PIPELINE:", "# INPUT-SEED:",
// the graph.
std::string compiled_regression_text(const ir::Graph& graph, const CompileCheckOptions& options,
                                     uint64_t input_seed, const std::string& message);

}  // namespace smelt::fuzz
