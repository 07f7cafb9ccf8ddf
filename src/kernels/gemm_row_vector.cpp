// gemm_own's path for a single row of A (M = 1): C (1, N) = alpha A (1, K) B (K, N) + beta C,
// the classifier layer of a CNN at batch 1. The packed GEMM would pad A's one row to a whole
// micro-panel (MR rows computed for one) and copy all of B into its packing buffers on every call;
// here B is read once, in place, which is what bounds this shape.
//
//   B rows contiguous (csb = 1): column blocks of kBlockCols, each accumulating A[k] B[k, block]
//                                over k in order (one streaming pass over the block's columns);
//   B columns contiguous (rsb = 1, a transposed weight): the same sums for one vector of columns
//                                at a time, B read along its columns and transposed in registers;
//   both strides > 1:            the same sums, B copied through small transposed tiles.
// Each C element is sum over k in order, whatever B's layout and the thread count (threads split
// the columns): the same bits for the same values. An epilogue (gemm.h) gets each block of columns
// once it is final.
#include <algorithm>
#include <cstring>
#include <utility>

#include "base/parallel.h"
#include "kernels/gemm.h"

namespace smelt::kernels {
namespace {

// Accumulators of one column block: 16 AVX-512 vectors of floats, in registers or L1.
constexpr int64_t kBlockCols = 256;
// Multiply-adds per thread chunk: below this, one thread (a fork costs a few microseconds).
constexpr int64_t kMinChunkMacs = 1 << 16;

// One register of the target: 16 floats with AVX-512, 8 with AVX, 4 with SSE (wider vectors
// emulated in narrower registers make the transposes far slower than the copies they replace).
#if defined(__AVX512F__)
constexpr int kVecBytes = 64;
#elif defined(__AVX__)
constexpr int kVecBytes = 32;
#else
constexpr int kVecBytes = 16;
#endif
template <class T>
using Vec [[gnu::vector_size(kVecBytes)]] = T;
template <class T>
constexpr int kLanes = int(kVecBytes / sizeof(T));


template <class T>
void finish(T alpha, T beta, const T* acc, T* c, int64_t n, int64_t csc) {
  for (int64_t j = 0; j < n; ++j) {
    T* p = c + j * csc;
    const T v = alpha * acc[j];
    *p = beta == T(0) ? v : v + beta * *p;  // beta == 0: C is not read (NaN does not propagate)
  }
}

// Columns [c0, c0 + kRegCols) of C with B's rows contiguous, the sums in registers (16 vectors:
// half the AVX-512 register file) instead of an L1 array loaded and stored at every k: B streams
// through at the cache's rate. Each lane adds A[k] B[k, j] in k order, as rows_block does.
template <class T>
constexpr int64_t kRegVectors = 16;
template <class T>
constexpr int64_t kRegCols = kRegVectors<T> * kLanes<T>;

template <class T>
void rows_registers(int64_t K, const T* A, int64_t csa, const T* B, int64_t rsb, int64_t c0, T* acc) {
  constexpr int64_t V = kRegVectors<T>, L = kLanes<T>;
  Vec<T> sum[V] = {};
  for (int64_t k = 0; k < K; ++k) {
    const T a = A[k * csa];
    const T* b = B + k * rsb + c0;
    for (int64_t v = 0; v < V; ++v) {
      Vec<T> bv;
      std::memcpy(&bv, b + v * L, sizeof(bv));
      sum[v] = sum[v] + a * bv;
    }
  }
  std::memcpy(acc, sum, sizeof(sum));
}

// Columns [c0, c1) of C with B's rows contiguous.
template <class T>
void rows_block(int64_t K, T alpha, const T* A, int64_t csa, const T* B, int64_t rsb, T beta, T* C, int64_t csc,
                int64_t c0, int64_t c1) {
  alignas(64) T acc[kBlockCols];
  const int64_t n = c1 - c0;
  int64_t j = 0;
  for (; j + kRegCols<T> <= n; j += kRegCols<T>) rows_registers(K, A, csa, B, rsb, c0 + j, acc + j);
  std::fill(acc + j, acc + n, T(0));
  for (int64_t k = 0; k < K; ++k) {
    const T a = A[k * csa];
    const T* __restrict b = B + k * rsb + c0;
    for (int64_t i = j; i < n; ++i) acc[i] += a * b[i];
  }
  finish(alpha, beta, acc, C + c0 * csc, n, csc);
}

// Columns [c0, c1) of C with both of B's strides > 1: B is read in 16 x 16 tiles, each copied
// transposed into L1, and every column accumulates over k in order exactly as rows_block does.
// The bits therefore do not depend on B's layout (a plan hands the GEMM a contiguous copy where
// the interpreter may pass a strided view).
template <class T>
void strided_block(int64_t K, T alpha, const T* A, int64_t csa, const T* B, int64_t rsb, int64_t csb, T beta, T* C,
                   int64_t csc, int64_t c0, int64_t c1) {
  constexpr int64_t kTile = 16;
  alignas(64) T acc[kBlockCols];
  alignas(64) T tile[kTile][kTile];  // tile[kk][j] = B[k0 + kk, col0 + j]
  const int64_t n = c1 - c0;
  std::fill(acc, acc + n, T(0));
  for (int64_t j0 = 0; j0 < n; j0 += kTile) {
    const int64_t nj = std::min(kTile, n - j0);
    for (int64_t k0 = 0; k0 < K; k0 += kTile) {
      const int64_t nk = std::min(kTile, K - k0);
      for (int64_t j = 0; j < nj; ++j) {
        const T* col = B + (c0 + j0 + j) * csb + k0 * rsb;
        for (int64_t kk = 0; kk < nk; ++kk) tile[kk][j] = col[kk * rsb];
      }
      for (int64_t kk = 0; kk < nk; ++kk) {
        const T a = A[(k0 + kk) * csa];
        T* __restrict out = acc + j0;
        for (int64_t j = 0; j < nj; ++j) out[j] += a * tile[kk][j];
      }
    }
  }
  finish(alpha, beta, acc, C + c0 * csc, n, csc);
}

// One stage of a register transpose: for rows i (bit `b` clear) and i + b, swaps the off-diagonal
// b x b blocks, i.e. exchanges bit b of the row index with bit b of the lane index.
template <int b, class T, size_t... l>
void transpose_stage(Vec<T>* r, std::index_sequence<l...>) {
  constexpr int L = kLanes<T>;
  for (int i = 0; i < L; ++i) {
    if (i & b) continue;
    const Vec<T> x = r[i], y = r[i + b];
    r[i] = __builtin_shufflevector(x, y, ((int(l) & b) == 0 ? int(l) : L + int(l) - b)...);
    r[i + b] = __builtin_shufflevector(x, y, ((int(l) & b) == 0 ? int(l) + b : L + int(l))...);
  }
}

// r[i][l] <- r[l][i]: each stage swaps one bit of the row index with the same bit of the lane.
template <class T, int b = 1>
void transpose_in_registers(Vec<T>* r) {
  if constexpr (b < kLanes<T>) {
    transpose_stage<b, T>(r, std::make_index_sequence<size_t(kLanes<T>)>{});
    transpose_in_registers<T, 2 * b>(r);
  }
}

// Columns cols + j csb for j in [0, L) (B's columns contiguous, rsb = 1) into acc: L x L tiles of
// B loaded along the columns and transposed in registers, so lane j accumulates A[k] B[k, j] over
// k in order, a multiply then an add, exactly as rows_block does (the same bits). (Two or four
// vectors of columns at once, to overlap their chains of adds, measured slower: the tiles no
// longer fit the registers.)
template <class T>
void column_vector(int64_t K, const T* A, int64_t csa, const T* cols, int64_t csb, T* acc) {
  constexpr int L = kLanes<T>;
  Vec<T> sum{};
  int64_t k0 = 0;
  for (; k0 + L <= K; k0 += L) {
    Vec<T> r[L];
    for (int j = 0; j < L; ++j) std::memcpy(&r[j], cols + j * csb + k0, sizeof(Vec<T>));
    transpose_in_registers<T>(r);  // r[kk][j] = B[k0 + kk, column j]
    for (int kk = 0; kk < L; ++kk) sum = sum + A[(k0 + kk) * csa] * r[kk];
  }
  for (; k0 < K; ++k0) {
    Vec<T> b;
    for (int j = 0; j < L; ++j) b[j] = cols[j * csb + k0];
    sum = sum + A[k0 * csa] * b;
  }
  std::memcpy(acc, &sum, sizeof(sum));
}

// Columns [c0, c1) of C with B's columns contiguous (rsb = 1, a transposed weight): a vector of
// columns at a time, then the columns left over one by one, each summed over k in order.
template <class T>
void columns_block(int64_t K, T alpha, const T* A, int64_t csa, const T* B, int64_t csb, T beta, T* C, int64_t csc,
                   int64_t c0, int64_t c1) {
  constexpr int L = kLanes<T>;
  alignas(64) T acc[kBlockCols];
  const int64_t n = c1 - c0;
  int64_t j = 0;
  for (; j + L <= n; j += L) column_vector(K, A, csa, B + (c0 + j) * csb, csb, acc + j);
  for (; j < n; ++j) {
    const T* col = B + (c0 + j) * csb;
    T s = 0;
    for (int64_t k = 0; k < K; ++k) s += A[k * csa] * col[k];
    acc[j] = s;
  }
  finish(alpha, beta, acc, C + c0 * csc, n, csc);
}

}  // namespace

template <class T>
bool gemm_row_vector(int64_t N, int64_t K, T alpha, const T* A, int64_t csa, const T* B, int64_t rsb, int64_t csb,
                     T beta, T* C, int64_t csc, const GemmEpilogue* epilogue) {
  const bool rows = csb == 1;
  const int64_t blocks = (N + kBlockCols - 1) / kBlockCols;
  const int64_t grain = std::max<int64_t>(1, kMinChunkMacs / std::max<int64_t>(1, K * kBlockCols));
  parallel_for(blocks, grain, [&](int64_t begin, int64_t end) {
    for (int64_t blk = begin; blk < end; ++blk) {
      const int64_t c0 = blk * kBlockCols, c1 = std::min(N, c0 + kBlockCols);
      if (rows) {
        rows_block(K, alpha, A, csa, B, rsb, beta, C, csc, c0, c1);
      } else if (rsb == 1) {
        columns_block(K, alpha, A, csa, B, csb, beta, C, csc, c0, c1);
      } else {
        strided_block(K, alpha, A, csa, B, rsb, csb, beta, C, csc, c0, c1);
      }
      if (epilogue) (*epilogue)(0, 1, c0, c1);
    }
  });
  return true;
}

template bool gemm_row_vector<float>(int64_t, int64_t, float, const float*, int64_t, const float*, int64_t, int64_t,
                                     float, float*, int64_t, const GemmEpilogue*);
template bool gemm_row_vector<double>(int64_t, int64_t, double, const double*, int64_t, const double*, int64_t,
                                      int64_t, double, double*, int64_t, const GemmEpilogue*);

}  // namespace smelt::kernels
