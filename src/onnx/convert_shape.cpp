// Shape and movement ops: Reshape, Flatten, Transpose, Squeeze/Unsqueeze, Concat, Split, Slice,
// Expand, Tile, Shape, Size, Constant(OfShape), Identity, Cast(Like), Range, Pad, DepthToSpace,
// SpaceToDepth, EyeLike, Trilu, Dropout (inference). Shapes, axes and pads must be known at import
// time (smelt graphs have static shapes); Shape of any value is, so shape subgraphs fold.
#include <cmath>
#include <cstring>
#include <numeric>

#include "onnx/node_context.h"
#include "smelt/creation.h"
#include "smelt/ops.h"

namespace smelt::onnx_import {
namespace {

using Ts = std::vector<Tensor>;

Tensor ints_tensor(const std::vector<int64_t>& v) { return from_vector(v, {int64_t(v.size())}); }

// A fresh value even when the op changes nothing, so that an output is never the same tensor as
// an input the caller might also return.
Tensor copy_of(const Tensor& x) { return contiguous(x.expand(x.shape())); }

std::vector<int64_t> axes_arg(NodeContext& c, int64_t input_opset, size_t input, int64_t rank) {
  std::vector<int64_t> axes = c.opset() >= input_opset ? (c.has_input(input) ? c.input_ints(input) : std::vector<int64_t>{})
                                                        : c.attr_ints("axes", std::vector<int64_t>{});
  for (auto& a : axes) a = normalize_axis(c, a, rank);
  return axes;
}

DType cast_target(NodeContext& c, int64_t onnx_type) { return dtype_from_onnx(int32_t(onnx_type), c.where() + " attribute 'to'"); }

Tensor slice_one(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  const int64_t n = x.size(dim);
  if (step > 0) {
    start = std::clamp(start < 0 ? start + n : start, int64_t(0), n);
    end = std::clamp(end < 0 ? end + n : end, int64_t(0), n);
    if (end < start) end = start;
    return slice(x, dim, start, end, step);
  }
  // A negative step walks backwards: the picked indices, gathered.
  start = std::clamp(start < 0 ? start + n : start, int64_t(-1), n - 1);
  end = std::clamp(end < 0 ? end + n : end, int64_t(-1), n - 1);
  std::vector<int64_t> idx;
  for (int64_t i = start; i > end; i += step) idx.push_back(i);
  return index_select(x, dim, ints_tensor(idx));
}

Tensor pad_tensor(NodeContext& c, const Tensor& x, const std::vector<int64_t>& pads, const std::string& mode, double value) {
  const int64_t r = x.dim();
  Tensor y = x;
  for (int64_t d = 0; d < r; ++d) {
    int64_t before = pads[size_t(d)], after = pads[size_t(d + r)];
    const int64_t n = y.size(d);
    // Negative pads crop.
    if (before < 0 || after < 0) {
      y = slice(y, d, std::max<int64_t>(0, -before), std::max<int64_t>(n - std::max<int64_t>(0, -after), std::max<int64_t>(0, -before)));
      before = std::max<int64_t>(before, 0);
      after = std::max<int64_t>(after, 0);
    }
    if (before == 0 && after == 0) continue;
    const int64_t m = y.size(d);
    if (mode == "constant") {
      Shape sb = y.shape(), sa = y.shape();
      sb[size_t(d)] = before;
      sa[size_t(d)] = after;
      y = cat({full(sb, value, y.dtype()), y, full(sa, value, y.dtype())}, d);
      continue;
    }
    if (m == 0) c.invalid("cannot pad an empty dim in mode " + mode);
    std::vector<int64_t> idx;
    for (int64_t i = -before; i < m + after; ++i) {
      int64_t j = i;
      if (mode == "edge") {
        j = std::clamp(j, int64_t(0), m - 1);
      } else {  // reflect
        if (m == 1) c.invalid("reflect padding needs at least 2 elements");
        const int64_t period = 2 * (m - 1);
        j = ((j % period) + period) % period;
        if (j >= m) j = period - j;
      }
      idx.push_back(j);
    }
    y = index_select(y, d, ints_tensor(idx));
  }
  return y.same(x) ? copy_of(x) : y;
}

void reg_constant() {
  register_converter("Constant", [](NodeContext& c) -> Ts {
    if (c.has_attr("value")) return {c.attr_tensor("value")};
    if (c.has_attr("value_float")) return {scalar_tensor(c.attr_float("value_float"), DType::Float32)};
    if (c.has_attr("value_int")) return {scalar_tensor(double(c.attr_int("value_int")), DType::Int64)};
    if (c.has_attr("value_floats")) {
      std::vector<double> v = c.attr_floats("value_floats");
      return {cast(from_vector(v, {int64_t(v.size())}, DType::Float64), DType::Float32)};
    }
    if (c.has_attr("value_ints")) return {ints_tensor(c.attr_ints("value_ints"))};
    if (c.has_attr("sparse_value")) c.unsupported("attribute 'sparse_value' (sparse tensors) is not supported");
    if (c.has_attr("value_string") || c.has_attr("value_strings")) c.unsupported("string constants are not supported");
    c.invalid("needs one of the value attributes");
  });
  register_converter("ConstantOfShape", [](NodeContext& c) -> Ts {
    std::vector<int64_t> shape = c.input_ints(0);
    for (int64_t d : shape) {
      if (d < 0) c.invalid("the shape has a negative dim");
    }
    Tensor v = c.has_attr("value") ? c.attr_tensor("value") : zeros({1}, DType::Float32);
    if (v.numel() != 1) c.invalid("attribute 'value' must hold one element");
    return {full(Shape(shape.begin(), shape.end()), v.to_vector()[0], v.dtype())};
  });
  register_converter("Identity", [](NodeContext& c) -> Ts { return {copy_of(c.input(0))}; });
  register_converter("Cast", [](NodeContext& c) -> Ts {
    if (c.has_attr("saturate")) c.attr_int("saturate");
    return {cast(c.input(0), cast_target(c, c.attr_int("to")))};
  });
  register_converter("CastLike", [](NodeContext& c) -> Ts { return {cast(c.input(0), c.input(1).dtype())}; });
  register_converter("Dropout", [](NodeContext& c) -> Ts {
    // Inference: the identity, and a mask of ones.
    if (c.opset() < 12) {
      c.attr_float("ratio", 0.5);
      if (c.attr_int("is_test", 1) == 0 && c.opset() < 7) c.unsupported("training mode");
    } else {
      c.attr_int("seed", 0);
      if (c.has_input(2)) {
        std::vector<double> training = c.input_floats(2);
        // Training with ratio 0 drops nothing: the identity and a mask of ones, whatever the seed.
        std::vector<double> ratio = c.has_input(1) ? c.input_floats(1) : std::vector<double>{0.5};
        if (ratio.size() != 1) c.invalid("ratio must hold one number");
        if (!training.empty() && training[0] != 0 && ratio[0] != 0) {
          c.unsupported("training_mode=true with ratio " + std::to_string(ratio[0]) +
                        " (random dropout; only ratio 0 is deterministic)");
        }
      }
    }
    const Tensor& x = c.input(0);
    return {copy_of(x), full(x.shape(), 1, DType::Bool)};
  });
}

void reg_reshape() {
  register_converter("Reshape", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    std::vector<int64_t> shape = c.input_ints(1);
    const bool allowzero = c.attr_int("allowzero", 0) != 0;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] == 0 && !allowzero) {
        if (int64_t(i) >= x.dim()) c.invalid("shape dim " + std::to_string(i) + " is 0 (copy) past the input's rank");
        shape[i] = x.size(int64_t(i));
      }
      if (shape[i] < -1) c.invalid("shape has a dim below -1");
    }
    return {reshape(x, Shape(shape.begin(), shape.end()))};
  });
  register_converter("Flatten", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    int64_t axis = c.attr_int("axis", 1);
    if (axis < 0) axis += x.dim();
    if (axis < 0 || axis > x.dim()) c.invalid("axis out of range");
    int64_t rows = 1, cols = 1;
    for (int64_t d = 0; d < x.dim(); ++d) (d < axis ? rows : cols) *= x.size(d);
    return {reshape(x, {rows, cols})};
  });
  register_converter("Transpose", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    std::vector<int64_t> def(size_t(x.dim()));
    for (int64_t d = 0; d < x.dim(); ++d) def[size_t(d)] = x.dim() - 1 - d;
    std::vector<int64_t> perm = c.attr_ints("perm", def);
    if (int64_t(perm.size()) != x.dim()) c.invalid("perm must have one entry per dim");
    return {permute(x, Shape(perm.begin(), perm.end()))};
  });
  register_converter("Squeeze", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    std::vector<int64_t> axes = axes_arg(c, 13, 1, x.dim());
    Shape out;
    for (int64_t d = 0; d < x.dim(); ++d) {
      const bool listed = std::find(axes.begin(), axes.end(), d) != axes.end();
      if (listed && x.size(d) != 1) c.invalid("dim " + std::to_string(d) + " has size " + std::to_string(x.size(d)) + ", not 1");
      if (axes.empty() ? x.size(d) != 1 : !listed) out.push_back(x.size(d));
    }
    return {reshape(x, out)};
  });
  register_converter("Unsqueeze", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    std::vector<int64_t> raw = c.opset() >= 13 ? c.input_ints(1) : c.attr_ints("axes");
    const int64_t rank = x.dim() + int64_t(raw.size());
    std::vector<bool> is_new(size_t(rank), false);
    for (int64_t a : raw) {
      const int64_t d = normalize_axis(c, a, rank);
      if (is_new[size_t(d)]) c.invalid("axes repeat a dim");
      is_new[size_t(d)] = true;
    }
    Shape out;
    int64_t k = 0;
    for (int64_t d = 0; d < rank; ++d) out.push_back(is_new[size_t(d)] ? 1 : x.size(k++));
    return {reshape(x, out)};
  });
  register_converter("Expand", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    std::vector<int64_t> shape = c.input_ints(1);
    Shape target = broadcast_shapes(x.shape(), Shape(shape.begin(), shape.end()), "Expand");
    Shape padded(target.size() - size_t(x.dim()), 1);  // leading 1s up to the target's rank
    padded.insert(padded.end(), x.shape().begin(), x.shape().end());
    return {contiguous(expand(reshape(x, padded), target))};
  });
}

