// Binary and ternary elementwise ops with NumPy broadcasting, and the arithmetic operators. The
// kernels are the elementwise table's (ops/elementwise_bind.h).
#include <atomic>

#include "kernels/loops.h"
#include "ops/elementwise_bind.h"
#include "ops/op_util.h"

namespace smelt {

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* where) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    SMELT_CHECK(da == db || da == 1 || db == 1)
        << where << ": shapes " << shape_str(a) << " and " << shape_str(b)
        << " cannot be broadcast together (dim " << i << ": " << da << " vs " << db
        << "); sizes must match or one of them must be 1";
    out[i] = da == 1 ? db : da;
  }
  return out;
}

namespace ops {
namespace {

// Integer division truncates toward zero (C semantics, ONNX Div) and INT64_MIN / -1 (INT32_MIN /
// -1) wraps (scalar::div);
// an integer divisor of zero is refused here with a clear error (PyTorch raises too).
void div_kernel(const std::vector<Tensor>& in, const Attrs& attrs, const std::vector<Tensor>& out) {
  if (dtype_is_signed_integer(in[1].dtype())) {
    std::atomic<bool> zero{false};
    SMELT_DISPATCH_NUMERIC(in[1].dtype(), "div", [&] {
      kernels::ElementwiseLoop<1>({&in[1]}).run([&](char** p, const int64_t* s, int64_t n) {
        for (int64_t i = 0; i < n; ++i) {
          if (*reinterpret_cast<const scalar_t*>(p[0] + i * s[0]) == 0) zero = true;
        }
      });
    });
    SMELT_CHECK(!zero) << "div: integer division by zero (the divisor " << shape_str(in[1].shape())
                       << " holds a 0); cast to float32 for IEEE division (inf/nan)";
  }
  elementwise_kernel(OpId::div, in, attrs, out);
}

// ---- gradient rules (results may have the broadcast shape; the engine sums them down)

std::vector<Tensor> add_grad(const GradContext& c) { return {c.grads[0], c.grads[0]}; }
std::vector<Tensor> sub_grad(const GradContext& c) {
  return {c.grads[0], c.needs(1) ? -c.grads[0] : Tensor()};
}
std::vector<Tensor> mul_grad(const GradContext& c) {
  const Tensor& g = c.grads[0];
  return {c.needs(0) ? g * c.inputs[1] : Tensor(), c.needs(1) ? g * c.inputs[0] : Tensor()};
}
// d a/b = 1/b, -a/b^2
std::vector<Tensor> div_grad(const GradContext& c) {
  const Tensor &g = c.grads[0], &a = c.inputs[0], &b = c.inputs[1];
  return {c.needs(0) ? g / b : Tensor(), c.needs(1) ? -(g * a) / (b * b) : Tensor()};
}
// d a^b / da = b a^(b-1), 0 where b == 0 (a^0 is constant: without the mask a == 0 gives
// 0 * inf = NaN). The exponent inside is made 1 where b == 0, so that the rule's own gradient
// (second order) sees a^0 and is masked the same way instead of meeting 0 * a^-2 = NaN.
// d a^b / db = a^b log(a), 0 where a == 0 and b >= 0 (the limit; as PyTorch), NaN for a < 0
// (a^b is not differentiable in b there; as PyTorch).
std::vector<Tensor> pow_grad(const GradContext& c) {
  const Tensor &g = c.grads[0], &a = c.inputs[0], &b = c.inputs[1];
  Tensor ga, gb;
  if (c.needs(0)) {
    Tensor zero = zero_like_scalar(b);
    Tensor b_is_zero = eq(b, zero);
    Tensor safe_b = where(b_is_zero, scalar_like(b, 1.0), b);
    ga = where(b_is_zero, zero_like_scalar(g), g * b * pow(a, safe_b - 1.0));
  }
  if (c.needs(1)) {
    Tensor a_is_zero = eq(a, zero_like_scalar(a));
    Tensor limit_zero = where(a_is_zero, ge(b, zero_like_scalar(b)), a_is_zero);  // a == 0 and b >= 0
    Tensor safe_a = where(limit_zero, scalar_like(a, 1.0), a);
    gb = where(limit_zero, zero_like_scalar(g), g * pow(safe_a, b) * log(safe_a));
  }
  return {ga, gb};
}
// The larger side gets the gradient; ties split it in half (as PyTorch).
std::vector<Tensor> select_grad(const GradContext& c, bool is_max) {
  const Tensor &g = c.grads[0], &a = c.inputs[0], &b = c.inputs[1];
  Tensor zero = zero_like_scalar(g);
  Tensor a_wins = is_max ? gt(a, b) : lt(a, b);
  Tensor tie = eq(a, b);
  Tensor half = g * 0.5;
  Tensor ga = where(a_wins, g, where(tie, half, zero));
  Tensor gb = where(a_wins, zero, where(tie, half, g));
  return {ga, gb};
}
std::vector<Tensor> maximum_grad(const GradContext& c) { return select_grad(c, true); }
std::vector<Tensor> minimum_grad(const GradContext& c) { return select_grad(c, false); }
std::vector<Tensor> where_grad(const GradContext& c) {
  const Tensor &cond = c.inputs[0], &g = c.grads[0];
  Tensor zero = zero_like_scalar(g);
  return {Tensor(), c.needs(1) ? where(cond, g, zero) : Tensor(),
          c.needs(2) ? where(cond, zero, g) : Tensor()};
}

}  // namespace

SMELT_OP_IMPL(add) = {table_shape<OpId::add>, table_kernel<OpId::add>, add_grad, kSaveNothing};
SMELT_OP_IMPL(sub) = {table_shape<OpId::sub>, table_kernel<OpId::sub>, sub_grad, kSaveNothing};
SMELT_OP_IMPL(mul) = {table_shape<OpId::mul>, table_kernel<OpId::mul>, mul_grad, kSaveInputs};
SMELT_OP_IMPL(div) = {table_shape<OpId::div>, div_kernel, div_grad, kSaveInputs};
SMELT_OP_IMPL(pow) = {table_shape<OpId::pow>, table_kernel<OpId::pow>, pow_grad, kSaveInputs};
SMELT_OP_IMPL(maximum) = {table_shape<OpId::maximum>, table_kernel<OpId::maximum>, maximum_grad, kSaveInputs};
SMELT_OP_IMPL(minimum) = {table_shape<OpId::minimum>, table_kernel<OpId::minimum>, minimum_grad, kSaveInputs};
SMELT_OP_IMPL(eq) = {table_shape<OpId::eq>, table_kernel<OpId::eq>, nullptr, kSaveNothing};
SMELT_OP_IMPL(ne) = {table_shape<OpId::ne>, table_kernel<OpId::ne>, nullptr, kSaveNothing};
SMELT_OP_IMPL(lt) = {table_shape<OpId::lt>, table_kernel<OpId::lt>, nullptr, kSaveNothing};
SMELT_OP_IMPL(le) = {table_shape<OpId::le>, table_kernel<OpId::le>, nullptr, kSaveNothing};
SMELT_OP_IMPL(gt) = {table_shape<OpId::gt>, table_kernel<OpId::gt>, nullptr, kSaveNothing};
SMELT_OP_IMPL(ge) = {table_shape<OpId::ge>, table_kernel<OpId::ge>, nullptr, kSaveNothing};
SMELT_OP_IMPL(where) = {table_shape<OpId::where>, table_kernel<OpId::where>, where_grad, kSaveInputs};

}  // namespace ops

