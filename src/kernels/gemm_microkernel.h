// The register-blocked GEMM micro-kernel and its blocking parameters, per instruction set.
//
// The micro-kernel computes an (MR, NR) tile of C from a packed A micro-panel (kc columns of MR
// rows: a[k * MR + i]) and a packed B micro-panel (kc rows of NR columns: b[k * NR + j]). The
// tile lives in MR x NV vector registers (NR = NV * vector width): per k it loads NV vectors of
// B, broadcasts each of the MR values of A and issues MR * NV fused multiply-adds. Tile shapes
// leave room for the B vectors and one broadcast: AVX-512 (32 registers) 12 x 2 accumulators,
// AVX2 (16 registers) 6 x 2, the portable fallback a scalar 4 x 8 tile.
//
// Blocking (GotoBLAS/BLIS): a kc x NR panel of B stays in L1 while MR x kc panels of A stream
// from an mc x kc block in L2; the kc x nc block of B sits in L3.
#pragma once

#include <cstdint>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

namespace smelt::kernels::gemm_detail {

// A vector of T and the handful of operations the micro-kernel needs.
template <class T>
struct Simd;

#if defined(__AVX512F__)
inline constexpr const char* kIsaName = "avx512";
template <>
struct Simd<float> {
  using V = __m512;
  static constexpr int kWidth = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static V set(float v) { return _mm512_set1_ps(v); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
};
template <>
struct Simd<double> {
  using V = __m512d;
  static constexpr int kWidth = 8;
  static V zero() { return _mm512_setzero_pd(); }
  static V load(const double* p) { return _mm512_loadu_pd(p); }
  static V broadcast(const double* p) { return _mm512_set1_pd(*p); }
  static V set(double v) { return _mm512_set1_pd(v); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_pd(a, b); }
  static void store(double* p, V v) { _mm512_storeu_pd(p, v); }
};
template <class T>
struct TileShape { static constexpr int MR = 12, NV = 2; };
#elif defined(__AVX2__) && defined(__FMA__)
inline constexpr const char* kIsaName = "avx2";
template <>
struct Simd<float> {
  using V = __m256;
  static constexpr int kWidth = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static V set(float v) { return _mm256_set1_ps(v); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
};
template <>
struct Simd<double> {
  using V = __m256d;
  static constexpr int kWidth = 4;
  static V zero() { return _mm256_setzero_pd(); }
  static V load(const double* p) { return _mm256_loadu_pd(p); }
  static V broadcast(const double* p) { return _mm256_broadcast_sd(p); }
  static V set(double v) { return _mm256_set1_pd(v); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
  static V mul(V a, V b) { return _mm256_mul_pd(a, b); }
  static void store(double* p, V v) { _mm256_storeu_pd(p, v); }
};
template <class T>
struct TileShape { static constexpr int MR = 6, NV = 2; };
#else
inline constexpr const char* kIsaName = "portable";
// A "vector" of one element: the same kernel code, left to the compiler's auto-vectorizer.
template <class T>
struct Simd {
  using V = T;
  static constexpr int kWidth = 1;
  static V zero() { return T(0); }
  static V load(const T* p) { return *p; }
  static V broadcast(const T* p) { return *p; }
  static V set(T v) { return v; }
  static V fma(V a, V b, V c) { return a * b + c; }
  static V mul(V a, V b) { return a * b; }
  static void store(T* p, V v) { *p = v; }
};
template <class T>
struct TileShape { static constexpr int MR = 4, NV = 8; };
#endif

// Tile and cache-block sizes for T. kc x NR of B fits L1 (32 KiB for float at kc = 256 on
// AVX-512); mc x kc of A fits L2; nc bounds the packed B block (L3).
template <class T>
struct GemmConfig {
  static constexpr int MR = TileShape<T>::MR;
  static constexpr int NV = TileShape<T>::NV;
  static constexpr int NR = NV * Simd<T>::kWidth;
  static constexpr int64_t KC = sizeof(T) == 4 ? 256 : 192;
  static constexpr int64_t MC = MR * (sizeof(T) == 4 ? 16 : 12);
  static constexpr int64_t NC = NR * 64;
};

// tile (MR, NR) = sum_k a[k * MR + i] * b[k * NR + j] for a full tile, then
//   C = alpha * tile + beta * C   (beta == 0: C is not read)
// when C's columns are unit-stride (csc == 1) and the tile is whole; otherwise the tile is stored
// to `scratch` (MR * NR, row-major) with no scaling and the caller merges it.
// Kept out of line: inlined into the blocking loops, GCC 12 ran short of registers and spilled a
// B vector to the stack, reloading it in every FMA.
template <class T>
__attribute__((noinline)) void micro_kernel(int64_t kc, const T* __restrict a, const T* __restrict b, T alpha,
                         T beta, T* __restrict c, int64_t rsc, bool direct, T* __restrict scratch) {
  using S = Simd<T>;
  using V = typename S::V;
  constexpr int MR = GemmConfig<T>::MR, NV = GemmConfig<T>::NV, W = S::kWidth;
  constexpr int NR = NV * W;
  V acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[i][v] = S::zero();
  }
#pragma GCC unroll 2
  for (int64_t k = 0; k < kc; ++k) {
    V bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = S::load(b + v * W);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      V av = S::broadcast(a + i);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[i][v] = S::fma(av, bv[v], acc[i][v]);
    }
    a += MR;
    b += NR;
  }
  if (!direct) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) S::store(scratch + i * NR + v * W, acc[i][v]);
    }
    return;
  }
  const V va = S::set(alpha);
  if (beta == T(0)) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) S::store(c + i * rsc + v * W, S::mul(va, acc[i][v]));
    }
  } else {
    const V vb = S::set(beta);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) {
        T* p = c + i * rsc + v * W;
        S::store(p, S::fma(va, acc[i][v], S::mul(vb, S::load(p))));
      }
    }
  }
}

}  // namespace smelt::kernels::gemm_detail
