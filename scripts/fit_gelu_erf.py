#!/usr/bin/python3
"""The coefficients of scalar::f32::gelu_erf's polynomial (src/kernels/scalar.h); rerun to get them.

Phi(-a) = exp(-a^2/2) g(a) for a >= 0, g(a) = exp(a^2/2) erfc(a / sqrt 2) / 2: smooth, 1/2 at 0,
~ 1 / (a sqrt(2 pi)) for large a. gelu_erf computes g(a) = r Q(u) with r = 1 / (K + a) and
u = K r - T0 = (1 - T0) - a r, for a in [0, A_MAX]. Q is a degree-DEG polynomial in u, a relative
minimax fit of g / r (Lawson's iteration on weighted least squares); its coefficients are then
rounded to float one at a time from the constant term up, the rest refitted after each, so that
the rounding costs little accuracy. Prints them highest degree first, as Horner's rule uses them.

  /usr/bin/python3 scripts/fit_gelu_erf.py [DEG K T0]     (numpy; the reference is math.erfc)

The defaults are what scalar.h uses. K and DEG came from scanning for the smallest float error
(bench/scalar_ulp_sweep): a larger K needs a lower degree, but near a = 0 an error in r moves g by
up to ~0.8 K times it. T0 = 0.625 makes 1 - T0 exact and keeps |u| <= 0.42, so that Horner's
partial sums stay near the result.
"""
import math
import sys

import numpy as np

DEG = int(sys.argv[1]) if len(sys.argv) > 1 else 9
K = float(sys.argv[2]) if len(sys.argv) > 2 else 3.5
T0 = float(sys.argv[3]) if len(sys.argv) > 3 else 0.625
A_MAX = 14.8  # gelu_erf clamps |x| here: beyond, x Phi(x) underflows to -0


def g(a):
    return 0.5 * math.exp(0.5 * a * a) * math.erfc(a / math.sqrt(2.0))


def main():
    t_min = K / (K + A_MAX)
    n = 20000
    # t = K / (K + a) in [t_min, 1], sampled at Chebyshev points
    t = np.cos(np.linspace(0.0, math.pi, n)) * 0.5 * (1 - t_min) + 0.5 * (1 + t_min)
    a = K * (1 - t) / t
    target = np.array([g(v) for v in a]) * (K + a)  # Q(u) = g / r
    u = t - T0
    # Monomials in u scaled to [-1, 1] keep the least-squares systems well conditioned.
    scale = max(abs(u.min()), abs(u.max()))
    V = np.vander(u / scale, DEG + 1, increasing=True)

    fixed = []  # the float coefficients of u^0, u^1, ... decided so far
    for j in range(DEG + 1):
        rest = target - sum(c * u**i for i, c in enumerate(fixed))
        cols = V[:, j:]
        w = np.full(n, 1.0 / n)
        for _ in range(200):
            sw = np.sqrt(w) / target
            coef, *_ = np.linalg.lstsq(cols * sw[:, None], rest * sw, rcond=None)
            err = (cols @ coef - rest) / target
            w = w * (np.abs(err) + 1e-30)
            w /= w.sum()
        fixed.append(float(np.float32(coef[0] / scale**j)))
    q = sum(c * u**i for i, c in enumerate(fixed))
    rel = np.abs(q / target - 1).max()
    print("max relative error of Q with float coefficients (exact arithmetic): %.3g = %.2f * 2^-24"
          % (rel, rel / 2.0**-24))
    print("coefficients, highest degree first:")
    for c in reversed(fixed):
        print("  %.9g" % c)


if __name__ == "__main__":
    main()
