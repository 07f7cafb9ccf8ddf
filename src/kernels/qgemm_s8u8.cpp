// The weights-on-the-left integer GEMM (kernels/qgemm.h, docs/quantization.md): out (M x N) =
// W (M x K int8, packed once) times X (K x N uint8, read from K row pointers and packed per
// panel by the task that multiplies it, so a panel goes from the image into L1 and stays there
// for every row tile).
#include <algorithm>
#include <cmath>
#include <optional>

#include "base/parallel.h"
#include "kernels/qgemm.h"
#include "kernels/qgemm_tiles.h"
#include "smelt/error.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace smelt::kernels {
namespace {

using namespace qtiles;

#if defined(__x86_64__)
// A panel of 32 columns (the first nc of them read, the rest zero) in the 4-byte groups of VNNI
// and AMX, per k group from four rows: byte and word interleaves within 128-bit lanes, then the
// lanes put in column order; 128 bytes per k group from about 20 instructions (the SSE2 path
// takes twice as many, the byte loop of a partial panel twenty times as many).
__attribute__((target("avx2,avx512bw,avx512vl"))) void pack_x_panel_bytes_avx512(const QGemmX& x, int64_t k,
                                                                                  int64_t k_groups, int64_t n0, int nc,
                                                                                  void* panel) {
  const __m256i sign = _mm256_set1_epi8(char(x.flip_sign ? 0x80 : 0)), zero = _mm256_setzero_si256();
  const __mmask32 columns = nc >= 32 ? ~__mmask32(0) : __mmask32((1u << nc) - 1);
  __m256i* out = static_cast<__m256i*>(panel);
  for (int64_t q = 0; q < k_groups; ++q, out += 4) {
    __m256i v[4];
    for (int r = 0; r < 4; ++r) {
      const int64_t kk = q * 4 + r;
      v[r] = kk < k ? _mm256_maskz_mov_epi8(columns, _mm256_xor_si256(_mm256_maskz_loadu_epi8(columns, x.rows[kk] + n0), sign))
                    : zero;
    }
    const __m256i ab0 = _mm256_unpacklo_epi8(v[0], v[1]), ab1 = _mm256_unpackhi_epi8(v[0], v[1]);
    const __m256i cd0 = _mm256_unpacklo_epi8(v[2], v[3]), cd1 = _mm256_unpackhi_epi8(v[2], v[3]);
    // columns 0-3 | 16-19, 4-7 | 20-23, 8-11 | 24-27, 12-15 | 28-31
    const __m256i q0 = _mm256_unpacklo_epi16(ab0, cd0), q1 = _mm256_unpackhi_epi16(ab0, cd0);
    const __m256i q2 = _mm256_unpacklo_epi16(ab1, cd1), q3 = _mm256_unpackhi_epi16(ab1, cd1);
    _mm256_storeu_si256(out, _mm256_permute2x128_si256(q0, q1, 0x20));
    _mm256_storeu_si256(out + 1, _mm256_permute2x128_si256(q2, q3, 0x20));
    _mm256_storeu_si256(out + 2, _mm256_permute2x128_si256(q0, q1, 0x31));
    _mm256_storeu_si256(out + 3, _mm256_permute2x128_si256(q2, q3, 0x31));
  }
}
#endif

// Columns [n0, n0 + nc) of X's rows packed as the micro-kernel reads a panel: per k group, NR
// columns of `group` values (VNNI/portable: 4 bytes; AVX2: 2 int16), zero past k and past nc.
// Full panels interleave 16 columns at a time with SSE2 (every x86-64 has it).
void pack_x_panel(QGemmIsa isa, const QGemmX& x, int64_t k, int64_t k_groups, int64_t n0, int nc,
                  void* panel) {
  const int NR = tile_columns(isa), G = k_group(isa);
  const uint8_t flip = x.flip_sign ? 0x80 : 0;
  const bool wide = isa == QGemmIsa::Avx2;
#if defined(__x86_64__)
  if (isa == QGemmIsa::Avx512Vnni || isa == QGemmIsa::Amx) {
    static_assert(kVnniNr == 32 && kAmxNr == 32 && kVnniGroup == 4);
    return pack_x_panel_bytes_avx512(x, k, k_groups, n0, nc, panel);
  }
#endif
  for (int64_t q = 0; q < k_groups; ++q) {
    const uint8_t* row[4] = {};
    for (int r = 0; r < G; ++r) row[r] = q * G + r < k ? x.rows[q * G + r] + n0 : nullptr;
#if defined(__x86_64__)
    if (nc == NR) {
      const __m128i sign = _mm_set1_epi8(char(flip)), zero = _mm_setzero_si128();
      auto load = [&](int r, int j) {
        return row[r] ? _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row[r] + j)), sign)
                      : zero;
      };
      __m128i* out = reinterpret_cast<__m128i*>(panel) + q * NR * G / (wide ? 8 : 16);
      for (int j = 0; j < NR; j += 16, out += 4) {
        if (wide) {  // column c: (row0[c], row1[c]) as int16
          const __m128i a = load(0, j), b = load(1, j);
          const __m128i a0 = _mm_unpacklo_epi8(a, zero), a1 = _mm_unpackhi_epi8(a, zero);
          const __m128i b0 = _mm_unpacklo_epi8(b, zero), b1 = _mm_unpackhi_epi8(b, zero);
          out[0] = _mm_unpacklo_epi16(a0, b0), out[1] = _mm_unpackhi_epi16(a0, b0);
          out[2] = _mm_unpacklo_epi16(a1, b1), out[3] = _mm_unpackhi_epi16(a1, b1);
        } else {  // column c: (row0[c], row1[c], row2[c], row3[c])
          const __m128i ab0 = _mm_unpacklo_epi8(load(0, j), load(1, j));
          const __m128i ab1 = _mm_unpackhi_epi8(load(0, j), load(1, j));
          const __m128i cd0 = _mm_unpacklo_epi8(load(2, j), load(3, j));
          const __m128i cd1 = _mm_unpackhi_epi8(load(2, j), load(3, j));
          out[0] = _mm_unpacklo_epi16(ab0, cd0), out[1] = _mm_unpackhi_epi16(ab0, cd0);
          out[2] = _mm_unpacklo_epi16(ab1, cd1), out[3] = _mm_unpackhi_epi16(ab1, cd1);
        }
      }
      continue;
    }
