// The spatial window attributes of ONNX's convolutions and pools (kernel_shape, strides,
// dilations, pads, auto_pad, ceil_mode), read and checked once for every converter that has them.
#pragma once

#include <cstdint>
#include <vector>

#include "onnx/node_context.h"

namespace smelt::onnx_import {

// Normalized to 2-D (1-D ops get a leading 1).
struct Window {
  std::vector<int64_t> kernel, stride, dilation, pad_begin, pad_end;
  bool ceil_mode = false;
};

// The node's window over input x (N, C, spatial...) for `kernel`; auto_pad resolved to pads.
Window read_window(NodeContext& c, const Tensor& x, const std::vector<int64_t>& kernel, bool is_pool,
                   bool apply_auto_pad = true, bool allow_3d = false);

Tensor to_2d(const Tensor& x);                   // (N, C, L) -> (N, C, 1, L); others as they are
Tensor from_2d(const Tensor& y, int64_t rank);   // the inverse for a rank-3 original

// x (N, C, spatial...) and w (O, C / groups, kernel...) of the same rank, at least 3.
void check_ranks(NodeContext& c, const Tensor& x, const Tensor& w);

}  // namespace smelt::onnx_import
