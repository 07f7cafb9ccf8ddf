// The elementwise table: every scalar function of kernels/scalar.h that an elementwise op runs,
// with what a caller needs to call it without knowing it: how many tensor operands, how many
// bound parameters follow them (attribute values, e.g. leaky_relu's slope), which dtypes it
// accepts and what dtype it returns. One row per function; three consumers read it:
//   - the eager kernels (kernels/elementwise.h): a typed functor per row, inlined into the
//     vectorized loops;
//   - a fused-kernel interpreter: the same functors through `scalar_fn_visit`;
//   - a C++ emitter: `scalar_call_text` spells the call of the same function.
// How an op's attributes become a row and its parameters lives next to the ops
// (ops/elementwise_bind.h): e.g. gelu's `approximate` picks gelu_erf or gelu_tanh.
//
// Parameters are bound as doubles and converted to the operand type with scalar::cast (so an
// infinite clamp bound on int64 saturates instead of being undefined).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/scalar.h"
#include "smelt/dtype.h"

namespace smelt::kernels {

// Which operand dtypes a row accepts.
enum class ScalarDTypes : uint8_t {
  Floating,  // float32, float64
  Numeric,   // float32, float64, int64, int32
  All,       // every dtype
};

// The result's dtype.
enum class ScalarResult : uint8_t {
  SameAsOperand,  // the dtype of the (last) value operand
  Bool,           // comparisons
  CastTarget,     // cast: the target dtype bound in the call
};

// X(name, arity, params, dtypes, result): `name` is the function smelt::scalar::name, called as
// name(operands..., params...). where's first operand is the bool condition.
#define SMELT_SCALAR_FUNCTIONS(X)                  \
  X(neg, 1, 0, Numeric, SameAsOperand)             \
  X(exp, 1, 0, Floating, SameAsOperand)            \
  X(log, 1, 0, Floating, SameAsOperand)            \
  X(sqrt, 1, 0, Floating, SameAsOperand)           \
  X(rsqrt, 1, 0, Floating, SameAsOperand)          \
  X(abs, 1, 0, Numeric, SameAsOperand)             \
  X(sign, 1, 0, Numeric, SameAsOperand)            \
  X(erf, 1, 0, Floating, SameAsOperand)            \
  X(relu, 1, 0, Numeric, SameAsOperand)            \
  X(leaky_relu, 1, 1, Floating, SameAsOperand)     \
  X(sigmoid, 1, 0, Floating, SameAsOperand)        \
  X(tanh, 1, 0, Floating, SameAsOperand)           \
  X(gelu_erf, 1, 0, Floating, SameAsOperand)       \
  X(gelu_tanh, 1, 0, Floating, SameAsOperand)      \
  X(silu, 1, 0, Floating, SameAsOperand)           \
  X(softplus, 1, 2, Floating, SameAsOperand)       \
  X(clamp, 1, 2, Numeric, SameAsOperand)           \
  X(cast, 1, 0, All, CastTarget)                   \
  X(floor, 1, 0, Floating, SameAsOperand) \
  X(ceil, 1, 0, Floating, SameAsOperand) \
  X(round, 1, 0, Floating, SameAsOperand) \
  X(sin, 1, 0, Floating, SameAsOperand) \
  X(cos, 1, 0, Floating, SameAsOperand) \
  X(tan, 1, 0, Floating, SameAsOperand) \
  X(asin, 1, 0, Floating, SameAsOperand) \
  X(acos, 1, 0, Floating, SameAsOperand) \
  X(atan, 1, 0, Floating, SameAsOperand) \
  X(sinh, 1, 0, Floating, SameAsOperand) \
  X(cosh, 1, 0, Floating, SameAsOperand) \
  X(asinh, 1, 0, Floating, SameAsOperand) \
  X(acosh, 1, 0, Floating, SameAsOperand) \
  X(atanh, 1, 0, Floating, SameAsOperand) \
  X(add, 2, 0, Numeric, SameAsOperand)             \
  X(sub, 2, 0, Numeric, SameAsOperand)             \
  X(mul, 2, 0, Numeric, SameAsOperand)             \
  X(div, 2, 0, Numeric, SameAsOperand)             \
  X(pow, 2, 0, Floating, SameAsOperand)            \
  X(maximum, 2, 0, Numeric, SameAsOperand)         \
  X(minimum, 2, 0, Numeric, SameAsOperand)         \
  X(eq, 2, 0, All, Bool)                           \
  X(ne, 2, 0, All, Bool)                           \
  X(lt, 2, 0, All, Bool)                           \
  X(le, 2, 0, All, Bool)                           \
  X(gt, 2, 0, All, Bool)                           \
  X(ge, 2, 0, All, Bool)                           \
  X(where, 3, 0, All, SameAsOperand)

enum class ScalarFn : uint8_t {
#define SMELT_SCALAR_ENUM(name, arity, params, dtypes, result) name,
  SMELT_SCALAR_FUNCTIONS(SMELT_SCALAR_ENUM)
#undef SMELT_SCALAR_ENUM
};

#define SMELT_SCALAR_COUNT(name, arity, params, dtypes, result) +1
inline constexpr int kScalarFnCount = 0 SMELT_SCALAR_FUNCTIONS(SMELT_SCALAR_COUNT);
#undef SMELT_SCALAR_COUNT

inline constexpr int kMaxScalarParams = 2;

struct ScalarFnInfo {
  const char* name;  // the function in namespace smelt::scalar
  int arity;         // tensor operands
  int params;        // bound parameters after the operands
  ScalarDTypes dtypes;
  ScalarResult result;
};

inline constexpr ScalarFnInfo kScalarFnInfo[] = {
#define SMELT_SCALAR_INFO(name, arity, params, dtypes, result) \
  {#name, arity, params, ScalarDTypes::dtypes, ScalarResult::result},
    SMELT_SCALAR_FUNCTIONS(SMELT_SCALAR_INFO)
#undef SMELT_SCALAR_INFO
};
static_assert(sizeof(kScalarFnInfo) / sizeof(kScalarFnInfo[0]) == kScalarFnCount);

inline const ScalarFnInfo& scalar_fn_info(ScalarFn fn) { return kScalarFnInfo[int(fn)]; }

// One bound call: the function, its parameters (as doubles) and, for cast, the target dtype.
struct ScalarCall {
  ScalarFn fn;
  double params[kMaxScalarParams] = {0, 0};
  DType cast_to = DType::Float32;
};

// A functor per row, so that loops inline the scalar function: fn::add{}(a, b) == scalar::add(a, b).
namespace fn {
#define SMELT_SCALAR_FUNCTOR(name, arity, params, dtypes, result)              \
  struct name {                                                                 \
    template <class... Args>                                                    \
    auto operator()(Args... args) const { return ::smelt::scalar::name(args...); } \
  };
SMELT_SCALAR_FUNCTIONS(SMELT_SCALAR_FUNCTOR)
#undef SMELT_SCALAR_FUNCTOR
}  // namespace fn

// Calls visit(fn::<row>{}, std::integral_constant<ScalarFn, row>{}) for the row of `f`: a
// generic caller (the eager kernel, an interpreter) instantiates its loop once per row.
template <class Visit>
decltype(auto) scalar_fn_visit(ScalarFn f, Visit&& visit) {
  switch (f) {
#define SMELT_SCALAR_VISIT(name, arity, params, dtypes, result) \
  case ScalarFn::name:                                           \
    return visit(fn::name{}, std::integral_constant<ScalarFn, ScalarFn::name>{});
    SMELT_SCALAR_FUNCTIONS(SMELT_SCALAR_VISIT)
#undef SMELT_SCALAR_VISIT
  }
  return visit(fn::neg{}, std::integral_constant<ScalarFn, ScalarFn::neg>{});  // unreachable
}

// Calls f(T{}) for the C++ type T of `dtype`, instantiating only the types `kAccepts` allows (so
// that, e.g., exp is never compiled for int64); returns false, calling nothing, for a dtype
// outside `kAccepts`. The eager loops and the kernel interpreter both dispatch through it.
template <ScalarDTypes kAccepts, class F>
bool scalar_dtypes_visit(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Float32: f(float{}); return true;
    case DType::Float64: f(double{}); return true;
    case DType::Int64:
      if constexpr (kAccepts != ScalarDTypes::Floating) { f(int64_t{}); return true; }
      break;
    case DType::Int32:
      if constexpr (kAccepts != ScalarDTypes::Floating) { f(int32_t{}); return true; }
      break;
    case DType::Bool:
      if constexpr (kAccepts == ScalarDTypes::All) { f(bool{}); return true; }
      break;
    case DType::UInt8:
      if constexpr (kAccepts == ScalarDTypes::All) { f(uint8_t{}); return true; }
      break;
    case DType::Int8:
      if constexpr (kAccepts == ScalarDTypes::All) { f(int8_t{}); return true; }
      break;
  }
  return false;
}

// Whether `fn` accepts operands of `dtype` (where: its value operands).
bool scalar_fn_accepts(ScalarFn fn, DType dtype);
// The result dtype of `call` on operands of `dtype`.
DType scalar_call_result(const ScalarCall& call, DType dtype);

// C++ source for `call` applied to operand expressions `args` of C++ type matching `dtype`,
// e.g. "smelt::scalar::leaky_relu(x, float(0x1.47ae147ae147bp-7))"; parameters print exactly
// (hex floats, through scalar::cast as the eager loops bind them).
std::string scalar_call_text(const ScalarCall& call, DType dtype, const std::vector<std::string>& args,
                             const std::vector<std::string>& params = {});

// The C++ type of `dtype` in generated source: "float", "double", "int64_t", "int32_t", "uint8_t",
// "bool".
const char* dtype_cpp_type(DType dtype);

}  // namespace smelt::kernels
