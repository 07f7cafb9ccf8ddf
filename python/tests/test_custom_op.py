"""User-defined ops and functions from Python: smelt.autograd.Function as PyTorch users write it
(gradients against finite differences and against PyTorch's own Function), and
smelt.library.register_op with NumPy kernels (eager, autograd, smelt.compile, a compiled training
step, ONNX-free IR round trip), with the errors users make."""
import numpy as np
import pytest

import smelt
import smelt.nn as nn


def numeric_grad(f, x, eps=1e-6):
    """Central differences of the scalar f at the float64 array x."""
    g = np.zeros_like(x)
    for i in range(x.size):
        plus, minus = x.copy(), x.copy()
        plus.flat[i] += eps
        minus.flat[i] -= eps
        g.flat[i] = (f(plus) - f(minus)) / (2 * eps)
    return g


class Cube(smelt.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return x * x * x * scale

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x * x * ctx.scale, None


class StraightThroughRound(smelt.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.round()

    @staticmethod
    def backward(ctx, grad):
        return grad


def test_function_gradients_match_finite_differences(rng):
    x0 = rng.standard_normal((3, 4))
    x = smelt.tensor(x0, requires_grad=True)
    y = Cube.apply(x, 2.0)
    np.testing.assert_allclose(y.detach().numpy(), x0 ** 3 * 2, rtol=1e-12)
    y.sum().backward()
    want = numeric_grad(lambda v: (v ** 3 * 2).sum(), x0)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-6, atol=1e-8)
    # Second order: the backward is built from smelt ops, so it differentiates again.
    x2 = smelt.tensor(x0, requires_grad=True)
    (g,) = smelt.autograd.grad(Cube.apply(x2, 2.0).sum(), x2, create_graph=True)
    (gg,) = smelt.autograd.grad(g.sum(), x2)
    np.testing.assert_allclose(gg.numpy(), 12 * x0, rtol=1e-10)


def test_function_matches_pytorch(torch, rng):
    """The same Function written for PyTorch and for smelt gives the same gradient."""
    class TorchST(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.round()

        @staticmethod
        def backward(ctx, grad):
            return grad

    x0 = rng.standard_normal((5,)) * 3
    xt = torch.tensor(x0, requires_grad=True)
    (TorchST.apply(xt) ** 2).sum().backward()
    xs = smelt.tensor(x0, requires_grad=True)
    (StraightThroughRound.apply(xs) ** 2).sum().backward()
    np.testing.assert_array_equal(xs.grad.numpy(), xt.grad.numpy())


def test_function_saved_tensor_changed_in_place_is_refused():
    x = smelt.randn(4, requires_grad=True)
    a = x * 1.0
    y = Cube.apply(a, 1.0)
    with smelt.no_grad():
        a.add_(1.0)
    with pytest.raises(RuntimeError, match="modified in place"):
        y.sum().backward()


def test_function_wrong_gradient_count_is_an_error():
    class Bad(smelt.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, grad):
            return grad

    x, y = smelt.randn(3, requires_grad=True), smelt.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="Bad.backward returned 1 gradients, but forward took 2"):
        Bad.apply(x, y).sum().backward()


def test_function_compiled(rng):
    """smelt.compile inlines the forward; a compiled training step records the backward, so a
    straight-through estimator trains compiled as it does eagerly."""
    f = smelt.compile(lambda x: StraightThroughRound.apply(x * 3.0) + 1.0)
    x = smelt.tensor(rng.standard_normal((6,)))
    np.testing.assert_array_equal(f(x).numpy(), (x * 3.0).round().numpy() + 1.0)

    def make():
        smelt.manual_seed(3)
        return nn.Linear(4, 2, dtype=smelt.float64)

    def loss(model, x):
        return (StraightThroughRound.apply(model(x) * 4.0) ** 2).mean()

    eager, model = make(), make()
    opt_e = smelt.optim.SGD(eager.parameters(), lr=0.01)
    opt = smelt.optim.SGD(model.parameters(), lr=0.01)
    step = smelt.compile_step(model, lambda x: loss(model, x), opt, backend="interpreter")
    for _ in range(3):
        x = smelt.tensor(rng.standard_normal((5, 4)))
        opt_e.zero_grad()
        want = loss(eager, x)
        want.backward()
        opt_e.step()
        got = step(x)
        np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-12)
    for pe, pc in zip(eager.parameters(), model.parameters()):
        np.testing.assert_allclose(pc.detach().numpy(), pe.detach().numpy(), rtol=1e-12)


