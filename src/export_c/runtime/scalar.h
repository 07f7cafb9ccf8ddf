/* The scalar functions of an exported model (docs/export_c.md), in C11: smelt_<name>_<dtype>, one
 * for every row of smelt's elementwise table (src/kernels/scalar_table.h) and every dtype the row
 * accepts, with the meaning kernels/scalar.h gives it (wrapping integer arithmetic, saturating
 * casts, NaN-propagating maximum and minimum, ...). float32's transcendental functions are
 * kernels/scalar_f32.h's own, which the export writes just before this text, so an exported
 * model computes them with smelt's bits. tests/export_c checks every function and dtype against
 * kernels/scalar.h, bit for bit, on special and random values. */
#ifndef SMELT_EXPORT_SCALAR_H
#define SMELT_EXPORT_SCALAR_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__)
#define SMELT_UNUSED __attribute__((unused))
/* A hint to fetch the cache line `bytes` past p (integer arithmetic: the address may lie past p's
 * object; a prefetch never faults). */
#define SMELT_PREFETCH(p, bytes) __builtin_prefetch((const void*)((uintptr_t)(p) + (bytes)))
/* A fused kernel's entry: it may go unused, and every call in it is inlined. A kernel vectorizes
 * only with its scalar functions (smelt_f32_exp, ...) inlined, and GCC stops inlining `static
 * inline` functions once the file has grown by its unit-growth limit: a GEMM tile inlined twice
 * more per call made EfficientNet-B0's SiLU epilogues call smelt_f32_exp per element, 2.8x slower. */
#define SMELT_KERNEL __attribute__((unused, flatten))
#else
#define SMELT_UNUSED
#define SMELT_PREFETCH(p, bytes) ((void)0)
#define SMELT_KERNEL
#endif

/* OpenMP, only where the user asks: SMELT_OMP (simd loops and their reductions) when compiled with
 * -fopenmp or -fopenmp-simd -DSMELT_OPENMP_SIMD; SMELT_OMP_FOR (threads) only with -fopenmp
 * -DSMELT_THREADS. Without them the code is plain C11 and runs on the calling thread. */
#define SMELT_PRAGMA(...) _Pragma(#__VA_ARGS__)
#if defined(_OPENMP) || defined(SMELT_OPENMP_SIMD)
#define SMELT_OMP(...) SMELT_PRAGMA(omp __VA_ARGS__)
#else
#define SMELT_OMP(...)
#endif
#if defined(_OPENMP) && defined(SMELT_THREADS)
#define SMELT_OMP_FOR(...) SMELT_PRAGMA(omp parallel for __VA_ARGS__)
#else
#define SMELT_OMP_FOR(...)
#endif

static inline double smelt_f64_from_bits(uint64_t b) {
  double d;
  memcpy(&d, &b, sizeof d);
  return d;
}

/* ---- every numeric dtype: float32, float64, int64, int32 ---- */
/* Integers wrap in two's complement (computed in the unsigned type U); integer division truncates,
 * x / 0 is 0 and MIN / -1 wraps (the eager op refuses a zero divisor before it gets here). */
#define SMELT_INTEGER_FUNCTIONS(T, U, N, LO, HI)                                                   \
  static inline T smelt_neg_##N(T x) { return (T)((U)0 - (U)x); }                                 \
  static inline T smelt_abs_##N(T x) { return x < 0 ? smelt_neg_##N(x) : x; }                     \
  static inline T smelt_add_##N(T a, T b) { return (T)((U)a + (U)b); }                             \
  static inline T smelt_sub_##N(T a, T b) { return (T)((U)a - (U)b); }                             \
  static inline T smelt_mul_##N(T a, T b) { return (T)((U)a * (U)b); }                             \
  static inline T smelt_div_##N(T a, T b) {                                                        \
    return b == 0 ? (T)0 : b == -1 ? smelt_neg_##N(a) : (T)(a / b);                                \
  }                                                                                                 \
  static inline T smelt_maximum_##N(T a, T b) { return a > b ? a : b; }                           \
  static inline T smelt_minimum_##N(T a, T b) { return a < b ? a : b; }                           \
  static inline T smelt_lowest_##N(void) { return LO; }                                           \
  static inline T smelt_highest_##N(void) { return HI; }

