// The quantized 2-D convolution over NCHW images (kernels/quantize.h, docs/quantization.md).
//
// Each group is one weights-on-the-left integer GEMM (qgemm_s8u8): output channels are rows, so
// the result lands in NCHW as it is computed, and X's K rows (one per (channel, kh, kw) tap) are
// read where they lie:
// - the image is padded and split into its stride phases (split_phases; nothing is copied without
//   padding and stride): then the tap (c, i, j) of every output pixel is one contiguous run of a
//   phase, when the output is computed a phase's width wide; the columns past the output's width
//   are dropped by the GEMM's store. No im2col.
// - one input channel per group (depthwise): a direct loop per channel over the same phase frames
//   (in int32), since a GEMM of one row would waste its tile.
// Padding reads the input's zero point, so it stands for 0.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/parallel.h"
#include "kernels/qgemm.h"
#include "kernels/qgemm_tiles.h"
#include "kernels/quantize.h"
#include "kernels/quantize_params.h"
#include "kernels/transpose.h"
#include "smelt/error.h"

namespace smelt::kernels {
namespace {

// A buffer of the calling thread, grown as needed and kept: a model's convolutions reuse it.
uint8_t* scratch(std::vector<uint8_t>& buffer, size_t bytes) {
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
}

struct ConvShape {
  int64_t N, C, H, W, O, Cg, kH, kW, Ho, Wo, groups, Og, K;
};

// The image padded (by `pad` bytes) and split into its stride phases: phase (a, b) of channel c
// holds padded[h * s0 + a][w * s1 + b] in an Hq x Wq frame. A tap at (ii, jj) of every output
// pixel (oh, ow) then reads phase (ii % s0, jj % s1) at (oh + ii / s0, ow + jj / s1): stride 1,
// whatever the convolution's stride, so every K row is one contiguous run.
struct Phases {
  int64_t Hq = 0, Wq = 0, s0 = 1, s1 = 1;
  int64_t offset(int64_t c, int64_t ii, int64_t jj) const {
    return ((c * s0 + ii % s0) * s1 + jj % s1) * Hq * Wq + (ii / s0) * Wq + jj / s1;
  }
};

Phases phases_of(const ConvShape& s, const QConvGeometry& g) {
  Phases p;
  p.s0 = g.stride[0], p.s1 = g.stride[1];
  p.Hq = (s.H + g.pad_begin[0] + g.pad_end[0] + p.s0 - 1) / p.s0;
  p.Wq = (s.W + g.pad_begin[1] + g.pad_end[1] + p.s1 - 1) / p.s1;
  return p;
}

#if defined(__x86_64__)
const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512vl");

// even[i] = row[2 i], odd[i] = row[2 i + 1] for i < n: 64 bytes at a time as 32 words, whose low
// and high bytes vpmovwb narrows out (the tail under a mask).
__attribute__((target("avx512f,avx512bw,avx512vl"))) void deinterleave_pairs_avx512(const uint8_t* row, int64_t n,
                                                                                     uint8_t* even, uint8_t* odd) {
  for (int64_t i = 0; i < n; i += 32) {
    const int64_t left = std::min<int64_t>(32, n - i);
    const __mmask32 mask = __mmask32((uint64_t(1) << left) - 1);
    const __m512i words = _mm512_maskz_loadu_epi16(mask, row + 2 * i);
    const __mmask32 all = ~__mmask32(0);  // (maskz: the plain form starts from an undefined value)
    _mm256_mask_storeu_epi8(even + i, mask, _mm512_maskz_cvtepi16_epi8(all, words));
    _mm256_mask_storeu_epi8(odd + i, mask, _mm512_maskz_cvtepi16_epi8(all, _mm512_srli_epi16(words, 8)));
  }
}
#endif

void split_phases(const uint8_t* image, const ConvShape& s, const QConvGeometry& g, const Phases& p, uint8_t pad,
                  uint8_t* frame) {
  const int64_t per_channel = p.s0 * p.s1 * p.Hq * p.Wq;
  const int64_t width = p.Wq * p.s1;  // the padded row, rounded up to whole phases
  parallel_for(s.C, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(per_channel, 1)), [&](int64_t b, int64_t e) {
    thread_local std::vector<uint8_t> padded;  // one padded row, when the stride splits it
    if (p.s1 > 1 && padded.size() < size_t(width)) padded.resize(size_t(width));
    for (int64_t c = b; c < e; ++c) {
      const uint8_t* channel = image + c * s.H * s.W;
      for (int64_t a = 0; a < p.s0; ++a) {
        for (int64_t hq = 0; hq < p.Hq; ++hq) {
          const int64_t ih = hq * p.s0 + a - g.pad_begin[0];
          uint8_t* out = frame + (c * p.s0 + a) * p.s1 * p.Hq * p.Wq + hq * p.Wq;  // phase (a, 0)
          // The padded row: the zero point's byte, the image row, the zero point's byte.
          uint8_t* row = p.s1 == 1 ? out : padded.data();
          const int64_t left = std::min<int64_t>(g.pad_begin[1], width);
          const int64_t inside = ih < 0 || ih >= s.H ? 0 : std::min<int64_t>(s.W, width - left);
          std::memset(row, pad, size_t(width));
          if (inside > 0) std::memcpy(row + left, channel + ih * s.W, size_t(inside));
          if (p.s1 == 1) continue;
#if defined(__x86_64__)
          if (p.s1 == 2 && avx512) {
            deinterleave_pairs_avx512(row, p.Wq, out, out + p.Hq * p.Wq);
            continue;
          }
#endif
          for (int64_t bb = 0; bb < p.s1; ++bb) {  // de-interleaved into the row's phases
            uint8_t* phase = out + bb * p.Hq * p.Wq;
            for (int64_t wq = 0; wq < p.Wq; ++wq) phase[wq] = row[wq * p.s1 + bb];
          }
        }
      }
    }
  });
}

// acc[q] = init + sum over the taps of w[t] * x[offset[t] + q], for q in [0, columns): blocks of
// columns kept in registers (the loop GCC vectorizes) across all the taps.
// The sums wrap in uint32, as the GEMM's accumulators do (a saturated int32 bias plus products
// would overflow a signed sum); each product fits int32 (|w'|, |x| <= 255).
template <class X>
void depthwise_taps(const X* x, const std::vector<int64_t>& offset, const std::vector<int32_t>& w, int32_t init,
                    int64_t columns, int32_t* acc) {
  constexpr int64_t kBlock = 64;
  const size_t taps = w.size();
  for (int64_t q0 = 0; q0 < columns; q0 += kBlock) {
    const int64_t n = std::min(kBlock, columns - q0);
    uint32_t block[kBlock];
    for (int64_t l = 0; l < kBlock; ++l) block[l] = uint32_t(init);
    for (size_t t = 0; t < taps; ++t) {
      const X* src = x + offset[t] + q0;
      const int32_t wt = w[t];
      if (n == kBlock) {
        for (int64_t l = 0; l < kBlock; ++l) block[l] += uint32_t(wt * int32_t(src[l]));
      } else {
        for (int64_t l = 0; l < n; ++l) block[l] += uint32_t(wt * int32_t(src[l]));
      }
    }
    for (int64_t l = 0; l < n; ++l) acc[q0 + l] = int32_t(block[l]);
  }
}

#if defined(__x86_64__)
// depthwise_taps for 32 columns at a time in zmm registers, storing each block as it is done.
// Taps go in pairs: the two taps' bytes widened to int16 and interleaved, times the pair of
// weights (w' = w - zw, within +-255, so int16), summed by vpmaddwd into int32 lanes — exact
// (|pair sum| <= 2 * 255 * 255) and wrapping like the portable loop. The interleave runs within
// 128-bit lanes, so the low and high halves hold columns {0-3, 8-11, ...} and {4-7, 12-15, ...}
// of the block; one permutation per block puts them back in order. The frame has 32 bytes of
// slack past its end for the last block's loads (those columns are never stored).
template <bool XSigned>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void depthwise_avx512(
    const uint8_t* x, const std::vector<int64_t>& offset, const std::vector<int32_t>& w, int32_t init,
    int64_t columns, const qtiles::RowStoreAvx512& store, float scale, char* out, const std::vector<qtiles::ColumnRun>& runs,
    const std::vector<int>& first_run) {
  const size_t taps = w.size();
  alignas(64) static constexpr int32_t kLow[16] = {0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23};
  alignas(64) static constexpr int32_t kHigh[16] = {8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31};
  const __m512i low_order = _mm512_load_si512(kLow), high_order = _mm512_load_si512(kHigh);
  auto widen = [](const uint8_t* p) {
    const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return XSigned ? _mm512_cvtepi8_epi16(bytes) : _mm512_cvtepu8_epi16(bytes);
  };
  const __m512i start = _mm512_set1_epi32(init);
  for (int64_t q0 = 0, block = 0; q0 < columns; q0 += 32, ++block) {
    __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
    for (size_t t = 0; t < taps; t += 2) {
      const bool pair = t + 1 < taps;
      const __m512i a = widen(x + offset[t] + q0);
      const __m512i b = pair ? widen(x + offset[t + 1] + q0) : _mm512_setzero_si512();
      const __m512i weights =
          _mm512_set1_epi32(int32_t(uint32_t(uint16_t(int16_t(w[t]))) | (pair ? uint32_t(w[t + 1]) << 16 : 0u)));
      lo = _mm512_add_epi32(lo, _mm512_madd_epi16(_mm512_unpacklo_epi16(a, b), weights));
      hi = _mm512_add_epi32(hi, _mm512_madd_epi16(_mm512_unpackhi_epi16(a, b), weights));
    }
    const __m512i v0 = _mm512_add_epi32(_mm512_permutex2var_epi32(lo, low_order, hi), start);
    const __m512i v1 = _mm512_add_epi32(_mm512_permutex2var_epi32(lo, high_order, hi), start);
    store(v0, v1, scale, out, runs.data() + first_run[size_t(block)],
          first_run[size_t(block) + 1] - first_run[size_t(block)]);
  }
}
#endif

// One output channel per task, each reading its one input channel split into the phase frames of
// split_phases (padding: the zero point's byte); the output computed Wq wide is then, per tap,
// one contiguous run of a phase. The products run on the stored bytes: sum w' (x - zx) =
// sum w' x - zx sum w' (w' = w - zw), the second term folded into the start value.
void depthwise(const uint8_t* x, bool x_int8, int32_t zx, const Tensor& wv, const std::vector<int32_t>& zw,
               const int32_t* bias, const Requant& r, const ConvShape& s, const QConvGeometry& g, const Tensor& y) {
  const Phases ph = phases_of(s, g);
  const int64_t taps = s.kH * s.kW, frame_size = ph.s0 * ph.s1 * ph.Hq * ph.Wq;
  const int64_t columns = (s.Ho - 1) * ph.Wq + s.Wo;
  const bool w_int8 = wv.dtype() == DType::Int8;
  const uint8_t* weights = static_cast<const uint8_t*>(wv.raw_data());  // (O, 1, kH, kW)
  char* out_data = static_cast<char*>(y.raw_data());
  std::vector<int64_t> offset;
  for (int64_t i = 0; i < s.kH; ++i) {
    for (int64_t j = 0; j < s.kW; ++j) offset.push_back(ph.offset(0, i * g.dilation[0], j * g.dilation[1]));
  }
  ConvShape one = s;  // a single channel's geometry, for split_phases
  one.C = 1;
#if defined(__x86_64__)
  // The kept columns of each block of 32, the same for every channel.
  std::vector<qtiles::ColumnRun> runs;
  std::vector<int> first_run(1, 0);
  if (avx512) {
    runs.resize(size_t((columns + 31) / 32 * 32));
    for (int64_t q0 = 0; q0 < columns; q0 += 32) {
      const int count = qtiles::column_runs(ph.Wq, s.Wo, q0, int(std::min<int64_t>(32, columns - q0)),
                                            runs.data() + first_run.back());
      first_run.push_back(first_run.back() + count);
    }
  }
  const qtiles::RowStoreAvx512 store(r.type, r.zero_point, std::numeric_limits<int32_t>::min(),
                             std::numeric_limits<int32_t>::max());
#endif
  const size_t out_bytes = dtype_size(y.dtype());
  const int64_t work = frame_size + columns * taps;
  parallel_for(s.N * s.O, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(work, 1)), [&](int64_t b, int64_t e) {
    std::vector<uint8_t> frame(static_cast<size_t>(frame_size + 64));  // slack for depthwise_avx512's loads
    std::vector<int32_t> acc, w(static_cast<size_t>(taps));
    for (int64_t t = b; t < e; ++t) {
      const int64_t n = t / s.O, o = t % s.O, c = o / s.Og;
      split_phases(x + (n * s.C + c) * s.H * s.W, one, g, ph, uint8_t(zx), frame.data());
      const int32_t z = zw.size() == 1 ? zw[0] : zw[size_t(o)];
      uint32_t weight_sum = 0;
      for (int64_t k = 0; k < taps; ++k) {
        const uint8_t raw = weights[o * taps + k];
        w[size_t(k)] = (w_int8 ? int32_t(int8_t(raw)) : int32_t(raw)) - z;
        weight_sum += uint32_t(w[size_t(k)]);
      }
      // wrapping, as the GEMM's accumulators
      const int32_t init = int32_t(uint32_t(bias ? bias[o] : 0) - uint32_t(zx) * weight_sum);
      const float scale = r.column.empty() ? 1.0f : r.column[size_t(o)];
      char* out = out_data + size_t((n * s.O + o) * s.Ho * s.Wo) * out_bytes;
#if defined(__x86_64__)
      if (avx512) {
        if (x_int8) {
          depthwise_avx512<true>(frame.data(), offset, w, init, columns, store, scale, out, runs, first_run);
        } else {
          depthwise_avx512<false>(frame.data(), offset, w, init, columns, store, scale, out, runs, first_run);
        }
        continue;
      }
#endif
      acc.resize(size_t(columns));
      if (x_int8) {
        depthwise_taps(reinterpret_cast<const int8_t*>(frame.data()), offset, w, init, columns, acc.data());
      } else {
        depthwise_taps(frame.data(), offset, w, init, columns, acc.data());
      }
      for (int64_t oh = 0; oh < s.Ho; ++oh) {
        const int32_t* row = acc.data() + oh * ph.Wq;
        const int64_t at = oh * s.Wo;
        if (r.type == QGemmOutput::Type::Int32) {
          std::copy(row, row + s.Wo, reinterpret_cast<int32_t*>(out) + at);
        } else if (r.type == QGemmOutput::Type::UInt8) {
          qtiles::requantize_row<uint8_t, false>(row, int(s.Wo), &scale, r.zero_point, 0, 255,
                                                 reinterpret_cast<uint8_t*>(out) + at);
        } else {
          qtiles::requantize_row<int8_t, false>(row, int(s.Wo), &scale, r.zero_point, -128, 127,
                                                reinterpret_cast<int8_t*>(out) + at);
        }
      }
    }
  });
}

}  // namespace

