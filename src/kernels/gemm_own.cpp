// smelt's own GEMM: GotoBLAS/BLIS loop structure around the micro-kernel of gemm_microkernel.h.
//
//   for jc over N in steps of nc          (B block, L3)
//     for pc over K in steps of kc        pack B (kc, nc) into NR-column micro-panels
//       for ic over M in steps of mc      pack A (mc, kc) into MR-row micro-panels (L2)
//         for jr over nc in steps of NR   B micro-panel stays in L1
//           for ir over mc in steps of MR micro-kernel -> C tile (MR, NR)
//
// Packing absorbs any strides (transposed, sliced, broadcast operands) and zero-pads the edges, so
// the micro-kernel always runs whole tiles; partial tiles and non-unit column strides of C are
// merged from a scratch tile. Threads take strips of C (gemm_threading.h), each packing into its
// own buffers: no barriers inside a strip. An epilogue (gemm.h) runs in the last K block, after
// each group of NR-column micro-panels spanning about kEpilogueCols columns of the (mc, nc)
// block: that part of C was just written and still sits in L2.
#include <algorithm>
#include <cstdlib>
#include <new>

#include "base/parallel.h"
#include "kernels/gemm.h"
#include "kernels/gemm_microkernel.h"
#include "kernels/gemm_threading.h"

namespace smelt::kernels {
namespace {

using gemm_detail::GemmConfig;

// Columns of C an epilogue call covers at most (rounded up to whole micro-panels): MC x 256
// floats is 192 KiB with AVX-512 tiles, well inside L2, and long rows keep the call overhead and
// the epilogue's per-row setup small.
constexpr int64_t kEpilogueCols = 256;

// A thread's packing buffer: 64-byte aligned, grown on demand, kept between calls.
template <class T>
class PackBuffer {
 public:
  ~PackBuffer() { std::free(data_); }
  T* get(size_t n) {
    if (n > size_) {
      std::free(data_);
      size_t bytes = (n * sizeof(T) + 63) / 64 * 64;
      data_ = static_cast<T*>(std::aligned_alloc(64, bytes));
      if (!data_) throw std::bad_alloc();
      size_ = n;
    }
    return data_;
  }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

// a: the (mc, kc) block of A. dst: ceil(mc / MR) micro-panels, each dst[k * MR + i].
template <class T>
void pack_a(int64_t mc, int64_t kc, const T* a, int64_t rsa, int64_t csa, T* dst) {
  constexpr int MR = GemmConfig<T>::MR;
  for (int64_t i0 = 0; i0 < mc; i0 += MR, dst += MR * kc) {
    const int64_t rows = std::min<int64_t>(MR, mc - i0);
    const T* src = a + i0 * rsa;
    if (rows == MR && rsa == 1) {  // column-major A: each k is MR contiguous values
      for (int64_t k = 0; k < kc; ++k) {
        for (int i = 0; i < MR; ++i) dst[k * MR + i] = src[k * csa + i];
      }
      continue;
    }
    for (int64_t i = 0; i < rows; ++i) {
      const T* row = src + i * rsa;
      for (int64_t k = 0; k < kc; ++k) dst[k * MR + i] = row[k * csa];
    }
    for (int64_t i = rows; i < MR; ++i) {
      for (int64_t k = 0; k < kc; ++k) dst[k * MR + i] = T(0);
    }
  }
}

// b: the (kc, nc) block of B. dst: ceil(nc / NR) micro-panels, each dst[k * NR + j].
template <class T>
void pack_b(int64_t kc, int64_t nc, const T* b, int64_t rsb, int64_t csb, T* dst) {
  constexpr int NR = GemmConfig<T>::NR;
  for (int64_t j0 = 0; j0 < nc; j0 += NR, dst += NR * kc) {
    const int64_t cols = std::min<int64_t>(NR, nc - j0);
    const T* src = b + j0 * csb;
    if (cols == NR && csb == 1) {  // row-major B: each k is NR contiguous values
      for (int64_t k = 0; k < kc; ++k) {
        const T* row = src + k * rsb;
        for (int j = 0; j < NR; ++j) dst[k * NR + j] = row[j];
      }
      continue;
    }
    for (int64_t j = 0; j < cols; ++j) {
      const T* col = src + j * csb;
      for (int64_t k = 0; k < kc; ++k) dst[k * NR + j] = col[k * rsb];
    }
    for (int64_t j = cols; j < NR; ++j) {
      for (int64_t k = 0; k < kc; ++k) dst[k * NR + j] = T(0);
    }
  }
}

// c (mr, nr) = alpha * tile + beta * c; tile (MR, NR) row-major.
template <class T>
void merge_tile(int64_t mr, int64_t nr, const T* tile, T alpha, T beta, T* c, int64_t rsc,
                int64_t csc) {
  constexpr int NR = GemmConfig<T>::NR;
  for (int64_t i = 0; i < mr; ++i) {
    for (int64_t j = 0; j < nr; ++j) {
      T* p = c + i * rsc + j * csc;
      T v = alpha * tile[i * NR + j];
      *p = beta == T(0) ? v : v + beta * *p;
    }
  }
}

// C = beta C (beta == 0: zeros, C not read).
template <class T>
void scale_c(int64_t M, int64_t N, T beta, T* C, int64_t rsc, int64_t csc) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      T* p = C + i * rsc + j * csc;
      *p = beta == T(0) ? T(0) : beta * *p;
    }
  }
}