// ---- public API

using ops::call1;
using ops::OpId;

Tensor add(const Tensor& a, const Tensor& b) { return call1(OpId::add, {a, b}); }
Tensor sub(const Tensor& a, const Tensor& b) { return call1(OpId::sub, {a, b}); }
Tensor mul(const Tensor& a, const Tensor& b) { return call1(OpId::mul, {a, b}); }
Tensor div(const Tensor& a, const Tensor& b) { return call1(OpId::div, {a, b}); }
Tensor pow(const Tensor& a, const Tensor& b) { return call1(OpId::pow, {a, b}); }
Tensor maximum(const Tensor& a, const Tensor& b) { return call1(OpId::maximum, {a, b}); }
Tensor minimum(const Tensor& a, const Tensor& b) { return call1(OpId::minimum, {a, b}); }
Tensor eq(const Tensor& a, const Tensor& b) { return call1(OpId::eq, {a, b}); }
Tensor ne(const Tensor& a, const Tensor& b) { return call1(OpId::ne, {a, b}); }
Tensor lt(const Tensor& a, const Tensor& b) { return call1(OpId::lt, {a, b}); }
Tensor le(const Tensor& a, const Tensor& b) { return call1(OpId::le, {a, b}); }
Tensor gt(const Tensor& a, const Tensor& b) { return call1(OpId::gt, {a, b}); }
Tensor ge(const Tensor& a, const Tensor& b) { return call1(OpId::ge, {a, b}); }
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return call1(OpId::where, {cond, a, b});
}

}  // namespace smelt
