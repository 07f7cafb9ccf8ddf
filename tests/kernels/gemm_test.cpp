// kernels::gemm: Own and OpenBLAS against a naive triple loop, over odd sizes, every layout of A, B
// and C (row-major, column-major, sliced, broadcast), alpha/beta, and empty dims.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/gemm.h"

namespace smelt::kernels {
namespace {

// C = alpha A B + beta C in long double; beta == 0 ignores C.
template <class T>
void naive_gemm(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t rsa, int64_t csa,
                const T* B, int64_t rsb, int64_t csb, T beta, T* C, int64_t rsc, int64_t csc) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      long double acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        acc += (long double)A[i * rsa + k * csa] * (long double)B[k * rsb + j * csb];
      }
      T* c = C + i * rsc + j * csc;
      *c = T(alpha * acc + (beta == T(0) ? 0.0L : (long double)beta * *c));
    }
  }
}

// A matrix of (rows, cols) in a buffer with the given layout; `pad` unused elements per line so
// the leading dimension exceeds the extent.
enum class Layout { RowMajor, ColMajor, Strided };

template <class T>
struct Matrix {
  std::vector<T> data;
  int64_t rs = 0, cs = 0;
};

template <class T>
Matrix<T> make_matrix(int64_t rows, int64_t cols, Layout layout, std::mt19937& rng) {
  Matrix<T> m;
  const int64_t pad = 3;
  switch (layout) {
    case Layout::RowMajor: m.rs = cols + pad; m.cs = 1; break;
    case Layout::ColMajor: m.rs = 1; m.cs = rows + pad; break;
    case Layout::Strided: m.rs = 2 * (cols + pad); m.cs = 2; break;  // neither unit stride
  }
  m.data.resize(size_t(std::max<int64_t>(1, rows * std::abs(m.rs) + cols * std::abs(m.cs))));
  std::uniform_real_distribution<double> dist(-1, 1);
  for (T& v : m.data) v = T(dist(rng));
  return m;
}

template <class T>
double tolerance(int64_t K) {
  return (sizeof(T) == 4 ? 2e-6 : 1e-14) * double(std::max<int64_t>(K, 1));
}

template <class T>
void check_case(int64_t M, int64_t N, int64_t K, Layout la, Layout lb, Layout lc, T alpha, T beta,
                GemmImpl impl) {
  std::mt19937 rng(unsigned(M * 131 + N * 17 + K));
  auto A = make_matrix<T>(M, K, la, rng);
  auto B = make_matrix<T>(K, N, lb, rng);
  auto C = make_matrix<T>(M, N, lc, rng);
  auto expected = C.data;
  naive_gemm<T>(M, N, K, alpha, A.data.data(), A.rs, A.cs, B.data.data(), B.rs, B.cs, beta,
                expected.data(), C.rs, C.cs);
  gemm<T>(M, N, K, alpha, A.data.data(), A.rs, A.cs, B.data.data(), B.rs, B.cs, beta,
          C.data.data(), C.rs, C.cs, impl);
  const double tol = tolerance<T>(K);
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_NEAR(double(C.data[i]), double(expected[i]), tol * (1 + std::abs(double(expected[i]))))
        << gemm_impl_name(impl) << " M=" << M << " N=" << N << " K=" << K << " layouts "
        << int(la) << int(lb) << int(lc) << " alpha=" << alpha << " beta=" << beta
        << " at buffer index " << i;
  }
}

const GemmImpl kImpls[] = {GemmImpl::Own, GemmImpl::OpenBlas, GemmImpl::Auto};
const Layout kLayouts[] = {Layout::RowMajor, Layout::ColMajor, Layout::Strided};