#endif
    for (int j = 0; j < NR; ++j) {
      for (int r = 0; r < G; ++r) {
        const uint8_t v = row[r] && j < nc ? uint8_t(row[r][j] ^ flip) : 0;
        const int64_t at = (q * NR + j) * G + r;
        if (wide) {
          static_cast<int16_t*>(panel)[at] = int16_t(v);
        } else {
          static_cast<uint8_t*>(panel)[at] = v;
        }
      }
    }
  }
}

// The column sums of a packed panel (needed only when some weight zero point is not 0).
void panel_column_sums(QGemmIsa isa, const void* panel, int64_t k_groups, int32_t* sums) {
  const int NR = tile_columns(isa), G = k_group(isa);
  for (int j = 0; j < NR; ++j) sums[j] = 0;
  for (int64_t q = 0; q < k_groups; ++q) {
    for (int j = 0; j < NR; ++j) {
      for (int r = 0; r < G; ++r) {
        const int64_t at = (q * NR + j) * G + r;
        sums[j] += isa == QGemmIsa::Avx2 ? static_cast<const int16_t*>(panel)[at]
                                         : static_cast<const uint8_t*>(panel)[at];
      }
    }
  }
}

void run_tile(QGemmIsa isa, const int32_t* wp, const void* panel, int64_t k_groups, int32_t* c) {
#if defined(__x86_64__)
  if (isa == QGemmIsa::Amx) {
    const int block = amx_block(k_groups);
    return tile_amx(wp, static_cast<const int8_t*>(panel), k_groups / block, block, c);
  }
  if (isa == QGemmIsa::Avx512Vnni) return tile_vnni<true>(wp, static_cast<const int8_t*>(panel), k_groups, c);
  if (isa == QGemmIsa::Avx2) return tile_avx2(wp, static_cast<const int16_t*>(panel), k_groups, c);
#endif
  SMELT_INTERNAL_CHECK(isa == QGemmIsa::Portable) << "qgemm: " << qgemm_isa_name(isa) << " is not built";
  tile_portable<true>(wp, static_cast<const int8_t*>(panel), k_groups, c);
}

