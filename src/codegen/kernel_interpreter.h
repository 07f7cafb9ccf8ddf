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

#include <memory>

#include "codegen/loop_kernel.h"

namespace smelt::codegen {

// A kernel (validate()d by the caller: nothing is checked here) prepared for interpretation:
// the per-call setup is done once, and each thread reuses its scratch, so a run allocates
// nothing once warm. Runs are reentrant. A dynamic-shape kernel (LoopKernel::sizes) runs at the
// sizes its arguments carry after the buffers, as its generated code does: one interpreter
// serves every size (a program per size, made on first use).
class InterpretedKernel {
 public:
  explicit InterpretedKernel(LoopKernel kernel);
  void run(void* const* args) const;
  // A tiled kernel's tile (loop_kernel.h): rows [r0, r1), columns [c0, c1), on this thread.
  void run_tile(void* const* args, int64_t r0, int64_t r1, int64_t c0, int64_t c1) const;
  const LoopKernel& kernel() const;

 private:
  struct Program;
  struct Sized;
  static std::shared_ptr<const Program> prepare(LoopKernel kernel);
  std::shared_ptr<const Program> program_for(void* const* args) const;
  std::shared_ptr<const Program> program_;
  std::shared_ptr<Sized> sized_;  // dynamic-shape kernels: the programs at other sizes
};

// Prepares and runs `kernel` once (tests).
void run_interpreted(const LoopKernel& kernel, void* const* args);

}  // namespace smelt::codegen
