// The machine's ceilings, measured in the same run as the workloads: STREAM-style copy and triad
// bandwidth over arrays far larger than the last-level cache (all threads), a triad whose arrays
// stay in the last-level cache (the ceiling of workloads whose data fits there, such as the
// 8 MiB softmax), and OpenBLAS's sgemm rate at the GEMM workloads' size. run.py turns the times into GB/s and GFLOP/s with the usual
// STREAM byte counts (no write-allocate traffic), like the workloads' byte counts.
#include <cblas.h>
#include <omp.h>

#include <cstdint>
#include <memory>

#include "smelt/creation.h"
#include "smelt/tensor.h"
#include "suite/workload.h"

namespace smelt::bench {
namespace {

constexpr int64_t kStreamElements = int64_t(32) << 20;  // 128 MiB per float array, 4x the L3
constexpr int64_t kCachedElements = int64_t(1) << 20;   // 4 MiB per array: 12 MiB in the L3

struct StreamArrays {
  int64_t n;
  Tensor a, b, c;  // (n), float
  explicit StreamArrays(int64_t n) : n(n), a(empty({n})), b(empty({n})), c(empty({n})) {
    float *pa = a.data<float>(), *pb = b.data<float>(), *pc = c.data<float>();
    // First touch by the threads that will use each page.
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      pa[i] = 1.0f;
      pb[i] = 2.0f;
      pc[i] = 0.0f;
    }
  }
};

Step stream_copy(int64_t n) {
  auto arrays = std::make_shared<StreamArrays>(n);
  return [arrays] {
    const float* a = arrays->a.data<float>();
    float* c = arrays->c.data<float>();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < arrays->n; ++i) c[i] = a[i];
  };
}

Step stream_triad(int64_t n) {
  auto arrays = std::make_shared<StreamArrays>(n);
  return [arrays] {
    float* a = arrays->a.data<float>();
    const float* b = arrays->b.data<float>();
    const float* c = arrays->c.data<float>();
    const float scalar = 3.0f;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < arrays->n; ++i) a[i] = b[i] + scalar * c[i];
  };
}

Step openblas_sgemm() {
  Tensor a = randn({kGemm, kGemm}), b = randn({kGemm, kGemm}), c = empty({kGemm, kGemm});
  return [=] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kGemm, kGemm, kGemm, 1.0f,
                a.data<float>(), kGemm, b.data<float>(), kGemm, 0.0f, c.data<float>(), kGemm);
  };
}

}  // namespace

std::vector<Workload> limit_workloads() {
  const double array = double(kStreamElements) * sizeof(float);
  const double cached = double(kCachedElements) * sizeof(float);
  return {
      {.name = "STREAM copy", .bytes = 2 * array, .impl = "limit",
       .build = [] { return stream_copy(kStreamElements); }},
      {.name = "STREAM triad", .bytes = 3 * array, .impl = "limit",
       .build = [] { return stream_triad(kStreamElements); }},
      {.name = "STREAM triad in L3 (3x4 MiB)", .bytes = 3 * cached, .impl = "limit",
       .build = [] { return stream_triad(kCachedElements); }},
      {.name = "OpenBLAS sgemm 1024^3", .flops = 2.0 * kGemm * kGemm * kGemm, .impl = "limit",
       .build = openblas_sgemm},
  };
}

}  // namespace smelt::bench
