// Reductions over dims (sum, mean, amax, amin, prod, var) and argmax.
#include "kernels/reduce.h"
#include "ops/op_util.h"

namespace smelt::ops {
namespace {

using kernels::ReduceKind;

bool keepdim_of(const Attrs& a) { return a.get_int("keepdim", 0) != 0; }

std::vector<TensorMeta> reduce_shape_rule(const std::vector<TensorMeta>& in, const Attrs& attrs,
                                          const char* op) {
  auto dims = reduce_dims(attrs, int64_t(in[0].shape.size()), op);
  return {{reduced_shape(in[0].shape, dims, keepdim_of(attrs)), in[0].dtype}};
}

// A max/min has no value over zero elements, so a reduced dim may not be empty; other dims may
// (the result is then empty too), as PyTorch.
void check_no_empty_reduced_dim(const Shape& shape, const Attrs& attrs, const char* op) {
  for (int64_t d : reduce_dims(attrs, int64_t(shape.size()), op)) {
    SMELT_CHECK(shape[d] > 0) << op << ": cannot reduce over the empty dim " << d << " (size 0) of input "
                              << shape_str(shape) << "; an extreme of no elements is undefined";
  }
}

#define REDUCE_OP(NAME, KIND, CHECK)                                                              \
  std::vector<TensorMeta> NAME##_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) { \
    CHECK;                                                                                       \
    return reduce_shape_rule(in, attrs, #NAME);                                                  \
  }                                                                                              \
  void NAME##_kernel(const std::vector<Tensor>& in, const Attrs& attrs,                          \
                     const std::vector<Tensor>& out) {                                           \
    kernels::reduce_forward(out[0], in[0], reduce_dims(attrs, in[0].dim(), #NAME), KIND);        \
  }

REDUCE_OP(sum, ReduceKind::Sum, (void)0)
REDUCE_OP(mean, ReduceKind::Mean, check_floating(in[0], "mean"))
REDUCE_OP(amax, ReduceKind::Max, check_no_empty_reduced_dim(in[0].shape, attrs, "amax"))
REDUCE_OP(amin, ReduceKind::Min, check_no_empty_reduced_dim(in[0].shape, attrs, "amin"))
// The product of no elements is 1 (an empty reduced dim is fine, as in PyTorch).
REDUCE_OP(prod, ReduceKind::Prod, check_numeric(in[0], "prod"))

std::vector<TensorMeta> var_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  check_floating(in[0], "var");
  attrs.get_int("correction");
  return reduce_shape_rule(in, attrs, "var");
}
void var_kernel(const std::vector<Tensor>& in, const Attrs& attrs, const std::vector<Tensor>& out) {
  const Tensor& y = out[0];
  kernels::var_forward(y, in[0], reduce_dims(attrs, in[0].dim(), "var"), attrs.get_int("correction"));
}

std::vector<TensorMeta> argmax_shape(const std::vector<TensorMeta>& in, const Attrs& attrs) {
  int64_t rank = int64_t(in[0].shape.size());
  int64_t dim = wrap_dim(attrs.get_int("dim"), rank, "argmax");
  SMELT_CHECK(rank == 0 || in[0].shape[dim] > 0) << "argmax: cannot reduce an empty dim";
  Shape s = rank == 0 ? Shape{} : reduced_shape(in[0].shape, {dim}, keepdim_of(attrs));
  return {{s, DType::Int64}};
}
void argmax_kernel(const std::vector<Tensor>& in, const Attrs& attrs,
                   const std::vector<Tensor>& out) {
  const Tensor& y = out[0];
  if (in[0].dim() == 0) {
    y.data<int64_t>()[0] = 0;
    return;
  }
  kernels::argmax_forward(y, in[0], wrap_dim(attrs.get_int("dim"), in[0].dim(), "argmax"));
}

// ---- gradient rules

std::vector<int64_t> dims_of(const GradContext& c) {
  return reduce_dims(c.attrs, c.inputs[0].dim(), "reduce");
}

std::vector<Tensor> sum_grad(const GradContext& c) {
  return {expand_reduced(c.grads[0], c.inputs[0].shape(), dims_of(c), keepdim_of(c.attrs))};
}

std::vector<Tensor> mean_grad(const GradContext& c) {
  auto dims = dims_of(c);
  int64_t count = 1;
  for (int64_t d : dims) count *= c.inputs[0].shape()[d];
  Tensor g = expand_reduced(c.grads[0], c.inputs[0].shape(), dims, keepdim_of(c.attrs));
  return {g / double(count)};
}

// The gradient is shared evenly by the elements equal to the extreme.
std::vector<Tensor> extreme_grad(const GradContext& c) {
  const Tensor& x = c.inputs[0];
  auto dims = dims_of(c);
  bool keep = keepdim_of(c.attrs);
  Tensor y = expand_reduced(c.outputs[0], x.shape(), dims, keep);
  Tensor mask = cast(eq(x, y), x.dtype());
  Tensor count = sum(mask, dims, /*keepdim=*/true);
  Tensor g = expand_reduced(c.grads[0], x.shape(), dims, keep);
  return {mask * g / count};
}

// d prod / d x_i = the product of the other elements. Dividing the product by x_i is wrong where
// x_i = 0, so the rule counts zeros per output: with none, out / x_i; with exactly one, the zero
// element gets the product of the non-zeros and the rest 0; with two or more, every gradient is 0.
// Zeros are replaced by 1 before dividing, so no branch (nor its own gradient) sees 0 / 0.
std::vector<Tensor> prod_grad(const GradContext& c) {
  const Tensor& x = c.inputs[0];
  auto dims = dims_of(c);
  Tensor is_zero = eq(x, zero_like_scalar(x));
  Tensor one = ones_like(x);
  Tensor safe_x = where(is_zero, one, x);
  Tensor nonzero_prod = prod(safe_x, dims, /*keepdim=*/true);
  Tensor zero_count = sum(cast(is_zero, DType::Int64), dims, /*keepdim=*/true);
  Tensor zero = zeros_like(x);
  Tensor at_zero = where(eq(zero_count, scalar_tensor(int64_t(1), DType::Int64)),
                         nonzero_prod.expand(x.shape()), zero);
  Tensor at_nonzero = where(eq(zero_count, scalar_tensor(int64_t(0), DType::Int64)),
                            nonzero_prod / safe_x, zero);
  Tensor g = expand_reduced(c.grads[0], x.shape(), dims, keepdim_of(c.attrs));
  return {g * where(is_zero, at_zero, at_nonzero)};
}

// d var = 2 (x - mean) / (N - correction)
std::vector<Tensor> var_grad(const GradContext& c) {
  const Tensor& x = c.inputs[0];
  auto dims = dims_of(c);
  int64_t count = 1;
  for (int64_t d : dims) count *= x.shape()[d];
  double denom = double(std::max<int64_t>(count - c.attrs.get_int("correction"), 0));
  Tensor centered = x - mean(x, dims, /*keepdim=*/true);
  Tensor g = expand_reduced(c.grads[0], x.shape(), dims, keepdim_of(c.attrs));
  return {g * centered * (2.0 / denom)};
}

}  // namespace

SMELT_OP_IMPL(sum) = {sum_shape, sum_kernel, sum_grad, kSaveNothing};
SMELT_OP_IMPL(mean) = {mean_shape, mean_kernel, mean_grad, kSaveNothing};
SMELT_OP_IMPL(amax) = {amax_shape, amax_kernel, extreme_grad, kSaveBoth};
SMELT_OP_IMPL(amin) = {amin_shape, amin_kernel, extreme_grad, kSaveBoth};
SMELT_OP_IMPL(prod) = {prod_shape, prod_kernel, prod_grad, kSaveInputs};
SMELT_OP_IMPL(var) = {var_shape, var_kernel, var_grad, kSaveInputs};
SMELT_OP_IMPL(argmax) = {argmax_shape, argmax_kernel, nullptr, kSaveNothing};

}  // namespace smelt::ops

namespace smelt {

using ops::Attrs;
using ops::call1;
using ops::OpId;

namespace {
Attrs reduce_attrs(const std::vector<int64_t>& dims, bool keepdim) {
  return {{"dims", dims}, {"keepdim", int64_t(keepdim)}};
}
}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return call1(OpId::sum, {x}, reduce_attrs(dims, keepdim));
}
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return call1(OpId::mean, {x}, reduce_attrs(dims, keepdim));
}
Tensor amax(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return call1(OpId::amax, {x}, reduce_attrs(dims, keepdim));
}
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return call1(OpId::amin, {x}, reduce_attrs(dims, keepdim));
}
Tensor prod(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return call1(OpId::prod, {x}, reduce_attrs(dims, keepdim));
}
Tensor var(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  Attrs attrs = reduce_attrs(dims, keepdim);
  attrs.set("correction", correction);
  return call1(OpId::var, {x}, attrs);
}
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  return call1(OpId::argmax, {x}, {{"dim", dim}, {"keepdim", int64_t(keepdim)}});
}

}  // namespace smelt
