// Plan::build's updates: graph outputs that are the new values of graph inputs
// (ir::Graph::updates: parameters and optimizer state after a training step's update). Where the
// step that computes one is the last to read its input and stores each element over the one it
// read (a pointwise kernel, or a GEMM's epilogue), the output's slot is the input's memory: the
// step updates the input in place, in the pass that computes it. Otherwise the run copies the
// output into the input at its end. Either way the caller's input holds the new value after the
// run, and is the output returned.
#include "runtime/plan_impl.h"

namespace smelt::runtime {

void Plan::Impl::plan_updates(const ir::Graph& graph) {
  for (const auto& [output, input] : graph.updates()) {
    const int out_slot = output_slots[output], in_slot = input_slots[input];
    const bool in_place = update_writable_in_place(out_slot, in_slot);
    updates.emplace_back(output, input);
    update_in_place.push_back(in_place);
    if (in_place) {
      slots[size_t(out_slot)].source = AliasSlot{in_slot, 0};
      ++stats.updates_in_place;
    }
  }
  stats.updates = int(updates.size());
}

bool Plan::Impl::update_writable_in_place(int out_slot, int in_slot) {
  if (!slots[size_t(out_slot)].as<OutputSlot>()) return false;
  auto rooted = [&](const std::vector<int>& list, int r) {
    for (int s : list) {
      if (root(s) == r) return true;
    }
    return false;
  };
  // The one step that writes the output's memory (a value may be written straight into an output
  // it is reshaped to: then through an alias of the slot).
  int writer = -1;
  for (size_t s = 0; s < steps.size(); ++s) {
    if (!rooted(steps[s].out_slots, out_slot)) continue;
    if (writer >= 0) return false;
    writer = int(s);
  }
  if (writer < 0) return false;
  Step& w = steps[size_t(writer)];
  if (w.kind != StepKind::Kernel && w.kind != StepKind::TiledContraction) return false;
  for (size_t s = size_t(writer) + 1; s < steps.size(); ++s) {  // nothing reads the old value later
    const Step& later = steps[s];
    if (rooted(later.in_slots, in_slot) || rooted(later.arg_slots, in_slot) || rooted(later.op_slots, in_slot))
      return false;
  }
  // A GEMM reads its operands across tiles: it must not read the input the epilogue overwrites.
  // When it writes its product into the output's memory (the epilogue then finishes each tile
  // in place), that memory becomes the input's: the epilogue must not read the input at all.
  const std::vector<size_t> input_args = args_rooted_at(w, in_slot);
  if (w.kind == StepKind::TiledContraction) {
    if (rooted(w.op_slots, in_slot) || root(w.product_slot) == in_slot) return false;
    if (root(w.product_slot) == out_slot && !input_args.empty()) {
      // The epilogue reads the old value (Adam's m beside the gradient): the product moves to an
      // arena temporary of its own (when the epilogue stores the output: it is not the product
      // itself; oneDNN's post-ops finish the product where it is) and the output goes over the
      // input.
      const size_t product_arg = w.in_slots.size();
      const codegen::LoopKernel& k = w.kernel->kernel();
      const std::vector<size_t> out_args = args_rooted_at(w, out_slot);
      bool stored = false;
      for (const codegen::Store& st : k.stores) {
        for (size_t a : out_args) stored = stored || (k.accesses[size_t(st.access)].arg == int(a) && a != product_arg);
      }
      if (!stored || w.post_ops || w.arg_slots[product_arg] != w.product_slot) return false;
      const int step = writer;
      w.product_slot = arena_slot(slots[size_t(w.product_slot)].meta, step, step, "product");
      w.arg_slots[product_arg] = w.product_slot;
    } else if (root(w.product_slot) == out_slot) {
      return true;  // the epilogue reads nothing of the input: the product and the output take its memory
    }
  }
  const std::vector<size_t> out_args = args_rooted_at(w, out_slot);
  if (out_args.size() != 1) return false;
  return stores_over_reads(w.kernel->kernel(), out_args[0], input_args);
}

// After a run: each updated input holds its new value, which is also the output returned.
// `inputs` are the caller's tensors, `in` those the plan read (a strided input's contiguous copy).
void Plan::Impl::finish_updates(const std::vector<Tensor>& inputs, std::vector<Tensor>& in,
                                std::vector<Tensor>& outputs) const {
  for (size_t e = 0; e < updates.size(); ++e) {
    const auto [output, input] = updates[e];
    if (update_in_place[e]) outputs[output] = in[input];
    Tensor target = inputs[input];
    if (outputs[output].storage() != target.storage() || outputs[output].offset() != target.offset()) {
      target.copy_(outputs[output]);
    } else {
      target.storage()->bump_version();  // written by the plan's kernel, behind autograd's back
    }
    outputs[output] = target;
  }
}

}  // namespace smelt::runtime