// The epilogue of one tile: zero-point terms and bias per row, requantization, and the store of
// each run of kept columns.
void store_tile(const QPackedW& w, const QGemmX& x, const QGemmRowOutput& out, const int32_t* c, int NR,
                int64_t m0, int mr, int nc, const int32_t* col_sums, const ColumnRun* runs, int run_count) {
  int32_t acc[kVnniNr];
  for (int i = 0; i < mr; ++i) {
    const int64_t row = m0 + i;
    const uint32_t zw = uint32_t(w.zero_point[size_t(row)]), zx = uint32_t(x.zero_point);
    // acc = c + K * zw * zx - zx * rowsum(W) - zw * colsum(X) (+ bias), wrapping as the lanes do
    const uint32_t row_term = uint32_t(w.k) * zw * zx - zx * uint32_t(w.row_sums[size_t(row)]) +
                              (out.bias ? uint32_t(out.bias[row]) : 0u);
    for (int j = 0; j < nc; ++j) {
      uint32_t v = uint32_t(c[i * NR + j]) + row_term;
      if (col_sums) v -= zw * uint32_t(col_sums[j]);
      acc[j] = int32_t(v);
    }
    const float scale = out.scale ? out.scale[row] : 1.0f;
    char* dst = static_cast<char*>(out.data);
    for (int r = 0; r < run_count; ++r) {
      const int j = runs[r].j, run = runs[r].length;
      const int64_t at = row * out.ldc + runs[r].at;
      switch (out.type) {
        case QGemmOutput::Type::UInt8:
          requantize_row<uint8_t, false>(acc + j, run, &scale, out.zero_point, out.lo, out.hi,
                                         reinterpret_cast<uint8_t*>(dst) + at);
          break;
        case QGemmOutput::Type::Int8:
          requantize_row<int8_t, false>(acc + j, run, &scale, out.zero_point, out.lo, out.hi,
                                        reinterpret_cast<int8_t*>(dst) + at);
          break;
        default:
          std::copy(acc + j, acc + j + run, reinterpret_cast<int32_t*>(dst) + at);
          break;
      }
    }
  }
}

#if defined(__x86_64__)
// store_tile in zmm registers, for a VNNI tile (NR = 32: two vectors per row): the zero-point
// terms and bias added, then requantized and stored by store_row_avx512.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void store_tile_avx512(
    const QPackedW& w, const QGemmX& x, const QGemmRowOutput& out, const int32_t* c, int64_t m0, int mr,
    const int32_t* col_sums, const ColumnRun* runs, int run_count) {
  static_assert(kVnniNr == 32 && kAmxNr == kVnniNr, "two zmm vectors of int32 per tile row");
  const RowStoreAvx512 store(out.type, out.zero_point, out.lo, out.hi);
  const __m512i sums0 = col_sums ? _mm512_loadu_si512(col_sums) : _mm512_setzero_si512();
  const __m512i sums1 = col_sums ? _mm512_loadu_si512(col_sums + 16) : _mm512_setzero_si512();
  for (int i = 0; i < mr; ++i) {
    const int64_t row = m0 + i;
    const uint32_t zw = uint32_t(w.zero_point[size_t(row)]), zx = uint32_t(x.zero_point);
    const uint32_t row_term = uint32_t(w.k) * zw * zx - zx * uint32_t(w.row_sums[size_t(row)]) +
                              (out.bias ? uint32_t(out.bias[row]) : 0u);
    const __m512i term = _mm512_set1_epi32(int32_t(row_term));
    __m512i v0 = _mm512_add_epi32(_mm512_loadu_si512(c + i * kVnniNr), term);
    __m512i v1 = _mm512_add_epi32(_mm512_loadu_si512(c + i * kVnniNr + 16), term);
    if (col_sums) {
      const __m512i zwv = _mm512_set1_epi32(int32_t(zw));
      v0 = _mm512_sub_epi32(v0, _mm512_mullo_epi32(zwv, sums0));
      v1 = _mm512_sub_epi32(v1, _mm512_mullo_epi32(zwv, sums1));
    }
    store(v0, v1, out.scale ? out.scale[row] : 1.0f, static_cast<char*>(out.data) + row * out.ldc * store.bytes,
          runs, run_count);
  }
}
#endif

// Where qgemm_pack_w puts the word of row `row`, k group `q` (qgemm.h: QPackedW).
int64_t word_index(const QPackedW& p, int64_t row, int64_t q) {
  const int64_t tile = row / p.mr, i = row % p.mr;
  if (p.isa != QGemmIsa::Amx) return (tile * p.k_groups + q) * p.mr + i;
  // [row tile][k block][half][row][k group]: a block is 2 x 16 x `block` words
  const int64_t block = amx_block(p.k_groups);
  return tile * p.k_groups * p.mr + (q / block) * 2 * 16 * block + (i / 16) * 16 * block + (i % 16) * block +
         q % block;
}

