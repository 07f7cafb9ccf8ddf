// Ops along one dim: cumsum (a running sum) and topk (the k extremes of each line, with indices).
#include "kernels/scan.h"
#include "ops/op_util.h"

namespace smelt::ops {

// A 0-dim tensor has one line of one element, along dim 0 (or -1), as in PyTorch.
int64_t line_dim(const Attrs& attrs, int64_t rank, const char* op) {
  return wrap_dim(attrs.get_int("dim"), std::max<int64_t>(rank, 1), op);
}

namespace {

// ---- cumsum: x (...) -> (...); dim, exclusive, reverse
std::vector<TensorMeta> cumsum_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  check_numeric(in[0], "cumsum");
  line_dim(attrs, int64_t(in[0].shape.size()), "cumsum");
  attrs.get_int("exclusive");
  attrs.get_int("reverse");
  return {in[0]};
}
void cumsum_kernel(const std::vector<Tensor>& in, const Attrs& attrs, const std::vector<Tensor>& out) {
  kernels::cumsum_forward(out[0], in[0], in[0].dim() == 0 ? 0 : line_dim(attrs, in[0].dim(), "cumsum"),
                          attrs.get_int("exclusive") != 0, attrs.get_int("reverse") != 0);
}
// Element j of the input reaches every output at or after j (before, when reversed): the gradient
// is the running sum of g in the other direction, exclusive exactly when the forward was.
std::vector<Tensor> cumsum_grad(const GradContext& c) {
  return {cumsum(c.grads[0], c.attrs.get_int("dim"), c.attrs.get_int("exclusive") != 0,
                 c.attrs.get_int("reverse") == 0)};
}

// ---- topk: x (..., N, ...) -> values (..., k, ...), indices Int64 (..., k, ...); k, dim, largest
std::vector<TensorMeta> topk_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const TensorMeta& x = in[0];
  check_numeric(x, "topk");
  SMELT_CHECK(!x.shape.empty()) << "topk: x must have at least one dim, got a 0-dim tensor";
  const int64_t dim = wrap_dim(attrs.get_int("dim"), int64_t(x.shape.size()), "topk");
  const int64_t k = attrs.get_int("k");
  SMELT_CHECK(k >= 0 && k <= x.shape[size_t(dim)])
      << "topk: k = " << k << " is out of range for dim " << dim << " of size " << x.shape[size_t(dim)]
      << " (x " << shape_str(x.shape) << "); valid: 0 <= k <= " << x.shape[size_t(dim)];
  attrs.get_int("largest");
  Shape s = x.shape;
  s[size_t(dim)] = k;
  return {{s, x.dtype}, {s, DType::Int64}};
}
void topk_kernel(const std::vector<Tensor>& in, const Attrs& attrs, const std::vector<Tensor>& out) {
  kernels::topk_forward(out[0], out[1], in[0], attrs.get_int("k"),
                        wrap_dim(attrs.get_int("dim"), in[0].dim(), "topk"),
                        attrs.get_int("largest") != 0);
}
// The values are picked elements: their gradient goes back to where they were picked from.
std::vector<Tensor> topk_grad(const GradContext& c) {
  const Tensor &x = c.inputs[0], &indices = c.outputs[1], &g = c.grads[0];
  const int64_t dim = wrap_dim(c.attrs.get_int("dim"), x.dim(), "topk");
  return {scatter_add(zeros(x.shape(), g.dtype()), dim, indices, g)};
}

}  // namespace

SMELT_OP_IMPL(cumsum) = {cumsum_shape, cumsum_kernel, cumsum_grad, kSaveNothing};
SMELT_OP_IMPL(topk) = {topk_shape, topk_kernel, topk_grad, kSaveOutputs};

}  // namespace smelt::ops

namespace smelt {

using ops::OpId;

Tensor cumsum(const Tensor& x, int64_t dim, bool exclusive, bool reverse) {
  const int64_t canonical = x.defined() ? ops::line_dim({{"dim", dim}}, x.dim(), "cumsum") : dim;
  return ops::call1(OpId::cumsum, {x},
                    {{"dim", canonical}, {"exclusive", int64_t(exclusive)}, {"reverse", int64_t(reverse)}});
}

TopKResult topk(const Tensor& x, int64_t k, int64_t dim, bool largest) {
  const int64_t canonical = x.defined() && x.dim() > 0 ? wrap_dim(dim, x.dim(), "topk") : dim;
  std::vector<Tensor> out = ops::call(OpId::topk, {x},
                                      {{"k", k}, {"dim", canonical}, {"largest", int64_t(largest)}});
  return {out[0], out[1]};
}

}  // namespace smelt
