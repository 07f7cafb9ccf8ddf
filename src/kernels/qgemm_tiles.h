// The micro-kernels of the integer GEMM (kernels/qgemm.h), shared by its two orientations: one
// register tile of MR rows x NR columns of int32 accumulators, over every k group.
//
// The broadcast operand comes packed as int32 words, per k group MR of them (one per row), each
// holding that row's `group` values: 4 bytes (Portable, VNNI) or 2 int16 (AVX2). The vector
// operand comes as a panel of NR columns, per k group NR x group values. `BroadcastSigned` says
// which operand is int8: false for activations x weights (A uint8 broadcast, B int8 vectors),
// true for weights x activations (W int8 broadcast, X uint8 vectors). vpdpbusd takes its unsigned
// operand first, so only the order of its arguments changes; vpmaddwd multiplies int16 pairs and
// needs nothing; the portable path reads each byte with its own sign.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/qgemm.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace smelt::kernels::qtiles {

constexpr int kVnniMr = 8, kVnniNr = 32, kVnniGroup = 4;
constexpr int kAvx2Mr = 6, kAvx2Nr = 16, kAvx2Group = 2;
constexpr int kPortableMr = 4;  // the portable path reads the VNNI packing
// AMX: 2 x 2 tiles of 16 x 16 int32 accumulators; a panel has the VNNI layout (32 columns of 4
// bytes per k group), read as two B tiles of 16 columns, 128 bytes apart per k group.
constexpr int kAmxMr = 32, kAmxNr = 32, kAmxBlock = 16;  // kAmxBlock k groups per tile product

inline int tile_rows(QGemmIsa isa) {
  switch (isa) {
    case QGemmIsa::Amx: return kAmxMr;
    case QGemmIsa::Avx512Vnni: return kVnniMr;
    case QGemmIsa::Avx2: return kAvx2Mr;
    case QGemmIsa::Portable: return kPortableMr;
  }
  return kPortableMr;
}
inline int tile_columns(QGemmIsa isa) { return isa == QGemmIsa::Avx2 ? kAvx2Nr : kVnniNr; }
inline int k_group(QGemmIsa isa) { return isa == QGemmIsa::Avx2 ? kAvx2Group : kVnniGroup; }
// AMX splits k's groups into the fewest tile products (of at most kAmxBlock groups each) of one
// size, as even as they go: 37 groups (the 147 taps of a 7x7 RGB stem) are 3 products of 13
// (39 packed, not 48), 36 are 3 of 12, 7 one of 7. amx_block gives the same size for the padded
// count as for the count itself (at least 1: a tile of no rows is not a valid configuration).
inline int64_t amx_products(int64_t k_groups) { return std::max<int64_t>(1, (k_groups + kAmxBlock - 1) / kAmxBlock); }
inline int amx_block(int64_t k_groups) {
  const int64_t products = amx_products(k_groups);
  return int(std::max<int64_t>(1, (k_groups + products - 1) / products));
}
// k groups, rounded as the packing pads them (Amx: to whole tile products).
inline int64_t padded_k_groups(QGemmIsa isa, int64_t k) {
  const int64_t groups = (k + k_group(isa) - 1) / k_group(isa);
  if (isa != QGemmIsa::Amx || groups == 0) return groups;
  return int64_t(amx_block(groups)) * amx_products(groups);
}

// c[i * NR + j] = sum over the k groups of the broadcast row i times the panel's column j.
template <bool BroadcastSigned>
void tile_portable(const int32_t* ap, const int8_t* bp, int64_t k_groups, int32_t* c) {
  constexpr int MR = kPortableMr, NR = kVnniNr, G = kVnniGroup;
  uint32_t acc[MR][NR] = {};  // wrapping, as vpdpbusd's lanes (signed overflow would be undefined)
  for (int64_t q = 0; q < k_groups; ++q) {
    const int8_t* bq = bp + q * NR * G;
    for (int i = 0; i < MR; ++i) {
      const uint32_t word = uint32_t(ap[q * MR + i]);
      for (int j = 0; j < NR; ++j) {
        int32_t s = 0;
        for (int r = 0; r < G; ++r) {
          const uint8_t byte = uint8_t(word >> (8 * r));
          const int32_t a = BroadcastSigned ? int32_t(int8_t(byte)) : int32_t(byte);
          const int32_t b = BroadcastSigned ? int32_t(uint8_t(bq[j * G + r])) : int32_t(bq[j * G + r]);
          s += a * b;
        }
        acc[i][j] += uint32_t(s);
      }
    }
  }
  std::memcpy(c, acc, sizeof acc);
}

