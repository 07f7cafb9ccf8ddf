// kernels::gemm with GemmImpl::Auto gives bitwise-identical results for the same call every time,
// the first call of a new shape class included: the implementation is decided before that call
// computes anything and never changes afterwards.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "kernels/gemm.h"

namespace smelt::kernels {
namespace {

struct Problem {
  int64_t M, N, K;
};

// Shapes of distinct classes, all large enough to be measured (at least 2 * 96^3 flops).
const Problem kProblems[] = {{200, 200, 200}, {97, 513, 129}, {300, 100, 700}, {64, 1000, 96}, {1, 1000, 1280}};

template <class T>
std::vector<T> random_values(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1, 1);
  std::vector<T> v(n);
  for (T& x : v) x = T(dist(rng));
  return v;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// C = 0.5 A B + 2 C0, row-major, with the given implementation.
template <class T>
std::vector<T> run(const Problem& p, const std::vector<T>& A, const std::vector<T>& B,
                   const std::vector<T>& C0, GemmImpl impl) {
  std::vector<T> C = C0;
  gemm<T>(p.M, p.N, p.K, T(0.5), A.data(), p.K, 1, B.data(), p.N, 1, T(2), C.data(), p.N, 1, impl);
  return C;
}

template <class T>
void check_repeatable(const Problem& p) {
  auto A = random_values<T>(size_t(p.M * p.K), 1);
  auto B = random_values<T>(size_t(p.K * p.N), 2);
  auto C0 = random_values<T>(size_t(p.M * p.N), 3);
  if (p.M == 1) {  // never measured: Own's row-vector path, in every process
    ASSERT_EQ(gemm_choice<T>(p.M, p.N, p.K), GemmImpl::Own);
  } else {
    ASSERT_EQ(gemm_choice<T>(p.M, p.N, p.K), GemmImpl::Auto) << "the class must be new";
  }
  const std::vector<T> first = run(p, A, B, C0, GemmImpl::Auto);
  const GemmImpl chosen = gemm_choice<T>(p.M, p.N, p.K);
  ASSERT_NE(chosen, GemmImpl::Auto) << "the first call decides";
  // The first call already used the decided implementation...
  EXPECT_TRUE(same_bits(first, run(p, A, B, C0, chosen)))
      << "M=" << p.M << " N=" << p.N << " K=" << p.K << " chosen " << gemm_impl_name(chosen);
  // ...and so does every later one.
  for (int call = 1; call < 8; ++call) {
    EXPECT_TRUE(same_bits(first, run(p, A, B, C0, GemmImpl::Auto)))
        << "call " << call << " differs from the first; M=" << p.M << " N=" << p.N
        << " K=" << p.K;
  }
  EXPECT_EQ(gemm_choice<T>(p.M, p.N, p.K), chosen) << "the decision never changes";
}

TEST(GemmDeterminism, RepeatedCallsAreBitwiseIdenticalFromTheFirst) {
  gemm_selection_reset();
  for (const Problem& p : kProblems) check_repeatable<float>(p);
  for (const Problem& p : kProblems) check_repeatable<double>(p);
}

// The property above is only worth testing if the two implementations can give different bits;
// they round differently on at least one of these problems (a guard against a vacuous test).
TEST(GemmDeterminism, ImplementationsDifferInTheLastBits) {
  bool any_differs = false;
  for (const Problem& p : kProblems) {
    auto A = random_values<float>(size_t(p.M * p.K), 1);
    auto B = random_values<float>(size_t(p.K * p.N), 2);
    auto C0 = random_values<float>(size_t(p.M * p.N), 3);
    any_differs |= !same_bits(run(p, A, B, C0, GemmImpl::Own), run(p, A, B, C0, GemmImpl::OpenBlas));
  }
  EXPECT_TRUE(any_differs);
}

// Threads meeting the same new class at once all wait for one decision and agree with it.
TEST(GemmDeterminism, ConcurrentFirstCallsAgree) {
  gemm_selection_reset();
  const Problem p{256, 160, 320};
  auto A = random_values<float>(size_t(p.M * p.K), 4);
  auto B = random_values<float>(size_t(p.K * p.N), 5);
  auto C0 = random_values<float>(size_t(p.M * p.N), 6);
  std::vector<std::vector<float>> results(4);
  std::vector<std::thread> threads;
  for (auto& r : results) threads.emplace_back([&] { r = run(p, A, B, C0, GemmImpl::Auto); });
  for (auto& t : threads) t.join();
  const GemmImpl chosen = gemm_choice<float>(p.M, p.N, p.K);
  ASSERT_NE(chosen, GemmImpl::Auto);
  const std::vector<float> expected = run(p, A, B, C0, chosen);
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_TRUE(same_bits(results[i], expected)) << "thread " << i;
  }
}

// Transposed operands meet the same class: still one decision, still repeatable.
TEST(GemmDeterminism, ColumnMajorCallsAreRepeatable) {
  gemm_selection_reset();
  const int64_t M = 150, N = 170, K = 190;
  auto A = random_values<double>(size_t(M * K), 7);
  auto B = random_values<double>(size_t(K * N), 8);
  std::vector<std::vector<double>> results;
  for (int call = 0; call < 4; ++call) {
    std::vector<double> C(size_t(M * N));
    gemm<double>(M, N, K, 1.0, A.data(), 1, M, B.data(), 1, K, 0.0, C.data(), 1, M);
    results.push_back(C);
  }
  for (size_t i = 1; i < results.size(); ++i) EXPECT_TRUE(same_bits(results[0], results[i])) << i;
}

// Own splits C over threads but never a dot product, and its tiles do not depend on the strips,
// so its bits do not depend on the thread count. (OpenBlas's do: OpenBLAS picks its blocking from
// the strip it is given, and the strips follow the thread count — one reason the thread count is
// part of Auto's shape class.)
TEST(GemmDeterminism, OwnIgnoresTheThreadCount) {
  const int threads = omp_get_max_threads();
  for (const Problem& p : kProblems) {
    auto A = random_values<float>(size_t(p.M * p.K), 9);
    auto B = random_values<float>(size_t(p.K * p.N), 10);
    auto C0 = random_values<float>(size_t(p.M * p.N), 11);
    omp_set_num_threads(1);
    const std::vector<float> one = run(p, A, B, C0, GemmImpl::Own);
    omp_set_num_threads(std::max(3, threads));
    const std::vector<float> many = run(p, A, B, C0, GemmImpl::Own);
    omp_set_num_threads(threads);
    EXPECT_TRUE(same_bits(one, many)) << "M=" << p.M << " N=" << p.N << " K=" << p.K;
  }
}

}  // namespace
}  // namespace smelt::kernels
