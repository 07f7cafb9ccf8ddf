// Depthwise convolutions straight from the image with vpermb and vpdpbusd (kernels/qconv_windows.h).
// Two layouts of the 16 outputs a vector computes:
// - rows: 16 outputs of one output row; per tap row one masked load of the 64 input bytes they
//   read (the zero point's byte outside the image, so no padded copy) and per group of 4 taps one
//   vpermb with indices that are the same for every row and channel;
// - flat, for narrow outputs: 16 consecutive outputs of the flattened Ho x Wo channel, across row
//   ends (a 7-wide row fills 7 of 16 lanes). Per tap row one window of 64 (or 128) bytes of the
//   channel holds every byte the chunk reads; vpermb (vpermt2b) gathers them and the padding's
//   bytes (outside the image, or past a row's end into the next row) are set to the zero point's
//   byte under a mask. The indices and masks are tables, one per (chunk, tap row, group).
// int8 activations are read as uint8 by +128 (the zero point and the start too), which keeps
// sum w' (x - zx) unchanged.
#include "kernels/qconv_windows.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

#include "smelt/error.h"
#include "kernels/qgemm_tiles.h"

namespace smelt::kernels::qconv {

#if defined(__x86_64__)
namespace {

// Narrow outputs (at most this many) take the flat layout where the rows' chunks would leave more
// than a quarter of the lanes idle (a 7-wide output fills 7 of 16; a 28-wide one, 28 of 32, and a
// 12-wide one, 12 of 16, keep the rows).
// Measured on MobileNetV2's depthwise layers (one thread, one channel at a time), the flat
// kernel took half the time at 7x7 outputs, the same at 14x14, and 10-30% more at 28x28 (its
// tables are loaded per chunk and tap row, and the padding is a blend more).
constexpr int64_t kFlatOutputs = 1024;

// Rows: per group g of 4 taps, byte 4 l + r of lane l = input column l * s1 + (4 g + r) * d1.
// Per chunk of 16 outputs of a row (the same in every row and channel): the input column of its
// load's byte 0, the mask of the bytes inside the image, and how many outputs it stores.
struct RowTables {
  __m512i index[2]{};
  std::vector<int64_t> first;
  std::vector<__mmask64> inside;
  std::vector<int> outputs;
};

// Flat: per (chunk, tap row) the window's first byte in the channel (may be negative) and the
// masks of its bytes inside the channel, per half; per (chunk, tap row, group) the permutation's
// indices and the bytes that are padding.
struct FlatTables {
  struct alignas(64) Index {
    uint8_t bytes[64];
  };
  bool two_sources = false;  // a window of 128 bytes somewhere
  int64_t chunks = 0;
  std::vector<int64_t> start;
  std::vector<__mmask64> inside[2];
  std::vector<Index> index;
  std::vector<__mmask64> padding;
};

__mmask64 lanes_between(int64_t lo, int64_t hi) {  // bits [lo, hi) of 64, clamped
  auto below = [](int64_t n) { return n <= 0 ? uint64_t(0) : n >= 64 ? ~uint64_t(0) : (uint64_t(1) << n) - 1; };
  return __mmask64(below(hi) & ~below(lo));
}

__attribute__((target("avx512f,avx512bw"))) RowTables row_tables(const ConvShape& s, const QConvGeometry& g,
                                                                 int groups) {
  RowTables t;
  for (int gi = 0; gi < groups; ++gi) {
    alignas(64) uint8_t bytes[64];
    for (int l = 0; l < 16; ++l) {
      for (int r = 0; r < 4; ++r) {
        const int64_t j = 4 * gi + r;
        bytes[4 * l + r] = j < s.kW ? uint8_t(l * g.stride[1] + j * g.dilation[1]) : 0;
      }
    }
    t.index[gi] = _mm512_load_si512(bytes);
  }
  for (int64_t ow0 = 0; ow0 < s.Wo; ow0 += 16) {
    const int64_t first = ow0 * g.stride[1] - g.pad_begin[1];
    t.first.push_back(first);
    t.inside.push_back(lanes_between(-first, s.W - first));
    t.outputs.push_back(int(std::min<int64_t>(16, s.Wo - ow0)));
  }
  return t;
}

// The flat tables where the geometry wants them, or nullopt (wide outputs, or a window that
// would span more than 128 bytes).
std::optional<FlatTables> flat_tables(const ConvShape& s, const QConvGeometry& g, int groups) {
  const int64_t outputs = s.Ho * s.Wo, row_lanes = (s.Wo + 15) / 16 * 16;
  if (outputs <= 0 || outputs > kFlatOutputs || 4 * s.Wo >= 3 * row_lanes) return std::nullopt;
  FlatTables f;
  f.chunks = (outputs + 15) / 16;
  for (int64_t c = 0; c < f.chunks; ++c) {
    for (int64_t i = 0; i < s.kH; ++i) {
      int64_t at[16][8];  // each byte's position in the channel, or -1 in the padding
      int64_t first = std::numeric_limits<int64_t>::max(), last = -1;
      for (int64_t l = 0; l < 16; ++l) {
        const int64_t p = c * 16 + l, oh = p / s.Wo, ow = p % s.Wo;
        const int64_t ih = oh * g.stride[0] + i * g.dilation[0] - g.pad_begin[0];
        for (int64_t j = 0; j < 4 * groups; ++j) {
          const int64_t iw = ow * g.stride[1] + j * g.dilation[1] - g.pad_begin[1];
          const bool inside = p < outputs && j < s.kW && ih >= 0 && ih < s.H && iw >= 0 && iw < s.W;
          at[l][j] = inside ? ih * s.W + iw : -1;
          if (inside) first = std::min(first, at[l][j]), last = std::max(last, at[l][j]);
        }
      }
      if (last < 0) first = 0, last = 0;  // all padding
      if (last - first >= 128) return std::nullopt;
      f.two_sources = f.two_sources || last - first >= 64;
      f.start.push_back(first);
      f.inside[0].push_back(lanes_between(-first, s.H * s.W - first));
      f.inside[1].push_back(lanes_between(-first - 64, s.H * s.W - first - 64));
      for (int gi = 0; gi < groups; ++gi) {
        FlatTables::Index& index = f.index.emplace_back();
        uint64_t pad = 0;
        for (int l = 0; l < 16; ++l) {
          for (int r = 0; r < 4; ++r) {
            const int64_t pos = at[l][4 * gi + r];
            index.bytes[4 * l + r] = pos < 0 ? 0 : uint8_t(pos - first);
            if (pos < 0) pad |= uint64_t(1) << (4 * l + r);
          }
        }
        f.padding.push_back(__mmask64(pad));
      }
    }
  }
  return f;
}

// Each (tap row, group of 4 taps across)'s weights as 4 bytes broadcast to every lane, the
// vpdpbusd operand: out[i * groups + group].
__attribute__((target("avx512f"))) void tap_group_weights(const int32_t* w, int64_t kH, int64_t kW, int groups,
                                                          __m512i* out) {
  for (int64_t i = 0; i < kH; ++i) {
    for (int gi = 0; gi < groups; ++gi) {
      uint32_t word = 0;
      for (int r = 0; r < 4; ++r) {
        const int64_t j = 4 * gi + r;
        if (j < kW) word |= uint32_t(uint8_t(int8_t(w[i * kW + j]))) << (8 * r);
      }
      out[i * groups + gi] = _mm512_set1_epi32(int32_t(word));
    }
  }
}

constexpr int kMaxWeights = 16;  // kH <= 8 rows of at most 2 groups

}  // namespace
#endif

struct DepthwiseWindows::Tables {
  ConvShape s;
  QConvGeometry g;
  int groups = 1;
  uint8_t pad = 0;
  bool x_int8 = false;
#if defined(__x86_64__)
  qtiles::RowStoreAvx512 store;
  std::optional<FlatTables> flat;
  RowTables rows;  // when not flat

