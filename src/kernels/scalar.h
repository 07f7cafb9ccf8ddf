// The scalar definition of every elementwise op: one inline function each, shared by the eager
// kernels, the fused-kernel interpreter and generated C++ (which #includes this header), so the
// math is defined exactly once. Self-contained on purpose: only standard headers, no intrinsics,
// so any C++20 compiler can build the generated kernels. kernels/scalar_table.h lists these
// functions (arity, bound parameters, dtypes) for the code that calls them generically.
//
// Every function is defined for every input of the dtypes it accepts; nothing here is undefined
// behaviour, so every backend computes the same bits:
// - int64 and int32 add, sub, mul, neg, abs wrap around in two's complement (done in the
//   unsigned type, where C++ defines wrapping): INT64_MAX + 1 = INT64_MIN, abs(INT64_MIN) =
//   neg(INT64_MIN) = INT64_MIN (likewise INT32_*), as PyTorch and NumPy give in practice.
// - integer div truncates toward zero (C semantics, PyTorch's rounding_mode="trunc", ONNX Div);
//   INT64_MIN / -1 wraps to INT64_MIN instead of trapping (SIGFPE), INT32_MIN / -1 likewise. x / 0 is 0 here, but the eager
//   div op refuses a zero integer divisor with an error before it gets here.
// - cast: see `cast` below (saturating float -> integer, NaN -> 0).
// - clamp: bounds are real values, infinities included; an absent bound is the infinity that
//   does not clamp. How an int64 tensor binds float bounds: ops/elementwise_bind.cpp.
//
// float64 uses std:: functions (float64 is for gradient checks: accuracy first). float32 has its
// own branch-free transcendental functions (kernels/scalar_f32.h, namespace f32) because GCC does not vectorize
// std::exp & co. without -ffast-math: these are straight-line float/int arithmetic, bit casts
// through std::memcpy and selects (f32::select, bit masks: GCC 12 keeps control flow for some `?:`
// on values, and erf and gelu_erf ran scalar while written that way), so every loop over them
// vectorizes under -march=native. Polynomials and reductions use std::fma (f32::fma): exactly
// rounded, so every backend gets the same bits, and one instruction under -march=native (a
// build without FMA in its target, SMELT_NATIVE=OFF, calls the C library's fmaf instead: same
// bits, much slower). gelu_erf, silu and gelu_tanh scale each branch only as far as it needs, so
// that large inputs compute no subnormal that is then discarded (a subnormal result costs a
// microcode assist on AMD Zen and others: gelu_erf took 3.1 instead of 1.7 ns per element for
// inputs of magnitude ~10 or more).
//
// Max error against the float64 std:: result rounded to float, in ulps (the ulp of a subnormal
// result is the smallest subnormal), measured exhaustively over all finite float32 inputs in the
// -march=native build (bench/scalar_ulp_sweep.cpp); tests/kernels/scalar_math_test.cpp re-checks
// a strided sweep and the special values:
//   exp 1   log 1   tanh 1   erf 1   sigmoid 3   silu 4   gelu (erf) 5   gelu (tanh) 4
//   softplus 3
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/scalar_f32.h"

