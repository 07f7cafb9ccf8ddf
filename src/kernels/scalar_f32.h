// float32's own branch-free transcendental functions, for kernels/scalar.h, which includes this
// and says why they exist (GCC does not vectorize std::exp & co. without -ffast-math), how they
// are written and their error bounds. Part of the scalar math every backend shares: generated
// kernels include it through scalar.h.
//
// Written in the common subset of C11 and C++20 (prefixed static inline functions, C casts, no
// namespaces in the definitions): the standalone C export (docs/export_c.md) writes this very
// text into every model.c, so an exported model computes its exponentials with the same bits as
// smelt. C++ code calls them through namespace smelt::scalar::f32 at the bottom.
#ifndef SMELT_KERNELS_SCALAR_F32_H
#define SMELT_KERNELS_SCALAR_F32_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#ifndef __cplusplus
#include <stdbool.h>
#endif

static inline uint32_t smelt_f32_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}
static inline float smelt_f32_from_bits(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}
static inline float smelt_f32_fabs(float x) { return smelt_f32_from_bits(smelt_f32_bits(x) & 0x7fffffffu); }

// c ? a : b as a select of bit patterns. GCC 12 does not if-convert some `?:` on values (it
// threads the branches of a clamp through the code after it, and the loop keeps control flow, so
// erf and gelu_erf ran scalar, ~10 ns per element); a mask and two ands always vectorize.
static inline float smelt_f32_select(bool c, float a, float b) {
  const uint32_t mask = 0u - (uint32_t)(c);
  return smelt_f32_from_bits((smelt_f32_bits(a) & mask) | (smelt_f32_bits(b) & ~mask));
}

// a * b + c rounded once. Exact, so every backend gets the same bits (contraction of a * b + c
// is off everywhere, see CMakeLists.txt); under -march=native it is one instruction.
static inline float smelt_f32_fma(float a, float b, float c) { return fmaf(a, b, c); }

// v * 2^n for n in [-252, 254] with one rounding: two exact power-of-two steps, each within the
// normal exponent range, so a subnormal result is rounded once (in the last multiply).
static inline float smelt_f32_ldexp2(float v, int32_t n) {
  int32_t half = n >> 1;
  float first = smelt_f32_from_bits((uint32_t)(half + 127) << 23);
  float second = smelt_f32_from_bits((uint32_t)(n - half + 127) << 23);
  return v * first * second;
}

// ldexp2's result in fewer instructions, for n >= -218 where v * 2^(n + 92) is a normal float (or
// v is 0, inf, NaN; so n <= 31 for |v| < 16): that step is exact, and the constant 2^-92 after it
// rounds once where the result is subnormal. The callers below scale values of magnitude in
// [~0.2, ~220] by n in [-218, 1], or smaller values by n near 0 (only lanes whose result is
// discarded may break this); checked against ldexp2 over all float inputs of each caller.
static inline float smelt_f32_ldexp_down(float v, int32_t n) {
  return v * smelt_f32_from_bits((uint32_t)(n + 92 + 127) << 23) * 0x1p-92f;
}

// exp(hi + mid + lo) = mant * 2^n, for |mid|, |lo| <= ~2: the argument may come in pieces that
// one float cannot hold without rounding (a large square and its rounding error, a polynomial's
// constant term and the rest). Cody-Waite reduction: n = round(argument / ln 2), r = argument -
// n ln 2 in [-ln2/2, ln2/2], with ln 2 split so that hi - n * smelt_f32_ln2_hi is exact and the small
// pieces are added to the already-small remainder; then a degree-6 polynomial for exp(r). hi is
// clamped to [-150, 89], beyond which exp is 0 or inf in float anyway, even for callers that
// multiply mant * 2^n by up to ~2^20 before scaling.
typedef struct {
  float mant;  // in [0.70, 1.42]
  int32_t n;   // in [-220, 131]
} smelt_f32_scaled;
static const float smelt_f32_log2e = 1.44269504f;
static const float smelt_f32_ln2_hi = 0.693359375f;      // 355/512: n * smelt_f32_ln2_hi is exact for |n| < 2^15
static const float smelt_f32_ln2_lo = -2.12194440e-4f;   // ln 2 - smelt_f32_ln2_hi
static const float smelt_f32_round_shift = 12582912.0f;  // 1.5 * 2^23: x + it rounds x to an integer

