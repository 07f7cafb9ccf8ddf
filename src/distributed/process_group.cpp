#include "distributed/process_group.h"

#include <mpi.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include "smelt/error.h"

namespace smelt::distributed::detail {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kFailureTag = 1;  // on the control communicator: "this rank failed: <message>"
constexpr int kAckTag = 2;      // the answer to a failure notice
// All-reduces and broadcasts go as calls of at most this many bytes, all issued at once: MPI counts
// are ints, and OpenMPI's non-blocking all-reduce of one large buffer ran at a tenth of the rate
// of 4 MiB pieces here (64 MiB: 0.24 GB/s against 2-3.5 GB/s; bench/distributed/ddp_bench.cpp).
constexpr int64_t kChunkBytes = int64_t(4) << 20;
// How long a failing rank waits for the others to acknowledge its notice.
constexpr double kNoticeSeconds = 5;

ProcessGroup* g_group = nullptr;
std::mutex g_init_mutex;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

MPI_Datatype wire_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Int64: return MPI_INT64_T;
    case DType::UInt8: return MPI_UINT8_T;
    default: return MPI_DATATYPE_NULL;
  }
}

MPI_Op wire_op(Reduction r) {
  switch (r) {
    case Reduction::Sum: return MPI_SUM;
    case Reduction::Max: return MPI_MAX;
    case Reduction::Min: return MPI_MIN;
  }
  return MPI_SUM;
}

// Launched by mpirun (OpenMPI's variables; PMI_SIZE for other launchers).
int launched_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    if (const char* v = std::getenv(name)) return std::atoi(v);
  }
  return 0;
}

std::string current_exception_text() {
  std::exception_ptr e = std::current_exception();
  if (!e) return "std::terminate was called without an exception";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

// An exception escaped on this rank: tell the others, say so, and exit (never MPI_Finalize: the
// others are not all going to reach it).
[[noreturn]] void on_terminate() {
  const std::string what = current_exception_text();
  if (g_group && !g_group->failed_remotely()) {
    g_group->notify_failure(what);
    std::fprintf(stderr, "smelt.distributed: rank %d failed: %s\n", g_group->rank(), what.c_str());
  } else {
    std::fprintf(stderr, "smelt.distributed: rank %d stopped: %s\n", g_group ? g_group->rank() : -1,
                 what.c_str());
  }
  std::fflush(stderr);
  std::_Exit(1);
}

void shutdown_at_exit() {
  if (g_group) g_group->shutdown();
}

}  // namespace

// ---- Work

void Work::finish(std::string error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = std::move(error);
    ended_ = Clock::now();
    done_ = true;
    done_flag_.store(true, std::memory_order_release);
  }
  finished_.notify_all();
}

double Work::wait() {
  const auto start = Clock::now();
  // Yield for a while first: most collectives of a step end within microseconds of the call, and
  // a thread blocked on the condition variable takes tens of them to wake.
  while (!done_flag_.load(std::memory_order_acquire) && seconds_between(start, Clock::now()) < 1e-3)
    std::this_thread::yield();
  std::unique_lock<std::mutex> lock(mutex_);
  finished_.wait(lock, [&] { return done_; });
  SMELT_CHECK(error_.empty()) << error_;
  return seconds_between(start, Clock::now());
}

