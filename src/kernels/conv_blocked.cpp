#include "kernels/conv_blocked.h"

#include <cstring>

#include "base/parallel.h"
#include "kernels/conv_onednn.h"
#include "kernels/conv_select.h"
#include "smelt/creation.h"

namespace smelt::kernels {
namespace {

// Both conversions go tile by tile: kTilePositions pixels of one (image, channel block) pair, whose
// B lanes (B * kTilePositions elements, 4 KiB for float32 blocks of 16) stay in L1 while the lanes
// are gathered or scattered, so every cache line is read and written once. The tiles are the
// parallel tasks: a single block (16 channels, one image) splits across threads too.
constexpr int64_t kTilePositions = 64;

template <class T>
void block_image(T* y /*(N, Cb, HW, B)*/, const T* x /*(N, C, HW)*/, int64_t N, int64_t C, int64_t HW, int64_t B) {
  const int64_t Cb = blocks_of(C, B), tiles = blocks_of(HW, kTilePositions);
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / (kTilePositions * B));
  parallel_for(N * Cb * tiles, grain, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t block = t / tiles, p0 = (t % tiles) * kTilePositions, p1 = std::min(HW, p0 + kTilePositions);
      const int64_t n = block / Cb, cb = block % Cb, lanes = std::min(B, C - cb * B);
      T* out = y + block * HW * B;
      const T* in = x + (n * C + cb * B) * HW;
      for (int64_t p = p0; p < p1; ++p) {
        for (int64_t l = 0; l < lanes; ++l) out[p * B + l] = in[l * HW + p];
        for (int64_t l = lanes; l < B; ++l) out[p * B + l] = T(0);
      }
    }
  });
}

template <class T>
void unblock_image(T* y /*(N, C, HW)*/, const T* x /*(N, Cb, HW, B)*/, int64_t N, int64_t C, int64_t HW, int64_t B) {
  const int64_t Cb = blocks_of(C, B), tiles = blocks_of(HW, kTilePositions);
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / (kTilePositions * B));
  parallel_for(N * Cb * tiles, grain, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t block = t / tiles, p0 = (t % tiles) * kTilePositions, p1 = std::min(HW, p0 + kTilePositions);
      const int64_t n = block / Cb, cb = block % Cb, lanes = std::min(B, C - cb * B);
      const T* in = x + block * HW * B;
      T* out = y + (n * C + cb * B) * HW;
      for (int64_t l = 0; l < lanes; ++l) {
        for (int64_t p = p0; p < p1; ++p) out[l * HW + p] = in[p * B + l];
      }
    }
  });
}

// The epilogue over all of y as (N Cb Ho Wo, B) rows, in parallel chunks.
void run_epilogue(const GemmEpilogue& epilogue, const Tensor& y) {
  const int64_t B = y.shape()[4], rows = y.numel() / B;
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / B);
  parallel_for(rows, grain, [&](int64_t r0, int64_t r1) { epilogue(r0, r1, 0, B); });
}

}  // namespace

void to_blocked_forward(const Tensor& y, const Tensor& x) {
  const Shape& s = x.shape();
  const int64_t B = y.shape()[4], HW = s[2] * s[3];
  if (x.dtype() == DType::Float32) {
    block_image(y.data<float>(), x.data<float>(), s[0], s[1], HW, B);
  } else if (x.dtype() == DType::Float64) {
    block_image(y.data<double>(), x.data<double>(), s[0], s[1], HW, B);
  } else {
    SMELT_INTERNAL_CHECK(false) << "to_blocked: floating dtypes only, got " << dtype_name(x.dtype());
  }
}

void from_blocked_forward(const Tensor& y, const Tensor& x) {
  const Shape& s = y.shape();
  const int64_t B = x.shape()[4], HW = s[2] * s[3];
  if (x.dtype() == DType::Float32) {
    unblock_image(y.data<float>(), x.data<float>(), s[0], s[1], HW, B);
  } else if (x.dtype() == DType::Float64) {
    unblock_image(y.data<double>(), x.data<double>(), s[0], s[1], HW, B);
  } else {
    SMELT_INTERNAL_CHECK(false) << "from_blocked: floating dtypes only, got " << dtype_name(x.dtype());
  }
}

bool conv2d_blocked_native(const Conv2dGeometry& g, DType dtype, int64_t block, bool plain_input) {
  return block == kOneDnnBlock && dtype == DType::Float32 && g.N > 0 && g.C > 0 && g.O > 0 &&
         conv2d_onednn_supports(g, dtype, /*winograd=*/false,
                                plain_input ? ConvLayout::PlainToBlocked : ConvLayout::Blocked);
}

void conv2d_blocked_forward(const Conv2dGeometry& g, const Tensor& y, const Tensor& x, const Tensor& w,
                            const GemmEpilogue* epilogue, bool weight_constant) {
  const int64_t B = y.shape()[4];
  const bool plain_input = x.dim() == 4;
  if (conv2d_blocked_native(g, y.dtype(), B, plain_input) && conv2d_onednn_exact(g, w, weight_constant)) {
    const ConvLayout layout = plain_input ? ConvLayout::PlainToBlocked : ConvLayout::Blocked;
    // Winograd where the plain layout's choice is Winograd (3x3 stride 1: oneDNN wants blocked
    // channels for it anyway), else oneDNN's direct convolution. The choice is asked only where
    // Winograd could apply: its key is text, built on every call (1x1 and depthwise convs, most of
    // MobileNetV2, skip it).
    const bool winograd_shape = g.kH == 3 && g.kW == 3 && g.stride_h == 1 && g.stride_w == 1 && g.dil_h == 1 &&
                                g.dil_w == 1 && g.groups == 1;
    const bool winograd = winograd_shape && conv_choice(g, y.dtype(), weight_constant) == ConvImpl::OneDnnWinograd &&
                          conv2d_onednn_supports(g, y.dtype(), /*winograd=*/true, layout);
    // (oneDNN's padding lanes, past g.O, are cleared in there before any epilogue sees them.)
    conv2d_onednn_forward(g, y, x, w, epilogue, weight_constant, winograd, layout);
    return;
  }
  // The reference path (also for a non-finite weight that meets the padding, which oneDNN would
  // skip): back to NCHW, any plain implementation, blocked again.
  Tensor x_plain = x, y_plain = empty({g.N, g.O, g.Ho, g.Wo}, y.dtype());
  if (!plain_input) {
    x_plain = empty({g.N, g.C, g.H, g.W}, x.dtype());
    from_blocked_forward(x_plain, x);
  }
  conv2d_forward(g, y_plain, x_plain, w, nullptr, weight_constant);
  to_blocked_forward(y, y_plain);
  if (epilogue && y.numel() > 0) run_epilogue(*epilogue, y);
}

}  // namespace smelt::kernels
