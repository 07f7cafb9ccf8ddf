// Plan's private state, shared by the files that build (plan_build.cpp), instantiate
// (plan_instantiate.cpp) and run (plan.cpp) a plan. Not part of the runtime's interface.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ops/attrs.h"
#include "ops/op_table.h"
#include "runtime/kernel_step.h"
#include "runtime/contraction_step.h"
#include "runtime/memory_plan.h"
#include "runtime/plan.h"
#include "runtime/profile.h"

namespace smelt::runtime {

// Where a slot's tensor comes from on each run: one alternative per kind, each with only its own
// fields (Slot::source).
struct InputSlot {
  int index = 0;  // the run's input
};
struct ConstantSlot {
  Tensor value;
};
struct ArenaSlot {
  int request = -1;    // its memory-plan request
  int64_t offset = 0;  // byte offset in the arena (after planning)
};
struct OutputSlot {
  int index = 0;  // the graph output, allocated per call
};
// Contiguous memory at `offset` elements into slot `of` (0 for a reshape; a cat operand's slice of
// the cat's buffer otherwise, plan_cat.cpp).
struct AliasSlot {
  int of = 0;
  int64_t offset = 0;
};
// A strided view of slot `of` (plan_views.cpp): `op` (a permute, slice or reshape) with `attrs`,
// applied by the op's view kernel when binding. Only the readers strided_operand_only or
// strided_view checked read such a slot; every other step takes contiguous memory.
struct ViewSlot {
  int of = 0;
  ops::OpId op{};
  ops::Attrs attrs;
};

struct Slot {
  ops::TensorMeta meta;
  std::variant<InputSlot, ConstantSlot, ArenaSlot, OutputSlot, AliasSlot, ViewSlot> source;
  template <class T>
  T* as() {
    return std::get_if<T>(&source);
  }
  template <class T>
  const T* as() const {
    return std::get_if<T>(&source);
  }
  // The slot this one views or aliases, or -1.
  int base() const {
    if (const AliasSlot* a = as<AliasSlot>()) return a->of;
    if (const ViewSlot* v = as<ViewSlot>()) return v->of;
    return -1;
  }
};

enum class StepKind : uint8_t { Kernel, Op, Interpret, TiledContraction };

struct Step {
  StepKind kind = StepKind::Op;
  std::string what;  // for describe(): the op or the kernel's name, and why interpreted
  std::vector<int> in_slots, out_slots;
  // Op
  ops::OpId op{};
  ops::Attrs attrs;
  // Kernel: arguments in the kernel's order
  std::unique_ptr<KernelStep> kernel;
  std::vector<int> arg_slots;
  // Interpret
  std::unique_ptr<ir::Graph> body;
  // TiledContraction: the op (op, attrs) reads op_slots and writes its product into product_slot;
  // `kernel` (tiled) is the epilogue, run on each finished tile (in_slots: the group's inputs).
  std::vector<int> op_slots;
  int product_slot = -1;
  // TiledContraction of a blocked conv whose epilogue is a bias and a clamp: that epilogue as data
  // (runtime/contraction_step.h, conv_epilogue_as_post_ops), for oneDNN to apply in its kernel.
  std::optional<ConvPostOps> post_ops;
};

// Whether kernel `k` may store argument `out` over the memory of arguments `over`: a one-stage
// kernel without reductions that reads each of them only at the positions it stores `out`.
bool stores_over_reads(const codegen::LoopKernel& k, size_t out, const std::vector<size_t>& over);

struct Plan::Impl {
  PlanOptions options;
  LowerFn lower;  // options.lower, else codegen::lower
  std::vector<Slot> slots;
  std::vector<Step> steps;
  std::vector<int> input_slots, output_slots;
  std::vector<ops::TensorMeta> input_metas;
  std::vector<BufferRequest> requests;
  MemoryPlan memory;
  Ref<Storage> arena;
  std::vector<Tensor> arena_tensors;  // per slot, for Arena slots (views into the arena)
  PlanStats stats;
  // One run at a time (the arena is shared by the calls); also guards the kernel steps' switch
  // to compiled code (request_kernels, during a run) against readers (describe, kernels).
  mutable std::mutex mutex;
  Profile profile;
  std::vector<int32_t> step_profile_id;  // per step: its profile kernel id, bytes and flops
  std::vector<int64_t> step_bytes, step_flops;

  // Per run: each slot's tensor and data pointer.
  std::vector<Tensor> tensors;
  std::vector<void*> pointers;

