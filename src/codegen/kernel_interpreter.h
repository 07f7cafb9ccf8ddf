// The tile interpreter: runs any validated LoopKernel without a compiler. It evaluates the
// expression DAG a tile of the inner loop at a time (one short vector per expression), calling
// the elementwise table's functors (kernels/scalar_table.h), so its results are the eager kernels'
// bits. It is the first tier of tiered execution and the backend when no C++ compiler exists.
//
// Threads: kernels without reductions run over the whole iteration space in parallel chunks;
// kernels with reductions run rows (outer indices) in parallel; either only above
// kParallelGrain elements of work (base/parallel.h), as the eager kernels. Reductions fold each
// row in inner order, on one thread.
#pragma once

#include "codegen/loop_kernel.h"

namespace smelt::codegen {

// Runs `kernel` (validate()d by the caller: nothing is checked here) on the argument buffers.
void run_interpreted(const LoopKernel& kernel, void* const* args);

}  // namespace smelt::codegen
