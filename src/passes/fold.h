// Constant folding: a node all of whose inputs are constants is evaluated once, at compile time,
// with the interpreter's eager kernels, and its outputs become constants. Random ops (kRandom) are
// never folded: each run must draw anew. Results larger than `max_elements` stay computed, so
// folding never bloats a graph with big tensors (an expand of a scalar stays a cheap view).
// Needs nothing before it; run dce after it to drop the folded nodes and their input constants.
#pragma once

#include <cstdint>

#include "ir/graph.h"

namespace smelt::passes {

struct FoldOptions {
  int64_t max_elements = 65536;  // per folded output
  // Hoisting, the plan stage's mode (runtime/pipeline.cpp, after fusion): every pure node or
  // group whose inputs are all constants is computed once, whatever its size (a transpose of a
  // captured weight that max_elements left), except graph outputs (each call returns fresh
  // tensors); the plan then has nothing to run for it. `folded` counts the nodes folded.
  bool hoist = false;
  int* folded = nullptr;
};

// Defaults with SMELT_FOLD_MAX_ELEMENTS applied (see docs/env.md).
FoldOptions fold_options_from_env();

bool fold(ir::Graph& graph, const FoldOptions& options);
bool fold(ir::Graph& graph);  // with fold_options_from_env()

}  // namespace smelt::passes