#define SMELT_FLOAT_FUNCTIONS(T, N, S)                                                             \
  static inline T smelt_neg_##N(T x) { return -x; }                                               \
  static inline T smelt_abs_##N(T x) { return fabs##S(x); }                                       \
  static inline T smelt_add_##N(T a, T b) { return a + b; }                                        \
  static inline T smelt_sub_##N(T a, T b) { return a - b; }                                        \
  static inline T smelt_mul_##N(T a, T b) { return a * b; }                                        \
  static inline T smelt_div_##N(T a, T b) { return a / b; }                                        \
  /* NaN propagates; of -0 and +0 maximum gives +0 and minimum -0, in either order */              \
  static inline T smelt_maximum_##N(T a, T b) {                                                    \
    return (a != a || a > b || (a == b && !signbit(a))) ? a : b;                                  \
  }                                                                                                 \
  static inline T smelt_minimum_##N(T a, T b) {                                                    \
    return (a != a || a < b || (a == b && signbit(a))) ? a : b;                                   \
  }                                                                                                 \
  static inline T smelt_lowest_##N(void) { return -INFINITY; }                                    \
  static inline T smelt_highest_##N(void) { return INFINITY; }                                    \
  static inline T smelt_sqrt_##N(T x) { return sqrt##S(x); }                                      \
  static inline T smelt_rsqrt_##N(T x) { return (T)1 / sqrt##S(x); }                              \
  static inline T smelt_leaky_relu_##N(T x, T slope) { return x < 0 ? x * slope : x; }            \
  static inline T smelt_floor_##N(T x) { return floor##S(x); }                                    \
  static inline T smelt_ceil_##N(T x) { return ceil##S(x); }                                      \
  static inline T smelt_round_##N(T x) { return nearbyint##S(x); }                                \
  static inline T smelt_sin_##N(T x) { return sin##S(x); }                                        \
  static inline T smelt_cos_##N(T x) { return cos##S(x); }                                        \
  static inline T smelt_tan_##N(T x) { return tan##S(x); }                                        \
  static inline T smelt_asin_##N(T x) { return asin##S(x); }                                      \
  static inline T smelt_acos_##N(T x) { return acos##S(x); }                                      \
  static inline T smelt_atan_##N(T x) { return atan##S(x); }                                      \
  static inline T smelt_sinh_##N(T x) { return sinh##S(x); }                                      \
  static inline T smelt_cosh_##N(T x) { return cosh##S(x); }                                      \
  static inline T smelt_asinh_##N(T x) { return asinh##S(x); }                                    \
  static inline T smelt_acosh_##N(T x) { return acosh##S(x); }                                    \
  static inline T smelt_atanh_##N(T x) { return atanh##S(x); }                                    \
  /* x^2 and x^1 are the multiplication and the value they are */                                  \
  static inline T smelt_pow_##N(T a, T b) { return b == 2 ? a * a : b == 1 ? a : pow##S(a, b); } \
  /* the online sum of exponentials (kernels/scalar.h): v when greater than m, NaN ignored */      \
  static inline T smelt_sumexp_block_max_##N(T m, T v) { return v > m ? v : m; }                 \
  static inline T smelt_sumexp_rescale_##N(T* m, double* s, T block_max) {                        \
    if (block_max > *m) {                                                                           \
      *s *= exp((double)*m - (double)block_max);                                                    \
      *m = block_max;                                                                               \
    }                                                                                               \
    return *m == -INFINITY ? (T)0 : *m;                                                             \
  }

/* ---- every dtype ---- */
#define SMELT_ANY_FUNCTIONS(T, N)                                                                  \
  static inline bool smelt_eq_##N(T a, T b) { return a == b; }                                    \
  static inline bool smelt_ne_##N(T a, T b) { return a != b; }                                    \
  static inline bool smelt_lt_##N(T a, T b) { return a < b; }                                     \
  static inline bool smelt_le_##N(T a, T b) { return a <= b; }                                    \
  static inline bool smelt_gt_##N(T a, T b) { return a > b; }                                     \
  static inline bool smelt_ge_##N(T a, T b) { return a >= b; }                                    \
  static inline T smelt_where_##N(bool c, T a, T b) { return c ? a : b; }

/* NaN passes through sign and relu (x != x is false for integers) */
#define SMELT_SIGNED_FUNCTIONS(T, N)                                                               \
  static inline T smelt_sign_##N(T x) { return x != x ? x : (T)((0 < x) - (x < 0)); }             \
  static inline T smelt_relu_##N(T x) { return x < 0 ? (T)0 : x; }                                \
  static inline T smelt_clamp_##N(T x, T lo, T hi) {                                              \
    T y = x < lo || lo != lo ? lo : x;                                                              \
    return y > hi || hi != hi ? hi : y;                                                             \
  }

SMELT_INTEGER_FUNCTIONS(int64_t, uint64_t, int64, INT64_MIN, INT64_MAX)
SMELT_INTEGER_FUNCTIONS(int32_t, uint32_t, int32, INT32_MIN, INT32_MAX)
SMELT_FLOAT_FUNCTIONS(float, float32, f)
SMELT_FLOAT_FUNCTIONS(double, float64, )
SMELT_ANY_FUNCTIONS(float, float32)
SMELT_ANY_FUNCTIONS(double, float64)
SMELT_ANY_FUNCTIONS(int64_t, int64)
SMELT_ANY_FUNCTIONS(int32_t, int32)
SMELT_ANY_FUNCTIONS(uint8_t, uint8)
SMELT_ANY_FUNCTIONS(bool, bool)
SMELT_SIGNED_FUNCTIONS(float, float32)
SMELT_SIGNED_FUNCTIONS(double, float64)
SMELT_SIGNED_FUNCTIONS(int64_t, int64)
SMELT_SIGNED_FUNCTIONS(int32_t, int32)