// Panels [first, first + count) of X packed for the micro-kernel, with each one's column sums
// (when a weight zero point needs them) and runs of kept columns.
struct PackedPanels {
  int64_t first = 0;
  std::vector<int8_t> bytes;
  std::vector<int32_t> col_sums;
  std::vector<ColumnRun> runs;
  std::vector<int> run_counts;
  PackedPanels(size_t panel_bytes, int64_t count, int NR)
      : bytes(panel_bytes * size_t(count) + 64), col_sums(size_t(NR * count)), runs(size_t(NR * count)),
        run_counts(size_t(count)) {}
};

}  // namespace

QPackedW qgemm_pack_w(const void* w, bool w_unsigned, int64_t m, int64_t k, int64_t ldw,
                      const std::vector<int32_t>& zero_points, QGemmIsa isa) {
  SMELT_CHECK(m >= 0 && k >= 0 && ldw >= k) << "qgemm: bad weight " << m << " x " << k << " (row stride " << ldw << ")";
  SMELT_CHECK(zero_points.size() == 1 || int64_t(zero_points.size()) == m)
      << "qgemm: " << zero_points.size() << " zero points for " << m << " rows; valid: one, or one per row";
  SMELT_CHECK(qgemm_isa_supported(isa)) << "qgemm: this CPU has no " << qgemm_isa_name(isa);
  QPackedW p;
  p.isa = isa;
  p.m = m;
  p.k = k;
  p.mr = tile_rows(isa);
  p.group = k_group(isa);
  p.k_groups = padded_k_groups(isa, k);
  const int64_t tiles = (m + p.mr - 1) / p.mr;
  p.words.assign(size_t(tiles * p.k_groups * p.mr), 0);
  p.row_sums.assign(size_t(m), 0);
  p.zero_point.resize(size_t(m));
  const int shift = w_unsigned ? 128 : 0;
  for (int64_t row = 0; row < m; ++row) {
    const int32_t zp = zero_points.size() == 1 ? zero_points[0] : zero_points[size_t(row)];
    SMELT_CHECK(w_unsigned ? (zp >= 0 && zp <= 255) : (zp >= -128 && zp <= 127))
        << "qgemm: weight zero point " << zp << " is outside "
        << (w_unsigned ? "[0, 255] (uint8)" : "[-128, 127] (int8)");
    p.zero_point[size_t(row)] = zp - shift;
    p.any_zero_point = p.any_zero_point || zp != shift;
    uint32_t sum = 0;
    for (int64_t kk = 0; kk < k; ++kk) {
      const int32_t v = w_unsigned ? int32_t(static_cast<const uint8_t*>(w)[row * ldw + kk]) - shift
                                   : int32_t(static_cast<const int8_t*>(w)[row * ldw + kk]);
      sum += uint32_t(v);
      const int64_t q = kk / p.group, r = kk % p.group;
      uint32_t& word = reinterpret_cast<uint32_t&>(p.words[size_t(word_index(p, row, q))]);
      word |= p.group == 2 ? (uint32_t(uint16_t(int16_t(v))) << (16 * r)) : (uint32_t(uint8_t(int8_t(v))) << (8 * r));
    }
    p.row_sums[size_t(row)] = int32_t(sum);
  }
  return p;
}