#if defined(__x86_64__)
template <bool BroadcastSigned>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void tile_vnni(const int32_t* ap,
                                                                       const int8_t* bp,
                                                                       int64_t k_groups,
                                                                       int32_t* c) {
  constexpr int MR = kVnniMr, NR = kVnniNr, G = kVnniGroup;
  __m512i acc[MR][2];
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_si512();
  for (int64_t q = 0; q < k_groups; ++q) {
    const __m512i b0 = _mm512_loadu_si512(bp + q * NR * G);
    const __m512i b1 = _mm512_loadu_si512(bp + q * NR * G + 64);
    for (int i = 0; i < MR; ++i) {
      const __m512i av = _mm512_set1_epi32(ap[q * MR + i]);
      if constexpr (BroadcastSigned) {
        acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], b0, av);
        acc[i][1] = _mm512_dpbusd_epi32(acc[i][1], b1, av);
      } else {
        acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], av, b0);
        acc[i][1] = _mm512_dpbusd_epi32(acc[i][1], av, b1);
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    _mm512_storeu_si512(c + i * NR, acc[i][0]);
    _mm512_storeu_si512(c + i * NR + 16, acc[i][1]);
  }
}

// tile_vnni<false> for a tile of one row (a matrix-vector product, M = 1: the classifier of a
// network at batch 1), which would otherwise compute 8 rows for 1. The row's 2 accumulators would
// make one dependency chain of vpdpbusd latencies, so four k groups go to four pairs of partial
// sums, added at the end (wrapping: the same int32 bits in any order).
__attribute__((target("avx512f,avx512bw,avx512vnni"))) inline void tile_vnni_one_row(const int32_t* ap,
                                                                                     const int8_t* bp,
                                                                                     int64_t k_groups,
                                                                                     int32_t* c) {
  constexpr int MR = kVnniMr, NR = kVnniNr, G = kVnniGroup, kChains = 4;
  __m512i acc[kChains][2];
  for (int i = 0; i < kChains; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_si512();
  int64_t q = 0;
  for (; q + kChains <= k_groups; q += kChains) {
    for (int i = 0; i < kChains; ++i) {
      const __m512i av = _mm512_set1_epi32(ap[(q + i) * MR]);
      acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], av, _mm512_loadu_si512(bp + (q + i) * NR * G));
      acc[i][1] = _mm512_dpbusd_epi32(acc[i][1], av, _mm512_loadu_si512(bp + (q + i) * NR * G + 64));
    }
  }
  for (; q < k_groups; ++q) {
    const __m512i av = _mm512_set1_epi32(ap[q * MR]);
    acc[0][0] = _mm512_dpbusd_epi32(acc[0][0], av, _mm512_loadu_si512(bp + q * NR * G));
    acc[0][1] = _mm512_dpbusd_epi32(acc[0][1], av, _mm512_loadu_si512(bp + q * NR * G + 64));
  }
  for (int h = 0; h < 2; ++h) {
    const __m512i sum = _mm512_add_epi32(_mm512_add_epi32(acc[0][h], acc[1][h]), _mm512_add_epi32(acc[2][h], acc[3][h]));
    _mm512_storeu_si512(c + h * 16, sum);
  }
}

