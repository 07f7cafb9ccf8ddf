// Data-parallel training across processes, on MPI (library smelt_distributed; CMake target
// smelt::distributed). docs/distributed.md is the guide.
//
//   // mpirun -np 2 ./train
//   smelt::distributed::init();
//   Net net;
//   smelt::distributed::DistributedDataParallel ddp(net);  // rank 0's weights everywhere
//   optim::SGD opt(net.parameters(), {.lr = 0.1});
//   data::DataLoader loader(train, {.batch_size = 32, .shuffle = true, .seed = 1,
//                                   .num_shards = distributed::world_size(),
//                                   .shard = distributed::rank()});
//   for (const data::Batch& b : loader) {
//     opt.zero_grad();
//     cross_entropy(ddp(b.inputs), b.targets).backward();  // gradients averaged over the ranks
//     opt.step();
//   }
//
// Every rank runs the same program; collectives must be called by every rank in the same order.
// Outside mpirun the world is this one process (rank 0 of 1) and collectives do nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "smelt/compile.h"
#include "smelt/io.h"
#include "smelt/tensor.h"

namespace smelt::nn {
class Module;
}
namespace smelt::optim {
class Optimizer;
}

namespace smelt::distributed {

struct InitOptions {
  // > 0: the number of processes the program expects; an error when mpirun started another
  // number, or when it was not started by mpirun and this is more than 1. 0: as launched.
  int world_size = 0;
  // A collective that does not complete on this rank within this many seconds fails (a rank that
  // stopped without notice, or deadlocked); the environment's SMELT_DISTRIBUTED_TIMEOUT, when
  // set, wins. A rank whose exception escapes tells the others at once (no waiting for this).
  double timeout_seconds = 300;
};

// Joins the world mpirun started (MPI_Init on a communication thread of smelt's); once per
// process, later calls only check `world_size`. From then on an exception that escapes on any
// thread of this rank is reported to every other rank, which stop with an error naming it.
void init(const InitOptions& options = {});
bool is_initialized();
// Tells every other rank that this one failed with `message` (they stop with an error naming this
// rank), waiting a few seconds for them to hear it. init() arranges this for C++ exceptions that
// escape (std::terminate); smelt.distributed.init does it from Python's sys.excepthook.
void report_failure(const std::string& message);
int rank();        // 0 .. world_size() - 1
int world_size();

enum class ReduceOp { Sum, Mean, Max, Min };

// In place on every rank: each element becomes the reduction of that element over the ranks.
// The tensor must be contiguous, float32, float64 or int64 (Mean: floating point only), and of
// the same shape and dtype on every rank (checked: a mismatch is an error on every rank).
void all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::Sum);
// In place: every rank's tensor becomes `root`'s.
void broadcast(const Tensor& tensor, int root = 0);
// Every rank's tensor, in rank order (new tensors of its shape and dtype).
std::vector<Tensor> all_gather(const Tensor& tensor);
// Returns once every rank has called it.
void barrier();

// io::save_checkpoint written by rank 0 only (atomically: a temporary file renamed into place);
// every rank returns once the file is complete.
void save_checkpoint(const std::string& path, const nn::Module& module, const optim::Optimizer& optimizer,
                     const io::Metadata& metadata = {});

struct DDPOptions {
  // Gradients are all-reduced in buckets of about this many MiB, each as soon as all its
  // gradients are computed, while the backward computes the rest.
  double bucket_cap_mb = 25;
  // Copy rank 0's buffers (batch norm's running statistics) to every rank before each forward,
  // as PyTorch does; off: each rank keeps its own.
  bool broadcast_buffers = true;
};

// What the last synchronized backward (or compiled step) spent on communication.
struct CommStats {
  int buckets = 0;
  int64_t bytes = 0;             // all-reduced per rank
  double comm_seconds = 0;       // sum over buckets of issue -> completion
  double blocked_seconds = 0;    // time the training thread waited for them
  // The part of the communication hidden behind computation: 1 - blocked / comm (0 when none).
  double overlap() const { return comm_seconds > 0 ? std::max(0.0, 1.0 - blocked_seconds / comm_seconds) : 0.0; }
};

class DistributedStep;

// Data-parallel training of `module` (which must outlive the wrapper): construction checks that
// every rank holds the same parameters (names, shapes, dtypes; a mismatch is an error on every
// rank) and copies rank 0's parameters and buffers to all. Each backward through a forward of any
// rank then leaves in every parameter's .grad the mean over the ranks of their gradients:
// buckets of gradients (reverse registration order, by dtype) are all-reduced as soon as their
// gradients are accumulated, overlapped with the rest of the backward, and the backward returns
// once all are done. A parameter a rank did not use contributes zeros there; one no rank used
// keeps no .grad. One backward per forward, as in PyTorch.
class DistributedDataParallel {
 public:
  explicit DistributedDataParallel(nn::Module& module, DDPOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // The module's forward, after prepare_forward().
  Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }
  nn::Module& module() { return module_; }
  // What forward() does before calling the module (for a caller that calls it itself, as the
  // Python wrapper does for forwards of several arguments): rank 0's buffers to every rank when
  // broadcast_buffers, and the end of whatever a backward that threw left in flight.
  void prepare_forward();

  // While a guard lives, backward passes only accumulate locally (gradient accumulation); the
  // first backward after it all-reduces what was accumulated.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp);
    ~NoSync();
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool previous_;
  };
  NoSync no_sync() { return NoSync(*this); }
  // What NoSync switches: whether a backward all-reduces (true) or only accumulates.
  void set_gradient_sync(bool on);
  bool gradient_sync() const;

  // compile_step (smelt/compile.h) whose plan all-reduces the gradients in buckets before the
  // update: each bucket's all-reduce is a plan step issued as soon as its gradients are computed
  // and waited for right before their first reader, the backward running in between. Calls with
  // StepOptions::accumulation_steps that only accumulate communicate nothing.
  DistributedStep compile_step(CompiledFunction::Fn loss_fn, optim::Optimizer& optimizer,
                               StepOptions step = {}, CompileOptions options = {});

  // Rank 0's buffers to every rank (forward and compiled steps do this when broadcast_buffers).
  void broadcast_buffers();
  const CommStats& last_stats() const;
  const DDPOptions& options() const { return options_; }

  struct State;  // the buckets and hooks (src/distributed/ddp.cpp)

 private:
  friend class DistributedStep;
  nn::Module& module_;
  DDPOptions options_;
  std::shared_ptr<State> state_;
};

// A compiled data-parallel training step: call it as the CompiledFunction it wraps.
class DistributedStep {
 public:
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);
  CompiledFunction& compiled() { return compiled_; }

 private:
  friend class DistributedDataParallel;
  DistributedStep(DistributedDataParallel& ddp, CompiledFunction compiled, std::shared_ptr<CommStats> stats)
      : ddp_(&ddp), compiled_(std::move(compiled)), stats_(std::move(stats)) {}
  DistributedDataParallel* ddp_;
  CompiledFunction compiled_;
  std::shared_ptr<CommStats> stats_;
};

}  // namespace smelt::distributed
