// General matrix multiply with arbitrary strides:
//
//   C = alpha * A B + beta * C,   A (M, K), B (K, N), C (M, N)
//
// Element (i, j) of A lives at A[i * rsa + j * csa] (row stride, column stride, in elements), so
// row-major, column-major, transposed and sliced matrices are all described without copies; a
// stride may be 0 for broadcast rows/columns of A and B. beta == 0 overwrites C without reading it
// (NaNs in C do not propagate); K == 0 gives C = beta C. C must not overlap A or B.
//
// Two implementations, selectable by name so the tuner can choose:
//   Own      — smelt's packed, cache-blocked GEMM (gemm_own.cpp): AVX-512 / AVX2 / portable
//              register-blocked micro-kernels, OpenMP over C's columns or rows.
//   OpenBlas — cblas_sgemm/dgemm. OpenBLAS runs single-threaded and smelt splits C over its own
//              OpenMP threads, so the two thread pools never compete for the cores.
//   Auto     — the faster of the two for this shape class, measured on scratch buffers when the
//              class is first met, before that call computes anything (gemm.cpp); overridable
//              with SMELT_GEMM=own|openblas|auto. The same call gives bitwise-identical results
//              every time within a process; SMELT_GEMM pins the choice across processes.
//              Own's bits do not depend on the thread count; OpenBlas's do (its blocking follows
//              the strip each thread gets), so runs that must match bit for bit across thread
//              counts use SMELT_GEMM=own.
// Every implementation runs on one thread when called inside a parallel region.
//
// Epilogue: an optional callback that finishes C while it is still in cache (a compiled plan runs
// a fused bias + activation there, codegen's tile entry). epilogue(r0, r1, c0, c1) is called
// once for each tile of a partition of C into rectangles, rows [r0, r1) and columns [c0, c1) of
// C as the caller passed it, right after the tile's final values are stored (after the last K
// block), from the thread that computed it. Tiles never overlap; calls run concurrently on
// different threads. The epilogue changes nothing about the values C receives: with or without
// it the same implementation computes the same bits.
//   Own      — after each group of micro-panels of a C block (MC rows, about kEpilogueCols
//              columns: a few hundred KiB, in L2);
//   OpenBlas — cblas cannot call back: after each thread's strip, in panels of rows.
#pragma once

#include <cstdint>
#include <string>

namespace smelt::kernels {

enum class GemmImpl : uint8_t { Auto, Own, OpenBlas };
const char* gemm_impl_name(GemmImpl impl);

// An epilogue that is y = min(max((y + bias[o]) + residual, lo), hi) on every output channel o,
// as data: a library that can apply it while the output is still in registers (oneDNN's bias,
// binary and eltwise post-ops, kernels/conv_onednn.cpp) may do so instead of calling
// GemmEpilogue::fn. Whoever sets it promises that fn computes exactly this; the library uses it
// only where the two agree up to rounding (no NaN or infinity can reach the epilogue; the sign of
// a zero may differ).
struct EpilogueAsPostOps {
  const float* bias = nullptr;      // (O) real channels; nullptr: none
  const float* residual = nullptr;  // y's shape and layout (a residual connection); nullptr: none
  float lo = -__builtin_inff(), hi = __builtin_inff();
};

struct GemmEpilogue {
  void (*fn)(void* ctx, int64_t r0, int64_t r1, int64_t c0, int64_t c1) = nullptr;
  void* ctx = nullptr;
  const EpilogueAsPostOps* post_ops = nullptr;  // fn's math as data, when it is that simple
  void operator()(int64_t r0, int64_t r1, int64_t c0, int64_t c1) const { fn(ctx, r0, r1, c0, c1); }
};

// `outer` seen from a block of C's rows starting at row `row0`: what a caller that runs one GEMM
// per block of rows (a batch entry, an image) hands each of them, so that every tile reaches
// `outer` in the whole output's coordinates. get() is nullptr when outer is.
class GemmEpilogueShift {
 public:
  GemmEpilogueShift(const GemmEpilogue* outer, int64_t row0) : outer_(outer), row0_(row0) {
    shifted_.fn = [](void* ctx, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
      const auto* s = static_cast<const GemmEpilogueShift*>(ctx);
      (*s->outer_)(s->row0_ + r0, s->row0_ + r1, c0, c1);
    };
    shifted_.ctx = this;
  }
  GemmEpilogueShift(const GemmEpilogueShift&) = delete;
  GemmEpilogueShift& operator=(const GemmEpilogueShift&) = delete;
  const GemmEpilogue* get() const { return outer_ ? &shifted_ : nullptr; }

 private:
  const GemmEpilogue* outer_;
  int64_t row0_;
  GemmEpilogue shifted_;
};

template <class T>
void gemm(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t rsa, int64_t csa,
          const T* B, int64_t rsb, int64_t csb, T beta, T* C, int64_t rsc, int64_t csc,
          GemmImpl impl = GemmImpl::Auto, const GemmEpilogue* epilogue = nullptr);

// The two implementations (no selection).
template <class T>
void gemm_own(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t rsa, int64_t csa,
              const T* B, int64_t rsb, int64_t csb, T beta, T* C, int64_t rsc, int64_t csc,
              const GemmEpilogue* epilogue = nullptr);
// gemm_own's path for M = 1 (kernels/gemm_row_vector.cpp): B read in place, no packing; every
// element summed over k in order, whatever B's layout. Always true (the caller's fallback is
// kept for a future refusal).
template <class T>
bool gemm_row_vector(int64_t N, int64_t K, T alpha, const T* A, int64_t csa, const T* B, int64_t rsb, int64_t csb,
                     T beta, T* C, int64_t csc, const GemmEpilogue* epilogue);
// Falls back to gemm_own when a layout cannot be expressed in BLAS terms (no unit stride, or a
// leading dimension smaller than the matrix, e.g. a broadcast stride of 0).
template <class T>
void gemm_openblas(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t rsa, int64_t csa,
                   const T* B, int64_t rsb, int64_t csb, T beta, T* C, int64_t rsc, int64_t csc,
                   const GemmEpilogue* epilogue = nullptr);

// Which implementation Auto uses for this problem; Auto when its class has not been met yet
// (gemm measures a new class on its first call; this only reports).
template <class T>
GemmImpl gemm_choice(int64_t M, int64_t N, int64_t K);

// One line per shape class seen: its key, the measured times and the choice.
std::string gemm_selection_report();
// Forgets every decision (tests, benchmarks).
void gemm_selection_reset();

// OpenBLAS's build description (openblas_get_config: version, target, threading), for cache keys.
std::string gemm_openblas_config();

// The micro-kernel the Own implementation was compiled with, e.g. "avx512 12x32".
template <class T>
std::string gemm_own_kernel_name();

}  // namespace smelt::kernels