namespace smelt::scalar {

// The C library's functions, called by their C names: for float, ::sinf rather than std::sin's
// float overload, which libstdc++ writes as __builtin_sinf. Generated kernels are compiled with
// -fno-builtin-<name> (codegen/compiler.cpp) so that a value the compiler proves constant is not
// folded at compile time with correct rounding where the eager kernels call the library at run
// time; an explicit __builtin_ call would still be folded. Other types go to std:: as before.
namespace libm {
#define SMELT_LIBM_UNARY(name)                                      \
  template <class T> inline T name(T x) {                           \
    if constexpr (std::is_same_v<T, float>) return ::name##f(x);    \
    else if constexpr (std::is_same_v<T, double>) return ::name(x); \
    else return std::name(x);                                       \
  }
// The list, once: these wrappers and the compiler's -fno-builtin flags (kLibmFunctions).
#define SMELT_LIBM_UNARY_FUNCTIONS(X) \
  X(exp) X(log) X(log1p) X(erf) X(erfc) X(tanh) X(sin) X(cos) X(tan) X(asin) X(acos) X(atan) X(sinh) \
  X(cosh) X(asinh) X(acosh) X(atanh)
SMELT_LIBM_UNARY_FUNCTIONS(SMELT_LIBM_UNARY)
#undef SMELT_LIBM_UNARY
template <class T> inline T pow(T a, T b) {
  if constexpr (std::is_same_v<T, float>) return ::powf(a, b);
  else if constexpr (std::is_same_v<T, double>) return ::pow(a, b);
  else return std::pow(a, b);
}
#define SMELT_LIBM_NAME(name) #name,
// Every C library function above by its double name (the float one adds "f").
inline constexpr const char* kLibmFunctions[] = {"pow", SMELT_LIBM_UNARY_FUNCTIONS(SMELT_LIBM_NAME)};
#undef SMELT_LIBM_NAME
}  // namespace libm

namespace detail {
// Signed integer arithmetic through the unsigned type: wraps (C++ defines unsigned overflow and, since C++20, the
// conversion back), where signed overflow would be undefined.
template <class T>
inline constexpr bool kWrapsInUnsigned = std::is_integral_v<T> && std::is_signed_v<T>;
template <class T>
using Unsigned = std::make_unsigned_t<T>;
}  // namespace detail

template <class T> inline T neg(T x) {
  if constexpr (detail::kWrapsInUnsigned<T>) return T(detail::Unsigned<T>(0) - detail::Unsigned<T>(x));
  else return -x;
}
template <class T> inline T exp(T x) { return libm::exp(x); }
template <> inline float exp<float>(float x) { return f32::exp(x); }
// exp(x) for x <= 0 or NaN (softmax's terms): the same bits as exp; float takes a shorter path.
template <class T> inline T exp_nonpositive(T x) { return exp(x); }
template <> inline float exp_nonpositive<float>(float x) { return f32::exp_nonpositive(x); }
template <class T> inline T log(T x) { return libm::log(x); }
template <> inline float log<float>(float x) { return f32::log(x); }
template <class T> inline T sqrt(T x) { return std::sqrt(x); }
template <class T> inline T rsqrt(T x) { return T(1) / std::sqrt(x); }
// Floats clear the sign bit (abs(-0) = +0 and abs(-NaN) = NaN, as PyTorch); integers wrap.
template <class T> inline T abs(T x) {
  if constexpr (std::is_floating_point_v<T>) return std::fabs(x);
  else return x < T(0) ? neg(x) : x;
}
// sign(NaN) is NaN (as PyTorch); x != x is false for integers, so they are unaffected.
template <class T> inline T sign(T x) { return x != x ? x : T((T(0) < x) - (x < T(0))); }
template <class T> inline T erf(T x) { return libm::erf(x); }
template <> inline float erf<float>(float x) { return f32::erf(x); }
// NaN passes through (as PyTorch): written as `x < 0 ? 0 : x`, not `x > 0 ? x : 0`.
template <class T> inline T relu(T x) { return x < T(0) ? T(0) : x; }
template <class T> inline T leaky_relu(T x, T slope) { return x < T(0) ? x * slope : x; }
// Written so that neither branch overflows: exp of a large positive number never happens.
template <class T> inline T sigmoid(T x) {
  if (x >= T(0)) return T(1) / (T(1) + libm::exp(-x));
  T e = libm::exp(x);
  return e / (T(1) + e);
}
template <> inline float sigmoid<float>(float x) { return f32::sigmoid(x); }
template <class T> inline T tanh(T x) { return libm::tanh(x); }
template <> inline float tanh<float>(float x) { return f32::tanh(x); }
// gelu(x) = x * Phi(x), Phi the standard normal CDF; through erfc below 0 (no cancellation)
template <class T> inline T gelu_erf(T x) {
  const T z = x * T(M_SQRT1_2);
  return x < T(0) ? T(0.5) * x * libm::erfc(-z) : T(0.5) * x * (T(1) + libm::erf(z));
}
template <> inline float gelu_erf<float>(float x) { return f32::gelu_erf(x); }
// the tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
template <class T> inline T gelu_tanh(T x) {
  const T k = T(0.7978845608028654);  // sqrt(2 / pi)
  return T(0.5) * x * (T(1) + libm::tanh(k * (x + T(0.044715) * x * x * x)));
}
template <> inline float gelu_tanh<float>(float x) { return f32::gelu_tanh(x); }
template <class T> inline T silu(T x) { return x * sigmoid(x); }
// Rounding; round is half to even (std::nearbyint in the default rounding mode, as PyTorch and
// ONNX). NaN and infinities pass through.
template <class T> inline T floor(T x) { return std::floor(x); }
template <class T> inline T ceil(T x) { return std::ceil(x); }
template <class T> inline T round(T x) { return std::nearbyint(x); }
// Trigonometric and hyperbolic functions and their inverses: the C library's.
template <class T> inline T sin(T x) { return libm::sin(x); }
template <class T> inline T cos(T x) { return libm::cos(x); }
template <class T> inline T tan(T x) { return libm::tan(x); }
template <class T> inline T asin(T x) { return libm::asin(x); }
template <class T> inline T acos(T x) { return libm::acos(x); }
template <class T> inline T atan(T x) { return libm::atan(x); }
template <class T> inline T sinh(T x) { return libm::sinh(x); }
template <class T> inline T cosh(T x) { return libm::cosh(x); }
template <class T> inline T asinh(T x) { return libm::asinh(x); }
template <class T> inline T acosh(T x) { return libm::acosh(x); }
template <class T> inline T atanh(T x) { return libm::atanh(x); }
template <> inline float silu<float>(float x) { return f32::silu(x); }
// softplus(x) = log(1 + exp(beta x)) / beta, linear above `threshold` (as PyTorch)
template <class T> inline T softplus(T x, T beta, T threshold) {
  T bx = beta * x;
  return bx > threshold ? x : libm::log1p(libm::exp(bx)) / beta;
}
template <> inline float softplus<float>(float x, float beta, float threshold) {
  return f32::softplus(x, beta, threshold);
}
// min(max(x, lo), hi): with lo > hi everything becomes hi (as PyTorch); a NaN x or a NaN bound
// gives NaN (as PyTorch). lo = -inf / hi = +inf leave that side unclamped.
template <class T> inline T clamp(T x, T lo, T hi) {
  T y = x < lo || lo != lo ? lo : x;
  return y > hi || hi != hi ? hi : y;
}

template <class T> inline T add(T a, T b) {
  if constexpr (detail::kWrapsInUnsigned<T>) return T(detail::Unsigned<T>(a) + detail::Unsigned<T>(b));
  else return a + b;
}
template <class T> inline T sub(T a, T b) {
  if constexpr (detail::kWrapsInUnsigned<T>) return T(detail::Unsigned<T>(a) - detail::Unsigned<T>(b));
  else return a - b;
}
template <class T> inline T mul(T a, T b) {
  if constexpr (detail::kWrapsInUnsigned<T>) return T(detail::Unsigned<T>(a) * detail::Unsigned<T>(b));
  else return a * b;
}
// Integers: truncation toward zero; the two cases C leaves undefined are defined (see the top).
template <class T> inline T div(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == T(0)) return T(0);
    if (b == T(-1)) return neg(a);
    return a / b;
  } else {
    return a / b;
  }
}
// x^2 and x^1 are the multiplication and the value they are (x^2 correctly rounded, as PyTorch's
// pow by 2 squares), the special values included (NaN, inf and -0 give pow's): a constant
// exponent of 2 compiles to a vectorized multiply instead of a libm call per element (an
// attention block's squared loss ran its GEMM epilogue at half speed).
template <class T> inline T pow(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (b == T(2)) return a * a;
    if (b == T(1)) return a;
  }
  return libm::pow(a, b);
}
// The identity of a maximum (kMax) or minimum reduction over T: -inf / +inf, or T's lowest /
// highest value for a type without infinities. One owner for the eager reductions
// (kernels/row_reduce.h), the fused-kernel interpreter and generated kernels.
template <class T, bool kMax> constexpr T extreme_identity() {
  if constexpr (std::numeric_limits<T>::has_infinity) {
    return kMax ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
  } else {
    return kMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  }
}