void qgemm_s8u8(const QPackedW& w, const QGemmX& x, const QGemmRowOutput& out) {
  SMELT_CHECK(x.zero_point >= 0 && x.zero_point <= 255)
      << "qgemm: activation zero point " << x.zero_point << " is outside [0, 255] (uint8)";
  SMELT_CHECK(out.type != QGemmOutput::Type::Float32) << "qgemm: weights-left products store integers only";
  SMELT_CHECK(out.type == QGemmOutput::Type::Int32 || out.scale) << "qgemm: a requantized output needs scales";
  SMELT_CHECK(out.padded_width == 0 || (out.width > 0 && out.width <= out.padded_width))
      << "qgemm: kept width " << out.width << " of a " << out.padded_width << "-wide padded row";
  if (w.m == 0 || x.n == 0) return;
  const QGemmIsa isa = w.isa;
  const int MR = w.mr, NR = tile_columns(isa);
  const int64_t m_tiles = (w.m + MR - 1) / MR, panels = (x.n + NR - 1) / NR;
  // Tasks are (group of panels, chunk of row tiles); a task packs its panels once and runs each
  // row tile over all of them, so a weight tile is read once per task. A small image (a few
  // panels) is one group, and its rows split into chunks so that every thread has work: the
  // weights, megabytes at 512 channels, then stream once in all instead of once per panel.
  constexpr int64_t kFewPanels = 8;
  const int64_t group = panels <= kFewPanels ? panels : 1, groups = (panels + group - 1) / group;
  // At least two tasks per thread, and a multiple of the thread count where the rows allow it
  // (7 tasks on 2 threads leave one idle an eighth of the time).
  const int64_t threads = num_threads();
  int64_t m_chunks = std::clamp<int64_t>((threads * 2 + groups - 1) / groups, 1, m_tiles);
  while (m_chunks < m_tiles && (groups * m_chunks) % threads != 0) ++m_chunks;
  const int64_t tiles_per_chunk = (m_tiles + m_chunks - 1) / m_chunks;
  const int64_t work_per_task = tiles_per_chunk * MR * NR * group * std::max<int64_t>(w.k, 1);
  const size_t panel_bytes = size_t(w.k_groups * NR * w.group) * (isa == QGemmIsa::Avx2 ? 2 : 1);
  auto pack = [&](PackedPanels& set, int64_t p) {
    const int64_t i = p - set.first;
    const int nc = int(std::min<int64_t>(NR, x.n - p * NR));
    int8_t* panel = set.bytes.data() + size_t(i) * panel_bytes;
    pack_x_panel(isa, x, w.k, w.k_groups, p * NR, nc, panel);
    if (w.any_zero_point) panel_column_sums(isa, panel, w.k_groups, set.col_sums.data() + i * NR);
    set.run_counts[size_t(i)] = column_runs(out.padded_width, out.width, p * NR, nc, set.runs.data() + i * NR);
  };
  // One group split into row chunks: its panels are packed once, by all threads, before the
  // chunks run (each chunk packing them again would multiply the packing by the chunks).
  std::optional<PackedPanels> shared;
  if (groups == 1 && m_chunks > 1) {
    shared.emplace(panel_bytes, panels, NR);
    parallel_for(panels, 1, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) pack(*shared, p);
    });
  }
  parallel_for(groups * m_chunks, std::max<int64_t>(1, kParallelGrain * 4 / work_per_task),
               [&](int64_t begin, int64_t end) {
                 std::optional<PackedPanels> own;
                 if (!shared) own.emplace(panel_bytes, group, NR);
                 PackedPanels& set = shared ? *shared : *own;
                 std::vector<int32_t> c(static_cast<size_t>(MR * NR));
                 int64_t packed = -1;
#if defined(__x86_64__)
                 std::optional<AmxTiles> tiles;
                 if (isa == QGemmIsa::Amx) tiles.emplace(amx_block(w.k_groups));
#endif
                 for (int64_t t = begin; t < end; ++t) {
                   const int64_t grp = t / m_chunks, chunk = t % m_chunks;
                   const int64_t p0 = grp * group, p1 = std::min(panels, p0 + group);
                   if (!shared && grp != packed) {
                     set.first = p0;
                     for (int64_t p = p0; p < p1; ++p) pack(set, p);
                     packed = grp;
                   }
                   const int64_t first = chunk * tiles_per_chunk, last = std::min(m_tiles, first + tiles_per_chunk);
                   for (int64_t mt = first; mt < last; ++mt) {
                     for (int64_t p = p0; p < p1; ++p) {
                       const int64_t i = p - set.first;
                       const int nc = int(std::min<int64_t>(NR, x.n - p * NR)), mr = int(std::min<int64_t>(MR, w.m - mt * MR));
                       const int32_t* sums = w.any_zero_point ? set.col_sums.data() + i * NR : nullptr;
                       const ColumnRun* runs = set.runs.data() + i * NR;
                       run_tile(isa, w.words.data() + mt * w.k_groups * MR, set.bytes.data() + size_t(i) * panel_bytes,
                                w.k_groups, c.data());
#if defined(__x86_64__)
                       if (isa == QGemmIsa::Avx512Vnni || isa == QGemmIsa::Amx) {
                         store_tile_avx512(w, x, out, c.data(), mt * MR, mr, sums, runs, set.run_counts[size_t(i)]);
                         continue;
                       }
#endif
                       store_tile(w, x, out, c.data(), NR, mt * MR, mr, nc, sums, runs, set.run_counts[size_t(i)]);
                     }
                   }
                 }
               });
}

}  // namespace smelt::kernels
