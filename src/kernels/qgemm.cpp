#include "kernels/qgemm.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "base/parallel.h"
#include "kernels/qgemm_tiles.h"
#include "smelt/error.h"

namespace smelt::kernels {
namespace {

#if defined(__x86_64__)
// AMX needs the CPU (CPUID leaf 7: AMX-TILE, AMX-INT8), the OS saving tile state (XCR0 bits 17
// and 18) and, on Linux, a per-process grant of the tile data state, asked for here once.
bool amx_granted() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const bool tile = edx & (1u << 24), int8 = edx & (1u << 25);
  if (!tile || !int8) return false;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & (1u << 27))) return false;  // OSXSAVE
  unsigned lo = 0, hi = 0;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & (3u << 17)) != (3u << 17)) return false;
#if defined(__linux__)
  constexpr long kArchRequestPermission = 0x1023, kTileData = 18;  // ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA
  if (syscall(SYS_arch_prctl, kArchRequestPermission, kTileData) != 0) return false;
#endif
  return true;
}
#endif

using namespace qtiles;

// A's rows [m0, m0 + mr) packed for the micro-kernel: per k group, MR int32 words each holding
// the group's bytes of one row (Portable/VNNI: 4 uint8; AVX2: 2 uint8 widened to int16), zero
// past k and past mr; and each row's sum.
void pack_a(QGemmIsa isa, const uint8_t* a, int64_t lda, int64_t m0, int mr, int64_t k,
            int64_t k_groups, int32_t* packed, int32_t* row_sums) {
  const int MR = tile_rows(isa);
  for (int i = 0; i < MR; ++i) {
    const uint8_t* row = i < mr ? a + (m0 + i) * lda : nullptr;
    uint32_t sum = 0;  // wrapping, as the accumulators
    for (int64_t q = 0; q < k_groups; ++q) {
      uint32_t word = 0;
      if (row) {
        if (isa == QGemmIsa::Avx2) {
          for (int r = 0; r < kAvx2Group; ++r) {
            const int64_t kk = q * kAvx2Group + r;
            const uint32_t v = kk < k ? row[kk] : 0;
            word |= v << (16 * r);
            sum += v;
          }
        } else {
          for (int r = 0; r < kVnniGroup; ++r) {
            const int64_t kk = q * kVnniGroup + r;
            const uint32_t v = kk < k ? row[kk] : 0;
            word |= v << (8 * r);
            sum += v;
          }
        }
      }
      packed[q * MR + i] = int32_t(word);
    }
    row_sums[i] = int32_t(sum);
  }
}

void run_tile(QGemmIsa isa, const int32_t* ap, const QPackedB& b, int64_t panel, int32_t* c) {
  const int64_t panel_elems = b.k_groups * b.nr * b.group;
#if defined(__x86_64__)
  if (isa == QGemmIsa::Avx512Vnni) return tile_vnni<false>(ap, b.bytes.data() + panel * panel_elems, b.k_groups, c);
  if (isa == QGemmIsa::Avx2) return tile_avx2(ap, b.words.data() + panel * panel_elems, b.k_groups, c);
#endif
  SMELT_INTERNAL_CHECK(isa == QGemmIsa::Portable) << "qgemm: " << qgemm_isa_name(isa) << " is not built";
  tile_portable<false>(ap, b.bytes.data() + panel * panel_elems, b.k_groups, c);
}

