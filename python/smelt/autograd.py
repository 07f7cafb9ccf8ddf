"""smelt.autograd: gradients without touching .grad (smelt.autograd.grad), and functions with
hand-written gradients (smelt.autograd.Function), as PyTorch's torch.autograd."""
from ._smelt import Tensor as _Tensor
from ._smelt.autograd import _apply_function, grad  # noqa: F401


class FunctionCtx:
    """The `ctx` of a Function's forward and backward: save_for_backward / saved_tensors,
    needs_input_grad, and any attribute the forward sets for the backward."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self._saved = ()
        self._versions = ()

    def save_for_backward(self, *tensors):
        for t in tensors:
            if t is not None and not isinstance(t, _Tensor):
                raise TypeError(f"save_for_backward takes tensors (or None), got {type(t).__name__}")
        self._saved = tensors
        self._versions = tuple(None if t is None else t._version for t in tensors)

    @property
    def saved_tensors(self):
        for i, (t, v) in enumerate(zip(self._saved, self._versions)):
            if t is not None and t._version != v:
                raise RuntimeError(
                    f"saved tensor {i} of the function was modified in place after save_for_backward "
                    f"(version {v} when saved, {t._version} now); clone it before changing it")
        return self._saved


class Function:
    """A function with a hand-written gradient, as torch.autograd.Function:

        class Exp(smelt.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = x.exp()
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, grad):
                (y,) = ctx.saved_tensors
                return grad * y

        y = Exp.apply(x)

    forward runs with gradients off; backward returns one gradient per forward argument (None for
    arguments that are not tensors or need none). Written with smelt ops, both trace: smelt.compile
    inlines the forward, and a compiled training step records the backward. A compiled call that
    must differentiate the function itself refuses, naming it (its forward was traced without the
    backward); NumPy code belongs in smelt.library.register_op, whose kernels run as plan steps.
    """

    @staticmethod
    def forward(ctx, *args):
        raise NotImplementedError("a Function subclass defines forward(ctx, *args)")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("a Function subclass defines backward(ctx, *grad_outputs)")

    @classmethod
    def apply(cls, *args):
        positions = [i for i, a in enumerate(args) if isinstance(a, _Tensor)]
        ctx = FunctionCtx(tuple(isinstance(a, _Tensor) and a.requires_grad for a in args))
        single = []

        def forward():
            out = cls.forward(ctx, *args)
            single.append(not isinstance(out, (tuple, list)))
            return [out] if single[0] else list(out)

        def backward(grads):
            result = cls.backward(ctx, *grads)
            if not isinstance(result, (tuple, list)):
                result = (result,)
            if len(result) != len(args):
                raise RuntimeError(f"{cls.__name__}.backward returned {len(result)} gradients, but forward "
                                   f"took {len(args)} arguments (one per argument; None for non-tensors)")
            return [result[i] for i in positions]

        outs = _apply_function(cls.__name__, [args[i] for i in positions], forward, backward)
        return outs[0] if single[0] else tuple(outs)