// hi clamped to [-150, 89]. The clamp selects bit patterns instead of values: written as
// `hi < -150 ? -150 : hi`, GCC folds the constant branches through the rest of the function and
// the vectorized loop computes all three paths under masks (about 45 instead of 27 instructions
// per 16 lanes). Same result: NaN compares false both ways and passes through.
static inline float smelt_f32_clamp_exp_arg(float hi) {
  const uint32_t below = 0u - (uint32_t)(hi < -150.0f), above = 0u - (uint32_t)(hi > 89.0f);
  uint32_t hi_bits = smelt_f32_bits(hi);
  hi_bits = (hi_bits & ~below) | (smelt_f32_bits(-150.0f) & below);
  hi_bits = (hi_bits & ~above) | (smelt_f32_bits(89.0f) & above);
  return smelt_f32_from_bits(hi_bits);
}

// exp(r) - 1 = r + r^2 q(r), q a minimax fit of (exp(r) - 1 - r) / r^2 on [-ln2/2, ln2/2]
static inline float smelt_f32_exp_poly_m1(float r) {
  float q = 0.00139061525f;
  q = smelt_f32_fma(q, r, 0.00836294983f);
  q = smelt_f32_fma(q, r, 0.0416667573f);
  q = smelt_f32_fma(q, r, 0.166665792f);
  q = smelt_f32_fma(q, r, 0.5f);
  return smelt_f32_fma(r * r, q, r);
}
static inline float smelt_f32_exp_poly(float r) { return 1.0f + smelt_f32_exp_poly_m1(r); }

static inline smelt_f32_scaled smelt_f32_exp_parts(float hi, float mid, float lo) {
  hi = smelt_f32_clamp_exp_arg(hi);
  float shifted = smelt_f32_fma(hi + (mid + lo), smelt_f32_log2e, smelt_f32_round_shift);
  int32_t n = (int32_t)(smelt_f32_bits(shifted) - smelt_f32_bits(smelt_f32_round_shift));
  float nf = shifted - smelt_f32_round_shift;
  float r = (smelt_f32_fma(nf, -smelt_f32_ln2_hi, hi) + mid) + smelt_f32_fma(nf, -smelt_f32_ln2_lo, lo);
  smelt_f32_scaled parts = {smelt_f32_exp_poly(r), n};
  return parts;
}

// exp_parts(x, 0, 0) without the additions of zeros, which the compiler has to keep (-0 + 0 = +0).
static inline float smelt_f32_exp(float x) {
  x = smelt_f32_clamp_exp_arg(x);
  float shifted = smelt_f32_fma(x, smelt_f32_log2e, smelt_f32_round_shift);
  int32_t n = (int32_t)(smelt_f32_bits(shifted) - smelt_f32_bits(smelt_f32_round_shift));
  float nf = shifted - smelt_f32_round_shift;
  float r = smelt_f32_fma(nf, -smelt_f32_ln2_lo, smelt_f32_fma(nf, -smelt_f32_ln2_hi, x));
  return smelt_f32_ldexp2(smelt_f32_exp_poly(r), n);
}

// exp(x) for x <= 0 or NaN, the same bits as exp(x) there (checked for every such float), in
// fewer instructions: softmax's terms exp(x - max) never have a positive argument, and their exp
// is most of a softmax's time. Only the lower clamp is needed (a NaN passes it: it compares
// false). The scaling by 2^n, n in [-217, 0], is one exact step to 2^(n + 92), always normal,
// then a multiply by the constant 2^-92 that rounds once where the result is subnormal: the
// correctly rounded mant * 2^n, as ldexp2 gives it in two variable steps. A NaN x makes mant NaN,
// whatever the garbage n then scales it by.
static inline float smelt_f32_exp_nonpositive(float x) {
  x = x < -150.0f ? -150.0f : x;
  float shifted = smelt_f32_fma(x, smelt_f32_log2e, smelt_f32_round_shift);
  int32_t n = (int32_t)(smelt_f32_bits(shifted) - smelt_f32_bits(smelt_f32_round_shift));
  float nf = shifted - smelt_f32_round_shift;
  float r = smelt_f32_fma(nf, -smelt_f32_ln2_lo, smelt_f32_fma(nf, -smelt_f32_ln2_hi, x));
  const float up = smelt_f32_from_bits((uint32_t)(n + 92 + 127) << 23);
  return smelt_f32_exp_poly(r) * up * 0x1p-92f;
}

