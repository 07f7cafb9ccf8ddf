// The counters behind smelt::memory_stats (include/smelt/memory.h), kept by Storage's
// constructors and destructor (tensor.cpp) and autograd's node allocator (autograd/node.cpp), and
// the allocation sites recorded when tracking is on. The op being dispatched names a site
// (ops/dispatch.cpp sets it for the duration of a call).
#pragma once

#include <cstdint>

namespace smelt {
class Storage;
}

namespace smelt::detail {

void track_storage_created(const Storage* storage);
void track_storage_destroyed(const Storage* storage);
void track_node(int delta);

// The op a thread is running (its name, static storage), for the sites; null outside ops.
class CurrentOp {
 public:
  explicit CurrentOp(const char* name);
  ~CurrentOp();
  CurrentOp(const CurrentOp&) = delete;
  CurrentOp& operator=(const CurrentOp&) = delete;

 private:
  const char* previous_;
};

}  // namespace smelt::detail
