#include "base/parallel.h"

#include <pthread.h>
#include <sched.h>

#include <mutex>
#include <vector>

#include "base/env.h"

namespace smelt {

void spread_threads(int n) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (n <= threads_spread.load()) return;
  threads_spread.store(n);
  if (env_int("SMELT_SPREAD_THREADS", 1, 0, 1) == 0 || omp_get_proc_bind() != omp_proc_bind_false) return;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (pthread_getaffinity_np(pthread_self(), sizeof allowed, &allowed) != 0) return;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  if (cpus.size() < 2) return;
  // Failures only cost speed: a thread that cannot be moved stays where it is.
#pragma omp parallel num_threads(n)
  {
    cpu_set_t own, one;
    CPU_ZERO(&own);
    CPU_ZERO(&one);
    if (pthread_getaffinity_np(pthread_self(), sizeof own, &own) == 0) {
      CPU_SET(cpus[size_t(omp_get_thread_num()) % cpus.size()], &one);
      CPU_AND(&one, &one, &own);
      if (CPU_COUNT(&one) > 0 && pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0) {
        pthread_setaffinity_np(pthread_self(), sizeof own, &own);
      }
    }
  }
}

}  // namespace smelt
