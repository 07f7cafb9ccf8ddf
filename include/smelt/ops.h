// The functional API: every op smelt offers, as free functions (and operators).
// Each goes through the dispatcher: shape rule, kernel (or tracer), autograd node.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "smelt/int_or_2.h"
#include "smelt/tensor.h"

namespace smelt {

// ---- elementwise, unary
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor gelu(const Tensor& x, GeluApprox approximate = GeluApprox::None);
Tensor silu(const Tensor& x);
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);
Tensor cast(const Tensor& x, DType dtype);
// Rounding (float only; round is half to even; gradients are zero) and trigonometric functions.
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tan(const Tensor& x);
Tensor asin(const Tensor& x);
Tensor acos(const Tensor& x);
Tensor atan(const Tensor& x);
Tensor sinh(const Tensor& x);
Tensor cosh(const Tensor& x);
Tensor asinh(const Tensor& x);
Tensor acosh(const Tensor& x);
Tensor atanh(const Tensor& x);

// ---- elementwise, binary (NumPy broadcasting; two tensors must have the same dtype; a number
// on either side is promoted with the tensor as in PyTorch, see smelt/scalar.h)
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);  // comparisons give Bool
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// The same with a number on either side (`add(a, 1)`, `gt(a, 0.5)`, `sub(1, a)`): the number
// becomes a 0-dim tensor of the promoted dtype, and the tensor is cast to it when that differs.
#define SMELT_SCALAR_OVERLOADS(NAME)               \
  Tensor NAME(const Tensor& a, const Scalar& b);   \
  Tensor NAME(const Scalar& a, const Tensor& b);
SMELT_SCALAR_OVERLOADS(add)
SMELT_SCALAR_OVERLOADS(sub)
SMELT_SCALAR_OVERLOADS(mul)
SMELT_SCALAR_OVERLOADS(div)
SMELT_SCALAR_OVERLOADS(pow)
SMELT_SCALAR_OVERLOADS(maximum)
SMELT_SCALAR_OVERLOADS(minimum)
SMELT_SCALAR_OVERLOADS(eq)
SMELT_SCALAR_OVERLOADS(ne)
SMELT_SCALAR_OVERLOADS(lt)
SMELT_SCALAR_OVERLOADS(le)
SMELT_SCALAR_OVERLOADS(gt)
SMELT_SCALAR_OVERLOADS(ge)
#undef SMELT_SCALAR_OVERLOADS

// A 0-dim tensor holding `value` in `like`'s dtype (no promotion: converted as full_like does),
// for gradient rules that need a constant of their operand's dtype. Same order as full_like.
Tensor scalar_like(const Tensor& like, const Scalar& value);

// Operators: tensors and numbers on either side. Division of two integers truncates toward zero
// (smelt's int64 div, unlike PyTorch's true division); comparisons give Bool tensors.
Tensor operator-(const Tensor& a);
#define SMELT_BINARY_OPERATOR(OP)                           \
  Tensor operator OP(const Tensor& a, const Tensor& b);     \
  Tensor operator OP(const Tensor& a, const Scalar& b);     \
  Tensor operator OP(const Scalar& a, const Tensor& b);
SMELT_BINARY_OPERATOR(+)
SMELT_BINARY_OPERATOR(-)
SMELT_BINARY_OPERATOR(*)
SMELT_BINARY_OPERATOR(/)
SMELT_BINARY_OPERATOR(==)
SMELT_BINARY_OPERATOR(!=)
SMELT_BINARY_OPERATOR(<)
SMELT_BINARY_OPERATOR(<=)
SMELT_BINARY_OPERATOR(>)
SMELT_BINARY_OPERATOR(>=)
#undef SMELT_BINARY_OPERATOR