// AMX's 2 x 2 block of tiles (tmm0-3: 16 x 16 int32 accumulators each) for 32 rows x 32 columns:
// zeroed, one product step (A tiles tmm4/5: rows 0-15 and 16-31 from `a`, `a_half` bytes apart,
// rows `a_stride` apart; B tiles tmm6/7: columns 0-15 and 16-31 from `x`, 64 bytes apart, rows
// `x_stride` apart; TDPBSUD multiplies signed A bytes by unsigned B bytes, four per int32 lane,
// exactly), and stored to c (32 x 32 int32). The caller holds the tile configuration (AmxTiles).
__attribute__((target("amx-tile"))) inline void amx_zero() {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
}
__attribute__((target("amx-tile,amx-int8"))) inline void amx_product(const void* a, int64_t a_half, int64_t a_stride,
                                                                    const void* x, int64_t x_stride) {
  _tile_loadd(4, a, a_stride);
  _tile_loadd(5, static_cast<const char*>(a) + a_half, a_stride);
  _tile_loadd(6, x, x_stride);
  _tile_loadd(7, static_cast<const char*>(x) + 64, x_stride);
  _tile_dpbsud(0, 4, 6);
  _tile_dpbsud(1, 4, 7);
  _tile_dpbsud(2, 5, 6);
  _tile_dpbsud(3, 5, 7);
}
__attribute__((target("amx-tile"))) inline void amx_store(int32_t* c) {
  constexpr int kRowBytes = kAmxNr * 4;
  _tile_stored(0, c, kRowBytes);
  _tile_stored(1, c + 16, kRowBytes);
  _tile_stored(2, c + 16 * kAmxNr, kRowBytes);
  _tile_stored(3, c + 16 * kAmxNr + 16, kRowBytes);
}

// The AMX tile product of a 32-row weight tile (two A tiles per k block, packed by qgemm_pack_w)
// and a 32-column panel (two B tiles per k block, a panel's k groups 128 bytes apart). A k block
// is `block` groups (amx_block); c is 32 x 32 int32.
__attribute__((target("amx-tile,amx-int8"))) inline void tile_amx(const int32_t* wp, const int8_t* panel,
                                                                 int64_t k_blocks, int block, int32_t* c) {
  constexpr int kPanelStride = kAmxNr * kVnniGroup;  // bytes per k group of a panel
  const int64_t a_stride = block * 4, a_tile = 16 * block;  // bytes per A row, words per A tile
  amx_zero();
  for (int64_t b = 0; b < k_blocks; ++b) {
    amx_product(wp + b * 2 * a_tile, a_tile * 4, a_stride, panel + b * block * kPanelStride, kPanelStride);
  }
  amx_store(c);
}

// The tile configuration of the calling thread for tile_amx with k blocks of `block` groups,
// loaded for a scope: C tiles 16 x 16 int32, A tiles 16 rows of `block` words, B tiles `block`
// rows of 16 words. Released at the end, so that the thread's tile state need not be saved.
class AmxTiles {
 public:
  __attribute__((target("amx-tile"))) explicit AmxTiles(int block) {
    struct alignas(64) Config {
      uint8_t palette = 1, start_row = 0;
      uint8_t reserved[14] = {};
      uint16_t bytes_per_row[16] = {};
      uint8_t rows[16] = {};
    } config;
    static_assert(sizeof(Config) == 64);
    for (int t = 0; t < 4; ++t) config.bytes_per_row[t] = 64, config.rows[t] = 16;  // C
    for (int t = 4; t < 6; ++t) config.bytes_per_row[t] = uint16_t(4 * block), config.rows[t] = 16;  // A
    for (int t = 6; t < 8; ++t) config.bytes_per_row[t] = 64, config.rows[t] = uint8_t(block);  // B
    _tile_loadconfig(&config);
  }
  __attribute__((target("amx-tile"))) ~AmxTiles() { _tile_release(); }
  AmxTiles(const AmxTiles&) = delete;
  AmxTiles& operator=(const AmxTiles&) = delete;
};

__attribute__((target("avx2"))) inline void tile_avx2(const int32_t* ap, const int16_t* bp,
                                                      int64_t k_groups, int32_t* c) {
  constexpr int MR = kAvx2Mr, NR = kAvx2Nr, G = kAvx2Group;
  __m256i acc[MR][2];
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_si256();
  for (int64_t q = 0; q < k_groups; ++q) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp + q * NR * G));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp + q * NR * G + 16));
    for (int i = 0; i < MR; ++i) {
      const __m256i av = _mm256_set1_epi32(ap[q * MR + i]);
      acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(av, b0));
      acc[i][1] = _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(av, b1));
    }
  }
  for (int i = 0; i < MR; ++i) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + i * NR), acc[i][0]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + i * NR + 8), acc[i][1]);
  }
}
#endif

