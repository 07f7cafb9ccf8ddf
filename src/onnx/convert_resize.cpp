// Resize (opsets 10-18) and Upsample, modes nearest and linear, composed per axis: the source
// coordinate of every output index is known at import time (shapes are static), so nearest is one
// index_select per resized axis and linear two, blended with constant weights. Cubic and
// tf_crop_and_resize are refused as unsupported.
#include <cmath>

#include "onnx/node_context.h"
#include "smelt/creation.h"
#include "smelt/ops.h"

namespace smelt::onnx_import {
namespace {

using Ts = std::vector<Tensor>;

struct ResizeMode {
  std::string mode = "nearest";
  std::string transform = "half_pixel";
  std::string nearest = "round_prefer_floor";
};

// Where output index `o` samples the input axis of size `in`. ONNX measures the resized length as
// in * scale, unrounded (2.4 for 4 * 0.6), also where the output has floor(2.4) = 2 elements.
double source_coordinate(NodeContext& c, const ResizeMode& m, int64_t o, int64_t in, double scale) {
  const double x = double(o), out = double(in) * scale;
  if (m.transform == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (m.transform == "pytorch_half_pixel") return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (m.transform == "align_corners") return out == 1 ? 0.0 : x * double(in - 1) / (out - 1);
  if (m.transform == "asymmetric") return x / scale;
  if (m.transform == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  c.unsupported("coordinate_transformation_mode '" + m.transform.substr(0, 40) + "'");
}

int64_t nearest_index(NodeContext& c, const ResizeMode& m, double x, int64_t in) {
  double r;
  if (m.nearest == "round_prefer_floor") r = x - std::floor(x) == 0.5 ? std::floor(x) : std::round(x);
  else if (m.nearest == "round_prefer_ceil") r = x - std::floor(x) == 0.5 ? std::ceil(x) : std::round(x);
  else if (m.nearest == "floor") r = std::floor(x);
  else if (m.nearest == "ceil") r = std::ceil(x);
  else c.unsupported("nearest_mode '" + m.nearest.substr(0, 40) + "'");
  return std::clamp<int64_t>(int64_t(r), 0, in - 1);
}

Tensor resize_axis(NodeContext& c, const ResizeMode& m, const Tensor& x, int64_t axis, int64_t out, double scale) {
  const int64_t in = x.size(axis);
  if (in == out && scale == 1.0) return x;
  if (in == 0) c.invalid("cannot resize an empty dim");
  const size_t n = static_cast<size_t>(out);
  std::vector<int64_t> i0(n), i1(n);
  std::vector<double> w1(n);
  for (int64_t o = 0; o < out; ++o) {
    const double s = source_coordinate(c, m, o, in, scale);
    if (m.mode == "nearest") {
      i0[size_t(o)] = nearest_index(c, m, s, in);
      continue;
    }
    const double clamped = std::clamp(s, 0.0, double(in - 1));
    const int64_t lo = int64_t(std::floor(clamped));
    i0[size_t(o)] = lo;
    i1[size_t(o)] = std::min(lo + 1, in - 1);
    w1[size_t(o)] = clamped - double(lo);
  }
  const Tensor first = index_select(x, axis, from_vector(i0, {out}));
  if (m.mode == "nearest") return first;
  Shape wshape(size_t(x.dim()), 1);
  wshape[size_t(axis)] = out;
  Tensor b = cast(from_vector(w1, wshape, DType::Float64), x.dtype());
  const Tensor second = index_select(x, axis, from_vector(i1, {out}));
  return first + (second - first) * b;
}

Tensor resize(NodeContext& c, const ResizeMode& m, const Tensor& x, std::vector<double> scales, std::vector<int64_t> sizes) {
  if (!dtype_is_floating(x.dtype())) c.unsupported(std::string("dtype ") + dtype_name(x.dtype()));
  if (m.mode != "nearest" && m.mode != "linear") c.unsupported("mode '" + m.mode.substr(0, 40) + "' (supported: nearest, linear)");
  const int64_t r = x.dim();
  if (!sizes.empty()) {
    if (int64_t(sizes.size()) != r) c.invalid("sizes must have one entry per dim");
    scales.clear();
    for (int64_t d = 0; d < r; ++d) {
      if (sizes[size_t(d)] < 0) c.invalid("sizes must be >= 0");
      scales.push_back(x.size(d) ? double(sizes[size_t(d)]) / double(x.size(d)) : 1.0);
    }
  } else {
    if (int64_t(scales.size()) != r) c.invalid("scales must have one entry per dim");
    for (int64_t d = 0; d < r; ++d) {
      if (!(scales[size_t(d)] > 0) || !std::isfinite(scales[size_t(d)])) c.invalid("scales must be positive");
      const double out = std::floor(double(x.size(d)) * scales[size_t(d)]);
      if (!(out < double(int64_t(1) << 40))) c.invalid("the output is too large");
      sizes.push_back(int64_t(out));
    }
  }
  Tensor y = x;
  for (int64_t d = 0; d < r; ++d) y = resize_axis(c, m, y, d, sizes[size_t(d)], scales[size_t(d)]);
  return y.same(x) ? contiguous(x.expand(x.shape())) : contiguous(y);
}

}  // namespace

void register_resize_converters() {
  register_converter("Resize", [](NodeContext& c) -> Ts {
    ResizeMode m;
    m.mode = c.attr_string("mode", "nearest");
    if (c.opset() >= 11) {
      m.transform = c.attr_string("coordinate_transformation_mode", "half_pixel");
      m.nearest = c.attr_string("nearest_mode", "round_prefer_floor");
      c.attr_float("cubic_coeff_a", -0.75);  // cubic only
      if (c.attr_int("exclude_outside", 0) != 0) c.unsupported("exclude_outside=1");
      c.attr_float("extrapolation_value", 0.0);  // tf_crop_and_resize only
    } else {
      m.transform = "asymmetric";
      m.nearest = "floor";
    }
    if (c.opset() >= 18) {
      if (c.attr_int("antialias", 0) != 0) c.unsupported("antialias=1");
      if (c.has_attr("axes")) c.unsupported("attribute 'axes'");
      if (c.attr_string("keep_aspect_ratio_policy", "stretch") != "stretch") c.unsupported("keep_aspect_ratio_policy");
    }
    std::vector<double> scales;
    std::vector<int64_t> sizes;
    if (c.opset() < 11) {
      scales = c.input_floats(1);
    } else {
      if (c.has_input(2) && c.input(2).numel() > 0) scales = c.input_floats(2);
      if (c.has_input(3) && c.input(3).numel() > 0) sizes = c.input_ints(3);
      if (scales.empty() == sizes.empty()) c.invalid("exactly one of scales and sizes must be given");
    }
    return {resize(c, m, c.input(0), scales, sizes)};
  });
  register_converter("Upsample", [](NodeContext& c) -> Ts {
    ResizeMode m;
    m.mode = c.attr_string("mode", "nearest");
    m.transform = "asymmetric";
    m.nearest = "floor";
    std::vector<double> scales = c.opset() < 9 ? c.attr_floats("scales") : c.input_floats(1);
    return {resize(c, m, c.input(0), scales, {})};
  });
}

}  // namespace smelt::onnx_import
