// Quantized convolutions on AMX without packing the image (kernels/qconv_frames.h,
// docs/quantization.md).
//
// The GEMM path (kernels/qconv.cpp) packs, for every panel of 32 output columns, all K = C kH kW
// rows of the image into AMX's B layout: each k group of 4 rows interleaved column by column. With
// AMX the products cost so little that this packing (K x 32 bytes per panel, the image copied kH kW
// times over) was most of a convolution's time. Here K runs (tap, channel) instead of (channel,
// tap), and the image is split into its phase frames with each 4 channels interleaved byte by byte
// (a "quad" frame: [quad][phase][Hq][Wq][4]). Then the k group (tap t, channels 4q .. 4q + 3) of 16
// consecutive columns is 64 contiguous bytes of quad q's frame at tap t's offset, and the 16 k
// groups of 64 channels lie one quad frame apart: one TILELOADD with that stride reads a B tile
// straight from the frame. The image is rearranged once (one pass over its bytes) instead of kH kW
// times.
//
// Weights symmetric (zero point 0, so no column sums of the image), channels padded to whole
// blocks of 64 with zero weights (their quad frames are zeros too), groups 1.
#include <algorithm>
#include <cstring>
#include <limits>

#include "base/parallel.h"
#include "kernels/qconv_frames.h"
#include "kernels/qgemm.h"
#include "kernels/qgemm_tiles.h"
#include "kernels/quantize_params.h"
#include "kernels/transpose.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace smelt::kernels::qconv {
namespace {

#if defined(__x86_64__)
constexpr int64_t kBlockChannels = 64;  // channels per tile product: 16 k groups of 4

int64_t padded_channels(int64_t C) { return (C + kBlockChannels - 1) / kBlockChannels * kBlockChannels; }

// The weights as A tiles: [row tile of 32][tap][channel block][half][16 rows][64 bytes], byte
// 4 q + r of a row holding the weight of channel 64 b + 4 q + r (zero past C and past O); with
// each output channel's sum of weights (for the activation zero point's term).
struct QuadWeights {
  int64_t O = 0, taps = 0, blocks = 0;
  std::vector<int8_t> bytes;
  std::vector<int32_t> row_sums;
};

QuadWeights pack_quad_weights(const Tensor& w, const ConvShape& s) {
  const Tensor wc = contiguous_copy(w);  // (O, C, kH, kW) int8
  const int8_t* src = static_cast<const int8_t*>(wc.raw_data());
  QuadWeights q;
  q.O = s.O, q.taps = s.kH * s.kW, q.blocks = padded_channels(s.C) / kBlockChannels;
  const int64_t row_tiles = (s.O + 31) / 32;
  q.bytes.assign(size_t(row_tiles * q.taps * q.blocks * 2 * 16 * 64), 0);
  q.row_sums.assign(size_t(s.O), 0);
  for (int64_t o = 0; o < s.O; ++o) {
    uint32_t sum = 0;
    for (int64_t c = 0; c < s.C; ++c) {
      for (int64_t t = 0; t < q.taps; ++t) {
        const int8_t v = src[(o * s.C + c) * q.taps + t];
        sum += uint32_t(int32_t(v));
        const int64_t b = c / kBlockChannels, within = c % kBlockChannels;
        const int64_t at = (((((o / 32) * q.taps + t) * q.blocks + b) * 2 + (o % 32) / 16) * 16 + o % 16) * 64 + within;
        q.bytes[size_t(at)] = v;
      }
    }
    q.row_sums[size_t(o)] = int32_t(sum);
  }
  return q;
}

// Four rows interleaved byte by byte: out[4 n + r] = rows[r][n] ^ flip, for n < count.
__attribute__((target("avx2,avx512bw,avx512vl"))) void interleave_quad(const uint8_t* const rows[4], int64_t count,
                                                                       uint8_t flip, uint8_t* out) {
  const __m256i sign = _mm256_set1_epi8(char(flip));
  for (int64_t n0 = 0; n0 < count; n0 += 32) {
    const int64_t left = std::min<int64_t>(32, count - n0);
    const __mmask32 mask = left >= 32 ? ~__mmask32(0) : __mmask32((1u << left) - 1);
    __m256i v[4];
    for (int r = 0; r < 4; ++r) v[r] = _mm256_xor_si256(_mm256_maskz_loadu_epi8(mask, rows[r] + n0), sign);
    const __m256i ab0 = _mm256_unpacklo_epi8(v[0], v[1]), ab1 = _mm256_unpackhi_epi8(v[0], v[1]);
    const __m256i cd0 = _mm256_unpacklo_epi8(v[2], v[3]), cd1 = _mm256_unpackhi_epi8(v[2], v[3]);
    const __m256i q0 = _mm256_unpacklo_epi16(ab0, cd0), q1 = _mm256_unpackhi_epi16(ab0, cd0);
    const __m256i q2 = _mm256_unpacklo_epi16(ab1, cd1), q3 = _mm256_unpackhi_epi16(ab1, cd1);
    const __m256i out0 = _mm256_permute2x128_si256(q0, q1, 0x20), out1 = _mm256_permute2x128_si256(q2, q3, 0x20);
    const __m256i out2 = _mm256_permute2x128_si256(q0, q1, 0x31), out3 = _mm256_permute2x128_si256(q2, q3, 0x31);
    uint8_t* at = out + 4 * n0;
    if (left == 32) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(at), out0);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(at + 32), out1);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(at + 64), out2);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(at + 96), out3);
      continue;
    }
    alignas(32) uint8_t tail[128];
    _mm256_store_si256(reinterpret_cast<__m256i*>(tail), out0);
    _mm256_store_si256(reinterpret_cast<__m256i*>(tail + 32), out1);
    _mm256_store_si256(reinterpret_cast<__m256i*>(tail + 64), out2);
    _mm256_store_si256(reinterpret_cast<__m256i*>(tail + 96), out3);
    std::memcpy(at, tail, size_t(4 * left));
  }
}

