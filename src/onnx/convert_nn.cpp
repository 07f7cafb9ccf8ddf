// Neural-network ops: Conv, ConvTranspose, pooling, normalization, MatMul, Gemm. 1-D convs and
// pools run as 2-D ones over a height of 1; ONNX's asymmetric pads, auto_pad and ceil_mode become
// explicit padding in front of smelt's symmetric-padding kernels; ConvTranspose is smelt's
// conv2d_grad_input (the same computation), a 3-D one with its depth taps as extra channels;
// MaxPool's Indices output comes from max_pool2d's per-plane indices.
#include <cmath>
#include <limits>

#include "onnx/node_context.h"
#include "onnx/window.h"
#include "ops/dispatch.h"
#include "smelt/creation.h"
#include "smelt/ops.h"

namespace smelt::onnx_import {
namespace {

using Ts = std::vector<Tensor>;

// Pads dims 2 and 3 with `value`: (begin, end) each.
Tensor pad_hw(const Tensor& x, const std::vector<int64_t>& begin, const std::vector<int64_t>& end, double value) {
  Tensor y = x;
  for (int64_t d = 0; d < 2; ++d) {
    const int64_t b = begin[size_t(d)], e = end[size_t(d)];
    if (b == 0 && e == 0) continue;
    Shape sb = y.shape(), se = y.shape();
    sb[size_t(2 + d)] = b;
    se[size_t(2 + d)] = e;
    y = cat({full(sb, value, y.dtype()), y, full(se, value, y.dtype())}, 2 + d);
  }
  return y;
}

// Extra end padding that ceil_mode adds so the last partial window exists (only windows that
// start inside the input or its explicit padding count).
std::vector<int64_t> ceil_extra(const Window& w, const Tensor& x) {
  std::vector<int64_t> extra(2, 0);
  if (!w.ceil_mode) return extra;
  for (int64_t d = 0; d < 2; ++d) {
    const int64_t in = x.size(2 + d) + w.pad_begin[size_t(d)] + w.pad_end[size_t(d)];
    const int64_t span = (w.kernel[size_t(d)] - 1) * w.dilation[size_t(d)] + 1, s = w.stride[size_t(d)];
    if (in < span) continue;
    int64_t out = (in - span + s - 1) / s + 1;
    if ((out - 1) * s >= x.size(2 + d) + w.pad_begin[size_t(d)]) --out;  // last window starts in the end pad
    extra[size_t(d)] = std::max<int64_t>(0, (out - 1) * s + span - in);
  }
  return extra;
}

bool symmetric(const Window& w) { return w.pad_begin == w.pad_end; }

Tensor conv(NodeContext& c) {
  const Tensor &x0 = c.input(0), &w0 = c.input(1);
  if (!dtype_is_floating(x0.dtype())) c.unsupported(std::string("dtype ") + dtype_name(x0.dtype()));
  check_ranks(c, x0, w0);
  std::vector<int64_t> kernel(w0.shape().begin() + 2, w0.shape().end());
  if (c.has_attr("kernel_shape")) kernel = c.attr_ints("kernel_shape");
  Window w = read_window(c, x0, kernel, false);
  const int64_t groups = c.attr_int("group", 1);
  Tensor x = to_2d(x0), wt = to_2d(w0);
  std::vector<int64_t> padding = w.pad_begin;
  if (!symmetric(w)) {
    x = pad_hw(x, w.pad_begin, w.pad_end, 0);
    padding = {0, 0};
  }
  Tensor bias = c.has_input(2) ? c.input(2) : Tensor();
  return from_2d(conv2d(x, wt, bias, w.stride, padding, w.dilation, groups), x0.dim());
}

// The transposed convolution of x (N, C, H, W) with w (C, O / groups, kH, kW), uncropped:
// (N, O, full[0], full[1]).
Tensor conv_transpose_2d(const Tensor& x, const Tensor& w, const Window& win, const std::vector<int64_t>& full,
                         int64_t groups) {
  ops::Attrs attrs{{"input_shape", std::vector<int64_t>{x.size(0), w.size(1) * groups, full[0], full[1]}},
                   {"stride", win.stride},
                   {"padding", std::vector<int64_t>{0, 0}},
                   {"dilation", win.dilation},
                   {"groups", groups}};
  return ops::call1(ops::OpId::conv2d_grad_input, {x, w}, attrs);
}

// The same over (D, H, W): x (N, C, D, H, W), w (C, O / groups, kD, kH, kW). The kernel's depth
// taps become output channels of one 2-D transposed conv over the images x[:, :, d] (w seen as
// (C, O / groups * kD, kH, kW)); tap kd of input depth d lands at output depth d * sD + kd * dD,
// so each tap's slab is placed by a strided slice_grad (zeros elsewhere) and the slabs are summed.
// No zero tensor is made at import: a hostile shape costs nothing until the graph runs.
Tensor conv_transpose_3d(const Tensor& x, const Tensor& w, const Window& win, const std::vector<int64_t>& full,
                         int64_t groups) {
  const int64_t N = x.size(0), C = x.size(1), D = x.size(2), kD = w.size(2), O = w.size(1) * groups;
  Tensor images = contiguous(x.permute({0, 2, 1, 3, 4})).reshape({N * D, C, x.size(3), x.size(4)});
  Tensor taps_w = contiguous(w).reshape({C, w.size(1) * kD, w.size(3), w.size(4)});
  Window hw = win;
  for (auto* v : {&hw.kernel, &hw.stride, &hw.dilation}) v->erase(v->begin());
  Tensor taps = conv_transpose_2d(images, taps_w, hw, {full[1], full[2]}, groups);  // (N D, O kD, H', W')
  taps = taps.reshape({N, D, O, kD, full[1], full[2]});
  const int64_t sD = win.stride[0], dD = win.dilation[0], spread = (D - 1) * sD + 1;
  const std::vector<int64_t> out{N, O, full[0], full[1], full[2]};
  Tensor y;
  for (int64_t kd = 0; kd < kD; ++kd) {
    Tensor slab = contiguous(slice(taps, 3, kd, kd + 1).reshape({N, D, O, full[1], full[2]}).permute({0, 2, 1, 3, 4}));
    ops::Attrs place{{"input_shape", out}, {"dim", int64_t(2)}, {"start", kd * dD}, {"end", kd * dD + spread},
                     {"step", sD}};
    Tensor part = ops::call1(ops::OpId::slice_grad, {slab}, place);
    y = y.defined() ? y + part : part;
  }
  return y;
}

Tensor conv_transpose(NodeContext& c) {
  const Tensor &x0 = c.input(0), &w0 = c.input(1);
  if (!dtype_is_floating(x0.dtype())) c.unsupported(std::string("dtype ") + dtype_name(x0.dtype()));
  check_ranks(c, x0, w0);
  const int64_t sd = x0.dim() - 2;
  std::vector<int64_t> kernel(w0.shape().begin() + 2, w0.shape().end());
  if (c.has_attr("kernel_shape")) kernel = c.attr_ints("kernel_shape");
  if (kernel != std::vector<int64_t>(w0.shape().begin() + 2, w0.shape().end())) {
    c.invalid("kernel_shape " + shape_str(kernel) + " does not match the weight " + shape_str(w0.shape()));
  }
  const int64_t groups = c.attr_int("group", 1);
  if (groups < 1 || x0.size(1) != w0.size(0) || w0.size(0) % groups != 0) {
    c.invalid("input " + shape_str(x0.shape()) + " and weight " + shape_str(w0.shape()) + " do not fit group " +
              std::to_string(groups) + " (the weight is (C, O / group, kernel...))");
  }
  std::vector<int64_t> out_pad = c.attr_ints("output_padding", std::vector<int64_t>(size_t(std::max<int64_t>(sd, 0)), 0));
  std::vector<int64_t> out_shape = c.attr_ints("output_shape", std::vector<int64_t>{});
  // auto_pad for ConvTranspose is about the output: read it here, the window reader sees NOTSET.
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  Window w = read_window(c, x0, kernel, false, false, true);
  if (auto_pad != "NOTSET" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER" && auto_pad != "VALID") {
    c.invalid("auto_pad '" + auto_pad.substr(0, 40) + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  }
  const size_t nd = w.kernel.size();  // 2, or 3 for a 3-D input (a 1-D one runs as 2-D)
  if (auto_pad == "VALID") w.pad_begin = w.pad_end = std::vector<int64_t>(nd, 0);
  if (int64_t(out_pad.size()) != sd) c.invalid("output_padding must match the spatial rank");
  if (!out_shape.empty() && int64_t(out_shape.size()) != sd) c.invalid("output_shape must have one entry per spatial dim");
  for (int64_t v : out_pad) if (v < 0) c.invalid("output_padding must be >= 0");
  if (sd == 1) out_pad.insert(out_pad.begin(), 0);
  Tensor x = to_2d(x0), wt = to_2d(w0);
  std::vector<int64_t> full(nd), begin = w.pad_begin, end = w.pad_end;
  for (size_t i = 0; i < nd; ++i) {
    const int64_t span = (w.kernel[i] - 1) * w.dilation[i] + 1;
    full[i] = w.stride[i] * (x.size(2 + int64_t(i)) - 1) + out_pad[i] + span;
  }
  if (!out_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t i = 0; i < nd; ++i) {
      const int64_t k = int64_t(i) - (int64_t(nd) - sd);  // -1: the height a 1-D op runs over
      const int64_t target = k < 0 ? 1 : !out_shape.empty() ? out_shape[size_t(k)] : x.size(2 + int64_t(i)) * w.stride[i];
      int64_t total = full[i] - target;
      if (total < 0) {  // the output needs more output padding than given: it grows at the end
        if (-total >= w.stride[i]) c.invalid("output_shape is larger than the stride allows");
        full[i] -= total;
        total = 0;
      }
      // ONNX's rule: SAME_UPPER puts the smaller half first, otherwise the larger half.
      begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      end[i] = total - begin[i];
    }
  }
  for (size_t i = 0; i < nd; ++i) {
    if (begin[i] + end[i] >= full[i]) c.invalid("pads leave no output along spatial dim " + std::to_string(i));
  }
  Tensor y = nd == 3 ? conv_transpose_3d(x, wt, w, full, groups) : conv_transpose_2d(x, wt, w, full, groups);
  for (size_t i = 0; i < nd; ++i) {
    const int64_t d = 2 + int64_t(i);
    if (begin[i] || end[i]) y = slice(y, d, begin[i], full[i] - end[i]);
  }
  if (c.has_input(2)) {
    Shape column(size_t(y.dim()), 1);
    column[1] = y.size(1);
    y = y + c.input(2).reshape(column);
  }
  return from_2d(contiguous(y), x0.dim());
}

// Max pool of x (N, C, H, W) over a 2-D window: padded with -inf, so a pad never wins. Returns
// the values and ONNX's indices: flattened over (N, C, H, W) of x, row-major (storage_order 0)
// or with each plane column-major (storage_order 1); only the values unless `indices`.
Ts max_pool_window(const Tensor& x0, const Window& w, bool indices = false, bool column_major = false) {
  std::vector<int64_t> extra = ceil_extra(w, x0);
  // smelt's pool skips padded positions, as -inf padding would: symmetric pads of at most half
  // the (dilated) window go to the op itself, sparing the two concatenations of -inf borders
  // (ResNet's stem pool).
  bool op_pads = symmetric(w) && extra == std::vector<int64_t>{0, 0};
  for (size_t d = 0; d < 2; ++d) op_pads = op_pads && 2 * w.pad_begin[d] <= w.dilation[d] * (w.kernel[d] - 1) + 1;
  Tensor x = x0;
  std::vector<int64_t> op_padding = w.pad_begin, shift = {0, 0};  // shift: x0's origin inside x
  if (!op_pads) {
    std::vector<int64_t> end = {w.pad_end[0] + extra[0], w.pad_end[1] + extra[1]};
    x = pad_hw(x0, w.pad_begin, end, -std::numeric_limits<double>::infinity());
    op_padding = {0, 0};
    shift = w.pad_begin;
  }
  Ts r = ops::call(ops::OpId::max_pool2d, {x},
                   {{"kernel", w.kernel}, {"stride", w.stride}, {"padding", op_padding}, {"dilation", w.dilation}});
  if (!indices) return {r[0]};
  // smelt's indices count within one (H, W) plane of x: back to x0's rows and columns.
  const int64_t N = x0.size(0), C = x0.size(1), H = x0.size(2), W = x0.size(3);
  const Tensor& at = r[1];
  const Tensor width = scalar_tensor(double(x.size(3)), DType::Int64);
  Tensor row = div(at, width);
  Tensor col = at - row * width;
  row = row - scalar_tensor(double(shift[0]), DType::Int64);
  col = col - scalar_tensor(double(shift[1]), DType::Int64);
  Tensor in_plane = column_major ? col * scalar_tensor(double(H), DType::Int64) + row
                                 : row * scalar_tensor(double(W), DType::Int64) + col;
  Tensor plane = arange(N * C).reshape({N, C, 1, 1}) * scalar_tensor(double(H * W), DType::Int64);
  return {r[0], in_plane + plane};
}

// Average pool of x (N, C, H, W) over a 2-D window.
Tensor avg_pool_window(const Tensor& x, const Window& w, bool include_pad) {
  std::vector<int64_t> extra = ceil_extra(w, x);
  // smelt's pool takes symmetric padding of at most half the (dilated) window.
  bool small_pads = true;
  for (size_t d = 0; d < 2; ++d) small_pads = small_pads && 2 * w.pad_begin[d] <= w.dilation[d] * (w.kernel[d] - 1) + 1;
  if (symmetric(w) && small_pads && extra == std::vector<int64_t>{0, 0} &&
      (include_pad || (w.pad_begin == std::vector<int64_t>{0, 0}))) {
    return avg_pool2d(x, w.kernel, w.stride, w.pad_begin, true, w.dilation);
  }
  // The mean over the counted positions: pooled sums of x (zero padded) over pooled counts.
  Tensor mask = ones({1, 1, x.size(2), x.size(3)}, x.dtype());
  mask = pad_hw(mask, w.pad_begin, w.pad_end, include_pad ? 1.0 : 0.0);
  mask = pad_hw(mask, {0, 0}, extra, 0.0);
  std::vector<int64_t> end = {w.pad_end[0] + extra[0], w.pad_end[1] + extra[1]};
  Tensor xp = pad_hw(x, w.pad_begin, end, 0.0);
  Tensor num = avg_pool2d(xp, w.kernel, w.stride, {0, 0}, true, w.dilation);
  Tensor den = avg_pool2d(mask, w.kernel, w.stride, {0, 0}, true, w.dilation);
  return num / den;
}

// The 2-D window over dims (a, b) of a 3-D one; b = -1 is a dim the window leaves alone.
Window sub_window(const Window& w, size_t a, int b) {
  Window s;
  s.ceil_mode = w.ceil_mode;
  for (int d : {int(a), b}) {
    const bool keep = d >= 0;
    s.kernel.push_back(keep ? w.kernel[size_t(d)] : 1);
    s.stride.push_back(keep ? w.stride[size_t(d)] : 1);
    s.dilation.push_back(keep ? w.dilation[size_t(d)] : 1);
    s.pad_begin.push_back(keep ? w.pad_begin[size_t(d)] : 0);
    s.pad_end.push_back(keep ? w.pad_end[size_t(d)] : 0);
  }
  return s;
}

// A pool of x (N, C, D, H, W) over a 3-D box, as two 2-D pools: (H, W) on x seen as
// (N, C * D, H, W), then (D, 1) on the result seen as (N, C, D, Ho * Wo). Exact for max and for
// mean: a box's maximum, sum and count of counted positions all factor over its dims.
template <class Pool>
Tensor pool_3d(const Tensor& x, const Window& w, Pool pool) {
  const int64_t N = x.size(0), C = x.size(1), D = x.size(2);
  Tensor y = pool(x.reshape({N, C * D, x.size(3), x.size(4)}), sub_window(w, 1, 2));
  const int64_t Ho = y.size(2), Wo = y.size(3);
  Tensor z = pool(y.reshape({N, C, D, Ho * Wo}), sub_window(w, 0, -1));
  return z.reshape({N, C, z.size(2), Ho, Wo});
}

// Values and, when the node asks for them, ONNX's flat indices.
Ts max_pool(NodeContext& c, const Tensor& x0) {
  const bool want_indices = c.num_outputs() > 1;
  // bytes pool exactly in float32 (every byte is a float32 integer; a maximum creates no value)
  if (x0.dtype() == DType::UInt8 || x0.dtype() == DType::Int8) {
    Ts r = max_pool(c, cast(x0, DType::Float32));
    r[0] = cast(r[0], x0.dtype());
    return r;
  }
  if (!dtype_is_floating(x0.dtype())) c.unsupported(std::string("dtype ") + dtype_name(x0.dtype()));
  const int64_t storage_order = c.attr_int("storage_order", 0);
  if (storage_order != 0 && storage_order != 1) c.invalid("storage_order must be 0 or 1");
  Window w = read_window(c, x0, c.attr_ints("kernel_shape"), true);
  if (x0.dim() == 5) {
    if (want_indices) c.unsupported("the Indices output of a 3-D MaxPool");
    return {pool_3d(x0, w, [](const Tensor& x, const Window& win) { return max_pool_window(x, win)[0]; })};
  }
  Ts r = max_pool_window(to_2d(x0), w, want_indices, storage_order == 1);
  r[0] = from_2d(r[0], x0.dim());
  if (!want_indices) return {r[0]};
  // A 1-D pool's planes are (1, W): its flat indices are the 2-D ones, shaped as the values.
  return {r[0], from_2d(r[1], x0.dim())};
}

Tensor avg_pool(NodeContext& c) {
  const Tensor& x0 = c.input(0);
  if (!dtype_is_floating(x0.dtype())) c.unsupported(std::string("dtype ") + dtype_name(x0.dtype()));
  const bool include_pad = c.attr_int("count_include_pad", 0) != 0;
  Window w = read_window(c, x0, c.attr_ints("kernel_shape"), true);
  // dilations: AveragePool has them from opset 19; read at any opset (absent means 1).
  auto pool = [include_pad](const Tensor& x, const Window& win) { return avg_pool_window(x, win, include_pad); };
  if (x0.dim() == 5) return pool_3d(x0, w, pool);
  return from_2d(pool(to_2d(x0), w), x0.dim());
}

std::vector<int64_t> spatial_dims(const Tensor& x) {
  std::vector<int64_t> d;
  for (int64_t i = 2; i < x.dim(); ++i) d.push_back(i);
  return d;
}

// (C) -> (1, C, 1, ...) to broadcast over x (N, C, ...).
Tensor per_channel(NodeContext& c, const Tensor& v, const Tensor& x) {
  if (x.dim() < 2) c.invalid("the input " + shape_str(x.shape()) + " must be (N, C, ...)");
  Shape s(size_t(x.dim()), 1);
  s[1] = v.numel();
  return v.reshape(s);
}

// Training mode (opset >= 14): y from the batch statistics (population variance), and the running
// statistics blended with them, running * momentum + batch * (1 - momentum), as ONNX defines it.
Ts batch_norm_training(NodeContext& c, double eps, double momentum) {
  const Tensor& x = c.input(0);
  if (!dtype_is_floating(x.dtype())) c.unsupported(std::string("dtype ") + dtype_name(x.dtype()));
  std::vector<int64_t> dims = {0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  Tensor batch_mean = mean(x, dims, true);
  Tensor centered = x - batch_mean;
  Tensor batch_var = mean(centered * centered, dims, true);
  Tensor y = centered * rsqrt(batch_var + eps) * per_channel(c, c.input(1), x) + per_channel(c, c.input(2), x);
  const Shape channels = c.input(3).shape();
  Tensor running_mean = c.input(3) * momentum + batch_mean.reshape(channels) * (1 - momentum);
  Tensor running_var = c.input(4) * momentum + batch_var.reshape(channels) * (1 - momentum);
  return {y, running_mean, running_var};
}

Ts batch_norm_node(NodeContext& c) {
  const Tensor& x = c.input(0);
  if (c.opset() < 7 && c.has_attr("is_test")) c.attr_int("is_test");
  if (c.opset() < 9 && c.has_attr("spatial") && c.attr_int("spatial") != 1) c.unsupported("spatial=0");
  const double momentum = c.attr_float("momentum", 0.9);
  const double eps = c.attr_float("epsilon", 1e-5);
  if (c.opset() >= 14 && c.attr_int("training_mode", 0) != 0) return batch_norm_training(c, eps, momentum);
  if (c.num_outputs() > 1) c.unsupported("the training outputs (running mean and variance)");
  if (x.dim() == 4 || x.dim() == 2) {
    return {batch_norm_functional(x, c.input(3), c.input(4), c.input(1), c.input(2), false, 0.1, eps).y};
  }
  Tensor inv = rsqrt(per_channel(c, c.input(4), x) + eps);
  return {(x - per_channel(c, c.input(3), x)) * inv * per_channel(c, c.input(1), x) + per_channel(c, c.input(2), x)};
}

Tensor gemm(NodeContext& c) {
  Tensor a = c.input(0), b = c.input(1);
  if (c.attr_int("transA", 0)) a = a.t();
  if (c.attr_int("transB", 0)) b = b.t();
  const double alpha = c.attr_float("alpha", 1.0), beta = c.attr_float("beta", 1.0);
  if (c.opset() < 7 && c.has_attr("broadcast")) c.attr_int("broadcast");
  Tensor y = matmul(a, b);
  if (alpha != 1.0) y = y * alpha;
  if (c.has_input(2)) {
    Tensor bias = c.input(2);
    y = y + (beta != 1.0 ? bias * beta : bias);
  }
  return y;
}

}  // namespace

void register_nn_converters() {
  register_converter("Conv", [](NodeContext& c) -> Ts { return {conv(c)}; });
  register_converter("ConvTranspose", [](NodeContext& c) -> Ts { return {conv_transpose(c)}; });
  register_converter("MaxPool", [](NodeContext& c) -> Ts { return max_pool(c, c.input(0)); });
  register_converter("AveragePool", [](NodeContext& c) -> Ts { return {avg_pool(c)}; });
  register_converter("GlobalAveragePool", [](NodeContext& c) -> Ts { return {mean(c.input(0), spatial_dims(c.input(0)), true)}; });
  register_converter("GlobalMaxPool", [](NodeContext& c) -> Ts { return {amax(c.input(0), spatial_dims(c.input(0)), true)}; });
  register_converter("BatchNormalization", [](NodeContext& c) -> Ts { return batch_norm_node(c); });
  register_converter("InstanceNormalization", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    const double eps = c.attr_float("epsilon", 1e-5);
    const std::vector<int64_t> dims = spatial_dims(x);
    Tensor centered = x - mean(x, dims, true);
    Tensor var_ = mean(centered * centered, dims, true);
    return {centered * rsqrt(var_ + eps) * per_channel(c, c.input(1), x) + per_channel(c, c.input(2), x)};
  });
  register_converter("LayerNormalization", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    const int64_t axis = normalize_axis(c, c.attr_int("axis", -1), x.dim());
    const double eps = c.attr_float("epsilon", 1e-5);
    if (c.attr_int("stash_type", 1) != 1) c.unsupported("stash_type other than 1 (float32)");
    std::vector<int64_t> dims;
    for (int64_t d = axis; d < x.dim(); ++d) dims.push_back(d);
    Tensor mu = mean(x, dims, true);
    Tensor centered = x - mu;
    Tensor rstd = rsqrt(mean(centered * centered, dims, true) + eps);
    Tensor y = centered * rstd * c.input(1);
    if (c.has_input(2)) y = y + c.input(2);
    return {y, mu, rstd};
  });
  register_converter("MeanVarianceNormalization", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    std::vector<int64_t> axes = c.attr_ints("axes", std::vector<int64_t>{0, 2, 3});
    for (auto& a : axes) a = normalize_axis(c, a, x.dim());
    Tensor centered = x - mean(x, axes, true);
    return {centered / (sqrt(mean(centered * centered, axes, true)) + 1e-9)};
  });
  register_converter("LpNormalization", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    const int64_t axis = normalize_axis(c, c.attr_int("axis", -1), x.dim());
    const int64_t p = c.attr_int("p", 2);
    if (p != 1 && p != 2) c.invalid("p must be 1 or 2");
    Tensor norm = p == 1 ? sum(abs(x), {axis}, true) : sqrt(sum(x * x, {axis}, true));
    return {x / norm};
  });
  register_converter("MatMul", [](NodeContext& c) -> Ts { return {matmul(c.input(0), c.input(1))}; });
  register_converter("Gemm", [](NodeContext& c) -> Ts { return {gemm(c)}; });
}

}  // namespace smelt::onnx_import
