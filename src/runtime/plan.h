// Plan: a compiled graph as a flat list of steps over slots, replayed with no lookups (the CPU
// analogue of a CUDA graph: define, instantiate, execute).
//
// Every graph value lives in a slot: a graph input (bound per call), a constant (held by the
// plan), a region of one preplanned arena (intermediates; offsets from the memory planner), a
// graph output (allocated per call, handed to the caller), or an alias of another slot (a reshape
// of a contiguous value costs nothing). A step is one of:
//   - Kernel: a fused group lowered to a LoopKernel, run by its backend entry (the interpreter
//     until the generated C++ is ready, see codegen/kernel_cache.h);
//   - Op: one op's out-variant eager kernel writing into its slots (matmul, conv, opaque ops,
//     and ops left unfused);
//   - Interpret: a group the lowering refused, run node by node (correct, allocating, rare: the
//     describe() text says which and why).
// A contraction group is one step when its epilogue lowers to a tiled kernel (loop_kernel.h):
// the matmul/conv runs with the epilogue's tile entry called on each output tile it finishes
// (ops/contraction_tiles.h), while the tile is in cache. Otherwise (or with
// PlanOptions::epilogue_in_tile off) two steps: the matmul/conv into an arena temporary, then its
// epilogue as a kernel. Both give the same bits.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "codegen/loop_kernel.h"
#include "codegen/lower.h"
#include "ir/graph.h"
#include "runtime/profile.h"
#include "runtime/memory_plan.h"

namespace smelt::runtime {

enum class KernelBackend : uint8_t {
  Interpreter,  // codegen's tile interpreter only
  Compiled,     // generated C++, compiled before the first run (no interpreter phase)
  Tiered,       // interpreter first, generated C++ as soon as the background compile finishes
};

using LowerFn = codegen::LowerFn;  // (codegen/lower.h)

struct PlanOptions {
  KernelBackend backend = KernelBackend::Tiered;
  bool memory_plan = true;  // false (SMELT_NO_MEMPLAN=1): every intermediate its own region
  // Tiered: the kernels' background compiles start at this run (SMELT_COMPILE_AFTER); a plan run
  // fewer times never compiles (the interpreter is cheaper than the compiler for one call).
  int compile_after_runs = 2;
  // For tests of the checks that guard the planner (the compile fuzzer's): edits the buffer
  // requests (lifetimes, sizes) before they are planned, as a bug in their computation would.
  std::function<void(std::vector<BufferRequest>&)> edit_requests;
  bool epilogue_in_tile = true;  // false (SMELT_NO_EPILOGUE_IN_TILE=1): contraction groups in two steps
  // A cat whose operands' producers write straight into their slices of its buffer, instead of a
  // copy (plan_cat.cpp); false (SMELT_NO_CAT_IN_PLACE=1): every cat copies.
  bool cat_in_place = true;
  // Replaces codegen::lower for every group, in build order: a dynamic batch records the kernels
  // of its probe builds and hands their fitted dynamic-batch kernels to later builds
  // (runtime/shape_fit.h).
  LowerFn lower;
  // Nodes the plan stage hoisted before the build (passes/fold.h), for the stats.
  int hoisted = 0;
};

struct PlanStats {
  int steps = 0;
  int kernels = 0;          // Kernel steps (fused groups and lowered view copies)
  int op_steps = 0;         // Op steps
  int interpreted = 0;      // groups the lowering refused
  int hoisted = 0;          // pure nodes reading only constants, computed once at build (PlanOptions)
  int cat_slices = 0;       // cat operands written in place into the cat's buffer (no copy)
  int tiled_contractions = 0;  // contraction groups run as one step, epilogue in the GEMM's tiles
                               // (each also counts as a kernel and an op step)
  int64_t arena_bytes = 0;  // planned peak
  int64_t naive_bytes = 0;  // every intermediate in its own region
  int64_t lower_bound = 0;  // most bytes live at one step
  int updates = 0;           // outputs that update inputs (ir::Graph::updates)
  int updates_in_place = 0;  // of those, written into the input by the step computing them
};

class Plan {
 public:
  // Instantiates `graph` (verified, optimized, fused). The graph must outlive the plan only for
  // describe(); steps keep what they need.
  static std::unique_ptr<Plan> build(const ir::Graph& graph, const PlanOptions& options = {});
  ~Plan();

  // `inputs` match the graph's inputs in shape and dtype (checked; a non-contiguous input is
  // copied). Returns the graph's outputs in fresh tensors, but for the outputs that update an
  // input (ir::Graph::updates): those are written into the caller's input tensor (in place by the
  // step computing them where the schedule allows, else copied at the end), which is returned.
  // One call at a time per plan.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);

  // Blocks until every kernel step's background compile (Tiered) has finished; returns the first
  // kernel that stays on the interpreter and why ("" when all are compiled, or for the
  // Interpreter backend). Lets a caller compile many plans' kernels at once, then run them.
  std::string wait_for_kernels() const;
  // Fills the whole arena with `byte` (for tests: 0xff is NaN in every float and -1 in int64). A
  // step that reads arena memory no earlier step of the same run wrote then shows in its results.
  void fill_arena(uint8_t byte);

  const PlanStats& stats() const;
  // The steps, one line each (kind, what it runs, slots), the arena plan and the stats.
  std::string describe() const;
  // The kernels of the Kernel steps, in step order.
  std::vector<const codegen::LoopKernel*> kernels() const;

  // Per-step profiling, off by default: each run records every step's time, bytes moved and
  // flops (see runtime/profile.h: a table, a Chrome trace).
  void set_profiling(bool on);
  const Profile& profile() const;
  // The arena over the schedule: a text report (naive, planned, lower bound) and an SVG timeline.
  std::string memory_report() const;
  std::string arena_svg() const;

  struct Impl;
  // The built plan's steps and slots (runtime/plan_impl.h), for readers of its structure: the C
  // export (export_c/) writes them out as C.
  const Impl& impl() const { return *impl_; }

 private:
  explicit Plan(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace smelt::runtime
