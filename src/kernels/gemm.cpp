// gemm's implementation choice (Auto).
//
// Which implementation is faster depends on the shape (and on the machine: OpenBLAS's kernels
// vary with the CPU it recognizes), so Auto measures instead of guessing. Problems are grouped
// into shape classes: dtype, thread count, and ceil(log2) of M, N and K. The first calls of a new
// class alternate between Own and OpenBlas — each call computes the real result, so measuring
// costs nothing extra — and time each one; the first call of each implementation is a warm-up
// (page faults, packing buffers) and is not counted. After kTimedRuns counted calls of each, the
// class keeps the implementation with the lower best time per flop. Problems under
// kMeasureMinFlops are not worth timing and use Own (no library call overhead).
// SMELT_GEMM=own|openblas forces one implementation; gemm_selection_report() shows the table.
#include "kernels/gemm.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <tuple>

#include "base/env.h"
#include "base/parallel.h"

namespace smelt::kernels {
namespace {

constexpr double kMeasureMinFlops = 2.0 * 96 * 96 * 96;
constexpr int kTimedRuns = 2;

struct ClassKey {
  int dtype_bytes, threads, log_m, log_n, log_k;
  auto tie() const { return std::tie(dtype_bytes, threads, log_m, log_n, log_k); }
  bool operator<(const ClassKey& o) const { return tie() < o.tie(); }
};

struct ClassStats {
  int runs[2] = {0, 0};                        // [own, openblas], warm-up included
  double best_ns_per_flop[2] = {1e300, 1e300};
  GemmImpl choice = GemmImpl::Auto;            // Auto while measuring
};

std::mutex g_mutex;
std::map<ClassKey, ClassStats> g_classes;

int ceil_log2(int64_t v) { return v <= 1 ? 0 : int(std::ceil(std::log2(double(v)))); }

GemmImpl forced_impl() {
  static const GemmImpl forced = [] {
    const std::string v = env_choice("SMELT_GEMM", "auto", {"auto", "own", "openblas"});
    if (v == "own") return GemmImpl::Own;
    if (v == "openblas") return GemmImpl::OpenBlas;
    return GemmImpl::Auto;
  }();
  return forced;
}

template <class T>
ClassKey class_key(int64_t M, int64_t N, int64_t K) {
  return {int(sizeof(T)), num_threads(), ceil_log2(M), ceil_log2(N), ceil_log2(K)};
}

template <class T>
void run_impl(GemmImpl impl, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t rsa,
              int64_t csa, const T* B, int64_t rsb, int64_t csb, T beta, T* C, int64_t rsc,
              int64_t csc) {
  if (impl == GemmImpl::OpenBlas) {
    gemm_openblas(M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc);
  } else {
    gemm_own(M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc);
  }
}

}  // namespace

const char* gemm_impl_name(GemmImpl impl) {
  switch (impl) {
    case GemmImpl::Auto: return "auto";
    case GemmImpl::Own: return "own";
    case GemmImpl::OpenBlas: return "openblas";
  }
  return "?";
}

template <class T>
GemmImpl gemm_choice(int64_t M, int64_t N, int64_t K) {
  if (forced_impl() != GemmImpl::Auto) return forced_impl();
  if (2.0 * double(M) * double(N) * double(K) < kMeasureMinFlops) return GemmImpl::Own;
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_classes.find(class_key<T>(M, N, K));
  return it == g_classes.end() ? GemmImpl::Auto : it->second.choice;
}

template <class T>
void gemm(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t rsa, int64_t csa,
          const T* B, int64_t rsb, int64_t csb, T beta, T* C, int64_t rsc, int64_t csc,
          GemmImpl impl) {
  if (impl == GemmImpl::Auto) impl = gemm_choice<T>(M, N, K);
  if (impl != GemmImpl::Auto) {
    run_impl(impl, M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc);
    return;
  }
  // Measuring: run whichever implementation has had fewer calls in this class.
  const ClassKey key = class_key<T>(M, N, K);
  int slot;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    ClassStats& s = g_classes[key];
    slot = s.runs[1] < s.runs[0] ? 1 : 0;
  }
  const GemmImpl trial = slot == 1 ? GemmImpl::OpenBlas : GemmImpl::Own;
  auto start = std::chrono::steady_clock::now();
  run_impl(trial, M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc);
  double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
                  .count();
  std::lock_guard<std::mutex> lock(g_mutex);
  ClassStats& s = g_classes[key];
  if (s.choice != GemmImpl::Auto) return;  // another thread finished the measurement
  if (s.runs[slot]++ > 0) {
    s.best_ns_per_flop[slot] =
        std::min(s.best_ns_per_flop[slot], ns / (2.0 * double(M) * double(N) * double(K)));
  }
  if (s.runs[0] > kTimedRuns && s.runs[1] > kTimedRuns) {
    s.choice = s.best_ns_per_flop[1] < s.best_ns_per_flop[0] ? GemmImpl::OpenBlas : GemmImpl::Own;
  }
}

std::string gemm_selection_report() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::ostringstream os;
  for (const auto& [key, s] : g_classes) {
    os << (key.dtype_bytes == 4 ? "float32" : "float64") << " threads=" << key.threads
       << " M<=2^" << key.log_m << " N<=2^" << key.log_n << " K<=2^" << key.log_k << ": own ";
    for (int slot = 0; slot < 2; ++slot) {
      if (slot == 1) os << ", openblas ";
      if (s.runs[slot] > 1) {
        os << 1.0 / s.best_ns_per_flop[slot] << " GFLOP/s";
      } else {
        os << "-";
      }
    }
    os << " -> " << gemm_impl_name(s.choice) << "\n";
  }
  return os.str();
}

void gemm_selection_reset() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_classes.clear();
}

#define SMELT_GEMM_INSTANTIATE(T)                                                              \
  template void gemm<T>(int64_t, int64_t, int64_t, T, const T*, int64_t, int64_t, const T*,   \
                        int64_t, int64_t, T, T*, int64_t, int64_t, GemmImpl);                 \
  template GemmImpl gemm_choice<T>(int64_t, int64_t, int64_t);
SMELT_GEMM_INSTANTIATE(float)
SMELT_GEMM_INSTANTIATE(double)
#undef SMELT_GEMM_INSTANTIATE

}  // namespace smelt::kernels