  __attribute__((target("avx512f,avx512bw,avx512vl"))) Tables(QGemmOutput::Type output, int32_t zero_point)
      : store(output, zero_point, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()) {}

  template <bool XSigned, int NC>
  void run_rows(const WindowChannel* ch) const;
  template <bool XSigned, bool TwoSources, int NC>
  void run_flat(const WindowChannel* ch) const;
  template <bool XSigned, int NC>
  void run_block(const WindowChannel* ch) const;
#endif
};

bool DepthwiseWindows::fits(const ConvShape& s, const QConvGeometry& g) {
#if defined(__x86_64__)
  static const bool cpu = avx512() && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi");
  return cpu && s.kW <= 8 && s.kH <= 8 && 15 * g.stride[1] + (s.kW - 1) * g.dilation[1] < 64;
#else
  (void)s, (void)g;
  return false;
#endif
}

DepthwiseWindows::DepthwiseWindows(const ConvShape& s, const QConvGeometry& g, QGemmOutput::Type output,
                                   int32_t zero_point, uint8_t pad, bool x_int8) {
  SMELT_INTERNAL_CHECK(fits(s, g)) << "DepthwiseWindows on a CPU or geometry it does not fit";
#if defined(__x86_64__)
  tables_ = std::make_unique<Tables>(output, zero_point);
  Tables& t = *tables_;
  t.s = s, t.g = g, t.pad = pad, t.x_int8 = x_int8;
  t.groups = int((s.kW + 3) / 4);
  t.flat = flat_tables(s, g, t.groups);
  if (!t.flat) t.rows = row_tables(s, g, t.groups);
#else
  (void)output, (void)zero_point, (void)pad, (void)x_int8;
#endif
}

DepthwiseWindows::~DepthwiseWindows() = default;

#if defined(__x86_64__)
template <bool XSigned, int NC>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi"))) void DepthwiseWindows::Tables::run_rows(
    const WindowChannel* ch) const {
  __m512i weights[NC][kMaxWeights];
  for (int c = 0; c < NC; ++c) tap_group_weights(ch[c].weights, s.kH, s.kW, groups, weights[c]);
  const __m512i fill = _mm512_set1_epi8(char(pad)), flip = _mm512_set1_epi8(char(0x80));
  // The geometry in locals: read through `this`, every store could change it.
  const int64_t H = s.H, W = s.W, Ho = s.Ho, Wo = s.Wo, kH = s.kH, two_groups = groups > 1;
  const int64_t s0 = g.stride[0], d0 = g.dilation[0], top = g.pad_begin[0];
  const __m512i index0 = rows.index[0], index1 = rows.index[1];
  const __mmask64 all = ~__mmask64(0);  // (maskz: the plain vpermb starts from an undefined value)
  const size_t chunks = rows.first.size(), bytes = store.bytes;
  const int64_t* first = rows.first.data();
  const __mmask64* inside = rows.inside.data();
  const int* outputs = rows.outputs.data();
  for (int64_t oh = 0; oh < Ho; ++oh) {
    int64_t row_at[8];  // each tap row's input row offset, -1 in the padding
    for (int64_t i = 0; i < kH; ++i) {
      const int64_t ih = oh * s0 + i * d0 - top;
      row_at[i] = ih >= 0 && ih < H ? ih * W : -1;
    }
    for (size_t k = 0; k < chunks; ++k) {
      __m512i acc[NC];
      for (int c = 0; c < NC; ++c) acc[c] = _mm512_set1_epi32(ch[c].start);
      for (int64_t i = 0; i < kH; ++i) {
        for (int c = 0; c < NC; ++c) {
          __m512i row = fill;
          if (row_at[i] >= 0) {
            const uintptr_t at = reinterpret_cast<uintptr_t>(ch[c].input) + uintptr_t(row_at[i] + first[k]);
            row = _mm512_mask_loadu_epi8(fill, inside[k], reinterpret_cast<const void*>(at));
          }
          if constexpr (XSigned) row = _mm512_xor_si512(row, flip);
          acc[c] = _mm512_dpbusd_epi32(acc[c], _mm512_maskz_permutexvar_epi8(all, index0, row), weights[c][i << two_groups]);
          if (two_groups) {
            acc[c] = _mm512_dpbusd_epi32(acc[c], _mm512_maskz_permutexvar_epi8(all, index1, row), weights[c][2 * i + 1]);
          }
        }
      }
      for (int c = 0; c < NC; ++c) {
        store.store16(acc[c], ch[c].scale, ch[c].out + size_t(oh * Wo + int64_t(k) * 16) * bytes, outputs[k]);
      }
    }
  }
}

