// Tensor's methods that are ops: each forwards to the free function of the same name (smelt/ops.h),
// qualified with smelt:: because inside Tensor the method's own name would be found first.
#include "smelt/ops.h"

namespace smelt {

#define SMELT_UNARY_METHOD(NAME) \
  Tensor Tensor::NAME() const { return smelt::NAME(*this); }
SMELT_UNARY_METHOD(neg)
SMELT_UNARY_METHOD(exp)
SMELT_UNARY_METHOD(log)
SMELT_UNARY_METHOD(sqrt)
SMELT_UNARY_METHOD(rsqrt)
SMELT_UNARY_METHOD(abs)
SMELT_UNARY_METHOD(sign)
SMELT_UNARY_METHOD(erf)
SMELT_UNARY_METHOD(relu)
SMELT_UNARY_METHOD(sigmoid)
SMELT_UNARY_METHOD(tanh)
SMELT_UNARY_METHOD(silu)
SMELT_UNARY_METHOD(floor)
SMELT_UNARY_METHOD(ceil)
SMELT_UNARY_METHOD(round)
SMELT_UNARY_METHOD(sin)
SMELT_UNARY_METHOD(cos)
SMELT_UNARY_METHOD(tan)
SMELT_UNARY_METHOD(asin)
SMELT_UNARY_METHOD(acos)
SMELT_UNARY_METHOD(atan)
SMELT_UNARY_METHOD(sinh)
SMELT_UNARY_METHOD(cosh)
SMELT_UNARY_METHOD(asinh)
SMELT_UNARY_METHOD(acosh)
SMELT_UNARY_METHOD(atanh)
#undef SMELT_UNARY_METHOD

Tensor Tensor::leaky_relu(double negative_slope) const {
  return smelt::leaky_relu(*this, negative_slope);
}
Tensor Tensor::gelu(GeluApprox approximate) const { return smelt::gelu(*this, approximate); }
Tensor Tensor::softplus(double beta, double threshold) const {
  return smelt::softplus(*this, beta, threshold);
}
Tensor Tensor::clamp(std::optional<double> min, std::optional<double> max) const {
  return smelt::clamp(*this, min, max);
}

#define SMELT_BINARY_METHOD(NAME)                                                            \
  Tensor Tensor::NAME(const Tensor& other) const { return smelt::NAME(*this, other); }       \
  Tensor Tensor::NAME(const Scalar& other) const { return smelt::NAME(*this, other); }
SMELT_BINARY_METHOD(add)
SMELT_BINARY_METHOD(sub)
SMELT_BINARY_METHOD(mul)
SMELT_BINARY_METHOD(div)
SMELT_BINARY_METHOD(pow)
SMELT_BINARY_METHOD(eq)
SMELT_BINARY_METHOD(ne)
SMELT_BINARY_METHOD(lt)
SMELT_BINARY_METHOD(le)
SMELT_BINARY_METHOD(gt)
SMELT_BINARY_METHOD(ge)
#undef SMELT_BINARY_METHOD
Tensor Tensor::maximum(const Tensor& other) const { return smelt::maximum(*this, other); }
Tensor Tensor::minimum(const Tensor& other) const { return smelt::minimum(*this, other); }
Tensor Tensor::where(const Tensor& condition, const Tensor& other) const {
  return smelt::where(condition, *this, other);
}

#define SMELT_REDUCE_METHOD(NAME)                                                   \
  Tensor Tensor::NAME(const std::vector<int64_t>& dims, bool keepdim) const {       \
    return smelt::NAME(*this, dims, keepdim);                                       \
  }
SMELT_REDUCE_METHOD(sum)
SMELT_REDUCE_METHOD(mean)
SMELT_REDUCE_METHOD(amax)
SMELT_REDUCE_METHOD(amin)
SMELT_REDUCE_METHOD(prod)
SMELT_REDUCE_METHOD(max)
SMELT_REDUCE_METHOD(min)
#undef SMELT_REDUCE_METHOD
Tensor Tensor::var(const std::vector<int64_t>& dims, int64_t correction, bool keepdim) const {
  return smelt::var(*this, dims, correction, keepdim);
}
Tensor Tensor::argmax(int64_t dim, bool keepdim) const { return smelt::argmax(*this, dim, keepdim); }
Tensor Tensor::cumsum(int64_t dim, bool exclusive, bool reverse) const {
  return smelt::cumsum(*this, dim, exclusive, reverse);
}
TopKResult Tensor::topk(int64_t k, int64_t dim, bool largest) const {
  return smelt::topk(*this, k, dim, largest);
}
Tensor Tensor::softmax(int64_t dim) const { return smelt::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return smelt::log_softmax(*this, dim); }

Tensor Tensor::matmul(const Tensor& other) const { return smelt::matmul(*this, other); }
Tensor Tensor::index_select(int64_t dim, const Tensor& index) const {
  return smelt::index_select(*this, dim, index);
}
Tensor Tensor::index_add(int64_t dim, const Tensor& index, const Tensor& source) const {
  return smelt::index_add(*this, dim, index, source);
}
Tensor Tensor::gather(int64_t dim, const Tensor& index) const {
  return smelt::gather(*this, dim, index);
}
Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& source) const {
  return smelt::scatter_add(*this, dim, index, source);
}

}  // namespace smelt
