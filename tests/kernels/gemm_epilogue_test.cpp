// The GEMM's tile epilogue (kernels/gemm.h): for each implementation, the tiles it reports cover
// C exactly once, each tile's values are already final when it is reported (a snapshot taken in
// the callback equals C after the call), and C holds the same bits as without an epilogue.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/gemm.h"

namespace smelt::kernels {
namespace {

struct EpilogueProblem {
  int64_t M, N, K;
  bool c_rows;  // C row-major (else column-major)
};

struct Recorder {
  const float* C;
  int64_t rsc, csc, N;
  std::vector<std::atomic<int>> calls;  // per element of C, (i, j) at i * N + j
  std::vector<float> seen;
  Recorder(const float* c, int64_t rs, int64_t cs, int64_t M, int64_t n)
      : C(c), rsc(rs), csc(cs), N(n), calls(size_t(M * n)), seen(size_t(M * n)) {}

  static void record(void* ctx, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    auto* r = static_cast<Recorder*>(ctx);
    for (int64_t i = r0; i < r1; ++i) {
      for (int64_t j = c0; j < c1; ++j) {
        r->calls[size_t(i * r->N + j)]++;
        r->seen[size_t(i * r->N + j)] = r->C[i * r->rsc + j * r->csc];
      }
    }
  }
};

std::vector<float> random_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(rng);
  return v;
}

TEST(GemmEpilogue, TilesCoverCOnceWithFinalValuesAndChangeNoBits) {
  const EpilogueProblem problems[] = {{1, 1, 1, true},     {13, 700, 300, true}, {300, 45, 200, true},
                              {257, 513, 70, true}, {37, 61, 0, true},    {90, 130, 40, false},
                              {1, 1000, 300, true}, {1, 700, 50, false},   // M = 1: the row-vector path
                              {1000, 1, 300, true}, {700, 1, 50, false}};  // N = 1: the same, transposed
  for (GemmImpl impl : {GemmImpl::Own, GemmImpl::OpenBlas}) {
    for (const EpilogueProblem& p : problems) {
      SCOPED_TRACE(std::string(gemm_impl_name(impl)) + " M=" + std::to_string(p.M) + " N=" + std::to_string(p.N) +
                   " K=" + std::to_string(p.K) + (p.c_rows ? " C row-major" : " C column-major"));
      const std::vector<float> A = random_values(p.M * p.K, 1), B = random_values(p.K * p.N, 2);
      const std::vector<float> C0 = random_values(p.M * p.N, 3);  // beta = 0.5 reads it
      const int64_t rsc = p.c_rows ? p.N : 1, csc = p.c_rows ? 1 : p.M;
      std::vector<float> plain = C0, with = C0;
      gemm<float>(p.M, p.N, p.K, 1.0f, A.data(), p.K, 1, B.data(), p.N, 1, 0.5f, plain.data(), rsc, csc, impl);
      Recorder rec(with.data(), rsc, csc, p.M, p.N);
      GemmEpilogue epilogue{&Recorder::record, &rec};
      gemm<float>(p.M, p.N, p.K, 1.0f, A.data(), p.K, 1, B.data(), p.N, 1, 0.5f, with.data(), rsc, csc, impl,
                  &epilogue);
      EXPECT_EQ(std::memcmp(plain.data(), with.data(), plain.size() * sizeof(float)), 0);
      int bad_calls = 0, stale = 0;
      for (int64_t i = 0; i < p.M; ++i) {
        for (int64_t j = 0; j < p.N; ++j) {
          bad_calls += rec.calls[size_t(i * p.N + j)] != 1;
          const float final_value = with[size_t(i * rsc + j * csc)];
          stale += std::memcmp(&rec.seen[size_t(i * p.N + j)], &final_value, sizeof(float)) != 0;
        }
      }
      EXPECT_EQ(bad_calls, 0) << "elements not reported exactly once";
      EXPECT_EQ(stale, 0) << "elements reported before their final value";
    }
  }
}

}  // namespace
}  // namespace smelt::kernels
