// The compile fuzzer's second batch size (smelt fuzz --compile --second-batch): a case whose
// inputs share a leading dim runs as a function through smelt::compile (its nodes called through
// the dispatcher, so that a trace at any batch size records the same ops), at its own batch size,
// then at two others: the second builds the dynamic batch (runtime/batch_graph.h), the third
// re-instantiates it. Each of those is compared with the unoptimized graph traced at that size on
// the IR interpreter, by the rule of the main check (compile_fuzzer.cpp): bit for bit, except
// outputs that a lowered reduction of the plan that ran (CompiledFunction::compiled_graph) or a
// rounding-changing pass reaches, within the tolerance; a difference beyond it is judged again
// on ordinary inputs.
#pragma once

#include <cstdint>
#include <string>

#include "fuzz/compile_fuzzer.h"
#include "ir/graph.h"

namespace smelt::fuzz {

struct SecondBatchResult {
  bool applicable = false;  // the inputs share a leading dim and the graph runs at the other sizes
  bool dynamic = false;     // the dynamic plan ran (else the compile fell back, `fallback` says why)
  bool passed = true;
  bool ill_conditioned = false;  // passed by the conditioning re-check (judge.h) at some batch size
  std::string message;   // what differed, for a failure
  std::string fallback;  // the recompile reason when the batch was not dynamic
};

SecondBatchResult check_second_batch(const ir::Graph& graph, const CompileCheckOptions& options, uint64_t seed);

}  // namespace smelt::fuzz