// x = m 2^e with m in [sqrt(1/2), sqrt(2)); log(m) = log1p(f), f = m - 1, through s = f / (2 + f)
// (log1p(f) = 2 atanh(s)), written as f - (f^2/2 - s (f^2/2 + R(s^2))) so that the leading terms
// are exact-ish and the polynomial only corrects.
static inline float smelt_f32_log(float x) {
  const float kMinNormal = 1.17549435e-38f;
  const uint32_t kSqrtHalfBits = 0x3f3504f3u;  // bits of sqrt(1/2)
  const float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  // Subnormals are scaled by 2^23 first. The exponent correction is read off the scale's bits:
  // reusing one condition in several selects lets GCC thread jumps, which blocks vectorization.
  float scale = x < kMinNormal ? 8388608.0f : 1.0f;
  int32_t scale_exp = (int32_t)(smelt_f32_bits(scale) >> 23) - 127;
  // Offsetting the bits by sqrt(1/2)'s makes the exponent field round m into [sqrt(1/2), sqrt(2)).
  int32_t offset = (int32_t)(smelt_f32_bits(x * scale) - kSqrtHalfBits);
  int32_t e = (offset >> 23) - scale_exp;
  float m = smelt_f32_from_bits(((uint32_t)(offset) & 0x007fffffu) + kSqrtHalfBits);
  float f = m - 1.0f;
  float s = f / (2.0f + f);
  float z = s * s;
  // R(z) ~ (2 atanh(s) - 2 s) / s, a minimax fit on [0, 0.0295]
  float R = z * (0.666666687f + z * (0.399989009f + z * (0.286594212f + z * 0.208958879f)));
  float half_f2 = 0.5f * f * f;
  // (float)(e) through the 1.5 * 2^23 shift: GCC treats an int-to-float conversion as a possible
  // FP trap and refuses to if-convert (vectorize) the loop around it.
  float ef = smelt_f32_from_bits((uint32_t)(e + 0x4b400000)) - 12582912.0f;
  float y = ef * kLn2Hi + (f - (half_f2 - (s * (half_f2 + R) + ef * kLn2Lo)));
  y = x == INFINITY ? INFINITY : y;
  return x > 0.0f ? y : (x == 0.0f ? -INFINITY : NAN);  // NaN and x < 0 give NaN
}

// log(1 + e) for e >= 0: 1 + e is rounded, and log(u) * e / (u - 1) cancels that rounding.
static inline float smelt_f32_log1p_nonneg(float e) {
  float u = 1.0f + e;
  float d = u - 1.0f;
  return d == 0.0f ? e : smelt_f32_log(u) * (e / d);
}

// An odd polynomial near 0; 1 - 2 / (exp(2|x|) + 1) beyond (no cancellation there: result >= 0.55).
static inline float smelt_f32_tanh(float x) {
  float ax = smelt_f32_fabs(x);
  float x2 = x * x;
  float p = 0.00277721323f;
  p = p * x2 - 0.00882874429f;
  p = p * x2 + 0.0219400302f;
  p = p * x2 - 0.0539842173f;
  p = p * x2 + 0.133334339f;
  p = p * x2 - 0.333333343f;
  float near_zero = x + x * x2 * p;
  float far = 1.0f - 2.0f / (smelt_f32_exp(2.0f * ax) + 1.0f);  // saturates to 1, NaN stays NaN
  far = x < 0.0f ? -far : far;
  return ax < 0.625f ? near_zero : far;
}

// v^2 = hi + lo exactly: hi the rounded square, lo its rounding error (exact through the fma).
typedef struct {
  float hi, lo;
} smelt_f32_square;
static inline smelt_f32_square smelt_f32_square_split(float v) {
  float hi = v * v;
  smelt_f32_square sq = {hi, smelt_f32_fma(v, v, -hi)};
  return sq;
}