// C (M, N) is the part of the caller's C starting at row row0, column col0: the epilogue gets the
// caller's coordinates.
template <class T>
void gemm_serial(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t rsa, int64_t csa,
                 const T* B, int64_t rsb, int64_t csb, T beta, T* C, int64_t rsc, int64_t csc,
                 const GemmEpilogue* epilogue, int64_t row0, int64_t col0) {
  using Cfg = GemmConfig<T>;
  constexpr int MR = Cfg::MR, NR = Cfg::NR;
  static thread_local PackBuffer<T> a_buffer, b_buffer;
  alignas(64) T scratch[MR * NR];
  const int64_t kc_max = std::min<int64_t>(K, Cfg::KC);
  T* a_pack = a_buffer.get(size_t((std::min<int64_t>(M, Cfg::MC) + MR - 1) / MR * MR * kc_max));
  T* b_pack = b_buffer.get(size_t((std::min<int64_t>(N, Cfg::NC) + NR - 1) / NR * NR * kc_max));

  for (int64_t jc = 0; jc < N; jc += Cfg::NC) {
    const int64_t nc = std::min<int64_t>(Cfg::NC, N - jc);
    for (int64_t pc = 0; pc < K; pc += Cfg::KC) {
      const int64_t kc = std::min<int64_t>(Cfg::KC, K - pc);
      const T beta_block = pc == 0 ? beta : T(1);  // later k blocks accumulate
      const bool last_block = pc + kc >= K;
      pack_b(kc, nc, B + pc * rsb + jc * csb, rsb, csb, b_pack);
      for (int64_t ic = 0; ic < M; ic += Cfg::MC) {
        const int64_t mc = std::min<int64_t>(Cfg::MC, M - ic);
        pack_a(mc, kc, A + ic * rsa + pc * csa, rsa, csa, a_pack);
        int64_t finished = 0;  // columns of this block already handed to the epilogue
        for (int64_t jr = 0; jr < nc; jr += NR) {
          const int64_t nr = std::min<int64_t>(NR, nc - jr);
          const T* b_panel = b_pack + jr * kc;
          for (int64_t ir = 0; ir < mc; ir += MR) {
            const int64_t mr = std::min<int64_t>(MR, mc - ir);
            T* c = C + (ic + ir) * rsc + (jc + jr) * csc;
            const bool direct = mr == MR && nr == NR && csc == 1;
            gemm_detail::micro_kernel<T>(kc, a_pack + ir * kc, b_panel, alpha, beta_block, c, rsc,
                                         direct, scratch);
            if (!direct) merge_tile(mr, nr, scratch, alpha, beta_block, c, rsc, csc);
          }
          const int64_t done = std::min(jr + NR, nc);
          if (epilogue && last_block && (done - finished >= kEpilogueCols || done == nc)) {
            (*epilogue)(row0 + ic, row0 + ic + mc, col0 + jc + finished, col0 + jc + done);
            finished = done;
          }
        }
      }
    }
  }
}

}  // namespace

template <class T>
void gemm_own(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t rsa, int64_t csa,
              const T* B, int64_t rsb, int64_t csb, T beta, T* C, int64_t rsc, int64_t csc,
              const GemmEpilogue* epilogue) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0 || alpha == T(0)) {
    scale_c(M, N, beta, C, rsc, csc);
    if (epilogue) (*epilogue)(0, M, 0, N);
    return;
  }
  if (M == 1 && gemm_row_vector(N, K, alpha, A, csa, B, rsb, csb, beta, C, csc, epilogue)) return;
  // One column (a 1x1 convolution on a 1x1 image: squeeze-excitation, a classifier as a conv):
  // C^T = B^T A^T, the row-vector path with A read in place as the transposed operand. Its
  // epilogue sees C's rows as the columns it finished.
  if (N == 1) {
    struct Transposed {
      const GemmEpilogue* outer;
      GemmEpilogue self;
    } t{epilogue, {}};
    t.self.fn = [](void* ctx, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
      (*static_cast<const Transposed*>(ctx)->outer)(c0, c1, r0, r1);
    };
    t.self.ctx = &t;
    if (gemm_row_vector(M, K, alpha, B, rsb, A, csa, rsa, beta, C, rsc, epilogue ? &t.self : nullptr)) return;
  }
  using Cfg = GemmConfig<T>;
  gemm_detail::for_each_strip(M, N, K, Cfg::MR, Cfg::NR, [&](bool split_n, int64_t begin, int64_t end) {
    if (split_n) {
      gemm_serial(M, end - begin, K, alpha, A, rsa, csa, B + begin * csb, rsb, csb, beta,
                  C + begin * csc, rsc, csc, epilogue, 0, begin);
    } else {
      gemm_serial(end - begin, N, K, alpha, A + begin * rsa, rsa, csa, B, rsb, csb, beta,
                  C + begin * rsc, rsc, csc, epilogue, begin, 0);
    }
  });
}

template <class T>
std::string gemm_own_kernel_name() {
  using Cfg = GemmConfig<T>;
  return std::string(gemm_detail::kIsaName) + " " + std::to_string(Cfg::MR) + "x" +
         std::to_string(Cfg::NR);
}

#define SMELT_GEMM_OWN_INSTANTIATE(T)                                                          \
  template void gemm_own<T>(int64_t, int64_t, int64_t, T, const T*, int64_t, int64_t,         \
                            const T*, int64_t, int64_t, T, T*, int64_t, int64_t,              \
                            const GemmEpilogue*);                                             \
  template std::string gemm_own_kernel_name<T>();
SMELT_GEMM_OWN_INSTANTIATE(float)
SMELT_GEMM_OWN_INSTANTIATE(double)
#undef SMELT_GEMM_OWN_INSTANTIATE

}  // namespace smelt::kernels
