// Reductions (ReduceSum ... ReduceLogSumExp, ReduceProd), CumSum and TopK, ArgMax/ArgMin, and the softmax family. The axes
// come from an attribute (older opsets) or an input (ReduceSum from opset 13, the others from 18);
// reductions smelt has no op for are composed (L1, L2, LogSum, LogSumExp, SumSquare).
#include <cmath>
#include <limits>

#include "onnx/node_context.h"
#include "smelt/creation.h"
#include "smelt/ops.h"

namespace smelt::onnx_import {
namespace {

using Ts = std::vector<Tensor>;

struct ReduceSpec {
  std::vector<int64_t> dims;  // normalized, sorted; empty: every dim
  bool keepdims = true;
  bool noop = false;          // no axes and noop_with_empty_axes: the input unchanged
};

ReduceSpec reduce_spec(NodeContext& c, int64_t axes_input_opset) {
  const Tensor& x = c.input(0);
  ReduceSpec s;
  s.keepdims = c.attr_int("keepdims", 1) != 0;
  std::vector<int64_t> axes;
  if (c.opset() >= axes_input_opset) {
    if (c.has_input(1)) axes = c.input_ints(1);
    const bool noop = c.attr_int("noop_with_empty_axes", 0) != 0;
    if (axes.empty() && noop) s.noop = true;
  } else {
    axes = c.attr_ints("axes", std::vector<int64_t>{});
  }
  for (int64_t a : axes) s.dims.push_back(normalize_axis(c, a, x.dim()));
  std::sort(s.dims.begin(), s.dims.end());
  if (std::adjacent_find(s.dims.begin(), s.dims.end()) != s.dims.end()) c.invalid("axes repeat a dim");
  if (s.dims.empty()) {
    for (int64_t d = 0; d < x.dim(); ++d) s.dims.push_back(d);
  }
  return s;
}

using ReduceFn = Tensor (*)(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim);

Tensor lse(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  Tensor m = amax(x, dims, true);
  // A row of -inf (or +inf) has no finite shift: shift by 0 there, as log(sum(exp(x))) does.
  Tensor finite = eq(m - m, scalar_of(0, m));
  m = where(finite, m, scalar_of(0, m).expand(m.shape()));
  Tensor r = log(sum(exp(x - m), dims, true)) + m;
  if (!keepdim) r = sum(r, dims, false);  // drops the size-1 dims
  return r;
}
Tensor l1(const Tensor& x, const std::vector<int64_t>& d, bool k) { return sum(abs(x), d, k); }
Tensor l2(const Tensor& x, const std::vector<int64_t>& d, bool k) { return sqrt(sum(x * x, d, k)); }
Tensor sumsq(const Tensor& x, const std::vector<int64_t>& d, bool k) { return sum(x * x, d, k); }
Tensor logsum(const Tensor& x, const std::vector<int64_t>& d, bool k) { return log(sum(x, d, k)); }
Tensor sum_(const Tensor& x, const std::vector<int64_t>& d, bool k) { return sum(x, d, k); }
Tensor mean_(const Tensor& x, const std::vector<int64_t>& d, bool k) { return mean(x, d, k); }
Tensor max_(const Tensor& x, const std::vector<int64_t>& d, bool k) { return amax(x, d, k); }
Tensor min_(const Tensor& x, const std::vector<int64_t>& d, bool k) { return amin(x, d, k); }
Tensor prod_(const Tensor& x, const std::vector<int64_t>& d, bool k) { return prod(x, d, k); }

// `empty_ok`: smelt's op gives the reduction's identity over an empty dim (prod: 1), as ONNX wants.
void reduction(const char* name, ReduceFn fn, int64_t axes_input_opset, bool floating,
               bool empty_ok = false) {
  register_converter(name, [fn, axes_input_opset, floating, empty_ok](NodeContext& c) -> Ts {
    const Tensor& x = c.input(0);
    if (x.dtype() == DType::Bool || x.dtype() == DType::UInt8 || x.dtype() == DType::Int8 || (floating && !dtype_is_floating(x.dtype()))) {
      c.unsupported(std::string("dtype ") + dtype_name(x.dtype()));
    }
    ReduceSpec s = reduce_spec(c, axes_input_opset);
    if (s.noop) return {x + scalar_of(0, x)};
    for (int64_t d : s.dims) {
      if (x.size(d) == 0 && !empty_ok) c.unsupported("reducing an empty dim (the identity element of this reduction)");
    }
    return {fn(x, s.dims, s.keepdims)};
  });
}

// The index of the first (or last) extreme along `axis`.
Tensor arg_extreme(NodeContext& c, bool is_max) {
  Tensor x = c.input(0);
  const int64_t axis = normalize_axis(c, c.attr_int("axis", 0), x.dim());
  const bool keep = c.attr_int("keepdims", 1) != 0;
  const bool last = c.attr_int("select_last_index", 0) != 0;
  if (x.dim() == 0) c.invalid("the input must have at least one dim");
  if (x.size(axis) == 0) c.invalid("the reduced dim is empty");
  if (!is_max) {
    if (!dtype_is_floating(x.dtype()) && !dtype_is_signed_integer(x.dtype())) c.unsupported(std::string("dtype ") + dtype_name(x.dtype()));
    // min of x is max of -x for floats; ints order-reverse through bitwise-free ~x = -x - 1.
    x = dtype_is_floating(x.dtype()) ? -x : scalar_of(-1, x) - x;
  }
  const int64_t n = x.size(axis);
  if (!last) return argmax(x, axis, keep);
  // Last index: the first in reversed order, mapped back.
  Tensor reversed_index = arange(double(n - 1), -1.0, -1.0);
  Tensor first_in_reversed = argmax(index_select(x, axis, reversed_index), axis, keep);
  return scalar_tensor(double(n - 1), DType::Int64) - first_in_reversed;
}

// Softmax-style ops before opset 13 work on the input seen as 2-D (dims before `axis` x the rest).
template <class F>
Tensor coerced(NodeContext& c, const Tensor& x, int64_t default_axis, F f) {
  int64_t axis = normalize_axis(c, c.attr_int("axis", default_axis), x.dim());
  if (c.opset() >= 13) return f(x, axis);
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < x.dim(); ++d) (d < axis ? rows : cols) *= x.size(d);
  return f(x.reshape({rows, cols}), 1).reshape(x.shape());
}

Tensor hardmax(const Tensor& x, int64_t axis) {
  const int64_t n = x.size(axis);
  Tensor hot = one_hot(argmax(x, axis, false), n);  // (..., n) with the class last
  Shape perm;
  for (int64_t d = 0; d < x.dim() - 1; ++d) perm.push_back(d);
  perm.insert(perm.begin() + axis, x.dim() - 1);
  return cast(permute(hot, perm), x.dtype()).contiguous();
}

// CumSum: the axis is a 0-D input; exclusive and reverse map onto smelt's op.
Tensor cumsum_node(NodeContext& c) {
  const Tensor& x = c.input(0);
  std::vector<int64_t> axis = c.input_ints(1);
  if (axis.size() != 1) c.invalid("axis must hold one value, got " + std::to_string(axis.size()));
  const int64_t dim = normalize_axis(c, axis[0], x.dim());
  return cumsum(x, dim, c.attr_int("exclusive", 0) != 0, c.attr_int("reverse", 0) != 0);
}

// TopK: k is an attribute before opset 10, a 1-element input after; smelt's result is always
// sorted, which satisfies sorted = 0 too (any order is allowed then).
Ts topk_node(NodeContext& c) {
  const Tensor& x = c.input(0);
  if (x.dim() == 0) c.invalid("the input must have at least one dim");
  int64_t k = 0;
  if (c.opset() >= 10) {
    std::vector<int64_t> ks = c.input_ints(1);
    if (ks.size() != 1) c.invalid("K must hold one value, got " + std::to_string(ks.size()));
    k = ks[0];
  } else {
    k = c.attr_int("k");
  }
  const int64_t axis = normalize_axis(c, c.attr_int("axis", -1), x.dim());
  bool largest = true;
  if (c.opset() >= 11) {
    largest = c.attr_int("largest", 1) != 0;
    c.attr_int("sorted", 1);
  }
  if (k < 0 || k > x.size(axis)) {
    c.invalid("K = " + std::to_string(k) + " is out of range for axis " + std::to_string(axis) +
              " of size " + std::to_string(x.size(axis)));
  }
  TopKResult r = topk(x, k, axis, largest);
  return {r.values, r.indices};
}

}  // namespace

