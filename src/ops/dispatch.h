// The one door every op goes through, eager or traced.
//
//   call(op, inputs, attrs):
//     1. the op's shape rule -> output metas (errors for bad input happen here, before any work)
//     2. a dispatch hook is installed (tracing): the hook records the op and returns symbolic
//        outputs; otherwise compute() runs the op: a view op's view kernel, or outputs
//        allocated here from the metas and written by the op's out-variant kernel
//     3. grad mode on and an input requires grad: an OpNode is recorded for backward
#pragma once

#include <vector>

#include "ops/op_table.h"

namespace smelt::ops {

// Installed by trace/ to record ops instead of computing them (thread-local).
class DispatchHook {
 public:
  virtual ~DispatchHook() = default;
  virtual std::vector<Tensor> record(OpId op, const std::vector<Tensor>& inputs,
                                     const Attrs& attrs, const std::vector<TensorMeta>& outputs) = 0;
  // The generator state a random op reads (its last input, Int64 [2]) while the hook records,
  // and the advanced state it returns: the tracer makes the first one a graph input and threads
  // the rest through the graph. A hook that cannot record random ops keeps the default (an error).
  virtual Tensor random_state();
  virtual void set_random_state(const Tensor& state);
};

DispatchHook* dispatch_hook();
// Installs `hook` (null to remove); returns the previous one.
DispatchHook* set_dispatch_hook(DispatchHook* hook);

std::vector<Tensor> call(OpId op, const std::vector<Tensor>& inputs, const Attrs& attrs = {});
// For single-output ops.
Tensor call1(OpId op, const std::vector<Tensor>& inputs, const Attrs& attrs = {});

// Runs `op` on concrete tensors, with no autograd and no hook: a view op's view kernel, else
// outputs allocated from `out_metas` (the shape rule's) and filled by the out-variant kernel.
// What the IR interpreter and constant folding run.
std::vector<Tensor> compute(OpId op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                            const std::vector<TensorMeta>& out_metas);

// The entry point of a memory plan: runs the out-variant kernel of `op` into `outputs`, tensors
// the caller placed (e.g. views into one arena storage), allocating no output. Checks first, with
// a clear smelt::Error: `op` is not a view op; the outputs are as many as the shape rule gives,
// each concrete, of its dtype and shape, contiguous, within its storage, and not overlapping
// another output. Records no autograd and no trace, but bumps each output storage's version (a
// write into existing memory, as an in-place op); the kernel may still check input values (an
// index out of range is an error, as in call()).
void call_into(OpId op, const std::vector<Tensor>& inputs, const Attrs& attrs,
               const std::vector<Tensor>& outputs);

// For a graph runner that knows which outputs of a node are read (`used[k]`): sets attributes that
// let `op`'s kernel skip the work of the unread ones (max_pool2d: "indices_unused", its indices
// output is then left unwritten). True when it set any. The shape rule ignores them.
bool mark_unused_outputs(OpId op, const std::vector<bool>& used, Attrs* attrs);

// Runs only the shape rule (with the arity check): what the IR verifier and tracer use.
std::vector<TensorMeta> infer_shape(OpId op, const std::vector<TensorMeta>& inputs,
                                    const Attrs& attrs);

TensorMeta meta_of(const Tensor& t);

// Test support: while set, the storage of every tensor an autograd node saves is appended to
// `log` (thread-local; null to stop). The autograd fuzzer uses it to avoid in-place writes that
// rightly fail at backward ("modified in place").
void set_saved_storage_log(std::vector<const Storage*>* log);

// While alive, autograd nodes recorded on this thread save tensors that live in `storage` as
// private copies: an in-place op is about to overwrite that memory with the result of the ops it
// records, and must not invalidate what those ops saved (x.mul_(w) saves x's old values).
class SaveCopiesOf {
 public:
  explicit SaveCopiesOf(const Storage* storage);
  ~SaveCopiesOf();
  SaveCopiesOf(const SaveCopiesOf&) = delete;
  SaveCopiesOf& operator=(const SaveCopiesOf&) = delete;

 private:
  const Storage* prev_;
};

// Sums `grad` down to `shape` (undoing broadcasting): the reduction of broadcast gradients.
Tensor sum_to(const Tensor& grad, const Shape& shape);

}  // namespace smelt::ops
