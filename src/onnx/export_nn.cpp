// Contractions, pooling, normalization and dropout -> ONNX.
//
//   conv2d               Conv (symmetric pads)
//   conv2d_grad_input    ConvTranspose, output_padding giving back the forward input's size
//   conv2d_grad_weight   Conv of x and dy with batch and channels swapped (grouped: x's groups
//                        moved into its channels)
//   max_pool2d           MaxPool; ONNX's indices count over the whole tensor, smelt's per plane: Mod
//   avg_pool2d           AveragePool; dilated: a depthwise Conv of ones over the tap counts
//   adaptive_avg_pool2d  GlobalAveragePool / AveragePool when the bins divide evenly, else a mean
//                        per bin row then per bin column (bins are products of ranges)
//   layer_norm           LayerNormalization (opset 17), before it the formula
//   batch_norm           BatchNormalization in eval mode; training mode as the formula, with the
//                        running statistics' update
#include <utility>

#include "onnx/export_builder.h"
#include "smelt/creation.h"

namespace smelt::onnx_export {
namespace {

using ops::OpId;

std::vector<int64_t> pads_of(const std::vector<int64_t>& p) { return {p[0], p[1], p[0], p[1]}; }

void window_attrs(::onnx::NodeProto* n, const ops::Attrs& a, bool dilation) {
  set_attr(n, "kernel_shape", a.get_ints("kernel"));
  set_attr(n, "strides", a.get_ints("stride"));
  set_attr(n, "pads", pads_of(a.get_ints("padding")));
  if (dilation && a.has("dilation")) set_attr(n, "dilations", a.get_ints("dilation"));
}

void conv_attrs(::onnx::NodeProto* n, const ops::Attrs& a, const Shape& w) {
  set_attr(n, "kernel_shape", std::vector<int64_t>{w[2], w[3]});
  set_attr(n, "strides", a.get_ints("stride"));
  set_attr(n, "pads", pads_of(a.get_ints("padding")));
  set_attr(n, "dilations", a.get_ints("dilation"));
  set_attr(n, "group", a.get_int("groups"));
}

// dx = ConvTranspose(dy, w): the forward conv's input size comes back through output_padding.
void conv_grad_input(NodeExport& e) {
  const ops::Attrs& a = e.attrs();
  const Shape& dy = e.in_meta(0).shape;
  const Shape& w = e.in_meta(1).shape;
  const Shape& x = a.get_ints("input_shape");
  const auto &s = a.get_ints("stride"), &p = a.get_ints("padding"), &d = a.get_ints("dilation");
  std::vector<int64_t> out_pad(2);
  for (size_t i = 0; i < 2; ++i) {
    out_pad[i] = x[2 + i] - (s[i] * (dy[2 + i] - 1) + (w[2 + i] - 1) * d[i] + 1 - 2 * p[i]);
    if (out_pad[i] < 0 || (out_pad[i] >= s[i] && out_pad[i] >= d[i])) {
      e.fail("input_shape " + shape_str(x) + " is not a size ConvTranspose can produce from " + shape_str(dy));
    }
  }
  ::onnx::NodeProto* n = e.b.node("ConvTranspose", e.in, {e.out[0]});
  conv_attrs(n, a, w);
  set_attr(n, "output_padding", out_pad);
}

// dw[o, c, i, j] = sum over n, oh, ow of dy[n, o, oh, ow] x[n, c, oh s + i d - p, ...]: a conv of
// x as (C, N, H, W) with dy as the weight (O, N, Ho, Wo), stride d and dilation s, cropped to the
// kernel and transposed back. With G groups, output channel o of group g reads only the Cg input
// channels of group g: x is seen as (Cg, G N, H, W) (channel g N + n is image n's channel g Cg + c)
// and the conv has G groups, so each group of O / G weight rows meets its N input channels.
void conv_grad_weight(NodeExport& e) {
  Builder& b = e.b;
  const ops::Attrs& a = e.attrs();
  const int64_t groups = a.get_int("groups");
  const Shape& x = e.in_meta(0).shape;
  const Shape& dy = e.in_meta(1).shape;
  const Shape& w = a.get_ints("weight_shape");
  const auto &s = a.get_ints("stride"), &p = a.get_ints("padding"), &d = a.get_ints("dilation");
  const std::vector<int64_t> swap{1, 0, 2, 3};
  std::string xt;
  if (groups == 1) {
    ::onnx::NodeProto* t = b.node("Transpose", {e.in[0]});
    set_attr(t, "perm", swap);
    xt = t->output(0);
  } else {
    const int64_t cg = x[1] / groups;
    const std::string split = b.op("Reshape", {e.in[0], b.ints({x[0], groups, cg, x[2], x[3]}, "group_shape")});
    ::onnx::NodeProto* t = b.node("Transpose", {split});
    set_attr(t, "perm", std::vector<int64_t>{2, 1, 0, 3, 4});  // (Cg, G, N, H, W)
    xt = b.op("Reshape", {t->output(0), b.ints({cg, groups * x[0], x[2], x[3]}, "grouped_images")});
  }
  ::onnx::NodeProto* dyt = b.node("Transpose", {e.in[1]});
  set_attr(dyt, "perm", swap);
  ::onnx::NodeProto* c = b.node("Conv", {xt, dyt->output(0)});
  set_attr(c, "kernel_shape", std::vector<int64_t>{dy[2], dy[3]});
  set_attr(c, "strides", d);
  set_attr(c, "dilations", s);
  set_attr(c, "pads", pads_of(p));
  if (groups != 1) set_attr(c, "group", groups);
  std::string r = c->output(0);  // (Cg, O, >= kH, >= kW)
  const int64_t h = (x[2] + 2 * p[0] - (dy[2] - 1) * s[0] - 1) / d[0] + 1;
  const int64_t wd = (x[3] + 2 * p[1] - (dy[3] - 1) * s[1] - 1) / d[1] + 1;
  if (h != w[2] || wd != w[3]) {
    r = b.op("Slice", {r, b.ints({0, 0}, "starts"), b.ints({w[2], w[3]}, "ends"), b.ints({2, 3}, "axes")});
  }
  set_attr(b.node("Transpose", {r}, {e.out[0]}), "perm", swap);
}

void max_pool(NodeExport& e) {
  Builder& b = e.b;
  const Shape& x = e.in_meta(0).shape;
  const bool indices = e.out_used[1];
  ::onnx::NodeProto* n = b.node("MaxPool", {e.in[0]}, {e.out[0], indices ? b.fresh("flat_indices") : ""});
  if (!indices) n->mutable_output()->RemoveLast();
  window_attrs(n, e.attrs(), true);
  if (indices) b.node("Mod", {n->output(1), b.int_scalar(x[2] * x[3], "plane")}, {e.out[1]});
}

// AveragePool; with a dilation (AveragePool has dilations only from opset 19, past what the
// exporter writes) a depthwise Conv of ones sums each window's taps and a Div by the tap count
// averages them: k_h k_w with count_include_pad (a window never passes the padded image), else
// the taps on the input, counted here per output position.
void avg_pool(NodeExport& e) {
  Builder& b = e.b;
  const ops::Attrs& a = e.attrs();
  const bool include_pad = a.get_int("count_include_pad") != 0;
  const std::vector<int64_t> d = a.has("dilation") ? a.get_ints("dilation") : std::vector<int64_t>{1, 1};
  if (d == std::vector<int64_t>{1, 1}) {
    ::onnx::NodeProto* n = b.node("AveragePool", e.in, {e.out[0]});
    window_attrs(n, a, false);
    set_attr(n, "count_include_pad", int64_t(include_pad));
    return;
  }
  const Shape& x = e.in_meta(0).shape;
  const Shape& y = e.out_meta(0).shape;
  const DType t = e.in_meta(0).dtype;
  const auto &k = a.get_ints("kernel"), &s = a.get_ints("stride"), &p = a.get_ints("padding");
  ::onnx::NodeProto* conv = b.node("Conv", {e.in[0], b.tensor(ones({x[1], 1, k[0], k[1]}, t), "window_ones")});
  set_attr(conv, "kernel_shape", k);
  set_attr(conv, "strides", s);
  set_attr(conv, "pads", pads_of(p));
  set_attr(conv, "dilations", d);
  set_attr(conv, "group", x[1]);
  std::string count;
  if (include_pad) {
    count = b.scalar(double(k[0] * k[1]), t, "window_taps");
  } else {
    // taps[i][o]: how many of window o's taps along dim i land on the input.
    std::vector<std::vector<double>> taps(2);
    for (size_t i = 0; i < 2; ++i) {
      for (int64_t o = 0; o < y[2 + i]; ++o) {
        int64_t n = 0;
        for (int64_t j = 0; j < k[i]; ++j) {
          const int64_t at = o * s[i] - p[i] + j * d[i];
          n += at >= 0 && at < x[2 + i];
        }
        taps[i].push_back(double(n));
      }
    }
    std::vector<double> counts;
    for (double h : taps[0]) {
      for (double w : taps[1]) counts.push_back(h * w);
    }
    count = b.tensor(from_vector(counts, {1, 1, y[2], y[3]}, t), "window_taps");
  }
  b.node("Div", {conv->output(0), count}, {e.out[0]});
}

void adaptive_avg_pool(NodeExport& e) {
  Builder& b = e.b;
  const Shape& x = e.in_meta(0).shape;
  const auto& out = e.attrs().get_ints("output_size");
  if (out[0] == 1 && out[1] == 1) {
    b.node("GlobalAveragePool", {e.in[0]}, {e.out[0]});
    return;
  }
  if (out[0] > 0 && out[1] > 0 && x[2] % out[0] == 0 && x[3] % out[1] == 0) {
    ::onnx::NodeProto* n = b.node("AveragePool", {e.in[0]}, {e.out[0]});
    const std::vector<int64_t> k{x[2] / out[0], x[3] / out[1]};
    set_attr(n, "kernel_shape", k);
    set_attr(n, "strides", k);
    return;
  }
  // Bin o of n over `in` positions: [floor(o in / n), ceil((o + 1) in / n)).
  std::string v = e.in[0];
  for (int64_t axis : {2, 3}) {
    const int64_t in = x[size_t(axis)], n = out[size_t(axis - 2)];
    std::vector<std::string> bins;
    for (int64_t o = 0; o < n; ++o) {
      const int64_t begin = o * in / n, end = ((o + 1) * in + n - 1) / n;
      std::string part = b.op("Slice", {v, b.ints({begin}, "starts"), b.ints({end}, "ends"), b.ints({axis}, "axes")});
      ::onnx::NodeProto* m = b.node("ReduceMean", {part});
      set_attr(m, "axes", std::vector<int64_t>{axis});  // attribute form through opset 17
      if (b.opset() >= 18) {
        m->clear_attribute();
        m->add_input(b.ints({axis}, "axes"));
      }
      set_attr(m, "keepdims", int64_t(1));
      bins.push_back(m->output(0));
    }
    ::onnx::NodeProto* c = b.node("Concat", bins, {axis == 3 ? e.out[0] : ""});
    set_attr(c, "axis", axis);
    v = c->output(0);
  }
}

void layer_norm(NodeExport& e) {
  Builder& b = e.b;
  const int64_t ndim = e.attrs().get_int("ndim");
  const double eps = e.attrs().get_float("eps");
  const size_t rank = e.in_meta(0).shape.size();
  if (b.opset() >= 17) {
    ::onnx::NodeProto* n = b.node("LayerNormalization", e.in, {e.out[0], e.out[1], e.out[2]});
    set_attr(n, "axis", -ndim);
    set_attr(n, "epsilon", eps);
    return;
  }
  const DType t = e.in_meta(0).dtype;
  std::vector<int64_t> axes;
  for (int64_t d = int64_t(rank) - ndim; d < int64_t(rank); ++d) axes.push_back(d);
  auto mean = [&](const std::string& v, const std::string& out) {
    ::onnx::NodeProto* m = b.node("ReduceMean", {v}, {out});
    set_attr(m, "axes", axes);
    set_attr(m, "keepdims", int64_t(1));
    return m->output(0);
  };
  const std::string mu = mean(e.in[0], e.out[1]);
  const std::string dev = b.op("Sub", {e.in[0], mu});
  const std::string var = mean(b.op("Mul", {dev, dev}), "");
  b.node("Reciprocal", {b.op("Sqrt", {b.op("Add", {var, b.scalar(eps, t, "eps")})})}, {e.out[2]});
  b.node("Add", {b.op("Mul", {b.op("Mul", {dev, e.out[2]}), e.in[1]}), e.in[2]}, {e.out[0]});
}

void batch_norm(NodeExport& e) {
  Builder& b = e.b;
  const ops::Attrs& a = e.attrs();
  const double eps = a.get_float("eps"), momentum = a.get_float("momentum");
  const Shape& x = e.in_meta(0).shape;
  const DType t = e.in_meta(0).dtype;
  const std::string &rmean = e.in[3], &rvar = e.in[4];
  if (!a.get_int("training")) {
    set_attr(b.node("BatchNormalization", e.in, {e.out[0]}), "epsilon", eps);
    if (e.out_used[1]) b.node("Identity", {rmean}, {e.out[1]});
    if (e.out_used[2]) b.node("Reciprocal", {b.op("Sqrt", {b.op("Add", {rvar, b.scalar(eps, t, "eps")})})}, {e.out[2]});
    if (e.out_used[3]) b.node("Identity", {rmean}, {e.out[3]});
    if (e.out_used[4]) b.node("Identity", {rvar}, {e.out[4]});
    return;
  }
  // Batch statistics over every dim but 1 (biased variance), the running ones updated with the
  // unbiased variance.
  std::vector<int64_t> axes{0};
  Shape column(x.size(), 1);
  column[1] = x[1];
  for (size_t d = 2; d < x.size(); ++d) axes.push_back(int64_t(d));
  const std::string col = b.ints(column, "channel_shape");
  auto mean = [&](const std::string& v, const std::string& out) {
    ::onnx::NodeProto* m = b.node("ReduceMean", {v}, {out});
    if (b.opset() >= 18) m->add_input(b.ints(axes, "axes"));
    else set_attr(m, "axes", axes);
    set_attr(m, "keepdims", int64_t(0));
    return m->output(0);
  };
  const std::string mu = mean(e.in[0], e.out[1]);
  const std::string dev = b.op("Sub", {e.in[0], b.op("Reshape", {mu, col})});
  const std::string var = mean(b.op("Mul", {dev, dev}), "");
  b.node("Reciprocal", {b.op("Sqrt", {b.op("Add", {var, b.scalar(eps, t, "eps")})})}, {e.out[2]});
  const std::string scale = b.op("Reshape", {b.op("Mul", {e.out[2], e.in[1]}), col});
  b.node("Add", {b.op("Mul", {dev, scale}), b.op("Reshape", {e.in[2], col})}, {e.out[0]});
  const double count = double(shape_numel(x)) / double(std::max<int64_t>(x[1], 1));
  const std::string keep = b.scalar(1 - momentum, t, "keep"), m = b.scalar(momentum, t, "momentum");
  b.node("Add", {b.op("Mul", {rmean, keep}), b.op("Mul", {mu, m})}, {e.out[3]});
  const std::string unbiased = b.op("Mul", {var, b.scalar(count / (count - 1), t, "bessel")});
  b.node("Add", {b.op("Mul", {rvar, keep}), b.op("Mul", {unbiased, m})}, {e.out[4]});
}

// The ops whose exporter is a function of their own above.
using Exporter = void (*)(NodeExport&);
constexpr std::pair<OpId, Exporter> kExporters[] = {
    {OpId::conv2d_grad_input, conv_grad_input},
    {OpId::conv2d_grad_weight, conv_grad_weight},
    {OpId::max_pool2d, max_pool},
    {OpId::avg_pool2d, avg_pool},
    {OpId::adaptive_avg_pool2d, adaptive_avg_pool},
    {OpId::layer_norm, layer_norm},
    {OpId::batch_norm, batch_norm},
};

}  // namespace

void export_nn(NodeExport& e) {
  Builder& b = e.b;
  const ops::Attrs& a = e.attrs();
  for (const auto& [op, exporter] : kExporters) {
    if (op == e.node.op) return exporter(e);
  }
  switch (e.node.op) {
    case OpId::matmul:
      b.node("MatMul", e.in, {e.out[0]});
      return;
    case OpId::conv2d:
      conv_attrs(b.node("Conv", e.in, {e.out[0]}), a, e.in_meta(1).shape);
      return;
    case OpId::dropout:
      // Draws from smelt's generator cannot be reproduced by ONNX's Dropout; eval mode is a copy.
      if (a.get_int("training") && a.get_float("p") > 0) {
        e.fail("dropout in training mode draws random numbers that ONNX cannot reproduce; trace the model in eval mode");
      }
      e.require_unused_from(1, "the mask or the generator state");
      b.node("Identity", {e.in[0]}, {e.out[0]});
      return;
    default:
      e.fail("internal: not an nn op");
  }
}

}  // namespace smelt::onnx_export