bool Work::done() {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

double Work::seconds() const {
  return done_ ? seconds_between(started_, ended_) : 0.0;
}

// ---- the process group

struct ProcessGroup::Mpi {
  std::thread thread;
  std::deque<WorkPtr> queue;  // guarded by ProcessGroup::mutex_, as the fields below
  bool stopping = false;
  bool ready = false;
  std::string init_error;
  std::string notice;  // a failure notice to send
  bool notice_sent = false;
  std::condition_variable notice_done;
  MPI_Comm data = MPI_COMM_NULL, control = MPI_COMM_NULL;
};

void check_wire_dtype(DType dtype, const char* where) {
  SMELT_CHECK(wire_type(dtype) != MPI_DATATYPE_NULL && dtype != DType::UInt8)
      << where << ": a " << dtype_name(dtype)
      << " tensor cannot be communicated; valid dtypes: float32, float64, int64";
}

bool ProcessGroup::initialized() {
  std::lock_guard<std::mutex> lock(g_init_mutex);
  return g_group != nullptr;
}

ProcessGroup& ProcessGroup::get(const char* where) {
  std::lock_guard<std::mutex> lock(g_init_mutex);
  SMELT_CHECK(g_group) << where << ": smelt::distributed::init() has not been called in this process";
  return *g_group;
}

ProcessGroup& ProcessGroup::init(int expected_world_size, double timeout_seconds) {
  SMELT_CHECK(timeout_seconds > 0) << "distributed::init: timeout_seconds must be > 0, got " << timeout_seconds;
  SMELT_CHECK(expected_world_size >= 0)
      << "distributed::init: world_size must be >= 0 (0: as launched), got " << expected_world_size;
  std::lock_guard<std::mutex> lock(g_init_mutex);
  const int launched = launched_world_size();
  if (g_group) {
    SMELT_CHECK(expected_world_size == 0 || expected_world_size == g_group->world_)
        << "distributed::init: already initialized with " << g_group->world_
        << " processes, now asked for " << expected_world_size;
    return *g_group;
  }
  SMELT_CHECK(launched > 0 || expected_world_size <= 1)
      << "distributed::init: a world of " << expected_world_size
      << " processes was asked for, but this process was not started by mpirun (no "
         "OMPI_COMM_WORLD_SIZE in its environment); run it as `mpirun -np "
      << expected_world_size << " <program>`";
  SMELT_CHECK(launched == 0 || expected_world_size == 0 || launched == expected_world_size)
      << "distributed::init: a world of " << expected_world_size << " processes was asked for, but mpirun started "
      << launched << "; run it with `mpirun -np " << expected_world_size << "`";
  auto* group = new ProcessGroup();  // lives until the process exits (shutdown runs at exit)
  group->timeout_seconds_ = timeout_seconds;
  if (launched > 0) {
    group->launched_ = true;
    group->mpi_ = std::make_unique<Mpi>();
    group->mpi_->thread = std::thread([group, expected_world_size] { group->run(expected_world_size); });
    std::unique_lock<std::mutex> wait_lock(group->mutex_);
    group->wake_.wait(wait_lock, [&] { return group->mpi_->ready; });
    if (!group->mpi_->init_error.empty()) {
      const std::string error = group->mpi_->init_error;
      wait_lock.unlock();
      group->mpi_->thread.join();
      delete group;
      SMELT_CHECK(false) << error;
    }
    std::set_terminate(on_terminate);
  }
  g_group = group;
  std::atexit(shutdown_at_exit);
  return *group;
}

WorkPtr ProcessGroup::submit(WorkPtr work) {
  if (!launched_) {  // one local process: every collective is already complete
    work->started_ = Clock::now();
    if (work->kind == Kind::AllGather) work->gathered.copy_(work->data.reshape(work->gathered.shape()));
    work->finish("");
    return work;
  }
  if (work->kind != Kind::Barrier && work->data.numel() == 0) {  // nothing to move (every rank agreed)
    work->started_ = Clock::now();
    work->finish("");
    return work;
  }
  if (work->kind == Kind::AllGather) {
    SMELT_CHECK(work->data.numel() <= INT_MAX)
        << work->what << ": at most " << INT_MAX << " elements per rank, got " << work->data.numel();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_.empty()) {
      mpi_->queue.push_back(work);
      wake_.notify_all();
      return work;
    }
  }
  work->finish(failure());
  return work;
}

std::string ProcessGroup::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

bool ProcessGroup::failed_remotely() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failed_remotely_;
}

void ProcessGroup::notify_failure(const std::string& message) {
  if (!launched_ || world_ == 1) return;
  std::unique_lock<std::mutex> lock(mutex_);
  if (notified_ || failed_remotely_ || !mpi_->thread.joinable()) return;
  notified_ = true;
  mpi_->notice = message.empty() ? std::string("(no message)") : message;
  wake_.notify_all();
  mpi_->notice_done.wait_for(lock, std::chrono::duration<double>(kNoticeSeconds + 1),
                             [&] { return mpi_->notice_sent; });
}

void ProcessGroup::fail_everything(const std::string& error, bool remote) {
  std::deque<WorkPtr> queued;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_.empty()) {
      failure_ = error;
      failed_remotely_ = remote;
    }
    queued.swap(mpi_->queue);
  }
  for (const WorkPtr& w : queued) w->finish(error);
}

void ProcessGroup::shutdown() {
  if (!launched_) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!mpi_->thread.joinable()) return;
    mpi_->stopping = true;
    wake_.notify_all();
  }
  mpi_->thread.join();
  // A failed run never finalizes MPI (the other ranks will not all get there): it ends here with
  // a failing status whatever main returned, so that every rank of it exits nonzero.
  if (!failure().empty()) std::_Exit(1);
}

