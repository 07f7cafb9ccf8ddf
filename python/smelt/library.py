"""smelt.library: user-defined ops whose kernels are Python callables.

    import numpy as np, smelt

    def forward(x):
        return np.sinc(x.numpy())

    def backward(ctx, grad):
        (x,) = ctx.inputs
        v = x.numpy()
        d = np.where(v == 0, 0.0, (np.cos(np.pi * v) - np.sinc(v)) / np.where(v == 0, 1, v))
        return grad.numpy() * d

    sinc = smelt.library.register_op("np_sinc", forward, backward=backward)
    y = sinc(x)

A registered op works in eager code, autograd, smelt.compile (a plan step that calls Python), the IR
text and ONNX import; see register_op's docstring. smelt.autograd.Function is the other way to
write a gradient by hand, from smelt ops.
"""
from ._smelt.library import (BackwardContext, CustomOp, TensorMeta, find_op,  # noqa: F401
                             is_registered, register_op)
