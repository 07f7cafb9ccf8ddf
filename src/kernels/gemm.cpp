// gemm's implementation choice (Auto).
//
// Which implementation is faster depends on the shape (and on the machine: OpenBLAS's kernels
// vary with the CPU it recognizes), so Auto measures instead of guessing. Problems are grouped
// into shape classes: dtype, thread count, and ceil(log2) of M, N and K.
//
// Determinism: Own and OpenBlas round differently, so the implementation is what decides the
// bits. The first call of a new class therefore measures both on private scratch buffers of its
// shape and layout (one warm-up and kTimedRuns timed runs each, alternating, under the table's
// lock; OpenBLAS must be 10% faster to be chosen), records
// the decision, and only then computes the caller's result, with the decided implementation —
// as does every later call of the class. So within a process the same call gives bitwise-identical
// results every time, the first call included. Problems under kMeasureMinFlops are not worth
// timing and always use Own (no library call overhead), as do all problems with M = 1 or N = 1.
//
// Across processes: the decision is measured again in each process (nothing is persisted), and a
// close race may go either way, so two runs may use different implementations for a class (the
// results then differ in the last bits). SMELT_GEMM=own|openblas pins the implementation for
// bitwise reproducibility across runs on the same machine; gemm_selection_report() shows the table.
#include "kernels/gemm.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "base/env.h"
#include "base/parallel.h"