// The kept columns of a block of NR consecutive columns: runs of columns, each stored at one place
// of an output row (several when the block crosses rows of an image computed `padded_width` wide
// of which the first `width` columns of each row are kept; one when padded_width is 0).
struct ColumnRun {
  int j = 0, length = 0;  // columns [j, j + length) of the block
  int64_t at = 0;         // where column j goes in a row of the output
};

inline int column_runs(int64_t padded_width, int64_t width, int64_t n0, int nc, ColumnRun* runs) {
  int count = 0;
  for (int j = 0; j < nc;) {
    const int64_t n = n0 + j;
    int64_t at = n, length = nc - j;
    if (padded_width > 0) {
      const int64_t col = n % padded_width;
      if (col >= width) {  // a column of the padding: skipped
        j += int(std::min<int64_t>(padded_width - col, nc - j));
        continue;
      }
      at = (n / padded_width) * width + col;
      length = std::min<int64_t>(length, width - col);
    }
    runs[count++] = {j, int(length), at};
    j += int(length);
  }
  return count;
}

#if defined(__x86_64__)
// Scaled accumulators y (float) to their requantized int32 values: clamped to [low, high] (the
// output's bounds minus its zero point, integers), converted (vcvtps2dq rounds to nearest even,
// the current mode), plus the zero point. Clamping before rounding gives what rounding before
// clamping gives (the bounds are integers), so no separate round. The maskz forms under a full
// mask: the plain ones start from _mm512_undefined, which GCC 12 reports as -Wmaybe-uninitialized.
__attribute__((target("avx512f"))) inline __m512i requantize16_avx512(__m512 y, __m512 low, __m512 high,
                                                                     __m512i zero_point) {
  const __mmask16 all = 0xffff;
  y = _mm512_maskz_min_ps(all, _mm512_maskz_max_ps(all, y, low), high);
  return _mm512_add_epi32(_mm512_maskz_cvtps_epi32(all, y), zero_point);
}

// The store of one row of 32 int32 accumulators (two zmm vectors) as `type`: Int32 as they are,
// UInt8 / Int8 requantized with the instructions of requantize_row_avx512 (so the same bytes).
// Each run of kept columns is one masked store at the address where the block's column 0 would
// go: the lanes outside a run's mask are not touched, so that address may lie before the row.
struct RowStoreAvx512 {
  bool narrow;
  size_t bytes;  // per element
  __m512 low, high;
  __m512i zero_point;

  __attribute__((target("avx512f,avx512bw,avx512vl"))) RowStoreAvx512(QGemmOutput::Type type, int32_t zp, int32_t lo,
                                                                      int32_t hi)
      : narrow(type != QGemmOutput::Type::Int32), bytes(narrow ? 1 : 4) {
    const bool is_unsigned = type == QGemmOutput::Type::UInt8;
    const int32_t type_lo = is_unsigned ? 0 : -128, type_hi = is_unsigned ? 255 : 127;
    low = _mm512_set1_ps(float(std::max(lo, type_lo) - zp));
    high = _mm512_set1_ps(float(std::min(hi, type_hi) - zp));
    zero_point = _mm512_set1_epi32(zp);
  }

