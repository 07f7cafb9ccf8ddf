// The compile fuzzer's second batch size (smelt fuzz --compile --second-batch): a case runs as a
// function through smelt::compile (its nodes called through the dispatcher, so that a trace at
// any size records the same ops), at its own sizes, then at two others, where the inputs' dims of
// one or two sizes vary (the batch, a last dim such as a sequence length, or both: two symbols):
// the second call builds the dynamic shapes (runtime/shape_fit.h), the third re-instantiates
// them. Each of those is compared with the unoptimized graph traced at those sizes on the IR
// interpreter, by the rule of the main check (compile_fuzzer.cpp): bit for bit, except outputs
// that a lowered reduction of the plan that ran (CompiledFunction::compiled_graph) or a
// rounding-changing pass reaches, within the tolerance; a difference beyond it is judged again on
// ordinary inputs.
#pragma once

#include <cstdint>
#include <string>

#include "fuzz/compile_fuzzer.h"
#include "ir/graph.h"

namespace smelt::fuzz {

struct SecondBatchResult {
  bool applicable = false;  // the graph runs at the other sizes
  bool dynamic = false;     // the dynamic plan ran (else the compile fell back, `fallback` says why)
  int sizes_varied = 0;     // how many input sizes varied (1 or 2: the batch, a last dim, both)
  bool passed = true;
  bool ill_conditioned = false;  // passed by the conditioning re-check (judge.h) at some batch size
  std::string message;   // what differed, for a failure
  std::string fallback;  // the recompile reason when the sizes were not dynamic
};

SecondBatchResult check_second_batch(const ir::Graph& graph, const CompileCheckOptions& options, uint64_t seed);

}  // namespace smelt::fuzz
