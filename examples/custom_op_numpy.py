"""A user-defined op from Python whose forward and backward are NumPy code: the normalized sinc,
sin(pi x) / (pi x), registered with smelt.library.register_op.

It trains a one-layer model through the op eagerly and with a compiled training step (where the
NumPy kernels run as steps of the plan), and checks itself: the gradient against central
differences, the compiled step against the eager loop. Exits non-zero when a check fails.

    PYTHONPATH=build/python python3 examples/custom_op_numpy.py
"""
import sys

import numpy as np

import smelt
import smelt.nn as nn


def sinc_forward(x):
    return np.sinc(x.numpy())


def sinc_backward(ctx, grad):
    """d/dx sinc(x) = (cos(pi x) - sinc(x)) / x, and 0 at x = 0."""
    (x,) = ctx.inputs
    v = x.numpy()
    safe = np.where(v == 0, 1.0, v)
    return grad.numpy() * np.where(v == 0, 0.0, (np.cos(np.pi * v) - np.sinc(v)) / safe)


def main():
    sinc = smelt.library.register_op("numpy_sinc", sinc_forward, backward=sinc_backward)
    rng = np.random.default_rng(0)
    failures = 0

    def check(ok, what):
        nonlocal failures
        print(f"{what:<60} {'ok' if ok else 'FAILED'}")
        failures += 0 if ok else 1

    # The gradient against central differences.
    x0 = rng.standard_normal(8)
    x = smelt.tensor(x0, requires_grad=True)
    sinc(x).sum().backward()
    eps = 1e-6
    numeric = (np.sinc(x0 + eps) - np.sinc(x0 - eps)) / (2 * eps)
    check(np.allclose(x.grad.numpy(), numeric, rtol=1e-6, atol=1e-9), "backward = central differences")

    # Training through the op: eager loop and compiled step side by side.
    def make():
        smelt.manual_seed(1)
        return nn.Linear(4, 1, dtype=smelt.float64)

    eager, model = make(), make()
    opt_e = smelt.optim.SGD(eager.parameters(), lr=0.5)
    opt = smelt.optim.SGD(model.parameters(), lr=0.5)
    data = rng.standard_normal((64, 4))
    target = np.sinc(data @ np.array([0.5, -0.25, 0.125, 1.0]))[:, None]
    xs, ts = smelt.tensor(data), smelt.tensor(target)

    def loss(m):
        return ((sinc(m(xs)) - ts) ** 2).mean()

    step = smelt.compile_step(model, lambda: loss(model), opt)
    first = None
    for _ in range(30):
        opt_e.zero_grad()
        want = loss(eager)
        want.backward()
        opt_e.step()
        got = step()
        first = first if first is not None else got.item()
        if not np.allclose(got.numpy(), want.detach().numpy(), rtol=1e-12):
            check(False, "compiled step = eager step")
            break
    else:
        check(True, "compiled step = eager step (30 steps)")
    check(got.item() < first, f"loss falls: {first:.4f} -> {got.item():.4f}")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
