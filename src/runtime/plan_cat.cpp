// Concat elimination in the plan: a cat whose operands are contiguous slices of its output (every
// dim before the cat dim has size 1: batch 1 for a channel cat, plain NCHW or blocked NCHW16c)
// gets its arena buffer from the step that writes its first operand on, and each operand is
// written by its producer straight into its slice: the slice is an alias slot at an element
// offset (AliasSlot::offset). A stack's operands are reshapes of the values its producers write
// (a recurrent layer's state at each step, also read by the next step): those values are placed.
// The cat step then copies only the operands that could not be placed (an input, a constant, a
// value placed in another cat, the same value twice): none, for a SqueezeNet fire module's two
// expand convolutions or an LSTM's output sequence.
//
// Why it is safe: the slices are disjoint, and each is written once, by its value's producer;
// other readers of a placed value read its slice, which its producer wrote whole before them (no
// reader sees another operand's slice); the cat's buffer is live from its first producer on and
// while any placed value is read (read_at follows alias slots to their root); alias slots are
// never offered in-place memory (Plan::Impl::offer_inplace takes arena outputs only).
// Slices start 64-byte aligned (kArenaAlignment), as every arena buffer does, so kernels that
// write them see the alignment they would see anyway. Graph outputs stay out: a cat that is one
// is written per call into the caller's tensor, and an operand that is one is returned as its own
// tensor.
#include "ops/dispatch.h"
#include "runtime/plan_impl.h"

namespace smelt::runtime {

namespace {

bool aliases_its_input(ops::OpId op) {
  // plan_build.cpp may make these alias slots instead of steps (a reshape, a transposed matmul
  // operand): such a value has no producer step to write into the slice. (A slice may be one too,
  // when it is contiguous where it lies: it is then left unplaced and its cat copies it.)
  return op == ops::OpId::reshape || op == ops::OpId::contiguous || op == ops::OpId::permute || op == ops::OpId::cat;
}

}  // namespace

// Whether `slot` is `target`, or a chain of reshape aliases of it (offset 0: the same memory).
bool Plan::Impl::same_memory(int slot, int target) const {
  while (slot != target) {
    const AliasSlot* a = slots[size_t(slot)].as<AliasSlot>();
    if (!a || a->offset != 0) return false;
    slot = a->of;
  }
  return true;
}

void Plan::Impl::plan_cat_slices(const ir::Graph& graph, const std::map<const ir::Value*, int>& output_index) {
  for (const auto& node_ptr : graph.nodes()) {
    const ir::Node& node = *node_ptr;
    if (node.op != ops::OpId::cat || node.is_group() || node.outputs.size() != 1) continue;
    const ir::Value* out = node.outputs[0];
    if (output_index.count(out) || out->is_dead()) continue;
    const Shape& shape = out->meta.shape;
    int64_t dim = node.attrs.get_int("dim");
    if (dim < 0) dim += int64_t(shape.size());
    if (dim < 0 || dim >= int64_t(shape.size())) continue;
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= shape[size_t(d)];
    for (size_t d = size_t(dim) + 1; d < shape.size(); ++d) inner *= shape[d];
    if (outer != 1) continue;  // each operand would be strided within the cat's buffer
    const int64_t elem = int64_t(dtype_size(out->meta.dtype));
    int64_t offset = 0;
    for (const ir::Value* operand : node.inputs) {
      const int64_t at = offset;
      offset += operand->meta.shape[size_t(dim)] * inner;
      // A stack's operands are unsqueezes (reshapes) of the values to place: follow them.
      const ir::Value* v = operand;
      while (v->kind == ir::ValueKind::Computed && v->producer && !output_index.count(v) &&
             !v->producer->is_group() && v->producer->op == ops::OpId::reshape) {
        v = v->producer->inputs[0];
      }
      if (v->kind != ir::ValueKind::Computed || !v->producer || output_index.count(v)) continue;
      if (v->meta.dtype != out->meta.dtype || cat_slices.count(v)) continue;  // placed once
      if (v->producer->is_group() ? false : aliases_its_input(v->producer->op)) continue;
      if (at * elem % kArenaAlignment != 0) continue;
      cat_slices[v] = CatSlice{&node, at, -1};
      if (v != operand) cat_placed_value[operand] = v;
    }
  }
}

// The slice of its cat's buffer that `v` is written into (the buffer made now, at the step of the
// first operand to be written, when this is it).
int Plan::Impl::cat_slice_slot(const ir::Value* v, int step) {
  CatSlice& slice = cat_slices.at(v);
  auto buffer = cat_buffers.find(slice.cat);
  if (buffer == cat_buffers.end()) {
    const ir::Value* out = slice.cat->outputs[0];
    std::string label = "%";  // (appended: GCC 12's -Wrestrict misfires on "%" + std::string)
    label += std::to_string(out->id);
    buffer = cat_buffers.emplace(slice.cat, arena_slot(out->meta, step, step, std::move(label))).first;
  }
  slice.slot = add_slot({v->meta, AliasSlot{buffer->second, slice.offset}});
  ++stats.cat_slices;
  return slice.slot;
}

// A cat with placed operands: its output is the buffer they were written into, and a copy step
// each writes the operands that were not placed (their slots are not their slices). False for
// any other node.
bool Plan::Impl::add_cat(const ir::Node& node, const std::vector<int>& in) {
  auto buffer = cat_buffers.find(&node);
  if (buffer == cat_buffers.end()) return false;  // no operand was placed: an ordinary cat step
  const int cat_slot = buffer->second;
  slot_of[node.outputs[0]] = cat_slot;
  const Shape& shape = node.outputs[0]->meta.shape;
  int64_t dim = node.attrs.get_int("dim");
  if (dim < 0) dim += int64_t(shape.size());
  int64_t inner = 1;
  for (size_t d = size_t(dim) + 1; d < shape.size(); ++d) inner *= shape[d];
  int64_t offset = 0;
  for (size_t k = 0; k < node.inputs.size(); ++k) {
    const ir::Value* operand = node.inputs[k];
    if (k > 0) offset += node.inputs[k - 1]->meta.shape[size_t(dim)] * inner;
    auto placed = cat_placed_value.find(operand);
    auto slice = cat_slices.find(placed == cat_placed_value.end() ? operand : placed->second);
    if (slice != cat_slices.end() && slice->second.cat == &node && slice->second.offset == offset &&
        same_memory(in[k], slice->second.slot)) {
      continue;
    }
    // Not placed: copied into its slice at this point.
    const int target = add_slot({node.inputs[k]->meta, AliasSlot{cat_slot, offset}});
    const int step = int(steps.size());
    read_at(in[k], step);
    read_at(cat_slot, step);  // written here: live until at least this step
    Step copy;
    copy.kind = StepKind::Op;
    copy.what = "cat operand " + std::to_string(k) + " into its slice";
    copy.op = ops::OpId::contiguous;
    copy.in_slots = {in[k]};
    copy.out_slots = {target};
    steps.push_back(std::move(copy));
    ++stats.op_steps;
  }
  return true;
}

}  // namespace smelt::runtime
