// Dead code elimination: removes nodes none of whose outputs is used or returned, and unused
// constants. Needs nothing before it; run it after any rewriting pass.
#pragma once

#include "ir/graph.h"

namespace smelt::passes {

bool dce(ir::Graph& graph);

}  // namespace smelt::passes