template <class T>
void sweep_sizes() {
  // Around the tile sizes (MR 4..12, NR 8..32) and the cache blocks (KC 192..256, MC 144..192).
  const int64_t sizes[][3] = {{1, 1, 1},    {2, 3, 5},     {13, 33, 7},   {12, 32, 256},
                              {25, 65, 257}, {193, 97, 300}, {200, 17, 513}, {7, 300, 64},
                              {1, 500, 40},  {500, 1, 40},   {64, 64, 1}};
  for (GemmImpl impl : kImpls) {
    for (const auto& s : sizes) {
      check_case<T>(s[0], s[1], s[2], Layout::RowMajor, Layout::RowMajor, Layout::RowMajor, T(1),
                    T(0), impl);
    }
  }
}

TEST(Gemm, FloatSizes) { sweep_sizes<float>(); }
TEST(Gemm, DoubleSizes) { sweep_sizes<double>(); }

template <class T>
void sweep_layouts() {
  for (GemmImpl impl : kImpls) {
    for (Layout la : kLayouts) {
      for (Layout lb : kLayouts) {
        for (Layout lc : kLayouts) {
          check_case<T>(37, 45, 29, la, lb, lc, T(0.5), T(-2), impl);
          check_case<T>(50, 70, 300, la, lb, lc, T(1), T(1), impl);
        }
      }
    }
  }
}

// M = 1 takes gemm_own's row-vector path (no packing) for every layout of B: every layout,
// column counts around its 256-column blocks, K around its 16 x 16 tiles, alpha / beta.
// (`column`: the N = 1 problems of the same sizes, M rows.)
template <class T>
void sweep_vector(bool column) {
  const int64_t sizes[][2] = {{1, 1}, {255, 15}, {256, 16}, {257, 17}, {1000, 1280}, {600, 3}};
  for (const auto& s : sizes) {
    const int64_t M = column ? s[0] : 1, N = column ? 1 : s[0];
    for (Layout la : kLayouts) {
      for (Layout lb : kLayouts) {
        for (Layout lc : kLayouts) {
          check_case<T>(M, N, s[1], la, lb, lc, T(1), T(0), GemmImpl::Own);
          check_case<T>(M, N, s[1], la, lb, lc, T(0.5), T(-2), GemmImpl::Own);
        }
      }
    }
  }
}

template <class T>
void sweep_row_vector() {
  sweep_vector<T>(false);
}

TEST(Gemm, FloatRowVector) { sweep_row_vector<float>(); }
TEST(Gemm, DoubleRowVector) { sweep_row_vector<double>(); }

// N = 1 (a 1x1 convolution on a 1x1 image) is the row-vector path transposed: every layout, row
// counts around its 256-column blocks, K around its tiles, alpha / beta; and the bits of the
// transposed M = 1 product (the same sums, in the same order).
template <class T>
void sweep_column_vector() {
  sweep_vector<T>(true);
  const int64_t sizes[][2] = {{1, 1}, {255, 15}, {256, 16}, {257, 17}, {1000, 1280}, {600, 3}};
  for (const auto& s : sizes) {
    const int64_t M = s[0], K = s[1];
    std::mt19937 rng(unsigned(M + K));
    auto A = make_matrix<T>(M, K, Layout::RowMajor, rng);
    auto b = make_matrix<T>(K, 1, Layout::RowMajor, rng);
    std::vector<T> column(static_cast<size_t>(M)), row(static_cast<size_t>(M));
    kernels::gemm<T>(M, 1, K, T(1), A.data.data(), A.rs, A.cs, b.data.data(), b.rs, b.cs, T(0), column.data(), 1, 1,
                     GemmImpl::Auto);
    kernels::gemm<T>(1, M, K, T(1), b.data.data(), 1, b.rs, A.data.data(), A.cs, A.rs, T(0), row.data(), M, 1,
                     GemmImpl::Own);
    EXPECT_EQ(std::memcmp(column.data(), row.data(), column.size() * sizeof(T)), 0) << "M=" << M << " K=" << K;
  }
}

TEST(Gemm, FloatColumnVector) { sweep_column_vector<float>(); }
TEST(Gemm, DoubleColumnVector) { sweep_column_vector<double>(); }