/* ---- floating functions: float32 through kernels/scalar_f32.h, float64 through libm ---- */
static inline float smelt_exp_float32(float x) { return smelt_f32_exp(x); }
static inline float smelt_exp_nonpositive_float32(float x) { return smelt_f32_exp_nonpositive(x); }
static inline float smelt_log_float32(float x) { return smelt_f32_log(x); }
static inline float smelt_erf_float32(float x) { return smelt_f32_erf(x); }
static inline float smelt_sigmoid_float32(float x) { return smelt_f32_sigmoid(x); }
static inline float smelt_tanh_float32(float x) { return smelt_f32_tanh(x); }
static inline float smelt_gelu_erf_float32(float x) { return smelt_f32_gelu_erf(x); }
static inline float smelt_gelu_tanh_float32(float x) { return smelt_f32_gelu_tanh(x); }
static inline float smelt_silu_float32(float x) { return smelt_f32_silu(x); }
static inline float smelt_softplus_float32(float x, float beta, float threshold) {
  return smelt_f32_softplus(x, beta, threshold);
}
static inline double smelt_exp_float64(double x) { return exp(x); }
static inline double smelt_exp_nonpositive_float64(double x) { return exp(x); }
static inline double smelt_log_float64(double x) { return log(x); }
static inline double smelt_erf_float64(double x) { return erf(x); }
static inline double smelt_tanh_float64(double x) { return tanh(x); }
/* written so that neither branch overflows */
static inline double smelt_sigmoid_float64(double x) {
  if (x >= 0) return 1 / (1 + exp(-x));
  double e = exp(x);
  return e / (1 + e);
}
static inline double smelt_gelu_erf_float64(double x) {
  const double z = x * 0.70710678118654752440;
  return x < 0 ? 0.5 * x * erfc(-z) : 0.5 * x * (1 + erf(z));
}
static inline double smelt_gelu_tanh_float64(double x) {
  return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
static inline double smelt_silu_float64(double x) { return x * smelt_sigmoid_float64(x); }
static inline double smelt_softplus_float64(double x, double beta, double threshold) {
  double bx = beta * x;
  return bx > threshold ? x : log1p(exp(bx)) / beta;
}

/* ---- casts (kernels/scalar.h `cast`): to bool x != 0; floating to a signed integer truncates and
 * saturates (NaN -> 0); floating to uint8 goes through int64 and wraps; integers wrap ---- */
#define SMELT_CAST(TO, TN, FROM, FN) \
  static inline TO smelt_cast_##TN##_##FN(FROM x) { return (TO)x; }
#define SMELT_CAST_TO_BOOL(FROM, FN) \
  static inline bool smelt_cast_bool_##FN(FROM x) { return x != 0; }
#define SMELT_CAST_SATURATING(TO, TN, FROM, FN, LO, HI, LIMIT)                          \
  static inline TO smelt_cast_##TN##_##FN(FROM x) {                                     \
    return x != x ? (TO)0 : x >= (FROM)(LIMIT) ? HI : x < -(FROM)(LIMIT) ? LO : (TO)x; \
  }
#define SMELT_CASTS_FROM_FLOAT(FROM, FN)                                                       \
  SMELT_CAST(float, float32, FROM, FN)                                                         \
  SMELT_CAST(double, float64, FROM, FN)                                                        \
  SMELT_CAST_SATURATING(int64_t, int64, FROM, FN, INT64_MIN, INT64_MAX, 9223372036854775808.0) \
  SMELT_CAST_SATURATING(int32_t, int32, FROM, FN, INT32_MIN, INT32_MAX, 2147483648.0)          \
  static inline uint8_t smelt_cast_uint8_##FN(FROM x) { return (uint8_t)smelt_cast_int64_##FN(x); } \
  SMELT_CAST_TO_BOOL(FROM, FN)
#define SMELT_CASTS_FROM_INTEGER(FROM, FN) \
  SMELT_CAST(float, float32, FROM, FN)     \
  SMELT_CAST(double, float64, FROM, FN)    \
  SMELT_CAST(int64_t, int64, FROM, FN)     \
  SMELT_CAST(int32_t, int32, FROM, FN)     \
  SMELT_CAST(uint8_t, uint8, FROM, FN)     \
  SMELT_CAST_TO_BOOL(FROM, FN)
SMELT_CASTS_FROM_FLOAT(float, float32)
SMELT_CASTS_FROM_FLOAT(double, float64)
SMELT_CASTS_FROM_INTEGER(int64_t, int64)
SMELT_CASTS_FROM_INTEGER(int32_t, int32)
SMELT_CASTS_FROM_INTEGER(uint8_t, uint8)
SMELT_CASTS_FROM_INTEGER(bool, bool)

#endif /* SMELT_EXPORT_SCALAR_H */