// The communication thread.
void ProcessGroup::run(int expected_world_size) {
  Mpi& m = *mpi_;
  {
    int provided = 0;
    std::string error;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
      error = "distributed::init: MPI_Init_thread failed";
    } else {
      MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
      MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
      MPI_Comm_size(MPI_COMM_WORLD, &world_);
      MPI_Comm_dup(MPI_COMM_WORLD, &m.data);
      MPI_Comm_dup(MPI_COMM_WORLD, &m.control);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    m.init_error = error;
    m.ready = true;
    wake_.notify_all();
    if (!error.empty()) return;
  }

  // Every collective becomes pieces (one MPI call each), started one at a time in submission
  // order: the same order on every rank, as MPI requires. One piece in flight at a time ran
  // large all-reduces several times faster here than all of a buffer's pieces at once, or one
  // call for the whole buffer (64 MiB: 30 ms against 220-300 ms; bench/distributed/ddp_bench.cpp).
  struct Piece {
    WorkPtr work;
    std::function<int(MPI_Request*)> issue;
    bool last = false;  // its completion completes the work
  };
  std::deque<Piece> pieces;
  std::optional<Piece> in_flight;
  MPI_Request request = MPI_REQUEST_NULL;
  Clock::time_point issued;

  auto split = [&](const WorkPtr& w) {
    const MPI_Datatype type = w->kind == Kind::Barrier ? MPI_DATATYPE_NULL : wire_type(w->data.dtype());
    const size_t first = pieces.size();
    auto chunks = [&](auto call) {
      char* base = static_cast<char*>(w->data.raw_data());
      const int64_t n = w->data.numel(), item = int64_t(dtype_size(w->data.dtype()));
      const int64_t chunk = std::max<int64_t>(1, kChunkBytes / item);
      for (int64_t at = 0; at < n; at += chunk) {
        void* p = base + at * item;
        const int count = int(std::min(chunk, n - at));
        pieces.push_back({w, [=](MPI_Request* r) { return call(p, count, r); }});
      }
    };
    switch (w->kind) {
      case Kind::AllReduce:
        chunks([=, comm = m.data, op = wire_op(w->reduction)](void* p, int count, MPI_Request* r) {
          return MPI_Iallreduce(MPI_IN_PLACE, p, count, type, op, comm, r);
        });
        break;
      case Kind::Broadcast:
        chunks([=, comm = m.data, root = w->root](void* p, int count, MPI_Request* r) {
          return MPI_Ibcast(p, count, type, root, comm, r);
        });
        break;
      case Kind::AllGather:
        pieces.push_back({w, [=, comm = m.data](MPI_Request* r) {
                            const int count = int(w->data.numel());
                            return MPI_Iallgather(w->data.raw_data(), count, type, w->gathered.raw_data(), count,
                                                  type, comm, r);
                          }});
        break;
      case Kind::Barrier:
        pieces.push_back({w, [comm = m.data](MPI_Request* r) { return MPI_Ibarrier(comm, r); }});
        break;
    }
    SMELT_INTERNAL_CHECK(pieces.size() > first) << w->what << ": no MPI call";
    pieces.back().last = true;
  };

  // Fails what is in flight and queued (the group has failed: nothing more will complete).
  auto abandon = [&](const std::string& error) {
    if (in_flight) in_flight->work->finish(error);
    in_flight.reset();
    for (const Piece& p : pieces) p.work->finish(error);
    pieces.clear();
  };

  // A notice from a failed rank: report it, acknowledge it, fail everything.
  auto poll_notices = [&] {
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kFailureTag, m.control, &flag, &status);
    if (!flag) return;
    int length = 0;
    MPI_Get_count(&status, MPI_CHAR, &length);
    std::string text(size_t(std::max(length, 0)), '\0');
    MPI_Recv(text.data(), length, MPI_CHAR, status.MPI_SOURCE, kFailureTag, m.control, MPI_STATUS_IGNORE);
    const std::string error = "rank " + std::to_string(status.MPI_SOURCE) + " failed: " + text;
    std::fprintf(stderr, "smelt.distributed: rank %d stops: %s\n", rank_, error.c_str());
    std::fflush(stderr);
    char ack = 1;
    MPI_Request r;
    MPI_Isend(&ack, 1, MPI_CHAR, status.MPI_SOURCE, kAckTag, m.control, &r);
    MPI_Request_free(&r);
    fail_everything(error, true);
    abandon(error);
  };

  // This rank failed: tell every other rank, wait (bounded) for their acknowledgements.
  auto send_notice = [&](const std::string& text) {
    std::vector<MPI_Request> requests;
    std::vector<char> acks(size_t(world_), 0);
    for (int r = 0; r < world_; ++r) {
      if (r == rank_) continue;
      MPI_Request s, a;
      MPI_Isend(text.data(), int(text.size()), MPI_CHAR, r, kFailureTag, m.control, &s);
      MPI_Irecv(&acks[size_t(r)], 1, MPI_CHAR, r, kAckTag, m.control, &a);
      requests.push_back(s);
      requests.push_back(a);
    }
    const auto begin = Clock::now();
    int all = 0;
    while (!all && seconds_between(begin, Clock::now()) < kNoticeSeconds) {
      poll_notices();  // another rank failing at the same time waits for this one's acknowledgement
      MPI_Testall(int(requests.size()), requests.data(), &all, MPI_STATUSES_IGNORE);
      if (!all) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const std::string error = "this rank failed: " + text;
    fail_everything(error, false);
    abandon(error);
    std::lock_guard<std::mutex> lock(mutex_);
    m.notice_sent = true;
    m.notice_done.notify_all();
  };

  // Polling: right after any progress the thread only yields between tests (a step's buckets
  // follow each other closely, and a sleeping thread takes tens of microseconds to wake); after
  // kBusySeconds without progress it sleeps between tests, or waits for work when it has none.
  constexpr double kBusySeconds = 2e-3;
  auto last_progress = Clock::now();
  while (true) {
    std::deque<WorkPtr> fresh;
    std::string notice;
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // Idle, it still looks for failure notices now and then, so that a failed rank hears back.
      if (!in_flight && pieces.empty() && m.queue.empty() && !m.stopping && m.notice.empty() &&
          seconds_between(last_progress, Clock::now()) > kBusySeconds)
        wake_.wait_for(lock, std::chrono::milliseconds(20));
      fresh.swap(m.queue);
      if (!m.notice_sent) notice = m.notice;
      stopping = m.stopping;
    }
    if (!notice.empty()) send_notice(notice);
    poll_notices();
    const std::string failed = failure();
    for (const WorkPtr& w : fresh) {
      if (!failed.empty()) {
        w->finish(failed);
        continue;
      }
      try {  // nothing may escape this thread (std::terminate would end the process)
        split(w);
      } catch (const std::exception& e) {
        w->finish(w->what + ": " + e.what());
      }
    }
    bool progressed = !fresh.empty();
    if (in_flight) {
      int done = 0;
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (done) {
        if (in_flight->last) in_flight->work->finish("");
        in_flight.reset();
        progressed = true;
      } else if (seconds_between(issued, Clock::now()) > timeout_seconds_) {
        const std::string error = in_flight->work->what + " got no answer from every rank within " +
                                  std::to_string(int(timeout_seconds_)) +
                                  " s (a rank stopped calling collectives, or calls them in another order)";
        fail_everything(error, false);
        abandon(error);
      }
    }
    while (!in_flight && !pieces.empty()) {
      Piece p = std::move(pieces.front());
      pieces.pop_front();
      issued = Clock::now();
      if (p.work->started_ == Clock::time_point()) p.work->started_ = issued;
      const int rc = p.issue(&request);
      if (rc == MPI_SUCCESS) {
        in_flight = std::move(p);
        break;
      }
      // The work's other pieces cannot complete it: drop them too.
      const WorkPtr w = p.work;
      w->finish(w->what + ": the MPI call failed (error code " + std::to_string(rc) + ")");
      std::erase_if(pieces, [&](const Piece& q) { return q.work == w; });
      progressed = true;
    }
    if (stopping && !in_flight && pieces.empty()) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (m.queue.empty()) break;
    }
    if (progressed) {
      last_progress = Clock::now();
    } else if (seconds_between(last_progress, Clock::now()) < kBusySeconds) {
      std::this_thread::yield();
    } else if (in_flight) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));  // a long collective: back off
    }
  }
  if (failure().empty()) {
    MPI_Comm_free(&m.data);
    MPI_Comm_free(&m.control);
    MPI_Finalize();
  }
}

}  // namespace smelt::distributed::detail
