// parallel_for and the other OpenMP regions: an exception thrown on any thread reaches the
// caller with its type and message (it used to std::terminate the process).
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <stdexcept>
#include <string>

#include "base/parallel.h"
#include "kernels/gemm_threading.h"
#include "smelt/error.h"
#include "smelt/smelt.h"

namespace smelt {
namespace {

// Forces several threads for one test, whatever OMP_NUM_THREADS says.
class ParallelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = omp_get_max_threads();
    omp_set_num_threads(kThreads);
  }
  void TearDown() override { omp_set_num_threads(saved_); }
  static constexpr int kThreads = 4;
  int saved_ = 1;
};

TEST_F(ParallelTest, AnErrorOnAWorkerThreadReachesTheCaller) {
  const int64_t n = kThreads * 1000;
  std::atomic<int> thrower_thread{-1};
  std::atomic<int64_t> chunks_run{0};
  try {
    parallel_for(n, 1000, [&](int64_t begin, int64_t end) {
      ++chunks_run;
      if (end == n) {  // the last chunk: with a static schedule, not the calling thread's
        thrower_thread = omp_get_thread_num();
        SMELT_CHECK(false) << "chunk [" << begin << ", " << end << ") failed";
      }
    });
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "chunk [3000, 4000) failed");
  }
  EXPECT_GE(chunks_run.load(), 1);
  EXPECT_NE(thrower_thread.load(), -1);
  EXPECT_NE(thrower_thread.load(), 0) << "the error should come from a worker thread";
}

TEST_F(ParallelTest, WhenEveryChunkThrowsOneErrorArrives) {
  for (int trial = 0; trial < 20; ++trial) {
    try {
      parallel_for(1 << 20, 1, [&](int64_t begin, int64_t) {
        SMELT_CHECK(false) << "failed at " << begin;
      });
      FAIL() << "no exception";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("failed at ", 0), 0u) << e.what();
    }
  }
}

TEST_F(ParallelTest, OtherExceptionTypesKeepTheirType) {
  EXPECT_THROW(parallel_for(kThreads * 10, 10,
                            [&](int64_t begin, int64_t) {
                              if (begin > 0) throw std::out_of_range("index 7 of 3");
                            }),
               std::out_of_range);
}

TEST_F(ParallelTest, TheSingleThreadPathThrowsToo) {
  EXPECT_THROW(parallel_for(10, 1000, [&](int64_t, int64_t) { SMELT_CHECK(false) << "x"; }),
               Error);
}

TEST_F(ParallelTest, AfterAnErrorTheNextLoopRunsNormally) {
  EXPECT_THROW(parallel_for(4096, 1, [&](int64_t, int64_t) { throw std::runtime_error("x"); }),
               std::runtime_error);
  std::atomic<int64_t> covered{0};
  parallel_for(4096, 1, [&](int64_t begin, int64_t end) { covered += end - begin; });
  EXPECT_EQ(covered.load(), 4096);
}

// The GEMM strip scheduler has its own OpenMP region (a dynamic schedule).
TEST_F(ParallelTest, AnErrorInAGemmStripReachesTheCaller) {
  const int64_t M = 64, N = 4096, K = 4096;  // enough flops for every thread
  std::atomic<int> strips{0};
  try {
    kernels::gemm_detail::for_each_strip(M, N, K, 8, 8, [&](bool, int64_t begin, int64_t end) {
      ++strips;
      SMELT_CHECK(begin != 0) << "strip [" << begin << ", " << end << ") failed";
    });
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("strip [0, "), std::string::npos) << e.what();
  }
  EXPECT_GE(strips.load(), 1);
}

// A real kernel failing on worker threads: a batched matmul runs its GEMMs inside parallel_for,
// and the first GEMM reads SMELT_GEMM (ctest runs each test in its own process, so this is the
// first read). A bad value is an Error thrown on every thread; it used to std::terminate.
TEST_F(ParallelTest, AKernelErrorOnWorkerThreadsReachesTheCaller) {
  ::setenv("SMELT_GEMM", "fastest", 1);
  Tensor a = ones({64, 64, 64});
  try {
    matmul(a, a);
    ::unsetenv("SMELT_GEMM");
    GTEST_SKIP() << "SMELT_GEMM was read earlier in this process (run the test on its own)";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SMELT_GEMM='fastest'"), std::string::npos) << e.what();
  }
  ::unsetenv("SMELT_GEMM");
}

}  // namespace
}  // namespace smelt