// ---- reductions (dims empty = all dims)
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// max/min over dims; gradient split evenly between tied maxima.
Tensor amax(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
inline Tensor max(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false) {
  return amax(x, dims, keepdim);
}
inline Tensor min(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false) {
  return amin(x, dims, keepdim);
}
// Product over dims (1 over an empty dim); int64 overflow wraps. The gradient is exact at zeros.
Tensor prod(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// Variance with Bessel's correction by default (correction = 1).
Tensor var(const Tensor& x, const std::vector<int64_t>& dims = {}, int64_t correction = 1,
           bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);  // Int64
// Running sum along dim. Beyond PyTorch (as ONNX CumSum): `exclusive` leaves each element out of
// its own sum (the first is 0), `reverse` sums from the end. Int64 overflow wraps.
Tensor cumsum(const Tensor& x, int64_t dim, bool exclusive = false, bool reverse = false);
// The k largest (or smallest) elements along dim and their Int64 indices, always sorted best
// first; equal values keep index order (lower index first, as ONNX TopK); NaN ranks highest.
struct TopKResult {
  Tensor values, indices;
};
TopKResult topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true);
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

// ---- contractions
// Batched matrix product; 1-D operands are promoted as in NumPy; batch dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
// x (N, C, H, W), w (O, C/groups, kH, kW), bias (O) optional. Sizes: one number or (h, w).
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias = Tensor(), IntOr2 stride = 1,
              IntOr2 padding = 0, IntOr2 dilation = 1, int64_t groups = 1);
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias = Tensor());  // x w^T + b

// ---- pooling, x (N, C, H, W); sizes one number or (h, w); an empty stride is the kernel size
Tensor max_pool2d(const Tensor& x, IntOr2 kernel, IntOr2 stride = {}, IntOr2 padding = 0,
                  IntOr2 dilation = 1);
// dilation: window taps that far apart (torch's avg_pool2d has none; ONNX AveragePool from opset 19).
Tensor avg_pool2d(const Tensor& x, IntOr2 kernel, IntOr2 stride = {}, IntOr2 padding = 0,
                  bool count_include_pad = true, IntOr2 dilation = 1);
Tensor adaptive_avg_pool2d(const Tensor& x, IntOr2 output_size);

// ---- normalization
// Normalizes over the last normalized_shape.size() dims; weight/bias optional.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// x (N, C, ...). Training: batch statistics, running stats updated in place (momentum as in
// PyTorch); eval: running statistics.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum = 0.1,
                  double eps = 1e-5);
// The same without writing anything: returns y and the new running statistics (the given ones in
// eval mode), for callers that store state themselves (a traced module, a compiled step).
struct BatchNormResult {
  Tensor y, running_mean, running_var;
};
BatchNormResult batch_norm_functional(const Tensor& x, const Tensor& running_mean,
                                      const Tensor& running_var, const Tensor& weight,
                                      const Tensor& bias, bool training, double momentum = 0.1,
                                      double eps = 1e-5);

// ---- random
Tensor dropout(const Tensor& x, double p, bool training);

// ---- losses (reduction: mean over non-ignored elements, sum, or none)
enum class Reduction { None, Mean, Sum };
// logits (N, C) or (N, C, d...), target Int64 class indices (N) or (N, d...).
Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index = -100,
                     double label_smoothing = 0.0, Reduction reduction = Reduction::Mean);
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, int64_t ignore_index = -100,
                Reduction reduction = Reduction::Mean);
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        Reduction reduction = Reduction::Mean);

// ---- indexing and joining
// As F.embedding(input, weight): Int64 indices (...), weight (V, D) -> (..., D). Arguments in
// the old order (weight, indices) are an error that says so.
Tensor embedding(const Tensor& input, const Tensor& weight);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor one_hot(const Tensor& indices, int64_t num_classes);  // Int64 (...) -> Int64 (..., C)
Tensor cat(const std::vector<Tensor>& xs, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& xs, int64_t dim = 0);
// Pieces of `split_size` along dim (the last may be smaller); views.
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);

// ---- views and movement (also available as Tensor methods)
Tensor reshape(const Tensor& x, const Shape& shape);  // one dim may be -1
Tensor permute(const Tensor& x, const Shape& dims);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor expand(const Tensor& x, const Shape& shape);   // -1 keeps a dim
Tensor contiguous(const Tensor& x);

// Broadcast shape of two shapes (NumPy rules); error names `where` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* where);

}  // namespace smelt