// NaN-propagating, as PyTorch's maximum/minimum. Of -0 and +0, maximum gives +0 and minimum -0
// in either order (IEEE 754-2019): the op table declares both commutative, and canonicalize / cse
// swap their operands on that promise (maximum(-0, +0) returning its second operand broke it).
template <class T> inline T maximum(T a, T b) {
  return (a != a || a > b || (a == b && !std::signbit(a))) ? a : b;
}
template <class T> inline T minimum(T a, T b) {
  return (a != a || a < b || (a == b && std::signbit(a))) ? a : b;
}

template <class T> inline bool eq(T a, T b) { return a == b; }
template <class T> inline bool ne(T a, T b) { return a != b; }
template <class T> inline bool lt(T a, T b) { return a < b; }
template <class T> inline bool le(T a, T b) { return a <= b; }
template <class T> inline bool gt(T a, T b) { return a > b; }
template <class T> inline bool ge(T a, T b) { return a >= b; }
template <class T> inline T where(bool cond, T a, T b) { return cond ? a : b; }

// Conversion between any two of float, double, int64_t, int32_t, uint8_t, int8_t, bool, defined for every
// input (ONNX's Cast leaves NaN, infinities and out-of-range values implementation-defined):
// - to bool: x != 0 (NaN -> true), as PyTorch.
// - float -> int64 / int32: truncation toward zero (-0.0 and -0.9 -> 0), saturating: NaN -> 0,
//   values >= 2^63 (2^31; +inf included) -> the type's max, values < -2^63 (-2^31; -inf
//   included) -> its min. C++ leaves those undefined and PyTorch's results depend on the CPU
//   (x86 gives INT64_MIN / INT32_MIN for all of them), so smelt saturates like ARM, Rust's `as`
//   and Java.
// - float -> uint8 / int8: the float -> int64 conversion above, then modulo 256 as int64 ->
//   uint8 / int8; this matches PyTorch wherever PyTorch's result does not depend on the CPU
//   (-1.5 -> 255, 300 -> 44; to int8: 200 -> -56). (Quantization saturates instead: the
//   quantize_linear op, not cast.)
// - integer -> narrower integer: modulo 2^bits, two's complement (int64 -> int32: 2^31 ->
//   INT32_MIN; -> uint8: -1 -> 255), as PyTorch and NumPy. int32 -> int64: exact.
// - integer -> float: round to nearest (int32 -> double is exact).
// - double -> float: round to nearest; beyond float's range -> ±inf (IEEE 754, which GCC and
//   Clang follow; the C++ standard alone leaves it undefined).
template <class To, class From> inline To cast(From x) {
  if constexpr (std::is_same_v<To, bool>) {
    return x != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    // int64 and int32 saturate at their own range; uint8 and int8 go through int64 and wrap.
    // Whether a loop holding this vectorizes is GCC's if-conversion's call (with trapping math a
    // float -> int conversion may raise a flag, so GCC will not run it unconditionally): this
    // form vectorizes the generated quantizing kernels (a requantize after a clamp, a quantized
    // residual add). Measured against it, a form without branches (the conversion of a clamped
    // value, the saturation added by a mask) vectorized float -> int -> float but left both of
    // those scalar (3.5 ns per element instead of 0.9); -fno-trapping-math is no way out either:
    // GCC then folds float(int(x)) into trunc(x), which keeps -0 where this gives +0.
    // tests/kernels/scalar_cast_test.cpp checks the values.
    using Wide = std::conditional_t<std::is_signed_v<To> && sizeof(To) >= 4, To, int64_t>;
    constexpr From kLimit = -From(std::numeric_limits<Wide>::min());  // 2^63 or 2^31: exact
    Wide wide = x != x          ? Wide(0)
                : x >= kLimit   ? std::numeric_limits<Wide>::max()
                : x < -kLimit   ? std::numeric_limits<Wide>::min()
                                : Wide(x);
    return To(wide);
  } else {
    return To(x);
  }
}

