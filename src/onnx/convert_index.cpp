// Indexing ops and the losses built on them: Gather, GatherElements, GatherND, ScatterElements,
// ScatterND, OneHot, Compress and NonZero (on values known at import time), and the NLL and
// softmax cross-entropy losses with weights and ignore_index. Negative indices count from the
// end, as ONNX says; the flattened forms go through smelt's index_select / gather / scatter_add /
// index_add (ScatterND's and ScatterElements' mul, max and min: one masked step per update row
// or element).
#include <numeric>

#include "onnx/node_context.h"
#include "smelt/creation.h"
#include "smelt/ops.h"

namespace smelt::onnx_import {
namespace {

using Ts = std::vector<Tensor>;

Tensor i64(int64_t v) { return scalar_tensor(double(v), DType::Int64); }

// smelt's index ops take int64; ONNX allows int32 indices too, widened here (exact).
Tensor check_index(NodeContext& c, const Tensor& idx) {
  if (idx.dtype() == DType::Int32) return cast(idx, DType::Int64);
  if (idx.dtype() != DType::Int64) {
    c.unsupported(std::string("index dtype ") + dtype_name(idx.dtype()) + " (supported: int64, int32)");
  }
  return idx;
}

// Negative indices wrap once: i < 0 -> i + n.
Tensor wrap(const Tensor& idx, int64_t n) { return where(lt(idx, i64(0)), idx + i64(n), idx); }

int64_t prod(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

Tensor gather_node(NodeContext& c) {
  const Tensor& x = c.input(0);
  const int64_t axis = normalize_axis(c, c.attr_int("axis", 0), x.dim());
  Tensor fixed = wrap(check_index(c, c.input(1)), x.size(axis));
  Shape out(x.shape().begin(), x.shape().begin() + axis);
  out.insert(out.end(), fixed.shape().begin(), fixed.shape().end());
  out.insert(out.end(), x.shape().begin() + axis + 1, x.shape().end());
  return reshape(index_select(x, axis, reshape(fixed, {fixed.numel()})), out);
}

// Row numbers into data flattened to (prod(B) * prod(D[:k]), D[k:]), for indices (B..., I..., k).
Tensor nd_rows(NodeContext& c, const Shape& data, const Tensor& indices, int64_t batch_dims) {
  if (indices.dim() < 1) c.invalid("indices must have at least one dim");
  const int64_t k = indices.size(-1);
  const size_t b = size_t(batch_dims);
  if (k < 1 || b + size_t(k) > data.size()) c.invalid("the last dim of indices must be in [1, rank - batch_dims]");
  for (size_t i = 0; i < b; ++i) {
    if (indices.size(int64_t(i)) != data[i]) c.invalid("indices and data must agree on the batch dims");
  }
  Tensor rows = zeros({}, DType::Int64);
  int64_t stride = 1;
  for (int64_t j = k - 1; j >= 0; --j) {
    const int64_t n = data[b + size_t(j)];
    Tensor col = wrap(reshape(slice(indices, -1, j, j + 1), Shape(indices.shape().begin(), indices.shape().end() - 1)), n);
    rows = rows + col * i64(stride);
    stride *= n;
  }
  if (b > 0) {  // each batch position owns `stride` rows
    Shape bshape(indices.shape().begin(), indices.shape().begin() + b);
    Shape pos_shape = bshape;
    pos_shape.resize(size_t(indices.dim() - 1), 1);
    Tensor pos = reshape(arange(prod(data, 0, b)), pos_shape);
    rows = rows + pos * i64(stride);
  }
  return rows;
}

Tensor gather_nd(NodeContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& idx = check_index(c, c.input(1));
  const int64_t b = c.attr_int("batch_dims", 0);
  if (b < 0 || b >= idx.dim()) c.invalid("batch_dims out of range");
  const Shape& s = x.shape();
  const size_t used = size_t(b + idx.size(-1));
  Tensor rows = nd_rows(c, s, idx, b);
  Shape flat = {prod(s, 0, used)};
  flat.insert(flat.end(), s.begin() + used, s.end());
  Shape out(idx.shape().begin(), idx.shape().end() - 1);
  out.insert(out.end(), s.begin() + used, s.end());
  return reshape(index_select(reshape(x, flat), 0, reshape(rows, {rows.numel()})), out);
}

// Update rows beyond this many make scatter_nd_fold's graph too long (one step per row).
constexpr int64_t kMaxFoldedScatterRows = 1024;

// xf (R, rest...) with each update row uf[j] folded into row rows[j] by `reduction` (mul, max,
// min), one row after the other as ONNX's reference does, so repeated rows combine in order:
// a step multiplies (or takes the max or min with) uf[j] where the row matches and leaves the
// other rows alone.
Tensor scatter_nd_fold(NodeContext& c, Tensor xf, const Tensor& rows, const Tensor& uf, const std::string& reduction) {
  const int64_t n = rows.numel(), R = xf.size(0);
  if (n > kMaxFoldedScatterRows) {
    c.unsupported("reduction '" + reduction + "' over " + std::to_string(n) + " update rows (at most " +
                  std::to_string(kMaxFoldedScatterRows) + ")");
  }
  Shape column(size_t(xf.dim()), 1);
  column[0] = R;
  const Tensor positions = reshape(arange(R), column);
  for (int64_t j = 0; j < n; ++j) {
    const Tensor hit = eq(positions, reshape(slice(rows, 0, j, j + 1), {}));
    const Tensor u = slice(uf, 0, j, j + 1);  // (1, rest...)
    if (reduction == "mul") xf = xf * where(hit, u, scalar_of(1, xf));
    else if (reduction == "max") xf = where(hit, maximum(xf, u), xf);
    else xf = where(hit, minimum(xf, u), xf);
  }
  return xf;
}

Tensor scatter_elements(NodeContext& c) {
  const Tensor &x = c.input(0), &upd = c.input(2);
  const int64_t axis = normalize_axis(c, c.attr_int("axis", 0), x.dim());
  const std::string reduction = c.opset() >= 16 ? c.attr_string("reduction", "none") : "none";
  Tensor idx = wrap(check_index(c, c.input(1)), x.size(axis));
  if (reduction == "add") return scatter_add(x, axis, idx, upd);
  if (reduction == "mul" || reduction == "max" || reduction == "min") {
    if (upd.shape() != idx.shape()) c.invalid("updates " + shape_str(upd.shape()) + " must have the shape of indices " + shape_str(idx.shape()));
    // Each update's flat position in data: gather checks the indices' shape and range.
    const Tensor rows = reshape(gather(reshape(arange(x.numel()), x.shape()), axis, idx), {-1});
    return reshape(scatter_nd_fold(c, reshape(x, {x.numel()}), rows, reshape(upd, {-1}), reduction), x.shape());
  }
  if (reduction != "none") c.unsupported("reduction '" + reduction.substr(0, 20) + "'");
  // Replacement (indices are distinct, as ONNX requires): the updates where an index hit.
  Tensor hits = scatter_add(zeros(x.shape(), x.dtype()), axis, idx, ones(upd.shape(), x.dtype()));
  return where(gt(hits, scalar_of(0, hits)), scatter_add(zeros(x.shape(), x.dtype()), axis, idx, upd), x);
}

Tensor scatter_nd(NodeContext& c) {
  const Tensor &x = c.input(0), &upd = c.input(2);
  const Tensor& idx = check_index(c, c.input(1));
  if (idx.dim() < 1) c.invalid("indices must have at least one dim");
  const std::string reduction = c.opset() >= 16 ? c.attr_string("reduction", "none") : "none";
  const Shape& s = x.shape();
  const size_t used = size_t(idx.size(-1));
  Tensor rows = reshape(nd_rows(c, s, idx, 0), {-1});
  Shape flat = {prod(s, 0, used)};
  flat.insert(flat.end(), s.begin() + used, s.end());
  Shape uflat = {rows.numel()};
  uflat.insert(uflat.end(), s.begin() + used, s.end());
  Tensor xf = reshape(x, flat), uf = reshape(upd, uflat);
  if (reduction == "add") return reshape(index_add(xf, 0, rows, uf), s);
  if (reduction == "mul" || reduction == "max" || reduction == "min") {
    return reshape(scatter_nd_fold(c, xf, rows, uf, reduction), s);
  }
  if (reduction != "none") c.unsupported("reduction '" + reduction.substr(0, 20) + "'");
  Tensor hits = index_add(zeros(flat, x.dtype()), 0, rows, ones(uflat, x.dtype()));
  return reshape(where(gt(hits, scalar_of(0, hits)), index_add(zeros(flat, x.dtype()), 0, rows, uf), xf), s);
}

Tensor one_hot_node(NodeContext& c) {
  Tensor idx = c.input(0);
  const std::vector<double> depth_v = c.input_floats(1);
  if (depth_v.size() != 1 || !(depth_v[0] >= 1)) c.invalid("depth must be one number >= 1");
  const int64_t depth = int64_t(depth_v[0]);
  const Tensor& values = c.input(2);
  if (values.numel() != 2) c.invalid("values must hold (off, on)");
  const int64_t axis = normalize_axis(c, c.attr_int("axis", -1), idx.dim() + 1);
  if (idx.dtype() != DType::Int64) idx = cast(idx, DType::Int64);
  idx = wrap(idx, depth);
  Shape cls(size_t(idx.dim() + 1), 1);
  cls[size_t(axis)] = depth;
  Tensor hot = eq(idx.unsqueeze(axis), reshape(arange(depth), cls));
  Tensor flat = reshape(values, {2});
  return where(hot, slice(flat, 0, 1, 2).reshape({}), slice(flat, 0, 0, 1).reshape({}));
}

// NLL over log-probabilities (N, C, d...) and targets (N, d...), weights (C) optional.
Ts nll(NodeContext& c, const Tensor& logp, const Tensor& target_in, const Tensor& weight, const std::string& reduction) {
  const Tensor& target = check_index(c, target_in);
  if (logp.dim() < 2 || target.dim() != logp.dim() - 1) c.invalid("input must be (N, C, d...) and target (N, d...)");
  const bool has_ignore = c.has_attr("ignore_index");
  const int64_t ignore = c.attr_int("ignore_index", 0);
  Tensor keep = has_ignore ? ne(target, i64(ignore)) : Tensor();
  Tensor safe = has_ignore ? where(keep, target, i64(0).expand(target.shape())) : target;
  Tensor picked = -gather(logp, 1, safe.unsqueeze(1)).squeeze(1);
  Tensor w = weight.defined() ? reshape(index_select(weight, 0, reshape(safe, {safe.numel()})), safe.shape())
                              : ones(safe.shape(), logp.dtype());
  if (has_ignore) w = w * cast(keep, logp.dtype());
  Tensor loss = picked * w;
  if (reduction == "none") return {loss};
  if (reduction == "sum") return {sum(loss)};
  if (reduction == "mean") return {sum(loss) / sum(w)};
  c.invalid("reduction '" + reduction.substr(0, 20) + "' is not one of none, sum, mean");
}

}  // namespace

void register_index_converters() {
  register_converter("Gather", [](NodeContext& c) -> Ts { return {gather_node(c)}; });
  register_converter("GatherElements", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    const int64_t axis = normalize_axis(c, c.attr_int("axis", 0), x.dim());
    return {gather(x, axis, wrap(check_index(c, c.input(1)), x.size(axis)))};
  });
  register_converter("GatherND", [](NodeContext& c) -> Ts { return {gather_nd(c)}; });
  register_converter("ScatterElements", [](NodeContext& c) -> Ts { return {scatter_elements(c)}; });
  register_converter("ScatterND", [](NodeContext& c) -> Ts { return {scatter_nd(c)}; });
  register_converter("OneHot", [](NodeContext& c) -> Ts { return {one_hot_node(c)}; });
  register_converter("NegativeLogLikelihoodLoss", [](NodeContext& c) -> Ts {
    return nll(c, c.input(0), c.input(1), c.has_input(2) ? c.input(2) : Tensor(), c.attr_string("reduction", "mean"));
  });
  register_converter("SoftmaxCrossEntropyLoss", [](NodeContext& c) -> Ts {
    Tensor logp = log_softmax(c.input(0), 1);
    Ts out = nll(c, logp, c.input(1), c.has_input(2) ? c.input(2) : Tensor(), c.attr_string("reduction", "mean"));
    out.push_back(logp);
    return out;
  });
  register_converter("Compress", [](NodeContext& c) -> Ts {
    Tensor x = c.input(0);
    std::vector<double> cond = c.input_floats(1);
    int64_t axis = 0;
    if (c.has_attr("axis")) {
      axis = normalize_axis(c, c.attr_int("axis"), x.dim());
    } else {
      x = reshape(x, {x.numel()});
    }
    std::vector<int64_t> picked;
    for (size_t i = 0; i < cond.size() && int64_t(i) < x.size(axis); ++i) {
      if (cond[i] != 0) picked.push_back(int64_t(i));
    }
    return {index_select(x, axis, from_vector(picked, {int64_t(picked.size())}))};
  });
  register_converter("NonZero", [](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    std::vector<double> v = c.input_floats(0);
    std::vector<std::vector<int64_t>> coords(size_t(x.dim()));
    for (size_t flat = 0; flat < v.size(); ++flat) {
      if (v[flat] == 0) continue;
      size_t rest = flat;
      for (int64_t d = x.dim() - 1; d >= 0; --d) {
        coords[size_t(d)].push_back(int64_t(rest % size_t(x.size(d))));
        rest /= size_t(x.size(d));
      }
    }
    std::vector<int64_t> out;
    const int64_t n = coords.empty() ? 0 : int64_t(coords[0].size());
    for (const auto& row : coords) out.insert(out.end(), row.begin(), row.end());
    return {from_vector(out, {x.dim(), n})};
  });
}

}  // namespace smelt::onnx_import
