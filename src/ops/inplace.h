// In-place ops under autograd, and the view bookkeeping they need.
//
// An in-place op `x.op_(args)` computes its functional form r = op(x, args) into a fresh buffer,
// then writes r into x's memory. Reading everything before writing anything makes operands that
// overlap x in another layout harmless; the write itself refuses an x whose elements share
// memory (tensor/overlap.h).
//
// When autograd records (grad mode on, and x, the tensor x views, or an argument requires grad),
// x's history is rebased: x.grad_fn becomes r's. Tensors that the op's own nodes save from x's
// memory are saved as copies (SaveCopiesOf), since the write would invalidate them.
//
// A write through a view v of a root tensor b also changes b: b's history becomes a CopySlices
// node with two inputs, b's old history (the gradient with v's region zeroed) and r (the
// gradient's region, cut out by replaying v's view ops on it). Other views of b see the new
// history through b: each view remembers b's history_version when it took its own, and rebuilds
// it by replaying its view ops on b when that changed.
#pragma once

#include <functional>
#include <vector>

#include "ops/op_table.h"

namespace smelt::ops {

class DispatchHook;

// Called by the dispatcher for every eager op: outputs that share memory with an input become
// views of that input's root, remembering `op` and `attrs` to replay them.
void record_views(OpId op, const Attrs& attrs, const std::vector<Tensor>& inputs,
                  const std::vector<Tensor>& outputs);

// Rebuilds a view's grad_fn from its root's current history when the root was rebased since;
// no-op for anything else. Needs grad mode on to record (the dispatcher and engine call it).
void refresh_view_history(TensorImpl* t);

// self := f(self) in place, as described above. `operands` are f's other tensor arguments
// (for "does anything require grad"); `op` names the method in errors.
using InplaceFn = std::function<Tensor(const Tensor& self)>;
Tensor& inplace_apply(Tensor& self, const char* op, const std::vector<Tensor>& operands,
                      const InplaceFn& f);

// The check every in-place write makes first: a defined, concrete tensor without internal
// overlap, and not a leaf (or a view of one) that requires grad while grad mode is on.
void check_inplace_target(const Tensor& self, const char* op);

// In-place ops on concrete tensors run eagerly even while tracing (the trace does not see
// them, as before in-place ops were recorded); this suspends the tracer for that. A symbolic
// operand is an error: the functional form traces.
class EagerWhileTracing {
 public:
  EagerWhileTracing(const char* op, const std::vector<Tensor>& operands);
  ~EagerWhileTracing();
  EagerWhileTracing(const EagerWhileTracing&) = delete;
  EagerWhileTracing& operator=(const EagerWhileTracing&) = delete;

 private:
  DispatchHook* hook_;
};

// Writes `src` (broadcastable to dst's shape, same dtype) into dst's memory, reading through a
// copy when src overlaps dst in another layout, and bumps dst's version. No autograd.
void write_into(const Tensor& dst, const Tensor& src);

}  // namespace smelt::ops
