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
// own branch-free transcendental functions (below, namespace f32) because GCC does not vectorize
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

namespace smelt::scalar {

namespace f32 {

inline uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
inline float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
inline float fabs(float x) { return from_bits(bits(x) & 0x7fffffffu); }

// c ? a : b as a select of bit patterns. GCC 12 does not if-convert some `?:` on values (it
// threads the branches of a clamp through the code after it, and the loop keeps control flow, so
// erf and gelu_erf ran scalar, ~10 ns per element); a mask and two ands always vectorize.
inline float select(bool c, float a, float b) {
  const uint32_t mask = 0u - uint32_t(c);
  return from_bits((bits(a) & mask) | (bits(b) & ~mask));
}

// a * b + c rounded once. Exact, so every backend gets the same bits (contraction of a * b + c
// is off everywhere, see CMakeLists.txt); under -march=native it is one instruction.
inline float fma(float a, float b, float c) { return std::fma(a, b, c); }

// v * 2^n for n in [-252, 254] with one rounding: two exact power-of-two steps, each within the
// normal exponent range, so a subnormal result is rounded once (in the last multiply).
inline float ldexp2(float v, int32_t n) {
  int32_t half = n >> 1;
  float first = from_bits(uint32_t(half + 127) << 23);
  float second = from_bits(uint32_t(n - half + 127) << 23);
  return v * first * second;
}

// ldexp2's result in fewer instructions, for n >= -218 where v * 2^(n + 92) is a normal float (or
// v is 0, inf, NaN; so n <= 31 for |v| < 16): that step is exact, and the constant 2^-92 after it
// rounds once where the result is subnormal. The callers below scale values of magnitude in
// [~0.2, ~220] by n in [-218, 1], or smaller values by n near 0 (only lanes whose result is
// discarded may break this); checked against ldexp2 over all float inputs of each caller.
inline float ldexp_down(float v, int32_t n) {
  return v * from_bits(uint32_t(n + 92 + 127) << 23) * 0x1p-92f;
}

// exp(hi + mid + lo) = mant * 2^n, for |mid|, |lo| <= ~2: the argument may come in pieces that
// one float cannot hold without rounding (a large square and its rounding error, a polynomial's
// constant term and the rest). Cody-Waite reduction: n = round(argument / ln 2), r = argument -
// n ln 2 in [-ln2/2, ln2/2], with ln 2 split so that hi - n * kExpLn2Hi is exact and the small
// pieces are added to the already-small remainder; then a degree-6 polynomial for exp(r). hi is
// clamped to [-150, 89], beyond which exp is 0 or inf in float anyway, even for callers that
// multiply mant * 2^n by up to ~2^20 before scaling.
struct ExpParts {
  float mant;  // in [0.70, 1.42]
  int32_t n;   // in [-220, 131]
};
constexpr float kExpLog2e = 1.44269504f;
constexpr float kExpLn2Hi = 0.693359375f;      // 355/512: n * kExpLn2Hi is exact for |n| < 2^15
constexpr float kExpLn2Lo = -2.12194440e-4f;   // ln 2 - kExpLn2Hi
constexpr float kExpRoundShift = 12582912.0f;  // 1.5 * 2^23: x + it rounds x to an integer

// hi clamped to [-150, 89]. The clamp selects bit patterns instead of values: written as
// `hi < -150 ? -150 : hi`, GCC folds the constant branches through the rest of the function and
// the vectorized loop computes all three paths under masks (about 45 instead of 27 instructions
// per 16 lanes). Same result: NaN compares false both ways and passes through.
inline float clamp_exp_arg(float hi) {
  const uint32_t below = 0u - uint32_t(hi < -150.0f), above = 0u - uint32_t(hi > 89.0f);
  uint32_t hi_bits = bits(hi);
  hi_bits = (hi_bits & ~below) | (bits(-150.0f) & below);
  hi_bits = (hi_bits & ~above) | (bits(89.0f) & above);
  return from_bits(hi_bits);
}

// exp(r) - 1 = r + r^2 q(r), q a minimax fit of (exp(r) - 1 - r) / r^2 on [-ln2/2, ln2/2]
inline float exp_poly_m1(float r) {
  float q = 0.00139061525f;
  q = fma(q, r, 0.00836294983f);
  q = fma(q, r, 0.0416667573f);
  q = fma(q, r, 0.166665792f);
  q = fma(q, r, 0.5f);
  return fma(r * r, q, r);
}
inline float exp_poly(float r) { return 1.0f + exp_poly_m1(r); }

inline ExpParts exp_parts(float hi, float mid, float lo) {
  hi = clamp_exp_arg(hi);
  float shifted = fma(hi + (mid + lo), kExpLog2e, kExpRoundShift);
  int32_t n = int32_t(bits(shifted) - bits(kExpRoundShift));
  float nf = shifted - kExpRoundShift;
  float r = (fma(nf, -kExpLn2Hi, hi) + mid) + fma(nf, -kExpLn2Lo, lo);
  return {exp_poly(r), n};
}

// exp_parts(x, 0, 0) without the additions of zeros, which the compiler has to keep (-0 + 0 = +0).
inline float exp(float x) {
  x = clamp_exp_arg(x);
  float shifted = fma(x, kExpLog2e, kExpRoundShift);
  int32_t n = int32_t(bits(shifted) - bits(kExpRoundShift));
  float nf = shifted - kExpRoundShift;
  float r = fma(nf, -kExpLn2Lo, fma(nf, -kExpLn2Hi, x));
  return ldexp2(exp_poly(r), n);
}

// exp(x) for x <= 0 or NaN, the same bits as exp(x) there (checked for every such float), in
// fewer instructions: softmax's terms exp(x - max) never have a positive argument, and their exp
// is most of a softmax's time. Only the lower clamp is needed (a NaN passes it: it compares
// false). The scaling by 2^n, n in [-217, 0], is one exact step to 2^(n + 92), always normal,
// then a multiply by the constant 2^-92 that rounds once where the result is subnormal: the
// correctly rounded mant * 2^n, as ldexp2 gives it in two variable steps. A NaN x makes mant NaN,
// whatever the garbage n then scales it by.
inline float exp_nonpositive(float x) {
  x = x < -150.0f ? -150.0f : x;
  float shifted = fma(x, kExpLog2e, kExpRoundShift);
  int32_t n = int32_t(bits(shifted) - bits(kExpRoundShift));
  float nf = shifted - kExpRoundShift;
  float r = fma(nf, -kExpLn2Lo, fma(nf, -kExpLn2Hi, x));
  const float up = from_bits(uint32_t(n + 92 + 127) << 23);
  return exp_poly(r) * up * 0x1p-92f;
}

// x = m 2^e with m in [sqrt(1/2), sqrt(2)); log(m) = log1p(f), f = m - 1, through s = f / (2 + f)
// (log1p(f) = 2 atanh(s)), written as f - (f^2/2 - s (f^2/2 + R(s^2))) so that the leading terms
// are exact-ish and the polynomial only corrects.
inline float log(float x) {
  constexpr float kMinNormal = 1.17549435e-38f;
  constexpr uint32_t kSqrtHalfBits = 0x3f3504f3u;  // bits of sqrt(1/2)
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  // Subnormals are scaled by 2^23 first. The exponent correction is read off the scale's bits:
  // reusing one condition in several selects lets GCC thread jumps, which blocks vectorization.
  float scale = x < kMinNormal ? 8388608.0f : 1.0f;
  int32_t scale_exp = int32_t(bits(scale) >> 23) - 127;
  // Offsetting the bits by sqrt(1/2)'s makes the exponent field round m into [sqrt(1/2), sqrt(2)).
  int32_t offset = int32_t(bits(x * scale) - kSqrtHalfBits);
  int32_t e = (offset >> 23) - scale_exp;
  float m = from_bits((uint32_t(offset) & 0x007fffffu) + kSqrtHalfBits);
  float f = m - 1.0f;
  float s = f / (2.0f + f);
  float z = s * s;
  // R(z) ~ (2 atanh(s) - 2 s) / s, a minimax fit on [0, 0.0295]
  float R = z * (0.666666687f + z * (0.399989009f + z * (0.286594212f + z * 0.208958879f)));
  float half_f2 = 0.5f * f * f;
  // float(e) through the 1.5 * 2^23 shift: GCC treats an int-to-float conversion as a possible
  // FP trap and refuses to if-convert (vectorize) the loop around it.
  float ef = from_bits(uint32_t(e + 0x4b400000)) - 12582912.0f;
  float y = ef * kLn2Hi + (f - (half_f2 - (s * (half_f2 + R) + ef * kLn2Lo)));
  y = x == INFINITY ? INFINITY : y;
  return x > 0.0f ? y : (x == 0.0f ? -INFINITY : NAN);  // NaN and x < 0 give NaN
}

// log(1 + e) for e >= 0: 1 + e is rounded, and log(u) * e / (u - 1) cancels that rounding.
inline float log1p_nonneg(float e) {
  float u = 1.0f + e;
  float d = u - 1.0f;
  return d == 0.0f ? e : log(u) * (e / d);
}

// An odd polynomial near 0; 1 - 2 / (exp(2|x|) + 1) beyond (no cancellation there: result >= 0.55).
inline float tanh(float x) {
  float ax = fabs(x);
  float x2 = x * x;
  float p = 0.00277721323f;
  p = p * x2 - 0.00882874429f;
  p = p * x2 + 0.0219400302f;
  p = p * x2 - 0.0539842173f;
  p = p * x2 + 0.133334339f;
  p = p * x2 - 0.333333343f;
  float near_zero = x + x * x2 * p;
  float far = 1.0f - 2.0f / (exp(2.0f * ax) + 1.0f);  // saturates to 1, NaN stays NaN
  far = x < 0.0f ? -far : far;
  return ax < 0.625f ? near_zero : far;
}

// v^2 = hi + lo exactly: hi the rounded square, lo its rounding error (exact through the fma).
struct Square {
  float hi, lo;
};
inline Square square_split(float v) {
  float hi = v * v;
  return {hi, fma(v, v, -hi)};
}

// erfc(z) for z in [0.5, 10.5], given t = 2/(2+z) and z^2 = sq.hi + sq.lo:
// erfc(z) = t exp(-z^2 + P(t)), P a minimax fit on t in [0.16, 0.8]. exp's argument goes in as
// pieces, so the large z^2 loses nothing to rounding and the tail keeps full relative precision.
// Returned as mant * 2^n so that callers can scale before the result leaves the normal range.
inline ExpParts erfc_tail(float t, Square sq) {
  float u = t - 0.48f;  // centred: small Horner intermediates, so little rounding
  float p_rest = 0.258541346f;
  p_rest = fma(p_rest, u, -0.10329859f);
  p_rest = fma(p_rest, u, -0.28021127f);
  p_rest = fma(p_rest, u, 0.154781848f);
  p_rest = fma(p_rest, u, 0.266022772f);
  p_rest = fma(p_rest, u, -0.185510337f);
  p_rest = fma(p_rest, u, -0.36141178f);
  p_rest = fma(p_rest, u, 0.211483285f);
  p_rest = fma(p_rest, u, 1.33726656f);
  p_rest *= u;
  ExpParts e = exp_parts(-sq.hi, -0.698621094f, p_rest - sq.lo);  // P = -0.6986... + p_rest
  return {t * e.mant, e.n};
}

// erf(x) = x + x Q(x^2) for |x| < 1; this returns Q(x^2). Keeping x out of the polynomial makes
// the leading coefficient 1 + 0.128... exact to float precision.
inline float erf_q(float x) {
  float y = x * x;
  float q = 7.92036808e-05f;
  q = fma(q, y, -0.000803076138f);
  q = fma(q, y, 0.00519073382f);
  q = fma(q, y, -0.026855126f);
  q = fma(q, y, 0.112836182f);
  q = fma(q, y, -0.376126289f);
  q = fma(q, y, 0.128379166f);
  return q;
}

inline float erf(float x) {
  float ax = fabs(x);
  float near_zero = fma(x, erf_q(x), x);
  float z = select(ax < 4.0f, ax, 4.0f);  // erf(4) rounds to 1; keeps the tail's arithmetic finite
  ExpParts c = erfc_tail(2.0f / (2.0f + z), square_split(z));
  float far = 1.0f - ldexp_down(c.mant, c.n);   // >= 0; n in [-25, 0]
  far = from_bits(bits(far) | (bits(x) & 0x80000000u));  // x's sign (x >= 1 in magnitude here)
  float y = select(ax < 1.0f, near_zero, far);
  return select(x != x, x, y);
}

// 1 / (1 + exp(-x)), through e = exp(-|x|) so that nothing overflows: sigmoid(x) = 1/(1+e) for
// x >= 0 and e/(1+e) below.
inline float sigmoid(float x) {
  float e = exp_nonpositive(-fabs(x));
  float s = 1.0f / (1.0f + e);
  return x >= 0.0f ? s : e * s;
}

// x sigmoid(v) with v computed by the caller: for v < 0 it is x e^v / (1 + e^v), whose 2^n scale
// is applied last so that x e^v stays accurate where e^v alone would be subnormal. x and v have
// the same sign; x <= -150 gives -0 (also for -inf, where inf * 0 would be NaN). Each scaling goes
// only as far as its result needs (e^v below 2^-40 leaves 1 + e^v = 1; the x >= 0 lanes do not
// scale x e^v at all), so that no lane computes a subnormal it then discards: a subnormal result
// costs a microcode assist on AMD Zen and others.
inline float x_sigmoid(float x, float v_hi, float v_lo) {
  ExpParts e = exp_parts(-fabs(v_hi), v_hi < 0.0f ? v_lo : -v_lo, 0.0f);
  float s = 1.0f / (1.0f + ldexp_down(e.mant, e.n < -40 ? -40 : e.n));
  float xc = x < -150.0f ? -150.0f : x;
  return x >= 0.0f ? x * s : ldexp_down(xc * e.mant * s, x < 0.0f ? e.n : 0);
}

inline float silu(float x) { return x_sigmoid(x, x, 0.0f); }

// 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3): no cancellation for
// x < 0. 2u is evaluated in double and passed on as float hi + lo, because exp amplifies the
// relative error of its argument by |2u| (up to ~100 before the result underflows).
inline float gelu_tanh(float x) {
  double xd = x;  // conversions stay unconditional: GCC will not if-convert a conditional one
  // 2u = 2 sqrt(2/pi) (x + 0.044715 x^3)
  double v = xd * (1.5957691216057308 + 0.071354816272600443 * xd * xd);
  float v_hi = float(v);
  float v_lo = float(v - double(v_hi));
  v_lo = fabs(v_lo) < 1.0f ? v_lo : 0.0f;  // inf - inf = NaN when v overflows float: drop it
  return x_sigmoid(x, v_hi, v_lo);
}

// x Phi(x) through one path for every x (no near-zero branch): for a = |x| (clamped, see below),
// Phi(-a) = exp(-a^2/2) g(a) with g smooth (1/2 at 0, ~ 1 / (a sqrt(2 pi)) for large a), so
// x Phi(x) = x e g for x < 0 and x (1 - e g) for x >= 0, e = exp(-a^2/2) (e g <= 1/2: no
// cancellation). g = r Q(u) with r = 1 / (3.5 + a) and u = 3.5 r - 0.625 = 0.375 - a r (one
// rounding from the exact product a r): Q is a degree-9 fit (scripts/fit_gelu_erf.py). An error
// in r moves u by -a r times it, which cancels the factor r's own error where g ~ 1/a and matters
// little near 0 where a r is small; so g keeps ~1 ulp. e comes from a's exact square split as
// exp_parts does (exp amplifies its argument's rounding by a^2/2), its polynomial's e - 1 folded
// into e g = q + q (e - 1) without rounding 1 + (e - 1) first.
// The clamp: beyond a = 14.8 x < 0 underflows to -0 (also -inf, where inf * 0 would be NaN); x >=
// 0 stops at a = 9, where e g = 2^-63 already leaves 1 - e g = 1, so that no lane computes a
// subnormal it then discards (a subnormal result costs a microcode assist on AMD Zen and others).
// The scaling by 2^n, n in [-158, 0], is ldexp_down's, with 2^(n + 92) read off the shifted
// exponent's bits directly (its 1.5 * 2^23 part shifts out). A NaN x reaches y through x * (...).
inline float gelu_erf(float x) {
  const bool neg = x < 0.0f;
  float limit = select(neg, 14.8f, 9.0f);
  float ax = fabs(x);
  float a = select(ax < limit, ax, limit);
  float minus_half_a = -0.5f * a;
  float h = minus_half_a * a;  // -a^2/2 = h + l exactly
  float l = fma(minus_half_a, a, -h);
  float shifted = fma(h, kExpLog2e, kExpRoundShift);
  float nf = shifted - kExpRoundShift;
  float em1 = exp_poly_m1(fma(nf, -kExpLn2Hi, h) + fma(nf, -kExpLn2Lo, l));  // e = (1 + em1) 2^n
  float r = 1.0f / (a + 3.5f);
  float u = fma(-a, r, 0.375f);
  float q = -0.056810163f;
  q = fma(q, u, 0.0451000966f);
  q = fma(q, u, 0.139906064f);
  q = fma(q, u, -0.110071227f);
  q = fma(q, u, -0.329442918f);
  q = fma(q, u, 0.106990784f);
  q = fma(q, u, 1.02798736f);
  q = fma(q, u, 1.63121688f);
  q = fma(q, u, 1.49195528f);
  q = fma(q, u, 0.907394826f);
  q *= r;  // g
  float v = select(neg, a, 1.0f) * fma(q, em1, q);
  float s = v * from_bits((bits(shifted) << 23) + ((92u + 127u) << 23)) * 0x1p-92f;
  return select(neg, -s, x * (1.0f - s));
}

// log(1 + exp(bx)) / beta = (max(bx, 0) + log1p(exp(-|bx|))) / beta, x above the threshold.
inline float softplus(float x, float beta, float threshold) {
  float bx = beta * x;
  float sp = (bx > 0.0f ? bx : 0.0f) + log1p_nonneg(exp_nonpositive(-fabs(bx)));
  return bx > threshold ? x : sp / beta;
}

}  // namespace f32

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

// Conversion between any two of float, double, int64_t, int32_t, uint8_t, bool, defined for every
// input (ONNX's Cast leaves NaN, infinities and out-of-range values implementation-defined):
// - to bool: x != 0 (NaN -> true), as PyTorch.
// - float -> int64 / int32: truncation toward zero (-0.0 and -0.9 -> 0), saturating: NaN -> 0,
//   values >= 2^63 (2^31; +inf included) -> the type's max, values < -2^63 (-2^31; -inf
//   included) -> its min. C++ leaves those undefined and PyTorch's results depend on the CPU
//   (x86 gives INT64_MIN / INT32_MIN for all of them), so smelt saturates like ARM, Rust's `as`
//   and Java.
// - float -> uint8: the float -> int64 conversion above, then modulo 256 as int64 -> uint8; this
//   matches PyTorch wherever PyTorch's result does not depend on the CPU (-1.5 -> 255, 300 -> 44).
// - integer -> narrower integer: modulo 2^bits, two's complement (int64 -> int32: 2^31 ->
//   INT32_MIN; -> uint8: -1 -> 255), as PyTorch and NumPy. int32 -> int64: exact.
// - integer -> float: round to nearest (int32 -> double is exact).
// - double -> float: round to nearest; beyond float's range -> ±inf (IEEE 754, which GCC and
//   Clang follow; the C++ standard alone leaves it undefined).
template <class To, class From> inline To cast(From x) {
  if constexpr (std::is_same_v<To, bool>) {
    return x != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    // Signed targets saturate at their own range; uint8 goes through int64 and wraps.
    using Wide = std::conditional_t<std::is_signed_v<To>, To, int64_t>;
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
