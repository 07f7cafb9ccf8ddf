// Quantized convolutions with one input channel per group (kernels/qconv_frames.h,
// docs/quantization.md): a GEMM of one row per group would waste its tile, so each output channel
// is a direct loop: straight from the image through byte permutations where the CPU and the
// weights allow (kernels/qconv_windows.h), else over its input channel's phase frames, where the
// output computed Wq wide reads every tap as one contiguous run. The products run on the stored
// bytes: sum w' (x - zx) = sum w' x - zx sum w' (w' = w - zw), the second term folded into the
// start.
#include <algorithm>
#include <limits>
#include <optional>

#include "base/parallel.h"
#include "kernels/qconv_frames.h"
#include "kernels/qconv_windows.h"
#include "kernels/qgemm_tiles.h"

namespace smelt::kernels::qconv {
namespace {

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
// The kept columns of each block of 32 of a channel's output (computed Wq wide), the same for
// every channel: block b's runs are runs[first[b], first[b + 1]).
struct BlockRuns {
  std::vector<qtiles::ColumnRun> runs;
  std::vector<int> first{0};
};

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
    int64_t columns, const qtiles::RowStoreAvx512& store, float scale, char* out, const BlockRuns& blocks) {
  const size_t taps = w.size(), pairs = (taps + 1) / 2;
  alignas(64) static constexpr int32_t kLow[16] = {0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23};
  alignas(64) static constexpr int32_t kHigh[16] = {8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31};
  const __m512i low_order = _mm512_load_si512(kLow), high_order = _mm512_load_si512(kHigh);
  auto widen = [](const uint8_t* p) {
    const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return XSigned ? _mm512_cvtepi8_epi16(bytes) : _mm512_cvtepu8_epi16(bytes);
  };
  // Each pair's weights and byte offsets, once per channel (a lone last tap pairs with weight 0
  // over its own bytes).
  constexpr size_t kMaxPairs = 16;
  __m512i weights[kMaxPairs];
  int64_t first_tap[kMaxPairs], second_tap[kMaxPairs];
  for (size_t p = 0; p < std::min(pairs, kMaxPairs); ++p) {
    const size_t t = 2 * p;
    const bool pair = t + 1 < taps;
    weights[p] = _mm512_set1_epi32(int32_t(uint32_t(uint16_t(int16_t(w[t]))) | (pair ? uint32_t(w[t + 1]) << 16 : 0u)));
    first_tap[p] = offset[t];
    second_tap[p] = offset[pair ? t + 1 : t];
  }
  const __m512i start = _mm512_set1_epi32(init);
  for (int64_t q0 = 0, block = 0; q0 < columns; q0 += 32, ++block) {
    __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
    for (size_t p = 0; p < pairs; ++p) {
      __m512i pair_weights;
      int64_t first, second;
      if (p < kMaxPairs) {
        pair_weights = weights[p], first = first_tap[p], second = second_tap[p];
      } else {
        const size_t t = 2 * p;
        const bool pair = t + 1 < taps;
        pair_weights =
            _mm512_set1_epi32(int32_t(uint32_t(uint16_t(int16_t(w[t]))) | (pair ? uint32_t(w[t + 1]) << 16 : 0u)));
        first = offset[t], second = offset[pair ? t + 1 : t];
      }
      const __m512i a = widen(x + first + q0), b = widen(x + second + q0);
      lo = _mm512_add_epi32(lo, _mm512_madd_epi16(_mm512_unpacklo_epi16(a, b), pair_weights));
      hi = _mm512_add_epi32(hi, _mm512_madd_epi16(_mm512_unpackhi_epi16(a, b), pair_weights));
    }
    const __m512i v0 = _mm512_add_epi32(_mm512_permutex2var_epi32(lo, low_order, hi), start);
    const __m512i v1 = _mm512_add_epi32(_mm512_permutex2var_epi32(lo, high_order, hi), start);
    const int begin = blocks.first[size_t(block)], end = blocks.first[size_t(block) + 1];
    store(v0, v1, scale, out, blocks.runs.data() + begin, end - begin);
  }
}

#endif

}  // namespace