// ---- The online sum of exponentials (softmax's denominator in one pass over a row) ----------
// Shared by generated row kernels (codegen, ReduceOp::SumExp) and the kernel interpreter, so that
// both fold alike. A row is visited in blocks; per block: its maximum ignoring NaN
// (sumexp_block_max, folded element by element), then sumexp_rescale, then the block's terms
// exp(v - shift) added to the sum in double. The sum is kept relative to the running maximum m
// and rescaled by exp(m_old - m_new) in double when a block raises it. Special values come out as
// the eager row kernels give them (kernels/softmax_rows.cpp, the same scheme): a NaN term makes
// the sum NaN; with +inf the shift is +inf and the +inf term exp(inf - inf) is NaN; an all -inf
// row is shifted by 0 and sums to 0 (so that exp(x - max) / sum is NaN there, as eager).

// v when it is greater than m, else m (a NaN v is ignored: it reaches the sum as a NaN term). A
// select of bit patterns, which vectorizes where `?:` on values may not.
template <class T> inline T sumexp_block_max(T m, T v) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  Bits mb, vb;
  std::memcpy(&mb, &m, sizeof mb);
  std::memcpy(&vb, &v, sizeof vb);
  const Bits greater = Bits(0) - Bits(v > m);
  const Bits out = (mb & ~greater) | (vb & greater);
  T r;
  std::memcpy(&r, &out, sizeof r);
  return r;
}

// After a block with maximum `block_max` (NaN ignored; -inf for none): raises the running maximum
// `m` (-inf before any block) and rescales the sum `s` to it; returns the shift of the block's
// terms: m, or 0 while m is -inf (x - m would be -inf - -inf = NaN; those elements contribute
// exp(-inf) = 0 once a finite maximum turns up).
template <class T> inline T sumexp_rescale(T& m, double& s, T block_max) {
  if (block_max > m) {
    s *= std::exp(double(m) - double(block_max));  // exp(-inf) = 0 clears a sum that had no maximum
    m = block_max;
  }
  return m == -std::numeric_limits<T>::infinity() ? T(0) : m;
}

}  // namespace smelt::scalar
