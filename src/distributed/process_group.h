// The process group behind smelt::distributed (include/smelt/distributed.h): one communication
// thread per process makes every MPI call, MPI_Init_thread included (so MPI_THREAD_FUNNELED is
// all it needs). Other threads submit collectives as Work items and wait for them; the thread
// starts each with its non-blocking MPI call in submission order (MPI matches collectives by that
// order, the same on every rank) and drives them to completion while the caller computes: that is
// the overlap of data-parallel training. docs/distributed.md says how failures end a run.
//
// Failures never hang: a rank whose exception escapes (std::terminate, or Python's excepthook)
// sends a notice to every other rank before it exits; a rank that receives one fails what it waits
// for, and everything it submits later, with an error naming the failed rank. A collective that no
// notice and no completion ends within the timeout fails too.
//
// Without mpirun the group is one local process: collectives return at once and MPI is never
// initialized.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "smelt/tensor.h"

namespace smelt::distributed::detail {

enum class Kind { AllReduce, Broadcast, AllGather, Barrier };
enum class Reduction { Sum, Max, Min };

// One collective: what the communication thread needs, and how it ended.
class Work {
 public:
  Kind kind = Kind::Barrier;
  Reduction reduction = Reduction::Sum;
  Tensor data;      // contiguous: reduced or broadcast in place; all_gather's contribution
  Tensor gathered;  // all_gather: world_size * data.numel() elements
  int root = 0;
  std::string what;  // "all_reduce of 1024 float32", for errors

  // Blocks until the collective finished on this rank; throws its error (a failed rank, a
  // timeout). Returns the seconds this call waited.
  double wait();
  bool done();
  // Seconds from start (the MPI call issued) to completion on this rank; 0 before.
  double seconds() const;

 private:
  friend class ProcessGroup;
  void finish(std::string error);
  std::mutex mutex_;
  std::condition_variable finished_;
  bool done_ = false;
  std::atomic<bool> done_flag_{false};  // done_, readable without the mutex (wait's spin)
  std::string error_;
  std::chrono::steady_clock::time_point started_, ended_;
};
using WorkPtr = std::shared_ptr<Work>;

class ProcessGroup {
 public:
  // Initializes the group (once per process; later calls check `expected_world_size` only).
  static ProcessGroup& init(int expected_world_size, double timeout_seconds);
  static bool initialized();
  // The group; an error naming `where` when init() has not run.
  static ProcessGroup& get(const char* where);

  int rank() const { return rank_; }
  int world_size() const { return world_; }
  bool local() const { return world_ == 1 && !launched_; }
  double timeout_seconds() const { return timeout_seconds_; }

  // Queues `work` for the communication thread (in order); returns at once. With one rank the
  // work is complete on return.
  WorkPtr submit(WorkPtr work);

  // This rank failed with `message`: tells every other rank (waiting a few seconds for their
  // acknowledgement, so that they report it before mpirun stops them). Any thread may call it,
  // once; later calls do nothing.
  void notify_failure(const std::string& message);
  // Why the group stopped (a failed rank, a timeout); empty while it runs.
  std::string failure() const;
  // Whether that failure came from another rank (a notice), not from this one.
  bool failed_remotely() const;

  // Ends the communication thread (MPI_Finalize when nothing failed). Run at exit.
  void shutdown();

 private:
  ProcessGroup() = default;
  struct Mpi;  // the MPI state, defined where <mpi.h> is included
  void run(int expected_world_size);
  void fail_everything(const std::string& error, bool remote);

  int rank_ = 0, world_ = 1;
  bool launched_ = false;
  double timeout_seconds_ = 300;
  std::unique_ptr<Mpi> mpi_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::string failure_;
  bool failed_remotely_ = false;
  bool notified_ = false;
};

// The element type MPI moves for `dtype` (float32, float64, int64; also uint8 for packed bytes);
// an error naming `where` for any other.
void check_wire_dtype(DType dtype, const char* where);

}  // namespace smelt::distributed::detail