// The output block of row tile `mt` (32 output channels) and columns [n0, n0 + 32): every tap and
// channel block, 2 x 2 tiles each, into c (32 x 32 int32).
__attribute__((target("amx-tile,amx-int8"))) void block_amx(const int8_t* weights, const uint8_t* frames,
                                                            const std::vector<int64_t>& tap_offset, int64_t blocks,
                                                            int64_t block_stride, int64_t quad_bytes, int64_t n0,
                                                            int32_t* c) {
  qtiles::amx_zero();
  const int8_t* a = weights;
  for (const int64_t offset : tap_offset) {
    const uint8_t* x = frames + offset + 4 * n0;
    for (int64_t b = 0; b < blocks; ++b, a += 2 * 16 * 64, x += block_stride) {
      qtiles::amx_product(a, 16 * 64, 64, x, quad_bytes);
    }
  }
  qtiles::amx_store(c);
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void store_block(const QuadWeights& w, const Requant& r,
                                                                      const int32_t* bias, uint32_t zx,
                                                                      const qtiles::RowStoreAvx512& store,
                                                                      const int32_t* c, int64_t m0, int mr, char* out,
                                                                      int64_t ldc, const qtiles::ColumnRun* runs,
                                                                      int run_count) {
  for (int i = 0; i < mr; ++i) {
    const int64_t row = m0 + i;
    // acc = c - zx * rowsum(W) (+ bias), wrapping as the lanes do
    const uint32_t term = (bias ? uint32_t(bias[row]) : 0u) - zx * uint32_t(w.row_sums[size_t(row)]);
    const __m512i t = _mm512_set1_epi32(int32_t(term));
    const __m512i v0 = _mm512_add_epi32(_mm512_loadu_si512(c + i * 32), t);
    const __m512i v1 = _mm512_add_epi32(_mm512_loadu_si512(c + i * 32 + 16), t);
    store(v0, v1, r.column.empty() ? 1.0f : r.column[size_t(row)], out + row * ldc * int64_t(store.bytes), runs,
          run_count);
  }
}
#endif

}  // namespace

bool amx_direct_fits(const ConvShape& s, const std::vector<int32_t>& zw, bool weight_int8) {
#if defined(__x86_64__)
  if (qgemm_s8u8_best_isa() != QGemmIsa::Amx || s.groups != 1 || !weight_int8) return false;
  if (std::any_of(zw.begin(), zw.end(), [](int32_t z) { return z != 0; })) return false;
  // Channels padded to blocks of 64 cost their padding: take shapes where it is at most a third.
  // A 1x1 kernel reads the image once on either path (the GEMM path packs it in place, without
  // phase frames), so only spatial kernels gain.
  return s.C >= 48 && padded_channels(s.C) * 3 <= s.C * 4 && s.kH * s.kW > 1 && s.kH * s.kW <= 64;
#else
  (void)s, (void)zw, (void)weight_int8;
  return false;
#endif
}