template <bool XSigned, bool TwoSources, int NC>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi"))) void DepthwiseWindows::Tables::run_flat(
    const WindowChannel* ch) const {
  __m512i weights[NC][kMaxWeights];
  for (int c = 0; c < NC; ++c) tap_group_weights(ch[c].weights, s.kH, s.kW, groups, weights[c]);
  const __m512i fill = _mm512_set1_epi8(char(pad)), flip = _mm512_set1_epi8(char(0x80));
  const __mmask64 all = ~__mmask64(0);
  const FlatTables& f = *flat;
  const int64_t kH = s.kH, outputs = s.Ho * s.Wo, chunks = f.chunks, gs = groups;
  const size_t bytes = store.bytes;
  for (int64_t k = 0; k < chunks; ++k) {
    __m512i acc[NC];
    for (int c = 0; c < NC; ++c) acc[c] = _mm512_set1_epi32(ch[c].start);
    for (int64_t i = 0; i < kH; ++i) {
      const size_t w = size_t(k * kH + i);
      const __mmask64 low_mask = f.inside[0][w], high_mask = f.inside[1][w];
      __m512i low[NC], high[NC];
      for (int c = 0; c < NC; ++c) {
        const uintptr_t at = reinterpret_cast<uintptr_t>(ch[c].input) + uintptr_t(f.start[w]);
        low[c] = _mm512_maskz_loadu_epi8(low_mask, reinterpret_cast<const void*>(at));
        if constexpr (TwoSources) high[c] = _mm512_maskz_loadu_epi8(high_mask, reinterpret_cast<const void*>(at + 64));
      }
      for (int64_t gi = 0; gi < gs; ++gi) {
        const size_t t = w * size_t(gs) + size_t(gi);
        const __m512i index = _mm512_load_si512(f.index[t].bytes);
        const __mmask64 padding = f.padding[t];
        for (int c = 0; c < NC; ++c) {
          __m512i taps = TwoSources ? _mm512_maskz_permutex2var_epi8(all, low[c], index, high[c])
                                    : _mm512_maskz_permutexvar_epi8(all, index, low[c]);
          taps = _mm512_mask_mov_epi8(taps, padding, fill);
          if constexpr (XSigned) taps = _mm512_xor_si512(taps, flip);
          acc[c] = _mm512_dpbusd_epi32(acc[c], taps, weights[c][i * gs + gi]);
        }
      }
    }
    const int n = int(std::min<int64_t>(16, outputs - k * 16));
    for (int c = 0; c < NC; ++c) store.store16(acc[c], ch[c].scale, ch[c].out + size_t(k * 16) * bytes, n);
  }
}

template <bool XSigned, int NC>
void DepthwiseWindows::Tables::run_block(const WindowChannel* ch) const {
  if (!flat) return run_rows<XSigned, NC>(ch);
  if (flat->two_sources) return run_flat<XSigned, true, NC>(ch);
  run_flat<XSigned, false, NC>(ch);
}
#endif

void DepthwiseWindows::run(const WindowChannel* channels, int count) const {
  SMELT_INTERNAL_CHECK(count >= 1 && count <= kBlock) << "DepthwiseWindows::run of " << count << " channels";
#if defined(__x86_64__)
  const Tables& t = *tables_;
  if (count == kBlock) {
    return t.x_int8 ? t.run_block<true, kBlock>(channels) : t.run_block<false, kBlock>(channels);
  }
  for (int c = 0; c < count; ++c) t.x_int8 ? t.run_block<true, 1>(channels + c) : t.run_block<false, 1>(channels + c);
#else
  (void)channels;
#endif
}

}  // namespace smelt::kernels::qconv
