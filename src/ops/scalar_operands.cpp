// Numbers as operands: PyTorch's promotion of (tensor, number), the number overloads of the binary
// ops, and the arithmetic and comparison operators.
#include "smelt/creation.h"
#include "smelt/ops.h"

namespace smelt {

// Categories bool < integer < floating: a number of a higher category than the tensor lifts the
// result to that category's default dtype (int64, float32); otherwise the tensor's dtype wins
// (float64 + 1.5 stays float64, uint8 + 1 stays uint8), as torch.result_type.
DType promote_with_scalar(DType tensor, const Scalar& number) {
  switch (number.kind()) {
    case Scalar::Kind::Float: return dtype_is_floating(tensor) ? tensor : DType::Float32;
    case Scalar::Kind::Int: return tensor == DType::Bool ? DType::Int64 : tensor;
    case Scalar::Kind::Bool: return tensor;
  }
  return tensor;
}

Tensor scalar_like(const Tensor& like, const Scalar& value) {
  return scalar_tensor(value, like.dtype());
}

namespace {

// The tensor (cast when promotion changes its dtype) and the number as a 0-dim tensor of the
// same dtype, ready for the tensor-tensor op.
struct Operands {
  Tensor tensor, number;
};
Operands promote(const Tensor& t, const Scalar& s) {
  SMELT_CHECK(t.defined()) << "a number was combined with an undefined (default-constructed) tensor";
  const DType d = promote_with_scalar(t.dtype(), s);
  return {d == t.dtype() ? t : cast(t, d), scalar_tensor(s, d)};
}

}  // namespace

#define SMELT_SCALAR_OVERLOADS(NAME)                  \
  Tensor NAME(const Tensor& a, const Scalar& b) {     \
    Operands o = promote(a, b);                       \
    return NAME(o.tensor, o.number);                  \
  }                                                   \
  Tensor NAME(const Scalar& a, const Tensor& b) {     \
    Operands o = promote(b, a);                       \
    return NAME(o.number, o.tensor);                  \
  }
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

Tensor operator-(const Tensor& a) { return neg(a); }

#define SMELT_BINARY_OPERATOR(OP, NAME)                                                   \
  Tensor operator OP(const Tensor& a, const Tensor& b) { return NAME(a, b); }             \
  Tensor operator OP(const Tensor& a, const Scalar& b) { return NAME(a, b); }             \
  Tensor operator OP(const Scalar& a, const Tensor& b) { return NAME(a, b); }
SMELT_BINARY_OPERATOR(+, add)
SMELT_BINARY_OPERATOR(-, sub)
SMELT_BINARY_OPERATOR(*, mul)
SMELT_BINARY_OPERATOR(/, div)
SMELT_BINARY_OPERATOR(==, eq)
SMELT_BINARY_OPERATOR(!=, ne)
SMELT_BINARY_OPERATOR(<, lt)
SMELT_BINARY_OPERATOR(<=, le)
SMELT_BINARY_OPERATOR(>, gt)
SMELT_BINARY_OPERATOR(>=, ge)
#undef SMELT_BINARY_OPERATOR

}  // namespace smelt
