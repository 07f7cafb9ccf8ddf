// DistributedDataParallel's state behind its public class (include/smelt/distributed.h): the
// parameters, their buckets, and where the current backward stands. The hooks hold it weakly.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "distributed/process_group.h"
#include "smelt/distributed.h"

namespace smelt::distributed {

// Gradient buckets for tensors of these dtypes and byte sizes (in registration order): indices
// in reverse order (the order a backward usually finishes them), one dtype per bucket, a bucket
// closed when the next tensor would take it past `cap_mb` MiB, and the first bucket past 1 MiB
// (as PyTorch's DDP: the first all-reduce starts early in the backward). Shared by the eager
// buckets and the compiled step's.
std::vector<std::vector<size_t>> plan_buckets(const std::vector<std::pair<DType, int64_t>>& tensors, double cap_mb);

struct DistributedDataParallel::State : std::enable_shared_from_this<State> {
  struct Param {
    std::string name;
    Tensor tensor;       // the parameter (requires grad)
    int bucket = 0;      // which bucket its gradient travels in
    int64_t offset = 0;  // its first element there
    uint64_t hook = 0;   // its post-accumulate hook
  };
  struct Bucket {
    DType dtype;
    std::vector<size_t> params;  // indices into `params`
    int64_t numel = 0;           // gradient elements; `flat` has one more per parameter
    Tensor flat;                 // the gradients, then how many ranks had each
    int pending = 0;             // parameters of this backward still without their gradient
    detail::WorkPtr work;        // its all-reduce this backward
  };

  State(detail::ProcessGroup& g, nn::Module& module, double bucket_cap_mb);

  // The post-accumulate hook of parameter `index`: its .grad is final for this backward.
  void on_gradient(size_t index);
  // The end of a backward: buckets not yet started start, all are waited for, .grad = the mean.
  void finish_backward();
  // Waits for whatever a backward that threw left in flight, and forgets it.
  void drain();

  detail::ProcessGroup* group;
  std::vector<Param> params;
  std::vector<Bucket> buckets;
  std::vector<char> ready;  // per parameter, this backward
  size_t next_launch = 0;   // buckets start strictly in order (the same on every rank)
  bool in_backward = false;
  bool sync = true;  // false under no_sync()
  CommStats stats;

 private:
  void copy_in(size_t index, bool used);
  void launch_ready();
};

}  // namespace smelt::distributed
