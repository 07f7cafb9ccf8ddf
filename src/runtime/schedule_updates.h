// Scheduling for in-place updates: the plan writes an output that updates an input
// (ir::Graph::updates: a parameter after an optimizer step) straight into the input's memory
// only when the step that computes it is the last to read that input. Fusion leaves nodes in
// an order that knows nothing of this (a weight's update fused into its gradient's GEMM may come
// before the GEMM of the input gradient that still reads the weight).
#pragma once

#include "ir/graph.h"

namespace smelt::runtime {

// Moves the node computing each update output, with the nodes that read its outputs, to after
// the last other reader of the input it updates (directly or through views), keeping the order
// topological. A writer that such a reader depends on stays where it is (the plan then copies
// the output into the input at the end of the run). Returns how many writers moved.
int schedule_updates(ir::Graph& graph);

}  // namespace smelt::runtime