// erfc(z) for z in [0.5, 10.5], given t = 2/(2+z) and z^2 = sq.hi + sq.lo:
// erfc(z) = t exp(-z^2 + P(t)), P a minimax fit on t in [0.16, 0.8]. exp's argument goes in as
// pieces, so the large z^2 loses nothing to rounding and the tail keeps full relative precision.
// Returned as mant * 2^n so that callers can scale before the result leaves the normal range.
static inline smelt_f32_scaled smelt_f32_erfc_tail(float t, smelt_f32_square sq) {
  float u = t - 0.48f;  // centred: small Horner intermediates, so little rounding
  float p_rest = 0.258541346f;
  p_rest = smelt_f32_fma(p_rest, u, -0.10329859f);
  p_rest = smelt_f32_fma(p_rest, u, -0.28021127f);
  p_rest = smelt_f32_fma(p_rest, u, 0.154781848f);
  p_rest = smelt_f32_fma(p_rest, u, 0.266022772f);
  p_rest = smelt_f32_fma(p_rest, u, -0.185510337f);
  p_rest = smelt_f32_fma(p_rest, u, -0.36141178f);
  p_rest = smelt_f32_fma(p_rest, u, 0.211483285f);
  p_rest = smelt_f32_fma(p_rest, u, 1.33726656f);
  p_rest *= u;
  smelt_f32_scaled e = smelt_f32_exp_parts(-sq.hi, -0.698621094f, p_rest - sq.lo);  // P = -0.6986... + p_rest
  smelt_f32_scaled parts = {t * e.mant, e.n};
  return parts;
}

// erf(x) = x + x Q(x^2) for |x| < 1; this returns Q(x^2). Keeping x out of the polynomial makes
// the leading coefficient 1 + 0.128... exact to float precision.
static inline float smelt_f32_erf_q(float x) {
  float y = x * x;
  float q = 7.92036808e-05f;
  q = smelt_f32_fma(q, y, -0.000803076138f);
  q = smelt_f32_fma(q, y, 0.00519073382f);
  q = smelt_f32_fma(q, y, -0.026855126f);
  q = smelt_f32_fma(q, y, 0.112836182f);
  q = smelt_f32_fma(q, y, -0.376126289f);
  q = smelt_f32_fma(q, y, 0.128379166f);
  return q;
}

static inline float smelt_f32_erf(float x) {
  float ax = smelt_f32_fabs(x);
  float near_zero = smelt_f32_fma(x, smelt_f32_erf_q(x), x);
  float z = smelt_f32_select(ax < 4.0f, ax, 4.0f);  // erf(4) rounds to 1; keeps the tail's arithmetic finite
  smelt_f32_scaled c = smelt_f32_erfc_tail(2.0f / (2.0f + z), smelt_f32_square_split(z));
  float far = 1.0f - smelt_f32_ldexp_down(c.mant, c.n);   // >= 0; n in [-25, 0]
  far = smelt_f32_from_bits(smelt_f32_bits(far) | (smelt_f32_bits(x) & 0x80000000u));  // x's sign (x >= 1 in magnitude here)
  float y = smelt_f32_select(ax < 1.0f, near_zero, far);
  return smelt_f32_select(x != x, x, y);
}

// 1 / (1 + exp(-x)), through e = exp(-|x|) so that nothing overflows: sigmoid(x) = 1/(1+e) for
// x >= 0 and e/(1+e) below.
static inline float smelt_f32_sigmoid(float x) {
  float e = smelt_f32_exp_nonpositive(-smelt_f32_fabs(x));
  float s = 1.0f / (1.0f + e);
  return x >= 0.0f ? s : e * s;
}

// x sigmoid(v) with v computed by the caller: for v < 0 it is x e^v / (1 + e^v), whose 2^n scale
// is applied last so that x e^v stays accurate where e^v alone would be subnormal. x and v have
// the same sign; x <= -150 gives -0 (also for -inf, where inf * 0 would be NaN). Each scaling goes
// only as far as its result needs (e^v below 2^-40 leaves 1 + e^v = 1; the x >= 0 lanes do not
// scale x e^v at all), so that no lane computes a subnormal it then discards: a subnormal result
// costs a microcode assist on AMD Zen and others.
static inline float smelt_f32_x_sigmoid(float x, float v_hi, float v_lo) {
  smelt_f32_scaled e = smelt_f32_exp_parts(-smelt_f32_fabs(v_hi), v_hi < 0.0f ? v_lo : -v_lo, 0.0f);
  float s = 1.0f / (1.0f + smelt_f32_ldexp_down(e.mant, e.n < -40 ? -40 : e.n));
  float xc = x < -150.0f ? -150.0f : x;
  return x >= 0.0f ? x * s : smelt_f32_ldexp_down(xc * e.mant * s, x < 0.0f ? e.n : 0);
}

static inline float smelt_f32_silu(float x) { return smelt_f32_x_sigmoid(x, x, 0.0f); }