void reg_join() {
  register_converter("Concat", [](NodeContext& c) -> Ts {
    std::vector<Tensor> xs;
    for (size_t i = 0; i < c.num_inputs(); ++i) xs.push_back(c.input(i));
    if (xs.empty()) c.invalid("needs at least one input");
    const int64_t axis = normalize_axis(c, c.attr_int("axis"), xs[0].dim());
    return {cat(xs, axis)};
  });
  register_converter("Split", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    const int64_t axis = normalize_axis(c, c.attr_int("axis", 0), x.dim());
    std::vector<int64_t> sizes;
    if (c.opset() >= 13) {
      if (c.has_input(1)) sizes = c.input_ints(1);
    } else {
      sizes = c.attr_ints("split", std::vector<int64_t>{});
    }
    const int64_t n = x.size(axis);
    if (sizes.empty()) {
      int64_t parts = int64_t(c.num_outputs());
      if (c.opset() >= 18) parts = c.attr_int("num_outputs", parts);
      if (parts <= 0) c.invalid("needs at least one output");
      const int64_t chunk = (n + parts - 1) / parts;
      for (int64_t i = 0; i < parts; ++i) sizes.push_back(std::max<int64_t>(0, std::min(chunk, n - i * chunk)));
    }
    if (std::accumulate(sizes.begin(), sizes.end(), int64_t(0)) != n) c.invalid("split sizes do not add up to the dim");
    Ts outs;
    for (const Tensor& t : split(x, sizes, axis)) outs.push_back(contiguous(t));
    return outs;
  });
  register_converter("Slice", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    std::vector<int64_t> starts, ends, axes, steps;
    if (c.opset() < 10) {
      starts = c.attr_ints("starts");
      ends = c.attr_ints("ends");
      axes = c.attr_ints("axes", std::vector<int64_t>{});
    } else {
      starts = c.input_ints(1);
      ends = c.input_ints(2);
      if (c.has_input(3)) axes = c.input_ints(3);
      if (c.has_input(4)) steps = c.input_ints(4);
    }
    if (axes.empty()) {
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
    }
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
      c.invalid("starts, ends, axes and steps must have the same length");
    }
    Tensor y = x;
    for (size_t i = 0; i < starts.size(); ++i) {
      if (steps[i] == 0) c.invalid("a step is 0");
      y = slice_one(y, normalize_axis(c, axes[i], x.dim()), starts[i], ends[i], steps[i]);
    }
    return {contiguous(y.same(x) ? copy_of(x) : y)};
  });
  register_converter("Tile", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    std::vector<int64_t> reps = c.input_ints(1);
    if (int64_t(reps.size()) != x.dim()) c.invalid("repeats must have one entry per dim");
    // (d0, d1, ...) -> (1, d0, 1, d1, ...) expanded to (r0, d0, r1, d1, ...) -> (r0 d0, r1 d1, ...)
    Shape inter, big, out;
    for (int64_t d = 0; d < x.dim(); ++d) {
      if (reps[size_t(d)] < 0) c.invalid("repeats must be >= 0");
      inter.insert(inter.end(), {1, x.size(d)});
      big.insert(big.end(), {reps[size_t(d)], x.size(d)});
      out.push_back(reps[size_t(d)] * x.size(d));
    }
    return {reshape(contiguous(expand(reshape(x, inter), big)), out)};
  });
  register_converter("Pad", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    const std::string mode = c.attr_string("mode", "constant");
    if (mode != "constant" && mode != "edge" && mode != "reflect") c.unsupported("mode '" + mode.substr(0, 40) + "'");
    std::vector<int64_t> pads;
    double value = 0;
    std::vector<int64_t> axes;
    if (c.opset() < 11) {
      pads = c.attr_ints("pads");
      value = c.attr_float("value", 0.0);
    } else {
      pads = c.input_ints(1);
      if (c.has_input(2)) {
        std::vector<double> v = c.input_floats(2);
        if (v.size() != 1) c.invalid("constant_value must hold one element");
        value = v[0];
      }
      if (c.has_input(3)) axes = c.input_ints(3);
    }
    const int64_t r = x.dim();
    if (!axes.empty()) {
      if (pads.size() != 2 * axes.size()) c.invalid("pads must have 2 entries per axis");
      std::vector<int64_t> full_pads(size_t(2 * r), 0);
      for (size_t i = 0; i < axes.size(); ++i) {
        const int64_t d = normalize_axis(c, axes[i], r);
        full_pads[size_t(d)] = pads[i];
        full_pads[size_t(d + r)] = pads[i + axes.size()];
      }
      pads = full_pads;
    }
    if (int64_t(pads.size()) != 2 * r) c.invalid("pads must have 2 entries per dim");
    return {contiguous(pad_tensor(c, x, pads, mode, value))};
  });
}

