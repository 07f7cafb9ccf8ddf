// The compile fuzzer's gradient mode (smelt fuzz --compile --gradients N): a case's joint
// forward+backward graph (trace::trace_vjp: every floating input differentiated, every floating
// output weighted by a random tangent) split by passes::partition at a memory budget drawn from
// the seed. The two halves run on the IR interpreter as a differentiable compiled call runs them
// (the forward returns the saved values, the backward reads them and the tangents) and must give
// the joint graph's outputs and gradients bit for bit: the same ops on the same values, whatever
// the cut recomputes; so must the joint graph with the same cut made inside it
// (passes::recompute_in_backward, as a compiled training step runs it). Then each half goes through the compile pipeline's own check
// (check_compiled): backward graphs (slice_grad, broadcast reductions, recomputed forward work)
// are graphs the random builder does not draw.
#pragma once

#include <cstdint>
#include <string>

#include "fuzz/compile_fuzzer.h"
#include "ir/graph.h"

namespace smelt::fuzz {

struct GradientResult {
  bool applicable = false;  // some floating output depends on a floating input
  bool passed = true;
  std::string message;  // what differed, for a failure
  double budget = 0;    // the memory budget drawn
  int saved = 0;        // values the backward keeps
  int recomputed = 0;   // nodes it recomputes
};

GradientResult check_gradients(const ir::Graph& graph, const CompileCheckOptions& options, uint64_t seed);

}  // namespace smelt::fuzz
