// A capture: the calling thread tracing a function into a graph (trace/ opens a CaptureScope
// for the duration of a trace). Random creation functions refuse to draw from the default
// generator then: their numbers would be drawn once, at capture, and baked into the graph as a
// constant, so a compiled function would replay the same "random" tensor on every call. (A
// Generator the caller passes is theirs: drawing from it inside a trace means a constant on
// purpose.) (dropout, a random op of the op table, takes the generator state as a graph input.)
//
// A capture that lifts (smelt::compile's traces) also tells apart the tensors the function
// creates while it is traced (constants of the graph: the same on every call) from the tensors it
// captured from outside (state that may change between calls: graph inputs read on every call,
// docs/design.md "Captured tensors"). A storage allocated by smelt on this thread during the
// capture is the function's own; every other storage — older, allocated on another thread, or
// memory smelt does not own (from_blob, NumPy), which may change without a version bump — is
// captured. The values of a captured tensor must not be read while tracing: Tensor::raw_data
// refuses, so that no branch or number taken from them is frozen into the plan.
#pragma once

namespace smelt {
class Storage;
}

namespace smelt::detail {

// Marks the calling thread as capturing while in scope (nests). With `lift_captured`, the scope
// also records the storages created on this thread while it lasts (see above); a nested scope
// keeps the outer scope's record, and lifts (refuses reads of captured values) only when it was
// asked to itself.
class CaptureScope {
 public:
  explicit CaptureScope(bool lift_captured = false);
  ~CaptureScope();
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;

 private:
  bool previous_;
  bool previous_lifting_;
  bool owns_record_ = false;
};

// True while a lifting capture is active on this thread and `storage` is not one the capture
// created (see above).
bool captured_from_outside(const Storage* storage);

// Called by Storage's constructors and destructor (tensor.cpp).
void note_storage_created(const Storage* storage);
void note_storage_destroyed(const Storage* storage);

}  // namespace smelt::detail