// One output channel per task: from the image through byte permutations where the weights fit
// int8 (kernels/qconv_windows.h), else reading its input channel split into phase frames
// (padding: the zero point's byte).
void depthwise(const uint8_t* x, bool x_int8, int32_t zx, const Tensor& wv, const std::vector<int32_t>& zw,
               const int32_t* bias, const Requant& r, const ConvShape& s, const QConvGeometry& g, const Tensor& y) {
  const Phases ph = phases_of(s, g);
  const int64_t taps = s.kH * s.kW, frame_size = ph.per_channel();
  const int64_t columns = (s.Ho - 1) * ph.Wq + s.Wo;
  const bool w_int8 = wv.dtype() == DType::Int8;
  const uint8_t* weights = static_cast<const uint8_t*>(wv.raw_data());  // (O, 1, kH, kW)
  char* out_data = static_cast<char*>(y.raw_data());
  std::vector<int64_t> offset;
  for (int64_t i = 0; i < s.kH; ++i) {
    for (int64_t j = 0; j < s.kW; ++j) offset.push_back(ph.offset(0, i * g.dilation[0], j * g.dilation[1]));
  }
  // From the image through byte permutations (kernels/qconv_windows.h) for the channels whose
  // weights fit int8, in blocks of DepthwiseWindows::kBlock.
  std::optional<DepthwiseWindows> windows;
  if (DepthwiseWindows::fits(s, g)) windows.emplace(s, g, r.type, r.zero_point, uint8_t(zx), x_int8);
#if defined(__x86_64__)
  BlockRuns blocks;
  if (avx512()) {
    blocks.runs.resize(size_t((columns + 31) / 32 * 32));
    for (int64_t q0 = 0; q0 < columns; q0 += 32) {
      const int count = qtiles::column_runs(ph.Wq, s.Wo, q0, int(std::min<int64_t>(32, columns - q0)),
                                            blocks.runs.data() + blocks.first.back());
      blocks.first.push_back(blocks.first.back() + count);
    }
  }
  // (built only where it runs: its constructor is AVX-512 code)
  std::optional<qtiles::RowStoreAvx512> store;
  if (avx512()) store.emplace(r.type, r.zero_point, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
#endif
  const size_t out_bytes = dtype_size(y.dtype());
  const int64_t work = frame_size + columns * taps;
  parallel_for(s.N * s.O, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(work, 1)), [&](int64_t b, int64_t e) {
    std::vector<uint8_t> frame;  // sized at its first use, with slack for depthwise_avx512's loads
    std::vector<int32_t> acc, w(static_cast<size_t>(taps));
    std::vector<int32_t> block_weights(static_cast<size_t>(taps * DepthwiseWindows::kBlock));
    WindowChannel block[DepthwiseWindows::kBlock];
    int blocked = 0;
    for (int64_t t = b; t < e; ++t) {
      const int64_t n = t / s.O, o = t % s.O, c = o / s.Og;
      const uint8_t* channel = x + (n * s.C + c) * s.H * s.W;
      const int32_t z = zw.size() == 1 ? zw[0] : zw[size_t(o)];
      uint32_t weight_sum = 0;
      bool int8_weights = true;
      for (int64_t k = 0; k < taps; ++k) {
        const uint8_t raw = weights[o * taps + k];
        w[size_t(k)] = (w_int8 ? int32_t(int8_t(raw)) : int32_t(raw)) - z;
        weight_sum += uint32_t(w[size_t(k)]);
        int8_weights = int8_weights && w[size_t(k)] >= -128 && w[size_t(k)] <= 127;
      }
      // wrapping, as the GEMM's accumulators
      const int32_t init = int32_t(uint32_t(bias ? bias[o] : 0) - uint32_t(zx) * weight_sum);
      const float scale = r.column.empty() ? 1.0f : r.column[size_t(o)];
      char* out = out_data + size_t((n * s.O + o) * s.Ho * s.Wo) * out_bytes;
      if (windows && int8_weights) {
        // int8 activations are read as uint8 by +128 (the zero point too): sum w' (x - zx) unchanged
        const uint32_t shifted = uint32_t(zx + (x_int8 ? 128 : 0));
        int32_t* kept = block_weights.data() + blocked * taps;
        std::copy(w.begin(), w.end(), kept);
        block[blocked++] = {channel, kept, int32_t(uint32_t(bias ? bias[o] : 0) - shifted * weight_sum), scale, out};
        if (blocked == DepthwiseWindows::kBlock) windows->run(block, blocked), blocked = 0;
        continue;
      }
      frame.resize(static_cast<size_t>(frame_size + 64));
      split_channel(channel, s, g, ph, uint8_t(zx), frame.data());
#if defined(__x86_64__)
      if (avx512()) {
        if (x_int8) {
          depthwise_avx512<true>(frame.data(), offset, w, init, columns, *store, scale, out, blocks);
        } else {
          depthwise_avx512<false>(frame.data(), offset, w, init, columns, *store, scale, out, blocks);
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
    if (blocked) windows->run(block, blocked);
  });
}

}  // namespace smelt::kernels::qconv