  int64_t runs = 0;
  // SMELT_SYNC_COMPILE=1 asks for compiled kernels from the first call: no deferral then.
  bool defer_compile() const;
  // Gives every kernel step without one its kernel cache handle, all in one request (the cache
  // compiles them in batches). Not while a run is in flight.
  void request_kernels();

  // The slot holding `v`, made on first sight for inputs and constants.
  std::map<const ir::Value*, int> slot_of;

  // (Out of line: GCC 12 inlining the variant's move into callers warned -Wmaybe-uninitialized.)
  int add_slot(Slot s);
  int constant_slot(const Tensor& value);
  // An arena slot for a value of `meta` live from `first_step` to `last_step`.
  int arena_slot(const ops::TensorMeta& meta, int first_step, int last_step, std::string label = "");

  int root(int slot) const {
    while (slots[size_t(slot)].base() >= 0) slot = slots[size_t(slot)].base();
    return slot;
  }

  // Records that `slot` is read at step `step` (extends its buffer's lifetime).
  void read_at(int slot, int step);

  // plan_cat.cpp: cats whose operands are written straight into their slices of the cat's buffer.
  struct CatSlice {
    const ir::Node* cat = nullptr;
    int64_t offset = 0;  // elements from the start of the cat's output
    int slot = -1;       // the slice's alias slot, once its producer made it
  };
  std::map<const ir::Value*, CatSlice> cat_slices;  // by placed value (an operand, or what it reshapes)
  std::map<const ir::Value*, const ir::Value*> cat_placed_value;  // operand -> the value placed
  bool same_memory(int slot, int target) const;
  std::map<const ir::Node*, int> cat_buffers;       // by cat: its output's arena slot, once made
  void plan_cat_slices(const ir::Graph& graph, const std::map<const ir::Value*, int>& output_index);
  int cat_slice_slot(const ir::Value* v, int step);
  bool add_cat(const ir::Node& node, const std::vector<int>& in);

  // plan_build.cpp: the graph's nodes as steps over slots (plan_views.cpp: which stay strided views).
  void build(const ir::Graph& graph);
  int new_value_slot(const ir::Value* v, int step, const std::map<const ir::Value*, int>& output_index);
  bool strided_operand_only(const ir::Node& node, const std::map<const ir::Value*, int>& output_index) const;
  std::optional<int64_t> contiguous_slice_offset(
      const ir::Node& node, int in_slot, const std::map<const ir::Value*, int>& output_index) const;
  bool strided_view(const ir::Node& node, int in_slot, const std::map<const ir::Value*, int>& output_index) const;
  bool strided_readers(const ir::Value* v, const Shape& strides,
                       const std::map<const ir::Value*, int>& output_index) const;
  Shape slot_strides(int slot) const;
  bool is_strided(int slot) const { return slots[size_t(slot)].as<ViewSlot>() != nullptr; }
  int strided_alias(const ir::Node& node, int in_slot);
  void add_op_step(const ir::Node& node, const std::vector<int>& in, const std::vector<int>& out);
  void mark_constant_weight(ops::OpId op, const std::vector<int>& operand_slots, ops::Attrs* attrs) const;
  void add_group(const ir::Node& node, const std::vector<int>& in, const std::vector<int>& out);
  bool add_tiled_contraction(const ir::Graph& body, const std::string& name, const std::vector<int>& in,
                             const std::vector<int>& out);
  void add_kernel_step(const ir::Graph& body, const std::string& name, const std::vector<int>& in,
                       const std::vector<int>& out);
  // plan_instantiate.cpp: costs, in-place offers, the arena.
  void instantiate();
  void measure_steps();
  void offer_inplace();
  std::vector<size_t> args_rooted_at(const Step& s, int root_slot) const;  // kernel arguments
  // plan_updates.cpp: the graph's updates (ir::Graph::updates) written straight into their
  // inputs where the schedule and the writing kernel allow it; the rest copied at the end of a run.
  std::vector<std::pair<size_t, size_t>> updates;  // (output, input), every one of the graph's
  std::vector<bool> update_in_place;               // per entry of `updates`
  void plan_updates(const ir::Graph& graph);
  // Whether the step writing `output_slot` may write it over `input_slot` (moving a GEMM's product
  // to a temporary of its own when that is what stands in the way).
  bool update_writable_in_place(int output_slot, int input_slot);
  void finish_updates(const std::vector<Tensor>& inputs, std::vector<Tensor>& in,
                      std::vector<Tensor>& outputs) const;
  // plan.cpp: a run.
  void bind(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs);
  void run_step(Step& step);
};

}  // namespace smelt::runtime
