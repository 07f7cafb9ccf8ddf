// Scheduling for registered ops that start or wait for background work (OpDefinition::placement
// in smelt/custom_op.h: a collective's start and its wait): an Early op moves up to right after
// the last producer of its inputs, a Late op down to right before the first step that reads its
// outputs, so that the steps between run while the work proceeds. The order stays topological.
#pragma once

#include "ir/graph.h"

namespace smelt::runtime {

// Returns how many nodes moved.
int schedule_placement(ir::Graph& graph);

}  // namespace smelt::runtime