// M = 1: the same values in B's three layouts (rows contiguous, columns contiguous, both strides
// > 1) give the same bits, special values included: each element is summed over k in order. The
// compile fuzzer found the layouts disagreeing (seed 20019121: a plan's contiguous copy of a
// strided input gave NaN where the interpreter's strided view gave -inf).
// N, K: whole vectors of columns and k tiles of every vector width with tails after them; 300
// columns span two of the threads' column blocks.
template <class T>
void row_vector_bits(int64_t N, int64_t K) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<T> u(-2, 2);
  std::vector<T> a(static_cast<size_t>(K)), b(static_cast<size_t>(K * N));
  for (T& v : a) v = u(rng);
  for (T& v : b) v = u(rng);
  a[3] = T(-9.2e18), a[4] = T(9.2e18), b[size_t(3 * N + 5)] = T(1e30), b[size_t(4 * N + 5)] = T(1e30);
  b[size_t(10 * N + 7)] = std::numeric_limits<T>::infinity(), a[11] = T(3e38), a[12] = T(3e38);
  // The three layouts of the same K x N matrix.
  std::vector<T> rows = b, cols(static_cast<size_t>(K * N)), wide(static_cast<size_t>(K * N * 6));
  for (int64_t k = 0; k < K; ++k) {
    for (int64_t n = 0; n < N; ++n) {
      cols[size_t(n * K + k)] = b[size_t(k * N + n)];
      wide[size_t(k * 3 * N * 2 + n * 2)] = b[size_t(k * N + n)];
    }
  }
  std::vector<T> c_rows(static_cast<size_t>(N)), c_cols(static_cast<size_t>(N)), c_wide(static_cast<size_t>(N));
  kernels::gemm<T>(1, N, K, T(1), a.data(), K, 1, rows.data(), N, 1, T(0), c_rows.data(), N, 1, GemmImpl::Own);
  kernels::gemm<T>(1, N, K, T(1), a.data(), K, 1, cols.data(), 1, K, T(0), c_cols.data(), N, 1, GemmImpl::Own);
  kernels::gemm<T>(1, N, K, T(1), a.data(), K, 1, wide.data(), 3 * N * 2, 2, T(0), c_wide.data(), N, 1, GemmImpl::Own);
  int specials = 0;
  for (int64_t n = 0; n < N; ++n) {
    specials += !std::isfinite(c_rows[size_t(n)]);
    EXPECT_EQ(std::memcmp(&c_rows[size_t(n)], &c_cols[size_t(n)], sizeof(T)), 0) << "column " << n;
    EXPECT_EQ(std::memcmp(&c_rows[size_t(n)], &c_wide[size_t(n)], sizeof(T)), 0) << "column " << n;
  }
  EXPECT_GT(specials, 0);  // the special values did reach some sums
}

TEST(Gemm, RowVectorBitsDoNotDependOnTheLayoutOfB) {
  row_vector_bits<float>(37, 53);
  row_vector_bits<float>(300, 40);
  row_vector_bits<double>(37, 53);
  row_vector_bits<double>(300, 40);
}

TEST(Gemm, FloatLayoutsAlphaBeta) { sweep_layouts<float>(); }
TEST(Gemm, DoubleLayoutsAlphaBeta) { sweep_layouts<double>(); }

TEST(Gemm, LargeThreadedMatchesNaive) {
  for (GemmImpl impl : kImpls) {
    check_case<float>(300, 520, 270, Layout::RowMajor, Layout::ColMajor, Layout::RowMajor, 1.f,
                      0.f, impl);
    check_case<float>(520, 300, 270, Layout::ColMajor, Layout::RowMajor, Layout::ColMajor, 1.f,
                      0.5f, impl);
  }
}