namespace smelt::kernels {
namespace {

constexpr double kMeasureMinFlops = 2.0 * 96 * 96 * 96;
constexpr int kTimedRuns = 4;
constexpr double kOpenBlasMargin = 1.1;

struct ClassKey {
  int dtype_bytes, threads, log_m, log_n, log_k;
  auto tie() const { return std::tie(dtype_bytes, threads, log_m, log_n, log_k); }
  bool operator<(const ClassKey& o) const { return tie() < o.tie(); }
};

struct ClassStats {
  double best_ns_per_flop[2] = {1e300, 1e300};  // [own, openblas]
  GemmImpl choice = GemmImpl::Own;
};

std::mutex g_gemm_mutex;
std::map<ClassKey, ClassStats> g_classes;

int ceil_log2(int64_t v) { return v <= 1 ? 0 : int(std::ceil(std::log2(double(v)))); }

GemmImpl forced_gemm_impl() {
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
              int64_t csc, const GemmEpilogue* epilogue = nullptr) {
  if (impl == GemmImpl::OpenBlas) {
    gemm_openblas(M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc, epilogue);
  } else {
    gemm_own(M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc, epilogue);
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

namespace {

// Best times per flop of Own and OpenBlas ([own, openblas]) on scratch matrices shaped like the
// caller's problem: the same M, N, K and the same orientation of A, B and C (row- or
// column-major), values in [-1, 1). One warm-up run of each (page faults, packing buffers) is not
// counted; then kTimedRuns rounds alternate the two, so that a burst of load on a shared machine
// slows both alike instead of deciding the class for the whole process (one encoder process in
// three took OpenBLAS's SSE3 kernels, 4x slower, when each side was timed in one stretch).
template <class T>
void measure_ns_per_flop(int64_t M, int64_t N, int64_t K, bool a_rows, bool b_rows, bool c_rows,
                         double best[2]) {
  std::vector<T> A(size_t(M * K)), B(size_t(K * N)), C(size_t(M * N));
  uint32_t state = 12345;
  for (std::vector<T>* v : {&A, &B}) {
    for (T& x : *v) {
      state = state * 1664525u + 1013904223u;
      x = T(int32_t(state >> 8) - (1 << 23)) / T(1 << 23);
    }
  }
  const int64_t rsa = a_rows ? K : 1, csa = a_rows ? 1 : M;
  const int64_t rsb = b_rows ? N : 1, csb = b_rows ? 1 : K;
  const int64_t rsc = c_rows ? N : 1, csc = c_rows ? 1 : M;
  best[0] = best[1] = 1e300;
  for (int run = 0; run <= kTimedRuns; ++run) {
    for (int slot = 0; slot < 2; ++slot) {
      const auto start = std::chrono::steady_clock::now();
      run_impl<T>(slot == 0 ? GemmImpl::Own : GemmImpl::OpenBlas, M, N, K, T(1), A.data(), rsa, csa, B.data(),
                  rsb, csb, T(0), C.data(), rsc, csc);
      const double ns =
          std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
      if (run > 0) best[slot] = std::min(best[slot], ns);
    }
  }
  for (int slot = 0; slot < 2; ++slot) best[slot] /= 2.0 * double(M) * double(N) * double(K);
}

// M = 1 is never measured either: Own's row-vector path reads B once, in place, where OpenBLAS
// packs it (MobileNetV2's classifier, 1280 -> 1000 with a transposed weight: own 60-150 us,
// OpenBLAS 400 us at 1 and 2 threads). A measurement on a busy machine could still pick OpenBLAS
// (one run of each), and this keeps the bits of such products the same in every process.
// N = 1 (one column: a 1x1 convolution on a 1x1 image) is the same product transposed, and takes
// the same path.
bool worth_measuring(int64_t M, int64_t N, int64_t K) {
  return M > 1 && N > 1 && 2.0 * double(M) * double(N) * double(K) >= kMeasureMinFlops;
}

// The implementation for this problem's class, measuring it first when the class is new.
template <class T>
GemmImpl decide(int64_t M, int64_t N, int64_t K, bool a_rows, bool b_rows, bool c_rows) {
  if (forced_gemm_impl() != GemmImpl::Auto) return forced_gemm_impl();
  if (!worth_measuring(M, N, K)) return GemmImpl::Own;
  const ClassKey key = class_key<T>(M, N, K);
  // Held while measuring: a second thread meeting the same new class waits for the decision
  // instead of computing its result with an implementation the class may not keep.
  std::lock_guard<std::mutex> lock(g_gemm_mutex);
  auto it = g_classes.find(key);
  if (it != g_classes.end()) return it->second.choice;
  ClassStats s;
  measure_ns_per_flop<T>(M, N, K, a_rows, b_rows, c_rows, s.best_ns_per_flop);
  // OpenBLAS only when clearly faster: a near tie is noise, and Own keeps the bits the same in
  // every process.
  s.choice = s.best_ns_per_flop[1] * kOpenBlasMargin < s.best_ns_per_flop[0] ? GemmImpl::OpenBlas : GemmImpl::Own;
  g_classes.emplace(key, s);
  return s.choice;
}

}  // namespace

template <class T>
GemmImpl gemm_choice(int64_t M, int64_t N, int64_t K) {
  if (forced_gemm_impl() != GemmImpl::Auto) return forced_gemm_impl();
  if (!worth_measuring(M, N, K)) return GemmImpl::Own;
  std::lock_guard<std::mutex> lock(g_gemm_mutex);
  auto it = g_classes.find(class_key<T>(M, N, K));
  return it == g_classes.end() ? GemmImpl::Auto : it->second.choice;
}

template <class T>
void gemm(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t rsa, int64_t csa,
          const T* B, int64_t rsb, int64_t csb, T beta, T* C, int64_t rsc, int64_t csc,
          GemmImpl impl, const GemmEpilogue* epilogue) {
  // The orientation (a unit column stride means row-major) is part of what is measured, not of
  // the class key: the decision stays one per class whichever layout meets it first.
  if (impl == GemmImpl::Auto) impl = decide<T>(M, N, K, csa == 1, csb == 1, csc == 1);
  run_impl(impl, M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc, epilogue);
}

std::string gemm_selection_report() {
  std::lock_guard<std::mutex> lock(g_gemm_mutex);
  std::ostringstream os;
  for (const auto& [key, s] : g_classes) {
    os << (key.dtype_bytes == 4 ? "float32" : "float64") << " threads=" << key.threads
       << " M<=2^" << key.log_m << " N<=2^" << key.log_n << " K<=2^" << key.log_k << ": own ";
    for (int slot = 0; slot < 2; ++slot) {
      if (slot == 1) os << ", openblas ";
      os << 1.0 / s.best_ns_per_flop[slot] << " GFLOP/s";
    }
    os << " -> " << gemm_impl_name(s.choice) << "\n";
  }
  return os.str();
}

void gemm_selection_reset() {
  std::lock_guard<std::mutex> lock(g_gemm_mutex);
  g_classes.clear();
}

#define SMELT_GEMM_INSTANTIATE(T)                                                              \
  template void gemm<T>(int64_t, int64_t, int64_t, T, const T*, int64_t, int64_t, const T*,   \
                        int64_t, int64_t, T, T*, int64_t, int64_t, GemmImpl,                  \
                        const GemmEpilogue*);                                                 \
  template GemmImpl gemm_choice<T>(int64_t, int64_t, int64_t);
SMELT_GEMM_INSTANTIATE(float)
SMELT_GEMM_INSTANTIATE(double)
#undef SMELT_GEMM_INSTANTIATE

}  // namespace smelt::kernels
