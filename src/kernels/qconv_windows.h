// Depthwise convolutions straight from the image on CPUs with AVX-512 VNNI and VBMI
// (kernels/qconv_windows.cpp, docs/quantization.md): for each tap row, a masked load of the input
// bytes that 16 outputs read, one vpermb per group of 4 horizontal taps gathering each output's
// 4 bytes (stride, dilation and padding are in the indices), one vpdpbusd with the group's
// weights. kernels/qconv_depthwise.cpp runs it for channels whose weights (minus their zero
// point) fit int8, and its phase-frame loops otherwise.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/qconv_frames.h"

namespace smelt::kernels::qconv {

// One output channel: its input channel, its weights w - zw (kH x kW, within int8), the
// accumulator's start (bias minus the zero point's products, with the +128 of int8 activations)
// and where its requantized outputs go.
struct WindowChannel {
  const uint8_t* input = nullptr;
  const int32_t* weights = nullptr;
  int32_t start = 0;
  float scale = 1;  // the requantization's multiplier (1 for int32 outputs)
  char* out = nullptr;
};

// The tables of one call's geometry, built once and read by every channel.
class DepthwiseWindows {
 public:
  // Channels per run(): they share each table load, and their accumulator chains interleave
  // (one channel alone waits on its vpdpbusd and requantization latencies).
  static constexpr int kBlock = 4;

  // Whether this CPU and geometry can run it (kernels up to 8 x 8, 16 outputs' windows within
  // 64 bytes).
  static bool fits(const ConvShape& s, const QConvGeometry& g);
  // `output`/`zero_point`: the requantization (or Int32 accumulators); `pad`: the input's zero
  // point byte, read in the padding; `x_int8`: the input bytes are int8 (read as uint8 + 128).
  DepthwiseWindows(const ConvShape& s, const QConvGeometry& g, QGemmOutput::Type output, int32_t zero_point,
                   uint8_t pad, bool x_int8);
  ~DepthwiseWindows();
  DepthwiseWindows(const DepthwiseWindows&) = delete;
  DepthwiseWindows& operator=(const DepthwiseWindows&) = delete;

  // `count` (1 to kBlock) channels.
  void run(const WindowChannel* channels, int count) const;

 private:
  struct Tables;
  std::unique_ptr<Tables> tables_;
};

}  // namespace smelt::kernels::qconv
