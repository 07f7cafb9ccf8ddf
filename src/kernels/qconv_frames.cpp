// The phase frames of the quantized convolutions (kernels/qconv_frames.h).
#include "kernels/qconv_frames.h"

#include <algorithm>
#include <cstring>

#include "base/parallel.h"
#include "kernels/qgemm.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace smelt::kernels::qconv {
namespace {

#if defined(__x86_64__)
// out[0, width) = the padded row: image[w - left] for w in [left, left + W), `pad` elsewhere (no
// image: a row of the padding). 64 bytes at a time: a load under the mask of the image's columns
// over a vector of the pad byte, then a store (the tail under a mask). The load's base may lie
// before the image row; the lanes outside its mask are not read.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void pad_row_avx512(const uint8_t* image, int64_t W,
                                                                          int64_t left, int64_t width, uint8_t pad,
                                                                          uint8_t* out) {
  const __m512i fill = _mm512_set1_epi8(char(pad));
  auto lanes_below = [](int64_t n) { return n >= 64 ? ~uint64_t(0) : (uint64_t(1) << n) - 1; };
  for (int64_t w0 = 0; w0 < width; w0 += 64) {
    const int64_t n = std::min<int64_t>(64, width - w0);
    __m512i v = fill;
    if (image) {
      const int64_t lo = std::clamp<int64_t>(left - w0, 0, n), hi = std::clamp<int64_t>(left + W - w0, 0, n);
      const __mmask64 inside = lanes_below(hi) & ~lanes_below(lo);
      const uintptr_t at = reinterpret_cast<uintptr_t>(image) + uintptr_t(w0 - left);
      v = _mm512_mask_loadu_epi8(fill, inside, reinterpret_cast<const void*>(at));
    }
    _mm512_mask_storeu_epi8(out + w0, lanes_below(n), v);
  }
}

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

void pad_row(const uint8_t* image, int64_t W, int64_t left, int64_t width, uint8_t pad, uint8_t* out) {
#if defined(__x86_64__)
  if (avx512()) return pad_row_avx512(image, W, left, width, pad, out);
#endif
  std::memset(out, pad, size_t(width));
  const int64_t first = std::min(left, width), inside = image ? std::clamp<int64_t>(width - first, 0, W) : 0;
  if (inside > 0) std::memcpy(out + first, image, size_t(inside));
}

}  // namespace

bool avx512() { return qgemm_vector_avx512(); }

Phases phases_of(const ConvShape& s, const QConvGeometry& g) {
  Phases p;
  p.s0 = g.stride[0], p.s1 = g.stride[1];
  p.Hq = (s.H + g.pad_begin[0] + g.pad_end[0] + p.s0 - 1) / p.s0;
  p.Wq = (s.W + g.pad_begin[1] + g.pad_end[1] + p.s1 - 1) / p.s1;
  return p;
}

void split_channel(const uint8_t* channel, const ConvShape& s, const QConvGeometry& g, const Phases& p, uint8_t pad,
                   uint8_t* frame) {
  const int64_t width = p.Wq * p.s1;  // the padded row, rounded up to whole phases
  thread_local std::vector<uint8_t> padded;  // one padded row, when the stride splits it
  if (p.s1 > 1 && padded.size() < size_t(width)) padded.resize(size_t(width));
  for (int64_t a = 0; a < p.s0; ++a) {
    for (int64_t hq = 0; hq < p.Hq; ++hq) {
      const int64_t ih = hq * p.s0 + a - g.pad_begin[0];
      uint8_t* out = frame + a * p.s1 * p.Hq * p.Wq + hq * p.Wq;  // phase (a, 0)
      // The padded row: the zero point's byte, the image row, the zero point's byte.
      uint8_t* row = p.s1 == 1 ? out : padded.data();
      pad_row(ih < 0 || ih >= s.H ? nullptr : channel + ih * s.W, s.W, g.pad_begin[1], width, pad, row);
      if (p.s1 == 1) continue;
#if defined(__x86_64__)
      if (p.s1 == 2 && avx512()) {
        deinterleave_pairs_avx512(row, p.Wq, out, out + p.Hq * p.Wq);
        continue;
      }
#endif
      for (int64_t b = 0; b < p.s1; ++b) {  // de-interleaved into the row's phases
        uint8_t* phase = out + b * p.Hq * p.Wq;
        for (int64_t wq = 0; wq < p.Wq; ++wq) phase[wq] = row[wq * p.s1 + b];
      }
    }
  }
}

void split_phases(const uint8_t* image, const ConvShape& s, const QConvGeometry& g, const Phases& p, uint8_t pad,
                  uint8_t* frame) {
  const int64_t per_channel = p.per_channel();
  parallel_for(s.C, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(per_channel, 1)), [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) split_channel(image + c * s.H * s.W, s, g, p, pad, frame + c * per_channel);
  });
}

}  // namespace smelt::kernels::qconv