int64_t qconv_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad_begin,
                          int64_t pad_end, int64_t dilation) {
  const int64_t room = in + pad_begin + pad_end - dilation * (kernel - 1) - 1;
  return room < 0 ? 0 : room / stride + 1;
}

void quantized_conv2d_forward(const Tensor& y, const QuantizedTensor& x, const QuantizedTensor& w,
                              const Tensor& bias, const Tensor& y_scale,
                              const Tensor& y_zero_point, const QConvGeometry& g, bool weight_constant) {
  const char* op = y.dtype() == DType::Int32 ? "conv2d_integer" : "qlinear_conv2d";
  ConvShape s;
  s.N = x.values.size(0), s.C = x.values.size(1), s.H = x.values.size(2), s.W = x.values.size(3);
  s.O = w.values.size(0), s.Cg = w.values.size(1), s.kH = w.values.size(2), s.kW = w.values.size(3);
  s.Ho = y.size(2), s.Wo = y.size(3), s.groups = g.groups, s.Og = s.O / s.groups, s.K = s.Cg * s.kH * s.kW;
  const int64_t P = s.Ho * s.Wo;
  const bool x_int8 = x.values.dtype() == DType::Int8;
  const int32_t zx = zero_point_values(x.zero_point).at(0);
  const uint8_t pad_byte = uint8_t(zx);  // the zero point's own byte, in x's dtype
  const std::vector<int32_t> zw = zero_point_values(w.zero_point);
  const Tensor bias_c = bias.defined() ? contiguous_copy(bias) : Tensor();
  const int32_t* bias_data = bias_c.defined() ? bias_c.data<int32_t>() : nullptr;
  const Requant r = make_requant(y, x, w, y_scale, y_zero_point, s.O, op);
  if (y.numel() == 0) return;
  const Tensor xc = x.values.is_contiguous() ? x.values : contiguous_copy(x.values);
  const uint8_t* xv = static_cast<const uint8_t*>(xc.raw_data());
  if (s.Cg == 1) {
    const Tensor wv = contiguous_copy(w.values);
    return depthwise(xv, x_int8, zx, wv, zw, bias_data, r, s, g, y);
  }
  const size_t out_bytes = dtype_size(y.dtype());
  std::vector<std::shared_ptr<const QPackedW>> packed(size_t(s.groups));
  for (int64_t grp = 0; grp < s.groups; ++grp) {
    std::vector<int32_t> zw_group(1, zw.at(0));
    if (zw.size() != 1) zw_group.assign(zw.begin() + grp * s.Og, zw.begin() + (grp + 1) * s.Og);
    const WeightPacking packing{WeightPacking::Kind::ConvW, s.K, s.Og, s.groups, grp};
    packed[size_t(grp)] = kept_packing_of<QPackedW>(w.values, weight_constant, zw_group, packing, [&] {
      const Tensor wv = contiguous_copy(w.values);  // (O, Cg, kH, kW): a group's rows are (Og, K)
      return qgemm_pack_w(static_cast<const uint8_t*>(wv.raw_data()) + grp * s.Og * s.K,
                          wv.dtype() == DType::UInt8, s.Og, s.K, s.K, zw_group, qgemm_s8u8_best_isa());
    });
  }
  // Without padding or stride the image is its own frame; otherwise it is split into phases.
  const bool in_place = g.stride[0] == 1 && g.stride[1] == 1 && !g.pad_begin[0] && !g.pad_begin[1] &&
                        !g.pad_end[0] && !g.pad_end[1];
  const Phases ph = in_place ? Phases{s.H, s.W, 1, 1} : phases_of(s, g);
  thread_local std::vector<uint8_t> frame_buffer;
  std::vector<const uint8_t*> rows(size_t(s.K));
  std::vector<int64_t> tap_offset(size_t(s.kH * s.kW));
  for (int64_t n = 0; n < s.N; ++n) {
    const uint8_t* frame = xv + n * s.C * s.H * s.W;
    if (!in_place) {
      uint8_t* split = scratch(frame_buffer, size_t(s.C * ph.s0 * ph.s1 * ph.Hq * ph.Wq));
      split_phases(frame, s, g, ph, pad_byte, split);
      frame = split;
    }
    for (int64_t grp = 0; grp < s.groups; ++grp) {
      // Row k = (c, i, j): the output computed Wq wide, the columns past Wo dropped by the store.
      // Tap (i, j) sits at the same place in every channel's frame (offset(0, ...)), and the
      // channels' frames follow one another: no division per row.
      const int64_t per_channel = ph.s0 * ph.s1 * ph.Hq * ph.Wq;
      for (int64_t i = 0, k = 0; i < s.kH; ++i) {
        for (int64_t j = 0; j < s.kW; ++j, ++k) tap_offset[size_t(k)] = ph.offset(0, i * g.dilation[0], j * g.dilation[1]);
      }
      const int64_t taps = s.kH * s.kW;
      for (int64_t c = 0; c < s.Cg; ++c) {
        const uint8_t* channel = frame + (grp * s.Cg + c) * per_channel;
        for (int64_t t = 0; t < taps; ++t) rows[size_t(c * taps + t)] = channel + tap_offset[size_t(t)];
      }
      QGemmX operand;
      operand.rows = rows.data();
      operand.n = (s.Ho - 1) * ph.Wq + s.Wo;
      operand.zero_point = zx + (x_int8 ? 128 : 0);
      operand.flip_sign = x_int8;
      QGemmRowOutput out;
      out.type = r.type;
      out.data = static_cast<char*>(y.raw_data()) + size_t((n * s.O + grp * s.Og) * P) * out_bytes;
      out.ldc = P;
      out.bias = bias_data ? bias_data + grp * s.Og : nullptr;
      if (!r.column.empty()) out.scale = r.column.data() + grp * s.Og;
      out.zero_point = r.zero_point;
      if (ph.Wq != s.Wo) out.padded_width = ph.Wq, out.width = s.Wo;
      qgemm_s8u8(*packed[size_t(grp)], operand, out);
    }
  }
}

}  // namespace smelt::kernels