def _load_example():
    """examples/custom_op_numpy.py as a module: its NumPy sinc kernels are the ones tested here."""
    import importlib.util
    import os
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    spec = importlib.util.spec_from_file_location("custom_op_numpy", os.path.join(root, "examples", "custom_op_numpy.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_example = _load_example()
sinc_forward, sinc_backward = _example.sinc_forward, _example.sinc_backward


@pytest.fixture(scope="module")
def np_sinc():
    return smelt.library.register_op("test_np_sinc", sinc_forward, backward=sinc_backward)


def test_numpy_op_eager_and_gradient(np_sinc, rng):
    x0 = rng.standard_normal((2, 5))
    x = smelt.tensor(x0, requires_grad=True)
    y = np_sinc(x)
    np.testing.assert_allclose(y.detach().numpy(), np.sinc(x0), rtol=1e-15)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), numeric_grad(lambda v: np.sinc(v).sum(), x0), rtol=1e-6, atol=1e-8)
    # float32 in: the NumPy float64 result is cast to the shape rule's dtype.
    x32 = smelt.tensor(x0.astype(np.float32))
    assert np_sinc(x32).dtype == smelt.float32
    assert smelt.library.is_registered("test_np_sinc")
    assert smelt.library.is_registered("test_np_sinc_backward")
    assert smelt.library.find_op("test_np_sinc").name == "test_np_sinc"


def test_numpy_op_compiled_and_trained(np_sinc, rng):
    f = smelt.compile(lambda x: np_sinc(x * 2.0) + 1.0)
    x = smelt.tensor(rng.standard_normal((3, 3)))
    np.testing.assert_array_equal(f(x).numpy(), np.sinc(x.numpy() * 2.0) + 1.0)
    assert f.report().op_steps >= 1

    def make():
        smelt.manual_seed(5)
        return nn.Linear(3, 3, dtype=smelt.float64)

    eager, model = make(), make()
    opt_e = smelt.optim.SGD(eager.parameters(), lr=0.1)
    opt = smelt.optim.SGD(model.parameters(), lr=0.1)
    step = smelt.compile_step(model, lambda x: np_sinc(model(x)).sum(), opt)
    for _ in range(3):
        x = smelt.tensor(rng.standard_normal((4, 3)))
        opt_e.zero_grad()
        want = np_sinc(eager(x)).sum()
        want.backward()
        opt_e.step()
        np.testing.assert_allclose(step(x).numpy(), want.detach().numpy(), rtol=1e-12)
    for pe, pc in zip(eager.parameters(), model.parameters()):
        np.testing.assert_allclose(pc.detach().numpy(), pe.detach().numpy(), rtol=1e-12)


def test_op_with_attributes_shape_rule_and_two_outputs(rng):
    def shape(x, **attrs):
        rows = x.shape[0]
        return [smelt.library.TensorMeta((rows,), x.dtype), smelt.library.TensorMeta((rows,), smelt.int64)]

    def forward(x, k=1):
        v = x.numpy()
        return np.sort(v, axis=1)[:, -k], np.argsort(v, axis=1)[:, -k]

    kth = smelt.library.register_op("test_np_kth_largest", forward, shape=shape, num_outputs=2)
    x0 = rng.standard_normal((4, 6))
    values, indices = kth(smelt.tensor(x0), k=2)
    np.testing.assert_array_equal(values.numpy(), np.sort(x0, axis=1)[:, -2])
    assert indices.dtype == smelt.int64
    np.testing.assert_array_equal(indices.numpy(), np.argsort(x0, axis=1)[:, -2])
    # No backward given: differentiating through it says so.
    x = smelt.tensor(x0, requires_grad=True)
    with pytest.raises(RuntimeError, match="test_np_kth_largest.*has no backward"):
        kth(x, k=1)[0].sum().backward()


