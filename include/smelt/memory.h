// What smelt holds in memory now, countable at any time: live tensor storages and their bytes,
// and autograd nodes. A training loop whose counts grow from step to step leaks (a tensor kept in
// a list, a graph kept alive through a saved output). With allocation tracking on
// (SMELT_TRACK_ALLOC=1, or set_alloc_tracking(true)) each storage also records where it was
// allocated, and a LeakScope reports the storages made inside it that are still alive:
//
//   smelt::LeakScope scope;
//   for (int step = 0; step < 100; ++step) train_step();
//   std::cout << scope.report();   // "2 storages (8192 bytes) allocated in this scope are
//                                  //  alive ...:\n  4096 bytes by matmul, at train_step <- main"
// (function names need their program linked with -rdynamic; frames in smelt's library are
// skipped).
#pragma once

#include <cstdint>
#include <string>

namespace smelt {

struct MemoryStats {
  int64_t storages = 0;        // live Storage objects (smelt's own memory and wrapped memory)
  int64_t bytes = 0;           // their bytes
  int64_t autograd_nodes = 0;  // live autograd nodes (backward functions and leaf accumulators)
  int64_t peak_bytes = 0;      // the most `bytes` reached since the start or reset_memory_peak()
};

MemoryStats memory_stats();
// Starts a new peak from the bytes live now (to measure one phase: a training loop's steps).
void reset_memory_peak();

// Whether new storages record their allocation site (the op being run and a few stack frames);
// starts as SMELT_TRACK_ALLOC says. Storages made while it was off have no site.
void set_alloc_tracking(bool on);
bool alloc_tracking();

class LeakScope {
 public:
  LeakScope();
  // Counts now minus at the scope's start (negative when it freed more than it made).
  MemoryStats grown() const;
  // The storages allocated since the start that are still alive, largest first (at most
  // `max_sites` listed), with their sites when tracking was on; "" when there are none.
  std::string report(int max_sites = 20) const;

 private:
  MemoryStats start_;
  uint64_t first_serial_;
};

}  // namespace smelt
