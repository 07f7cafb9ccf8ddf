// Splitting a joint forward+backward graph (trace::trace_vjp) into the graph a call runs forward
// and the graph its backward runs later, choosing what the backward keeps (saved by the forward)
// and what it recomputes from what is kept (docs/design.md "Training compile").
//
// The choice is a minimum cut: every value the backward needs is either saved (its bytes are the
// cost) or recomputed from its operands, which then are needed in turn. Only cheap work is ever
// recomputed (elementwise, broadcast, views and copies, reductions and normalizations); matmul,
// conv, pooling, gathers and random ops are saved (or their consumers are). `memory_budget` in
// [0, 1] prices recomputation: 0 saves the least bytes whatever it recomputes, 1 recomputes
// nothing but views (everything else the backward reads is saved), values between charge
// budget / (1 - budget) times a recomputed value's bytes against the bytes it saves.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace smelt::passes {

// Where a backward input that is not a tangent comes from.
struct SavedValue {
  bool forward_input = false;  // a forward input (the caller's tensor), else a forward output
  size_t index = 0;            // into the forward graph's inputs or outputs
};

// What the backward keeps and what it recomputes.
struct Recomputation {
  int64_t saved_bytes = 0;               // of the saved values the forward computed (inputs are free)
  int64_t saved_bytes_no_recompute = 0;  // the same with memory_budget 1
  std::vector<std::string> saved_values;  // "%12 f32[64,256] (matmul)"
  std::vector<std::string> recomputed;    // "%13 f32[64,256] (relu)", one per recomputed node
  // A few lines: bytes with and without recomputation, what is saved, what is recomputed.
  std::string explain() const;
};

struct Partition : Recomputation {
  // The joint graph's forward inputs -> its forward outputs, then the values saved for the
  // backward that are not among them.
  std::unique_ptr<ir::Graph> forward;
  // `saved`, then the tangents -> the joint graph's gradient outputs.
  std::unique_ptr<ir::Graph> backward;
  std::vector<SavedValue> saved;
};

// `joint`'s first `forward_inputs` inputs and `forward_outputs` outputs are the forward's; the
// remaining inputs are the tangents and the remaining outputs the gradients.
Partition partition(const ir::Graph& joint, size_t forward_inputs, size_t forward_outputs,
                    double memory_budget);

// The same choice inside one graph that runs forward and backward together (a compiled training
// step): the graph's inputs from `tangents` on are the tangents; each forward node the backward
// recomputes is cloned just before the first backward node that needs it, so the forward's value
// dies early and the clone lives only while the backward needs it (its graph outputs are kept to
// the end anyway and count as free). Dead nodes are removed. Run after the canonical passes (CSE
// would merge the clones back) and before fusion (which fuses them into the backward's kernels).
Recomputation recompute_in_backward(ir::Graph& joint, size_t tangents, double memory_budget);

// The attribute recompute_in_backward sets on each clone ({recompute=1} in the printed graph):
// fusion keeps a clone out of groups that would compute it with the forward.
inline constexpr const char* kRecomputeAttr = "recompute";

// Whether the partitioner may recompute `op` in the backward (cheap and deterministic).
bool recomputable(ops::OpId op);

}  // namespace smelt::passes