TEST(Gemm, EmptyDims) {
  for (GemmImpl impl : kImpls) {
    // M or N == 0: nothing is touched.
    std::vector<float> c = {7.f};
    float a = 1.f, b = 1.f;
    gemm<float>(0, 1, 1, 1.f, &a, 1, 1, &b, 1, 1, 0.f, c.data(), 1, 1, impl);
    gemm<float>(1, 0, 1, 1.f, &a, 1, 1, &b, 1, 1, 0.f, c.data(), 1, 1, impl);
    EXPECT_EQ(c[0], 7.f);
    // K == 0: C = beta C.
    std::vector<float> c2 = {1.f, 2.f, 3.f, 4.f};
    gemm<float>(2, 2, 0, 1.f, nullptr, 0, 1, nullptr, 2, 1, 3.f, c2.data(), 2, 1, impl);
    EXPECT_EQ(c2, (std::vector<float>{3.f, 6.f, 9.f, 12.f}));
    gemm<float>(2, 2, 0, 1.f, nullptr, 0, 1, nullptr, 2, 1, 0.f, c2.data(), 2, 1, impl);
    EXPECT_EQ(c2, (std::vector<float>{0.f, 0.f, 0.f, 0.f}));
  }
}

TEST(Gemm, BetaZeroIgnoresNaNInC) {
  for (GemmImpl impl : kImpls) {
    std::mt19937 rng(3);
    auto A = make_matrix<double>(20, 30, Layout::RowMajor, rng);
    auto B = make_matrix<double>(30, 40, Layout::RowMajor, rng);
    std::vector<double> C(20 * 40, std::numeric_limits<double>::quiet_NaN());
    gemm<double>(20, 40, 30, 1.0, A.data.data(), A.rs, A.cs, B.data.data(), B.rs, B.cs, 0.0,
                 C.data(), 40, 1, impl);
    for (double v : C) ASSERT_FALSE(std::isnan(v)) << gemm_impl_name(impl);
  }
}

TEST(Gemm, BroadcastStrideZero) {
  // A's rows all alias one row (rsa = 0), B's columns one column (csb = 0).
  for (GemmImpl impl : kImpls) {
    std::vector<float> a = {1, 2, 3}, b = {4, 5, 6};
    std::vector<float> c(4 * 5);
    gemm<float>(4, 5, 3, 1.f, a.data(), 0, 1, b.data(), 1, 0, 0.f, c.data(), 5, 1, impl);
    for (float v : c) EXPECT_FLOAT_EQ(v, 32.f) << gemm_impl_name(impl);
  }
}

TEST(Gemm, AutoDecidesAfterMeasuring) {
  gemm_selection_reset();
  std::mt19937 rng(5);
  auto A = make_matrix<float>(200, 200, Layout::RowMajor, rng);
  auto B = make_matrix<float>(200, 200, Layout::RowMajor, rng);
  std::vector<float> C(200 * 200);
  EXPECT_EQ(gemm_choice<float>(200, 200, 200), GemmImpl::Auto);
  for (int i = 0; i < 8; ++i) {
    gemm<float>(200, 200, 200, 1.f, A.data.data(), A.rs, 1, B.data.data(), B.rs, 1, 0.f, C.data(),
                200, 1);
  }
  GemmImpl chosen = gemm_choice<float>(200, 200, 200);
  EXPECT_TRUE(chosen == GemmImpl::Own || chosen == GemmImpl::OpenBlas);
  EXPECT_NE(gemm_selection_report().find("M<=2^8"), std::string::npos) << gemm_selection_report();
  // Small problems are never measured, nor is a single row of A (a classifier at batch 1).
  EXPECT_EQ(gemm_choice<float>(8, 8, 8), GemmImpl::Own);
  EXPECT_EQ(gemm_choice<float>(1, 1000, 1280), GemmImpl::Own);
  std::vector<float> a(1280, 1.f), b(1280 * 1000, 1.f), c(1000);
  gemm<float>(1, 1000, 1280, 1.f, a.data(), 1280, 1, b.data(), 1, 1280, 0.f, c.data(), 1000, 1);
  EXPECT_EQ(gemm_selection_report().find("M<=2^0"), std::string::npos) << gemm_selection_report();
}

}  // namespace
}  // namespace smelt::kernels