// The epilogue of one tile: zero-point corrections, bias, requantization, the store.
void store_tile(const QGemmOutput& out, const QPackedB& b, const int32_t* c, int nr_stride,
                int64_t m0, int mr, int64_t n0, int nr, const int32_t* row_sums,
                const QGemmA& a) {
  float scale[kVnniNr];
  for (int j = 0; j < nr; ++j) {
    scale[j] = out.scale ? out.scale[out.per_column_scale ? n0 + j : 0] : 1.0f;
  }
  int32_t acc[kVnniNr];
  float row_scaled[kVnniNr];
  for (int i = 0; i < mr; ++i) {
    const int64_t row = m0 + i;
    const uint32_t za = uint32_t(a.zero_points[a.per_row ? row : 0]);
    // acc = c + K * za * zb[n] - za * colsum[n] - zb[n] * rowsum[m] (+ bias[n]), in wrapping
    // arithmetic: int32 overflow is the accumulator's own limit, as in every int8 GEMM.
    for (int j = 0; j < nr; ++j) {
      const int64_t n = n0 + j;
      const uint32_t zb = uint32_t(b.zero_point[size_t(n)]);
      acc[j] = int32_t(uint32_t(c[i * nr_stride + j]) + uint32_t(b.k) * za * zb -
                       za * uint32_t(b.col_sums[size_t(n)]) - zb * uint32_t(row_sums[i]) +
                       (out.bias ? uint32_t(out.bias[n]) : 0u));
    }
    const float* s = scale;
    if (out.row_scale) {
      for (int j = 0; j < nr; ++j) row_scaled[j] = out.row_scale[row] * scale[j];
      s = row_scaled;
    }
    const int64_t at = row * out.ldc + n0;
    switch (out.type) {
      case QGemmOutput::Type::Int32:
        std::memcpy(static_cast<int32_t*>(out.data) + at, acc, sizeof(int32_t) * size_t(nr));
        break;
      case QGemmOutput::Type::Float32: {
        float* dst = static_cast<float*>(out.data) + at;
        for (int j = 0; j < nr; ++j) dst[j] = float(acc[j]) * s[j];
        break;
      }
      case QGemmOutput::Type::UInt8:
        requantize_row<uint8_t, true>(acc, nr, s, out.zero_point, out.lo, out.hi, static_cast<uint8_t*>(out.data) + at);
        break;
      case QGemmOutput::Type::Int8:
        requantize_row<int8_t, true>(acc, nr, s, out.zero_point, out.lo, out.hi, static_cast<int8_t*>(out.data) + at);
        break;
    }
  }
}

}  // namespace

const char* qgemm_isa_name(QGemmIsa isa) {
  switch (isa) {
    case QGemmIsa::Portable: return "portable";
    case QGemmIsa::Avx2: return "avx2";
    case QGemmIsa::Avx512Vnni: return "avx512-vnni";
    case QGemmIsa::Amx: return "amx-int8";
  }
  return "?";
}

bool qgemm_isa_supported(QGemmIsa isa) {
  switch (isa) {
    case QGemmIsa::Portable: return true;
#if defined(__x86_64__)
    case QGemmIsa::Avx2: return __builtin_cpu_supports("avx2");
    case QGemmIsa::Avx512Vnni:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl");
    case QGemmIsa::Amx: {
      static const bool granted = qgemm_isa_supported(QGemmIsa::Avx512Vnni) && amx_granted();
      return granted;
    }
#else
    default: return false;
#endif
  }
  return false;
}

namespace {

// The fastest of `fastest_first` this CPU runs, or SMELT_QGEMM_ISA's choice where it is one of
// them (a GEMM without a kernel for the chosen set keeps its own fastest). A name that is no
// instruction set, or one this CPU cannot run, is an error.
QGemmIsa chosen_isa(std::initializer_list<QGemmIsa> fastest_first) {
  if (const char* wanted = std::getenv("SMELT_QGEMM_ISA"); wanted && *wanted) {
    std::string valid;
    bool known = false;
    for (QGemmIsa isa : {QGemmIsa::Amx, QGemmIsa::Avx512Vnni, QGemmIsa::Avx2, QGemmIsa::Portable}) {
      if (!qgemm_isa_supported(isa)) continue;
      valid += std::string(valid.empty() ? "" : ", ") + qgemm_isa_name(isa);
      if (std::strcmp(wanted, qgemm_isa_name(isa)) != 0) continue;
      known = true;
      if (std::find(fastest_first.begin(), fastest_first.end(), isa) != fastest_first.end()) return isa;
    }
    if (!known) {
      throw Error(std::string("SMELT_QGEMM_ISA=") + wanted + ": not an instruction set this CPU runs; valid: " + valid);
    }
  }
  for (QGemmIsa isa : fastest_first) {
    if (qgemm_isa_supported(isa)) return isa;
  }
  return QGemmIsa::Portable;
}

}  // namespace

QGemmIsa qgemm_best_isa() {
  static const QGemmIsa best = chosen_isa({QGemmIsa::Avx512Vnni, QGemmIsa::Avx2, QGemmIsa::Portable});
  return best;
}

