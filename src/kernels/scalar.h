// The scalar definition of every elementwise op: one inline function each, shared by the eager
// kernels, the fused-kernel interpreter and generated C++ (which #includes this header), so the
// math is defined exactly once. Self-contained on purpose: only <cmath> and <cstdint>.
#pragma once

#include <cmath>
#include <cstdint>

namespace smelt::scalar {

template <class T> inline T neg(T x) { return -x; }
template <class T> inline T exp(T x) { return std::exp(x); }
template <class T> inline T log(T x) { return std::log(x); }
template <class T> inline T sqrt(T x) { return std::sqrt(x); }
template <class T> inline T rsqrt(T x) { return T(1) / std::sqrt(x); }
template <class T> inline T abs(T x) { return x < T(0) ? -x : x; }
template <class T> inline T sign(T x) { return T((T(0) < x) - (x < T(0))); }
template <class T> inline T erf(T x) { return std::erf(x); }
template <class T> inline T relu(T x) { return x > T(0) ? x : T(0); }
template <class T> inline T leaky_relu(T x, T slope) { return x > T(0) ? x : x * slope; }
// Written so that neither branch overflows: exp of a large positive number never happens.
template <class T> inline T sigmoid(T x) {
  if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
  T e = std::exp(x);
  return e / (T(1) + e);
}
template <class T> inline T tanh(T x) { return std::tanh(x); }
// gelu(x) = x * Phi(x), Phi the standard normal CDF
template <class T> inline T gelu_erf(T x) { return T(0.5) * x * (T(1) + std::erf(x * T(M_SQRT1_2))); }
// the tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
template <class T> inline T gelu_tanh(T x) {
  const T k = T(0.7978845608028654);  // sqrt(2 / pi)
  return T(0.5) * x * (T(1) + std::tanh(k * (x + T(0.044715) * x * x * x)));
}
template <class T> inline T silu(T x) { return x * sigmoid(x); }
// softplus(x) = log(1 + exp(beta x)) / beta, linear above `threshold` (as PyTorch)
template <class T> inline T softplus(T x, T beta, T threshold) {
  T bx = beta * x;
  return bx > threshold ? x : std::log1p(std::exp(bx)) / beta;
}
// min(max(x, lo), hi): with lo > hi everything becomes hi (as PyTorch); NaN passes through
template <class T> inline T clamp(T x, T lo, T hi) {
  T y = x < lo ? lo : x;
  return y > hi ? hi : y;
}

template <class T> inline T add(T a, T b) { return a + b; }
template <class T> inline T sub(T a, T b) { return a - b; }
template <class T> inline T mul(T a, T b) { return a * b; }
template <class T> inline T div(T a, T b) { return a / b; }
template <class T> inline T pow(T a, T b) { return std::pow(a, b); }
// NaN-propagating, as PyTorch's maximum/minimum
template <class T> inline T maximum(T a, T b) { return (a != a || a > b) ? a : b; }
template <class T> inline T minimum(T a, T b) { return (a != a || a < b) ? a : b; }

}  // namespace smelt::scalar