def test_op_errors(np_sinc):
    with pytest.raises(RuntimeError, match="already exists"):
        smelt.library.register_op("test_np_sinc", sinc_forward)
    with pytest.raises(RuntimeError, match="not an identifier"):
        smelt.library.register_op("np sinc", sinc_forward)

    def writes(x):
        x.numpy()[0] = 7.0
        return x.numpy()

    bad = smelt.library.register_op("test_np_writes", writes)
    with pytest.raises(RuntimeError, match="forward changed its input 0"):
        bad(smelt.zeros(3, dtype=smelt.float64))

    def raises(x):
        raise ValueError("bad value in kernel")

    thrower = smelt.library.register_op("test_np_raises", raises)
    with pytest.raises(RuntimeError, match="test_np_raises.*bad value in kernel"):
        thrower(smelt.zeros(3))
    wrong = smelt.library.register_op("test_np_wrong_shape", lambda x: np.zeros(2))
    with pytest.raises(RuntimeError, match=r"result 0 has shape \(2,\), the shape rule says \(3,\)"):
        wrong(smelt.zeros(3))

    def few(ctx, grad):
        return ()

    fewer = smelt.library.register_op("test_np_few", sinc_forward, backward=few)
    x = smelt.randn(3, dtype=smelt.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="returned 0 gradients for 1 inputs"):
        fewer(x).sum().backward()


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


def test_function_saving_its_output_differentiates_twice(rng):
    """The saved output carries the function's history in backward: d/dx (g * y) = g * exp(x)."""
    x0 = rng.standard_normal(4)
    x = smelt.tensor(x0, requires_grad=True)
    (g,) = smelt.autograd.grad(Exp.apply(x).sum(), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), np.exp(x0), rtol=1e-12)
    (gg,) = smelt.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), np.exp(x0), rtol=1e-12)


def test_python_kernels_in_compiled_calls_from_two_threads(np_sinc):
    """Two Python threads call one compiled function whose plan calls a NumPy kernel: the plan
    runs without the GIL, so neither waits forever for the other (a deadlock before)."""
    import threading
    f = smelt.compile(lambda x: np_sinc(x) * 2.0)
    x = smelt.tensor(np.linspace(-2, 2, 4096))
    want = np.sinc(x.numpy()) * 2.0
    errors = []

    def worker():
        try:
            for _ in range(50):
                np.testing.assert_array_equal(f(x).numpy(), want)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "compiled calls from two threads deadlocked"
    assert not errors, errors


def test_numpy_example_checks_itself():
    """examples/custom_op_numpy.py: its own checks pass (run as a user runs it)."""
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([sys.executable, os.path.join(root, "examples", "custom_op_numpy.py")],
                       capture_output=True, text=True, env=dict(os.environ), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "FAILED" not in r.stdout


def test_view_op_shares_memory_differentiates_and_compiles(rng):
    # The diagonal of square matrices as a view op: no forward, a layout rule.
    def shape(x):
        return smelt.library.TensorMeta(x.shape[:-1], x.dtype)

    def view(in_shape, in_strides, in_offset, out_shape):
        return list(in_strides[:-2]) + [in_strides[-2] + in_strides[-1]], in_offset

    def backward(ctx, grad):
        n = grad.shape[-1]
        return np.eye(n) * grad.numpy()[..., None]

    diag = smelt.library.register_op("test_np_diagonal", view=view, shape=shape, backward=backward)
    x0 = rng.standard_normal((3, 4, 4))
    x = smelt.tensor(x0)
    d = diag(x)
    np.testing.assert_array_equal(d.numpy(), np.diagonal(x0, axis1=1, axis2=2))
    assert d.stride() == (16, 5) and d.storage_offset() == 0
    d.fill_(2.0)  # a write through the view reaches the input
    assert (np.diagonal(x.numpy(), axis1=1, axis2=2) == 2.0).all()
    # A strided input: the transposed matrices' diagonals are the same elements.
    np.testing.assert_array_equal(diag(x.permute(0, 2, 1)).numpy(), np.full((3, 4), 2.0))
    # Gradient (the NumPy backward) against the formula.
    leaf = smelt.tensor(x0, requires_grad=True)
    (diag(leaf * 3.0) * 2.0).sum().backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), np.broadcast_to(np.eye(4) * 6.0, (3, 4, 4)))
    # Compiled, fused as index arithmetic: equal to eager.
    f = smelt.compile(lambda t: (diag(t * 2.0) + 1.0).exp())
    y = smelt.tensor(rng.standard_normal((2, 5, 5)).astype(np.float32))
    np.testing.assert_array_equal(f(y).numpy(), (diag(y * 2.0) + 1.0).exp().numpy())
    assert f.report().op_steps == 0
    # A rule that is not affine is refused on the call.
    bad = smelt.library.register_op("test_np_bad_view", view=lambda s, st, o, out: ([st[0] * st[1]], o), shape=shape)
    with pytest.raises(smelt.Error, match="not affine"):
        bad(smelt.tensor(np.zeros((3, 3))))