void register_reduce_converters() {
  register_converter("CumSum", [](NodeContext& c) -> Ts { return {cumsum_node(c)}; });
  register_converter("TopK", topk_node);
  reduction("ReduceSum", sum_, 13, false);
  reduction("ReduceMean", mean_, 18, false);
  reduction("ReduceMax", max_, 18, false);
  reduction("ReduceMin", min_, 18, false);
  reduction("ReduceProd", prod_, 18, false, /*empty_ok=*/true);
  reduction("ReduceL1", l1, 18, false);
  reduction("ReduceL2", l2, 18, true);
  reduction("ReduceSumSquare", sumsq, 18, false);
  reduction("ReduceLogSum", logsum, 18, true);
  reduction("ReduceLogSumExp", lse, 18, true);
  register_converter("ArgMax", [](NodeContext& c) -> Ts { return {arg_extreme(c, true)}; });
  register_converter("ArgMin", [](NodeContext& c) -> Ts { return {arg_extreme(c, false)}; });
  register_converter("Softmax", [](NodeContext& c) -> Ts {
    const int64_t def = c.opset() >= 13 ? -1 : 1;
    return {coerced(c, c.input(0), def, [](const Tensor& x, int64_t a) { return softmax(x, a); })};
  });
  register_converter("LogSoftmax", [](NodeContext& c) -> Ts {
    const int64_t def = c.opset() >= 13 ? -1 : 1;
    return {coerced(c, c.input(0), def, [](const Tensor& x, int64_t a) { return log_softmax(x, a); })};
  });
  register_converter("Hardmax", [](NodeContext& c) -> Ts {
    const int64_t def = c.opset() >= 13 ? -1 : 1;
    return {coerced(c, c.input(0), def, hardmax)};
  });
}

}  // namespace smelt::onnx_import