bool qgemm_vector_avx512() {
  static const bool use = [] {
#if defined(__x86_64__)
    if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
          __builtin_cpu_supports("avx512vl"))) {
      return false;
    }
    // (chosen_isa also refuses a name that is no instruction set)
    const char* wanted = std::getenv("SMELT_QGEMM_ISA");
    if (!wanted || !*wanted) return true;
    const QGemmIsa chosen = chosen_isa({QGemmIsa::Amx, QGemmIsa::Avx512Vnni, QGemmIsa::Avx2, QGemmIsa::Portable});
    return chosen != QGemmIsa::Avx2 && chosen != QGemmIsa::Portable;
#else
    return false;
#endif
  }();
  return use;
}

QGemmIsa qgemm_s8u8_best_isa() {
  static const QGemmIsa best = chosen_isa({QGemmIsa::Amx, QGemmIsa::Avx512Vnni, QGemmIsa::Avx2, QGemmIsa::Portable});
  return best;
}

int32_t requantize_one(int32_t acc, float scale, int32_t zero_point, int32_t lo, int32_t hi) {
  float y = float(acc) * scale;
  // Past int32 the result saturates anyway; the bound keeps the conversion defined (NaN: a NaN
  // scale, refused by callers, would land on lo).
  y = std::fmin(std::fmax(y, -2147483648.0f), 2147483520.0f);
  const int64_t q = int64_t(std::nearbyint(y)) + zero_point;  // half to even: the default mode
  return int32_t(std::clamp<int64_t>(q, lo, hi));
}

QPackedB qgemm_pack_b(const void* b, bool b_unsigned, int64_t k, int64_t n, int64_t stride_k,
                      int64_t stride_n, const std::vector<int32_t>& zero_points, QGemmIsa isa) {
  SMELT_CHECK(k >= 0 && n >= 0) << "qgemm: negative size " << k << " x " << n;
  SMELT_CHECK(zero_points.size() == 1 || int64_t(zero_points.size()) == n)
      << "qgemm: " << zero_points.size() << " zero points for " << n
      << " columns; valid: one, or one per column";
  SMELT_CHECK(qgemm_isa_supported(isa)) << "qgemm: this CPU has no " << qgemm_isa_name(isa);
  SMELT_CHECK(isa != QGemmIsa::Amx) << "qgemm: amx-int8 runs the weights-left GEMM only (qgemm_s8u8); valid here: "
                                    << qgemm_isa_name(qgemm_best_isa());
  QPackedB p;
  p.isa = isa;
  p.k = k;
  p.n = n;
  p.nr = isa == QGemmIsa::Avx2 ? kAvx2Nr : kVnniNr;
  p.group = isa == QGemmIsa::Avx2 ? kAvx2Group : kVnniGroup;
  p.k_groups = (k + p.group - 1) / p.group;
  const int64_t panels = (n + p.nr - 1) / p.nr;
  const int64_t elems = panels * p.k_groups * p.nr * p.group;
  if (isa == QGemmIsa::Avx2) {
    p.words.assign(size_t(elems), 0);
  } else {
    p.bytes.assign(size_t(elems), 0);
  }
  p.col_sums.assign(size_t(n), 0);
  p.zero_point.resize(size_t(n));
  const int shift = b_unsigned ? 128 : 0;
  for (int64_t col = 0; col < n; ++col) {
    const int32_t zp = zero_points.size() == 1 ? zero_points[0] : zero_points[size_t(col)];
    SMELT_CHECK(b_unsigned ? (zp >= 0 && zp <= 255) : (zp >= -128 && zp <= 127))
        << "qgemm: weight zero point " << zp << " is outside "
        << (b_unsigned ? "[0, 255] (uint8)" : "[-128, 127] (int8)");
    p.zero_point[size_t(col)] = zp - shift;
  }
  // Walk B along its contiguous dim (a conv weight (N, K) is read row by row).
  const bool k_inner = stride_k < stride_n;
  for (int64_t outer = 0; outer < (k_inner ? n : k); ++outer) {
    for (int64_t inner = 0; inner < (k_inner ? k : n); ++inner) {
      const int64_t kk = k_inner ? inner : outer, col = k_inner ? outer : inner;
      const int64_t at = kk * stride_k + col * stride_n;
      const int32_t v = b_unsigned ? int32_t(static_cast<const uint8_t*>(b)[at]) - shift
                                   : int32_t(static_cast<const int8_t*>(b)[at]);
      p.col_sums[size_t(col)] = int32_t(uint32_t(p.col_sums[size_t(col)]) + uint32_t(v));
      const int64_t index = (((col / p.nr) * p.k_groups + kk / p.group) * p.nr + col % p.nr) * p.group + kk % p.group;
      if (isa == QGemmIsa::Avx2) {
        p.words[size_t(index)] = int16_t(v);
      } else {
        p.bytes[size_t(index)] = int8_t(v);
      }
    }
  }
  return p;
}