  // 16 accumulators to 16 bytes.
  __attribute__((target("avx512f,avx512bw,avx512vl"))) __m128i requantize(__m512i v, __m512 scale) const {
    const __mmask16 all = 0xffff;
    const __m512 y = _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(all, v), scale);
    return _mm512_maskz_cvtepi32_epi8(all, requantize16_avx512(y, low, high, zero_point));
  }

  // The first n (at most 16) of 16 accumulators stored at `at`.
  __attribute__((target("avx512f,avx512bw,avx512vl"))) void store16(__m512i v, float scale, char* at, int n) const {
    const __mmask16 mask = __mmask16((1u << n) - 1);
    if (!narrow) return _mm512_mask_storeu_epi32(at, mask, v);
    _mm_mask_storeu_epi8(at, mask, requantize(v, _mm512_set1_ps(scale)));
  }

  __attribute__((target("avx512f,avx512bw,avx512vl"))) void operator()(__m512i v0, __m512i v1, float scale, char* row,
                                                                      const ColumnRun* runs, int count) const {
    const uintptr_t base = reinterpret_cast<uintptr_t>(row);
    if (!narrow) {
      for (int r = 0; r < count; ++r) {
        const uint32_t mask = uint32_t((uint64_t(1) << runs[r].length) - 1) << runs[r].j;
        int32_t* at = reinterpret_cast<int32_t*>(base + uintptr_t(runs[r].at - runs[r].j) * sizeof(int32_t));
        _mm512_mask_storeu_epi32(at, __mmask16(mask), v0);
        _mm512_mask_storeu_epi32(at + 16, __mmask16(mask >> 16), v1);
      }
      return;
    }
    const __m512 s = _mm512_set1_ps(scale);
    const __m256i out = _mm256_inserti128_si256(_mm256_castsi128_si256(requantize(v0, s)), requantize(v1, s), 1);
    for (int r = 0; r < count; ++r) {
      const uint32_t mask = uint32_t((uint64_t(1) << runs[r].length) - 1) << runs[r].j;
      _mm256_mask_storeu_epi8(reinterpret_cast<void*>(base + uintptr_t(runs[r].at - runs[r].j)), __mmask32(mask), out);
    }
  }
};
#endif

// One row of requantized values: dst[j] = clamp(round_half_even(acc[j] * scale[j or 0]), lo, hi)
// with the bounds also T's range, plus the zero point. Clamped before the zero point is added:
// the same value as requantize_one (both bounds are integers, so clamping before or after
// rounding agrees), exact in float (|v| < 2^9). std::min/max, not fmin/fmax, so that GCC
// vectorizes the loop (vminps; no NaN reaches it: the scales are finite).
template <class T, bool PerColumnScale>
void requantize_row_portable(const int32_t* acc, int n, const float* scale, float zp, float low, float high, T* dst) {
  const float s0 = scale[0];
  for (int j = 0; j < n; ++j) {
    const float y = std::nearbyint(float(acc[j]) * (PerColumnScale ? scale[j] : s0));
    dst[j] = T(std::min(std::max(y, low), high) + zp);
  }
}

#if defined(__x86_64__)
// The same, 16 lanes at a time in zmm registers (GCC vectorizes the loop above only 4 wide, for
// its 16-byte stores): convert, scale, requantize16_avx512, narrow to bytes (the value is within
// T's range, so truncation is exact for both signednesses); the tail under a mask.
template <class T, bool PerColumnScale>
__attribute__((target("avx512f,avx512bw"))) void requantize_row_avx512(const int32_t* acc, int n, const float* scale,
                                                                       float zp, float low, float high, T* dst) {
  const __m512 lo = _mm512_set1_ps(low), hi = _mm512_set1_ps(high);
  const __m512i z = _mm512_set1_epi32(int32_t(zp));
  const __m512 s0 = _mm512_set1_ps(scale[0]);
  for (int j = 0; j < n; j += 16) {
    const __mmask16 m = n - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - j)) - 1);
    const __m512 s = PerColumnScale ? _mm512_mask_loadu_ps(_mm512_setzero_ps(), m, scale + j) : s0;
    const __mmask16 all = 0xffff;
    const __m512 y =
        _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(all, _mm512_mask_loadu_epi32(_mm512_setzero_si512(), m, acc + j)), s);
    _mm512_mask_cvtepi32_storeu_epi8(dst + j, m, requantize16_avx512(y, lo, hi, z));
  }
}
#endif

template <class T, bool PerColumnScale>
void requantize_row(const int32_t* acc, int n, const float* scale, int32_t zero_point, int32_t lo, int32_t hi,
                    T* dst) {
  const float low = float(std::max<int32_t>(lo, std::numeric_limits<T>::min()) - zero_point);
  const float high = float(std::min<int32_t>(hi, std::numeric_limits<T>::max()) - zero_point);
#if defined(__x86_64__)
  if (qgemm_vector_avx512()) {
    return requantize_row_avx512<T, PerColumnScale>(acc, n, scale, float(zero_point), low, high, dst);
  }
#endif
  requantize_row_portable<T, PerColumnScale>(acc, n, scale, float(zero_point), low, high, dst);
}

}  // namespace smelt::kernels::qtiles
