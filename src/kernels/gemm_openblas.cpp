// The OpenBLAS implementation of kernels::gemm.
//
// Debian ships the pthreads build of OpenBLAS (libopenblas0-pthread): its own thread pool, whose
// workers spin after each call. Run next to smelt's OpenMP threads on the same cores, the two
// pools would take turns preempting each other. So OpenBLAS is set to one thread, once, and smelt
// splits C into strips over its OpenMP threads (OMP_NUM_THREADS), one cblas call per strip —
// exactly the threading of the Own implementation, so the two compare like for like.
// cblas cannot call back, so an epilogue runs on each strip right after its cblas call, in panels
// of kEpilogueRows rows, on the thread that computed the strip (the strip's end is still cached).
#include <cblas.h>

#include <algorithm>
#include <mutex>

#include "base/parallel.h"
#include "kernels/gemm.h"
#include "kernels/gemm_threading.h"

namespace smelt::kernels {
namespace {

constexpr int64_t kEpilogueRows = 64;

// The epilogue over C's rows [r0, r1), columns [c0, c1) in panels of rows. `transposed`: the
// coordinates are of C^T (the column-major case), swapped back for the caller.
void epilogue_panels(const GemmEpilogue& epilogue, bool transposed, int64_t r0, int64_t r1, int64_t c0,
                     int64_t c1) {
  if (transposed) {
    std::swap(r0, c0);
    std::swap(r1, c1);
  }
  for (int64_t r = r0; r < r1; r += kEpilogueRows) epilogue(r, std::min(r + kEpilogueRows, r1), c0, c1);
}

void openblas_single_threaded() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

// How BLAS sees a (rows, cols) matrix with strides (rs, cs): row-major (cs == 1) or column-major
// (rs == 1) with a leading dimension; false when it is neither. Strides of size-1 dims do not
// matter, so they are chosen to make the layout valid.
bool blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, bool* row_major,
                 int64_t* ld) {
  if (cs == 1 || cols <= 1) {
    int64_t lead = rows <= 1 ? std::max<int64_t>(1, cols) : rs;
    if (lead >= std::max<int64_t>(1, cols)) {
      *row_major = true;
      *ld = lead;
      return true;
    }
  }
  if (rs == 1 || rows <= 1) {
    int64_t lead = cols <= 1 ? std::max<int64_t>(1, rows) : cs;
    if (lead >= std::max<int64_t>(1, rows)) {
      *row_major = false;
      *ld = lead;
      return true;
    }
  }
  return false;
}

void cblas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t M, int64_t N, int64_t K,
                float alpha, const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                float* C, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, blasint(M), blasint(N), blasint(K), alpha, A, blasint(lda),
              B, blasint(ldb), beta, C, blasint(ldc));
}
void cblas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t M, int64_t N, int64_t K,
                double alpha, const double* A, int64_t lda, const double* B, int64_t ldb,
                double beta, double* C, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, blasint(M), blasint(N), blasint(K), alpha, A, blasint(lda),
              B, blasint(ldb), beta, C, blasint(ldc));
}

// One strip, C row-major (csc == 1 or N == 1). False when A or B has no BLAS layout.
template <class T>
bool blas_strip(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t rsa, int64_t csa,
                const T* B, int64_t rsb, int64_t csb, T beta, T* C, int64_t ldc) {
  bool a_rows, b_rows;
  int64_t lda, ldb;
  if (!blas_layout(M, K, rsa, csa, &a_rows, &lda) || !blas_layout(K, N, rsb, csb, &b_rows, &ldb)) {
    return false;
  }
  cblas_gemm(a_rows ? CblasNoTrans : CblasTrans, b_rows ? CblasNoTrans : CblasTrans, M, N, K,
             alpha, A, lda, B, ldb, beta, C, ldc);
  return true;
}

}  // namespace

template <class T>
void gemm_openblas(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t rsa, int64_t csa,
                   const T* B, int64_t rsb, int64_t csb, T beta, T* C, int64_t rsc, int64_t csc,
                   const GemmEpilogue* epilogue) {
  if (M <= 0 || N <= 0) return;
  // BLAS indices are 32-bit; C must be row- or column-major (column-major C: C^T = B^T A^T).
  bool c_rows;
  int64_t ldc;
  const bool fits = std::max({M, N, K, std::abs(rsa), std::abs(csa), std::abs(rsb),
                              std::abs(csb), std::abs(rsc), std::abs(csc)}) < (int64_t(1) << 31);
  if (!fits || K <= 0 || !blas_layout(M, N, rsc, csc, &c_rows, &ldc)) {
    gemm_own(M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc, epilogue);
    return;
  }
  if (!c_rows) {
    // A' = B^T (N, K), B' = A^T (K, M).
    const int64_t rsa_t = csb, csa_t = rsb, rsb_t = csa, csb_t = rsa;
    std::swap(M, N);
    std::swap(A, B);
    rsa = rsa_t, csa = csa_t, rsb = rsb_t, csb = csb_t;
  }
  // Now C (M, N) is row-major with leading dimension ldc; A (M, K), B (K, N).
  bool a_ok, b_ok;
  int64_t unused;
  bool a_layout = blas_layout(M, K, rsa, csa, &a_ok, &unused);
  bool b_layout = blas_layout(K, N, rsb, csb, &b_ok, &unused);
  if (!a_layout || !b_layout) {
    if (!epilogue) {
      gemm_own(M, N, K, alpha, A, rsa, csa, B, rsb, csb, beta, C, ldc, int64_t(1));
    } else {  // the epilogue expects the caller's coordinates: keep the caller's orientation
      gemm_own(c_rows ? M : N, c_rows ? N : M, K, alpha, c_rows ? A : B, c_rows ? rsa : csb,
               c_rows ? csa : rsb, c_rows ? B : A, c_rows ? rsb : csa, c_rows ? csb : rsa, beta, C,
               c_rows ? ldc : 1, c_rows ? 1 : ldc, epilogue);
    }
    return;
  }
  openblas_single_threaded();
  // Strips in multiples of 16 (a cache line of floats), as many as the Own implementation uses.
  gemm_detail::for_each_strip(M, N, K, 16, 16, [&](bool split_n, int64_t begin, int64_t end) {
    if (split_n) {
      blas_strip(M, end - begin, K, alpha, A, rsa, csa, B + begin * csb, rsb, csb, beta,
                 C + begin, ldc);
      if (epilogue) epilogue_panels(*epilogue, !c_rows, 0, M, begin, end);
    } else {
      blas_strip(end - begin, N, K, alpha, A + begin * rsa, rsa, csa, B, rsb, csb, beta,
                 C + begin * ldc, ldc);
      if (epilogue) epilogue_panels(*epilogue, !c_rows, begin, end, 0, N);
    }
  });
}

template void gemm_openblas<float>(int64_t, int64_t, int64_t, float, const float*, int64_t,
                                   int64_t, const float*, int64_t, int64_t, float, float*,
                                   int64_t, int64_t, const GemmEpilogue*);
template void gemm_openblas<double>(int64_t, int64_t, int64_t, double, const double*, int64_t,
                                    int64_t, const double*, int64_t, int64_t, double, double*,
                                    int64_t, int64_t, const GemmEpilogue*);

std::string gemm_openblas_config() {
  const char* config = openblas_get_config();
  return config ? config : "";
}

}  // namespace smelt::kernels