// 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3): no cancellation for
// x < 0. 2u is evaluated in double and passed on as float hi + lo, because exp amplifies the
// relative error of its argument by |2u| (up to ~100 before the result underflows).
static inline float smelt_f32_gelu_tanh(float x) {
  double xd = x;  // conversions stay unconditional: GCC will not if-convert a conditional one
  // 2u = 2 sqrt(2/pi) (x + 0.044715 x^3)
  double v = xd * (1.5957691216057308 + 0.071354816272600443 * xd * xd);
  float v_hi = (float)(v);
  float v_lo = (float)(v - (double)(v_hi));
  v_lo = smelt_f32_fabs(v_lo) < 1.0f ? v_lo : 0.0f;  // inf - inf = NaN when v overflows float: drop it
  return smelt_f32_x_sigmoid(x, v_hi, v_lo);
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
static inline float smelt_f32_gelu_erf(float x) {
  const bool neg = x < 0.0f;
  float limit = smelt_f32_select(neg, 14.8f, 9.0f);
  float ax = smelt_f32_fabs(x);
  float a = smelt_f32_select(ax < limit, ax, limit);
  float minus_half_a = -0.5f * a;
  float h = minus_half_a * a;  // -a^2/2 = h + l exactly
  float l = smelt_f32_fma(minus_half_a, a, -h);
  float shifted = smelt_f32_fma(h, smelt_f32_log2e, smelt_f32_round_shift);
  float nf = shifted - smelt_f32_round_shift;
  float em1 = smelt_f32_exp_poly_m1(smelt_f32_fma(nf, -smelt_f32_ln2_hi, h) + smelt_f32_fma(nf, -smelt_f32_ln2_lo, l));  // e = (1 + em1) 2^n
  float r = 1.0f / (a + 3.5f);
  float u = smelt_f32_fma(-a, r, 0.375f);
  float q = -0.056810163f;
  q = smelt_f32_fma(q, u, 0.0451000966f);
  q = smelt_f32_fma(q, u, 0.139906064f);
  q = smelt_f32_fma(q, u, -0.110071227f);
  q = smelt_f32_fma(q, u, -0.329442918f);
  q = smelt_f32_fma(q, u, 0.106990784f);
  q = smelt_f32_fma(q, u, 1.02798736f);
  q = smelt_f32_fma(q, u, 1.63121688f);
  q = smelt_f32_fma(q, u, 1.49195528f);
  q = smelt_f32_fma(q, u, 0.907394826f);
  q *= r;  // g
  float v = smelt_f32_select(neg, a, 1.0f) * smelt_f32_fma(q, em1, q);
  float s = v * smelt_f32_from_bits((smelt_f32_bits(shifted) << 23) + ((92u + 127u) << 23)) * 0x1p-92f;
  return smelt_f32_select(neg, -s, x * (1.0f - s));
}

// log(1 + exp(bx)) / beta = (max(bx, 0) + log1p(exp(-|bx|))) / beta, x above the threshold.
static inline float smelt_f32_softplus(float x, float beta, float threshold) {
  float bx = beta * x;
  float sp = (bx > 0.0f ? bx : 0.0f) + smelt_f32_log1p_nonneg(smelt_f32_exp_nonpositive(-smelt_f32_fabs(bx)));
  return bx > threshold ? x : sp / beta;
}

#ifdef __cplusplus
namespace smelt::scalar::f32 {
inline float fma(float a, float b, float c) { return smelt_f32_fma(a, b, c); }
inline float select(bool c, float a, float b) { return smelt_f32_select(c, a, b); }
inline float ldexp2(float v, int32_t n) { return smelt_f32_ldexp2(v, n); }
inline float ldexp_down(float v, int32_t n) { return smelt_f32_ldexp_down(v, n); }
inline float exp(float x) { return smelt_f32_exp(x); }
inline float exp_nonpositive(float x) { return smelt_f32_exp_nonpositive(x); }
inline float log(float x) { return smelt_f32_log(x); }
inline float tanh(float x) { return smelt_f32_tanh(x); }
inline float erf(float x) { return smelt_f32_erf(x); }
inline float sigmoid(float x) { return smelt_f32_sigmoid(x); }
inline float silu(float x) { return smelt_f32_silu(x); }
inline float gelu_tanh(float x) { return smelt_f32_gelu_tanh(x); }
inline float gelu_erf(float x) { return smelt_f32_gelu_erf(x); }
inline float softplus(float x, float beta, float threshold) { return smelt_f32_softplus(x, beta, threshold); }
}  // namespace smelt::scalar::f32
#endif

#endif  // SMELT_KERNELS_SCALAR_F32_H
