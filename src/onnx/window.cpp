#include "onnx/window.h"

#include <algorithm>

#include "smelt/ops.h"

namespace smelt::onnx_import {

Window read_window(NodeContext& c, const Tensor& x, const std::vector<int64_t>& kernel, bool is_pool,
                   bool apply_auto_pad, bool allow_3d) {
  const int64_t sd = x.dim() - 2;
  if (sd < 1) c.invalid("the input " + shape_str(x.shape()) + " must be (N, C, spatial...)");
  if (sd != 1 && sd != 2 && !((is_pool || allow_3d) && sd == 3)) {
    c.unsupported(std::to_string(sd) + "-D spatial input (supported: 1-D and 2-D; pools and ConvTranspose also 3-D)");
  }
  Window w;
  w.kernel = kernel;
  if (int64_t(kernel.size()) != sd) c.invalid("kernel_shape must have " + std::to_string(sd) + " entries");
  w.stride = c.attr_ints("strides", std::vector<int64_t>(size_t(sd), 1));
  w.dilation = c.attr_ints("dilations", std::vector<int64_t>(size_t(sd), 1));
  std::vector<int64_t> pads = c.attr_ints("pads", std::vector<int64_t>(size_t(2 * sd), 0));
  if (is_pool) w.ceil_mode = c.attr_int("ceil_mode", 0) != 0;
  if (int64_t(w.stride.size()) != sd || int64_t(w.dilation.size()) != sd || int64_t(pads.size()) != 2 * sd) {
    c.invalid("strides, dilations and pads must match the spatial rank");
  }
  for (int64_t v : w.stride) if (v < 1) c.invalid("strides must be >= 1");
  for (int64_t v : w.dilation) if (v < 1) c.invalid("dilations must be >= 1");
  for (int64_t v : pads) if (v < 0) c.invalid("pads must be >= 0");
  for (int64_t v : kernel) if (v < 1) c.invalid("kernel sizes must be >= 1");
  w.pad_begin.assign(pads.begin(), pads.begin() + sd);
  w.pad_end.assign(pads.begin() + sd, pads.end());
  const std::string auto_pad = apply_auto_pad ? c.attr_string("auto_pad", "NOTSET") : "NOTSET";
  if (auto_pad == "VALID") {
    w.pad_begin.assign(size_t(sd), 0);
    w.pad_end.assign(size_t(sd), 0);
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (int64_t d = 0; d < sd; ++d) {
      const int64_t in = x.size(2 + d), s = w.stride[size_t(d)];
      const int64_t span = (w.kernel[size_t(d)] - 1) * w.dilation[size_t(d)] + 1;
      const int64_t total = std::max<int64_t>(0, ((in + s - 1) / s - 1) * s + span - in);
      const int64_t small = total / 2, big = total - small;
      w.pad_begin[size_t(d)] = auto_pad == "SAME_UPPER" ? small : big;
      w.pad_end[size_t(d)] = auto_pad == "SAME_UPPER" ? big : small;
    }
  } else if (auto_pad != "NOTSET") {
    c.invalid("auto_pad '" + auto_pad.substr(0, 40) + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  }
  if (sd == 1) {  // as 2-D over a height of 1
    for (auto* v : {&w.kernel, &w.stride, &w.dilation}) v->insert(v->begin(), 1);
    w.pad_begin.insert(w.pad_begin.begin(), 0);
    w.pad_end.insert(w.pad_end.begin(), 0);
  }
  return w;
}

Tensor to_2d(const Tensor& x) { return x.dim() == 3 ? x.unsqueeze(2) : x; }
Tensor from_2d(const Tensor& y, int64_t rank) { return rank == 3 ? y.squeeze(2) : y; }

// x (N, C, spatial...) and w (O, C / groups, kernel...) of the same rank, at least 3.
void check_ranks(NodeContext& c, const Tensor& x, const Tensor& w) {
  if (x.dim() < 3 || w.dim() != x.dim()) {
    c.invalid("input " + shape_str(x.shape()) + " and weight " + shape_str(w.shape()) +
              " must have the same rank, at least 3 (N, C, spatial...)");
  }
}

}  // namespace smelt::onnx_import