void reg_shape() {
  register_converter("Shape", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    const int64_t r = x.dim();
    int64_t start = c.attr_int("start", 0), end = c.attr_int("end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = std::clamp<int64_t>(start, 0, r);
    end = std::clamp<int64_t>(end, start, r);
    return {ints_tensor(std::vector<int64_t>(x.shape().begin() + start, x.shape().begin() + end))};
  });
  register_converter("Size", [](NodeContext& c) -> Ts { return {scalar_tensor(double(c.input(0).numel()), DType::Int64)}; });
  register_converter("Range", [](NodeContext& c) -> Ts {
    const Tensor& s = c.input(0);
    auto scalar = [&](size_t i) {
      const std::vector<double> v = c.input_floats(i);
      if (v.size() != 1) c.invalid("input " + std::to_string(i) + " must hold one number");
      return v[0];
    };
    const double start = scalar(0), limit = scalar(1), delta = scalar(2);
    if (delta == 0) c.invalid("delta is 0");
    const double n = std::max(std::ceil((limit - start) / delta), 0.0);
    if (!(n < double(int64_t(1) << 40))) c.invalid("the range has too many elements");
    if (s.dtype() == DType::Int64) {
      std::vector<int64_t> v;
      for (int64_t i = 0; i < int64_t(n); ++i) v.push_back(int64_t(start) + i * int64_t(delta));
      return {ints_tensor(v)};
    }
    std::vector<double> v;
    for (int64_t i = 0; i < int64_t(n); ++i) v.push_back(start + double(i) * delta);
    return {cast(from_vector(v, {int64_t(v.size())}, DType::Float64), s.dtype())};
  });
  register_converter("EyeLike", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    if (x.dim() != 2) c.invalid("the input must be 2-D");
    const DType dtype = c.has_attr("dtype") ? cast_target(c, c.attr_int("dtype")) : x.dtype();
    const int64_t k = c.attr_int("k", 0);
    Tensor e = zeros(x.shape(), DType::Float64);
    double* p = e.data<double>();
    for (int64_t i = 0; i < x.size(0); ++i) {
      const int64_t j = i + k;
      if (j >= 0 && j < x.size(1)) p[i * x.size(1) + j] = 1;
    }
    return {cast(e, dtype)};
  });
  register_converter("Trilu", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    if (x.dim() < 2) c.invalid("the input must have at least 2 dims");
    const bool upper = c.attr_int("upper", 1) != 0;
    std::vector<int64_t> kv = c.has_input(1) ? c.input_ints(1) : std::vector<int64_t>{0};
    if (kv.size() != 1) c.invalid("k must hold one number");
    const int64_t k = kv[0];
    const int64_t rows = x.size(-2), cols = x.size(-1);
    Tensor i = arange(double(rows)).reshape({rows, 1}), j = arange(double(cols)).reshape({1, cols});
    Tensor diff = j - i;  // j - i >= k keeps the upper part
    Tensor keep = upper ? ge(diff, scalar_tensor(double(k), DType::Int64)) : le(diff, scalar_tensor(double(k), DType::Int64));
    return {where(keep, x, zeros({}, x.dtype()))};
  });
  register_converter("DepthToSpace", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    if (x.dim() != 4) c.invalid("the input must be 4-D");
    const int64_t b = c.attr_int("blocksize");
    const std::string mode = c.attr_string("mode", "DCR");
    const int64_t n = x.size(0), ch = x.size(1), h = x.size(2), w = x.size(3);
    if (b <= 0 || ch % (b * b) != 0) c.invalid("channels must be a multiple of blocksize^2");
    const int64_t oc = ch / (b * b);
    Tensor y;
    if (mode == "DCR") {
      y = permute(reshape(x, {n, b, b, oc, h, w}), {0, 3, 4, 1, 5, 2});
    } else if (mode == "CRD") {
      y = permute(reshape(x, {n, oc, b, b, h, w}), {0, 1, 4, 2, 5, 3});
    } else {
      c.unsupported("mode '" + mode.substr(0, 40) + "'");
    }
    return {reshape(contiguous(y), {n, oc, h * b, w * b})};
  });
  register_converter("SpaceToDepth", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    if (x.dim() != 4) c.invalid("the input must be 4-D");
    const int64_t b = c.attr_int("blocksize");
    const int64_t n = x.size(0), ch = x.size(1), h = x.size(2), w = x.size(3);
    if (b <= 0 || h % b != 0 || w % b != 0) c.invalid("height and width must be multiples of blocksize");
    Tensor y = permute(reshape(x, {n, ch, h / b, b, w / b, b}), {0, 3, 5, 1, 2, 4});
    return {reshape(contiguous(y), {n, ch * b * b, h / b, w / b})};
  });
}

}  // namespace

void register_shape_converters() {
  reg_constant();
  reg_reshape();
  reg_join();
  reg_shape();
}

}  // namespace smelt::onnx_import