void amx_direct(const uint8_t* x, bool x_int8, int32_t zx, const Tensor& w, bool weight_constant,
                const int32_t* bias, const Requant& r, const ConvShape& s, const QConvGeometry& g, const Tensor& y) {
#if defined(__x86_64__)
  const WeightPacking packing{WeightPacking::Kind::ConvWQuads, s.K, s.O, 1, 0, 0};
  const std::shared_ptr<const QuadWeights> weights =
      kept_packing_of<QuadWeights>(w, weight_constant, {0}, packing, [&] { return pack_quad_weights(w, s); });
  const Phases ph = phases_of(s, g);
  const int64_t per_channel = ph.per_channel(), quad_bytes = 4 * per_channel;
  const int64_t Cp = padded_channels(s.C), quads = Cp / 4, blocks = Cp / kBlockChannels;
  const int64_t columns = (s.Ho - 1) * ph.Wq + s.Wo, panels = (columns + 31) / 32;
  std::vector<int64_t> tap_offset;
  for (int64_t i = 0; i < s.kH; ++i) {
    for (int64_t j = 0; j < s.kW; ++j) tap_offset.push_back(4 * ph.offset(0, i * g.dilation[0], j * g.dilation[1]));
  }
  // The kept columns of each panel (the padding columns Wq - Wo of each row dropped).
  std::vector<qtiles::ColumnRun> runs(size_t(panels * 32));
  std::vector<int> run_count(static_cast<size_t>(panels));
  for (int64_t p = 0; p < panels; ++p) {
    run_count[size_t(p)] = qtiles::column_runs(ph.Wq, s.Wo, p * 32, int(std::min<int64_t>(32, columns - p * 32)),
                                               runs.data() + p * 32);
  }
  const qtiles::RowStoreAvx512 store(r.type, r.zero_point, std::numeric_limits<int32_t>::min(),
                                     std::numeric_limits<int32_t>::max());
  const uint8_t flip = x_int8 ? 0x80 : 0;
  const uint32_t zx_stored = uint32_t(zx + (x_int8 ? 128 : 0));
  const size_t out_bytes = dtype_size(y.dtype());
  const int64_t m_tiles = (s.O + 31) / 32;
  // Quad frames, then 32 + 128 bytes of slack: a B tile of the last panel reads past the columns.
  thread_local std::vector<uint8_t> frames_buffer;
  const size_t frames_size = size_t(quads * quad_bytes + 256);
  if (frames_buffer.size() < frames_size) frames_buffer.assign(frames_size, 0);
  uint8_t* frames = frames_buffer.data();
  for (int64_t n = 0; n < s.N; ++n) {
    const uint8_t* image = x + n * s.C * s.H * s.W;
    // Each 4 channels split into phase frames (the zero point's byte as padding), then interleaved;
    // the padding channels' frames are zeros (their weights are zero).
    ConvShape one = s;
    one.C = 1;
    parallel_for(quads, 1, [&](int64_t begin, int64_t end) {
      std::vector<uint8_t> channel_frames(size_t(4 * per_channel));
      for (int64_t q = begin; q < end; ++q) {
        uint8_t* out = frames + q * quad_bytes;
        if (4 * q >= s.C) {
          std::memset(out, 0, size_t(quad_bytes));
          continue;
        }
        const uint8_t* rows[4];
        for (int rr = 0; rr < 4; ++rr) {
          const int64_t c = 4 * q + rr;
          uint8_t* f = channel_frames.data() + rr * per_channel;
          if (c < s.C) {
            split_channel(image + c * s.H * s.W, one, g, ph, uint8_t(zx), f);
          } else {
            std::memset(f, uint8_t(zx), size_t(per_channel));
          }
          rows[rr] = f;
        }
        interleave_quad(rows, per_channel, flip, out);
      }
    });
    char* out = static_cast<char*>(y.raw_data()) + size_t(n * s.O * s.Ho * s.Wo) * out_bytes;
    // Row tile by row tile: a task's consecutive blocks share the row tile's weights (at 512
    // channels, 150 KB per row tile: in L2 for the next panel, where panel by panel would stream
    // all 2.4 MB of them once per panel).
    parallel_for(m_tiles * panels, 1, [&](int64_t begin, int64_t end) {
      qtiles::AmxTiles tiles(qtiles::kAmxBlock);
      alignas(64) int32_t c[32 * 32];
      for (int64_t t = begin; t < end; ++t) {
        const int64_t mt = t / panels, p = t % panels;
        block_amx(weights->bytes.data() + mt * tap_offset.size() * blocks * 2 * 16 * 64, frames, tap_offset, blocks,
                  16 * quad_bytes, quad_bytes, p * 32, c);
        store_block(*weights, r, bias, zx_stored, store, c, mt * 32, int(std::min<int64_t>(32, s.O - mt * 32)), out,
                    s.Ho * s.Wo, runs.data() + p * 32, run_count[size_t(p)]);
      }
    });
  }
#else
  (void)x, (void)x_int8, (void)zx, (void)w, (void)weight_constant, (void)bias, (void)r, (void)s, (void)g, (void)y;
  SMELT_INTERNAL_CHECK(false) << "qconv: the AMX path is built for x86-64 only";
#endif
}

}  // namespace smelt::kernels::qconv
