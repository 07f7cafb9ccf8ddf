"""Autograd from Python: .grad, backward, no_grad, hooks, autograd.grad, in-place rules."""
import numpy as np
import pytest
import smelt


def test_backward_matches_pytorch(torch, rng):
    x0 = rng.standard_normal((4, 5))
    w0 = rng.standard_normal((5, 3))
    x = smelt.tensor(x0, requires_grad=True)
    w = smelt.tensor(w0, requires_grad=True)
    y = ((x @ w).tanh() * 2 - 1).softmax(-1).log().sum() + (x ** 2).mean() / 3
    y.backward()
    tx = torch.tensor(x0, requires_grad=True)
    tw = torch.tensor(w0, requires_grad=True)
    ty = ((tx @ tw).tanh() * 2 - 1).softmax(-1).log().sum() + (tx ** 2).mean() / 3
    ty.backward()
    np.testing.assert_allclose(y.item(), ty.item(), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_grad_attributes():
    x = smelt.ones(3, requires_grad=True)
    assert x.grad is None and x.is_leaf and x.grad_fn is None
    y = (x * 3).sum()
    assert not y.is_leaf and y.grad_fn.endswith("Backward")
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [6, 6, 6])   # accumulated twice
    x.grad = None
    assert x.grad is None
    z = x * 2
    z.backward(smelt.tensor([1.0, 0.0, -1.0]))
    np.testing.assert_array_equal(x.grad.numpy(), [2, 0, -2])
    with pytest.raises(RuntimeError, match="backward"):
        (x * 2).backward()                                      # non-scalar without a gradient


def test_no_grad_context_and_decorator():
    x = smelt.ones(2, requires_grad=True)
    with smelt.no_grad():
        assert not (x * 2).requires_grad
        assert not smelt.is_grad_enabled()
        with smelt.enable_grad():
            assert (x * 2).requires_grad
    assert smelt.is_grad_enabled() and (x * 2).requires_grad

    @smelt.no_grad()
    def f(t):
        return t * 2
    assert not f(x).requires_grad
    try:
        with smelt.no_grad():
            raise KeyError("x")
    except KeyError:
        pass
    assert smelt.is_grad_enabled()                              # restored after an exception


def test_autograd_grad_and_hooks():
    x = smelt.tensor([1.0, 2.0], requires_grad=True)
    (g,) = smelt.autograd.grad((x ** 3).sum(), x, create_graph=True)
    np.testing.assert_array_equal(g.numpy() if not g.requires_grad else g.detach().numpy(), [3, 12])
    (gg,) = smelt.autograd.grad(g.sum(), x)
    np.testing.assert_array_equal(gg.numpy(), [6, 12])
    seen = []
    x.register_hook(lambda grad: seen.append(grad.tolist()) or grad * 10)
    (x * 1).sum().backward()
    assert seen == [[1.0, 1.0]]
    np.testing.assert_array_equal(x.grad.numpy(), [10, 10])


def test_inplace_rules_from_python():
    w = smelt.ones(2, requires_grad=True)
    with pytest.raises(smelt.Error, match="leaf"):
        w += 1
    with smelt.no_grad():
        w -= 0.5                                                 # an optimizer-style update
    np.testing.assert_array_equal(w.detach().numpy(), [0.5, 0.5])
    y = w * 1
    y *= 3                                                       # a non-leaf: history rebased
    y.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3, 3])
