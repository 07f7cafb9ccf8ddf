"""smelt: tensors, autograd, nn modules, optimizers and a graph compiler, from Python.

    import smelt
    x = smelt.randn(4, 3, requires_grad=True)
    loss = (x.relu() * 2).sum()
    loss.backward()
    x.grad

The tensors, ops and modules are smelt's C++ ones (the extension smelt._smelt); this package only
arranges them as PyTorch users expect: smelt.nn, smelt.nn.functional, smelt.optim, smelt.io,
smelt.data, smelt.library, smelt.no_grad.
"""
import functools as _functools
import types as _types

from . import _smelt

# Every public name of the extension's top level (its submodules are wrapped by the packages below).
globals().update({k: v for k, v in vars(_smelt).items()
                  if not k.startswith("_") and not isinstance(v, _types.ModuleType)})

from . import autograd, data, io, library, nn, onnx, optim  # noqa: E402

__version__ = "0.1.0"


class _GradMode:
    """A context manager and decorator that sets grad mode, restoring the previous one after."""

    enabled = True

    def __enter__(self):
        self._previous = _smelt.is_grad_enabled()
        _smelt.set_grad_enabled(self.enabled)
        return self

    def __exit__(self, *exc):
        _smelt.set_grad_enabled(self._previous)
        return False

    def __call__(self, fn):
        @_functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with type(self)():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradMode):
    """`with smelt.no_grad():` — ops inside record no autograd history."""

    enabled = False


class enable_grad(_GradMode):
    """`with smelt.enable_grad():` — turns recording back on inside a no_grad block."""

    enabled = True
