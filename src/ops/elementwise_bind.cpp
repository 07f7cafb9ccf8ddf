#include "ops/elementwise_bind.h"

#include <cmath>
#include <cstring>

#include "kernels/elementwise.h"
#include "ops/op_util.h"

namespace smelt::ops {

using kernels::ScalarCall;
using kernels::ScalarFn;

void check_clamp_bounds(const Attrs& attrs, DType dtype) {
  for (const char* side : {"min", "max"}) {
    if (!attrs.has(side)) continue;
    const double v = attrs.get_float(side);
    if (dtype_is_floating(dtype)) continue;  // any double binds: ±inf and NaN included
    // Integers have no type promotion here (PyTorch would return float): refuse what the dtype
    // cannot hold rather than round it. A bound beyond the range on the side where it changes
    // nothing (min = -inf, max = 1e30) saturates to the extreme, which clamps nothing either.
    const bool is_min = side[1] == 'i';
    const bool narrow = dtype == DType::Int32;
    const double limit = narrow ? 2147483648.0 : 9223372036854775808.0;
    SMELT_CHECK(!std::isnan(v)) << "clamp: " << side << " is NaN; an " << dtype_name(dtype)
                                << " tensor needs an integral bound (or cast to float first)";
    SMELT_CHECK(std::isinf(v) || v == std::trunc(v))
        << "clamp: " << side << " = " << v << " is not an integer; an " << dtype_name(dtype)
        << " tensor needs integral bounds (cast it to float to clamp at " << v << ")";
    const bool beyond_above = v >= limit, beyond_below = v < -limit;
    SMELT_CHECK(is_min ? !beyond_above : !beyond_below)
        << "clamp: " << side << " = " << v << " is beyond the range of " << dtype_name(dtype)
        << " in the direction it clamps; valid: " << (narrow ? "[-2^31, 2^31)" : "[-2^63, 2^63)");
  }
}

namespace {

// The table's rows without parameters that an op of the same name computes as they are (add,
// exp, where, ...), found by name once: the ops with attributes bind them below.
std::optional<ScalarFn> same_name_row(OpId op) {
  static const std::vector<std::optional<ScalarFn>> rows = [] {
    std::vector<std::optional<ScalarFn>> r(static_cast<size_t>(kOpCount));
    for (int f = 0; f < kernels::kScalarFnCount; ++f) {
      const kernels::ScalarFnInfo& info = kernels::kScalarFnInfo[f];
      if (info.params != 0 || info.result == kernels::ScalarResult::CastTarget) continue;
      for (int o = 0; o < kOpCount; ++o) {
        if (op_info(OpId(o)).kind == OpKind::Elementwise &&
            std::strcmp(op_name(OpId(o)), info.name) == 0)
          r[size_t(o)] = ScalarFn(f);
      }
    }
    return r;
  }();
  return int(op) < kOpCount ? rows[size_t(op)] : std::nullopt;
}

}  // namespace

std::optional<ScalarCall> elementwise_scalar_call(OpId op, const Attrs& attrs, DType dtype) {
  if (std::optional<ScalarFn> row = same_name_row(op)) return ScalarCall{*row};
  switch (op) {
    // leaky_relu(x, negative_slope)
    case OpId::leaky_relu: return ScalarCall{ScalarFn::leaky_relu, {attrs.get_float("negative_slope")}};
    // approximate = 1 selects the tanh form
    case OpId::gelu:
      return ScalarCall{get_int_in(attrs, "gelu", "approximate", 0, 1) == 1 ? ScalarFn::gelu_tanh : ScalarFn::gelu_erf};
    // softplus(x, beta, threshold)
    case OpId::softplus:
      return ScalarCall{ScalarFn::softplus, {attrs.get_float("beta"), attrs.get_float("threshold")}};
    // clamp(x, min, max); an absent bound is the infinity that clamps nothing
    case OpId::clamp:
      check_clamp_bounds(attrs, dtype);
      return ScalarCall{ScalarFn::clamp, {attrs.get_float("min", -INFINITY), attrs.get_float("max", INFINITY)}};
    // cast<dtype>(x)
    case OpId::cast: {
      ScalarCall call{ScalarFn::cast};
      call.cast_to = attrs.get_dtype("dtype");
      return call;
    }
    default: return std::nullopt;
  }
}

std::vector<TensorMeta> elementwise_shape(OpId op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const char* name = op_name(op);
  const TensorMeta& value = in.back();  // (where's values: its last two operands)
  if (in.size() == 3) check_dtype(in[0], DType::Bool, name, "condition");
  if (in.size() >= 2) check_same_dtype(in[in.size() - 2], value, name);
  const std::optional<ScalarCall> call = elementwise_scalar_call(op, attrs, value.dtype);
  SMELT_INTERNAL_CHECK(call) << name << " has no row in the elementwise table";
  const kernels::ScalarFnInfo& info = kernels::scalar_fn_info(call->fn);
  const char* what = in.size() == 1 ? "input" : "operands";
  if (info.dtypes == kernels::ScalarDTypes::Floating) check_floating(value, name, what);
  if (info.dtypes == kernels::ScalarDTypes::Numeric) check_numeric(value, name, what);
  Shape shape = in[0].shape;
  for (size_t i = 1; i < in.size(); ++i) shape = broadcast_shapes(shape, in[i].shape, name);
  const DType result = info.result == kernels::ScalarResult::Bool         ? DType::Bool
                       : info.result == kernels::ScalarResult::CastTarget ? call->cast_to
                                                                          : value.dtype;
  return {{shape, result}};
}

void elementwise_kernel(OpId op, const std::vector<Tensor>& in, const Attrs& attrs,
                        const std::vector<Tensor>& out) {
  const DType value_dtype = in[in.size() == 3 ? 1 : 0].dtype();
  std::optional<ScalarCall> call = elementwise_scalar_call(op, attrs, value_dtype);
  SMELT_INTERNAL_CHECK(call) << op_name(op) << " has no row in the elementwise table";
  kernels::elementwise_forward(*call, out[0], in);
}

}  // namespace smelt::ops
