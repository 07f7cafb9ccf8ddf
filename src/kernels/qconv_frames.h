// What the quantized convolutions (kernels/qconv.cpp, kernels/qconv_depthwise.cpp) share: the
// geometry of one call, and the phase frames their products read (docs/quantization.md).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/quantize.h"
#include "kernels/quantize_params.h"

namespace smelt::kernels::qconv {

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
  int64_t per_channel() const { return s0 * s1 * Hq * Wq; }
};

Phases phases_of(const ConvShape& s, const QConvGeometry& g);

// One channel's frames (per_channel() bytes) from its H x W image; no threads.
void split_channel(const uint8_t* channel, const ConvShape& s, const QConvGeometry& g, const Phases& p, uint8_t pad,
                   uint8_t* frame);
// Every channel of one image, in parallel.
void split_phases(const uint8_t* image, const ConvShape& s, const QConvGeometry& g, const Phases& p, uint8_t pad,
                  uint8_t* frame);

// A convolution with one input channel per group (kernels/qconv_depthwise.cpp).
void depthwise(const uint8_t* x, bool x_int8, int32_t zx, const Tensor& wv, const std::vector<int32_t>& zw,
               const int32_t* bias, const Requant& r, const ConvShape& s, const QConvGeometry& g, const Tensor& y);

// A convolution on AMX straight from 4-channel-interleaved frames (kernels/qconv_amx.cpp): where
// this CPU runs AMX, groups 1, symmetric int8 weights (`zw` all 0), a spatial kernel, and channels
// that pad to whole blocks of 64 with little waste.
bool amx_direct_fits(const ConvShape& s, const std::vector<int32_t>& zw, bool weight_int8);
void amx_direct(const uint8_t* x, bool x_int8, int32_t zx, const Tensor& w, bool weight_constant,
                const int32_t* bias, const Requant& r, const ConvShape& s, const QConvGeometry& g, const Tensor& y);

// AVX-512 F, BW and VL, which the vector paths here use (kernels/qgemm.h: qgemm_vector_avx512).
bool avx512();

}  // namespace smelt::kernels::qconv