void qgemm_u8s8(int64_t m, const uint8_t* a, int64_t lda, int32_t a_zero_point,
                const QPackedB& b, const QGemmOutput& out) {
  QGemmA operand;
  operand.data = a;
  operand.lda = lda;
  operand.zero_points = &a_zero_point;
  qgemm_u8s8(m, operand, b, out);
}

void qgemm_u8s8(int64_t m, const QGemmA& a, const QPackedB& b, const QGemmOutput& out) {
  SMELT_CHECK(m >= 0) << "qgemm: negative row count " << m;
  SMELT_CHECK(a.zero_points) << "qgemm: no zero point for A";
  for (int64_t i = 0; i < (a.per_row ? m : 1); ++i) {
    SMELT_CHECK(a.zero_points[i] >= 0 && a.zero_points[i] <= 255)
        << "qgemm: activation zero point " << a.zero_points[i] << " is outside [0, 255] (uint8)";
  }
  SMELT_CHECK(a.lda >= b.k && out.ldc >= b.n) << "qgemm: row strides " << a.lda << " / " << out.ldc
                                              << " shorter than the rows " << b.k << " / " << b.n;
  SMELT_CHECK(out.type == QGemmOutput::Type::Int32 || out.scale)
      << "qgemm: a requantized or dequantized output needs a scale";
  if (m == 0 || b.n == 0) return;
  const QGemmIsa isa = b.isa;
  const int MR = tile_rows(isa);
  const int64_t m_tiles = (m + MR - 1) / MR;
  const int64_t panels = (b.n + b.nr - 1) / b.nr;
  // Tasks go panel by panel within a row tile, so a chunk packs each row tile of A once.
  const int64_t work_per_task = std::max<int64_t>(1, int64_t(MR) * b.nr * std::max<int64_t>(b.k, 1));
  parallel_for(m_tiles * panels, std::max<int64_t>(1, kParallelGrain * 4 / work_per_task),
               [&](int64_t begin, int64_t end) {
                 std::vector<int32_t> packed(size_t(b.k_groups * MR) + 1);
                 std::vector<int32_t> row_sums(static_cast<size_t>(MR));
                 std::vector<int32_t> c(static_cast<size_t>(MR * b.nr));
                 int64_t packed_tile = -1;
                 for (int64_t t = begin; t < end; ++t) {
                   const int64_t mt = t / panels, panel = t % panels;
                   const int64_t m0 = mt * MR;
                   const int mr = int(std::min<int64_t>(MR, m - m0));
                   if (mt != packed_tile) {
                     pack_a(isa, a.data, a.lda, m0, mr, b.k, b.k_groups, packed.data(), row_sums.data());
                     packed_tile = mt;
                   }
#if defined(__x86_64__)
                   if (isa == QGemmIsa::Avx512Vnni && mr == 1) {
                     tile_vnni_one_row(packed.data(), b.bytes.data() + panel * b.k_groups * b.nr * b.group, b.k_groups,
                                       c.data());
                   } else {
                     run_tile(isa, packed.data(), b, panel, c.data());
                   }
#else
                   run_tile(isa, packed.data(), b, panel, c.data());
#endif
                   const int64_t n0 = panel * b.nr;
                   store_tile(out, b, c.data(), b.nr, m0, mr, n0, int(std::min<int64_t>(b.nr, b.n - n0)),
                              row_sums.data(), a);
                 }
               });
}

}  // namespace smelt::kernels
