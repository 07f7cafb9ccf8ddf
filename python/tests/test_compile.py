"""smelt.compile over Python callables: traced through the C++ dispatcher, checked against eager."""
import numpy as np
import pytest
import smelt
from smelt import nn


def gelu_chain(x, a, b):
    return smelt.nn.functional.gelu(x * a + b)


def test_compiled_python_function_matches_eager(rng):
    x0 = rng.standard_normal((64, 32)).astype(np.float32)
    a, b = smelt.tensor(1.5), smelt.tensor(0.25)
    f = smelt.compile(gelu_chain, backend="interpreter")
    x = smelt.tensor(x0)
    np.testing.assert_allclose(f(x, a, b).numpy(), gelu_chain(x, a, b).numpy(), rtol=1e-6, atol=1e-7)
    f(x, a, b)
    assert f.num_compiles == 1
    x2 = smelt.tensor(x0[:16])
    np.testing.assert_allclose(f(x2, a, b).numpy(), gelu_chain(x2, a, b).numpy(), rtol=1e-6, atol=1e-7)
    assert f.num_compiles == 2 and f.recompile_reasons()
    assert f.report().nodes_traced > 0


def test_compiled_tuple_outputs_and_captured_weights(rng):
    w = smelt.tensor(rng.standard_normal((8, 4)).astype(np.float32))

    def two(x):
        h = (x @ w).relu()
        return h.softmax(-1), h.sum(1)
    f = smelt.compile(two, backend="interpreter")
    x = smelt.tensor(rng.standard_normal((3, 8)).astype(np.float32))
    got, want = f(x), two(x)
    assert isinstance(got, tuple) and len(got) == 2
    for g, e in zip(got, want):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-5, atol=1e-6)


def test_compile_module_of_a_python_module(rng):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(6, 3)
            self.gain = nn.Parameter(smelt.full((3,), 2.0))

        def forward(self, x):
            return self.fc(x).tanh() * self.gain
    net = Net()
    f = smelt.compile_module(net, backend="interpreter")
    x = smelt.tensor(rng.standard_normal((5, 6)).astype(np.float32))
    y = f(x)
    assert y.requires_grad                      # the parameters' gradients go through it, as eager
    np.testing.assert_allclose(y.detach().numpy(), net(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    with smelt.no_grad():
        net.gain.fill_(-1.0)                    # parameters are read on every call
        np.testing.assert_allclose(f(x).numpy(), net(x).numpy(), rtol=1e-5, atol=1e-6)


def test_compile_errors_reach_python():
    f = smelt.compile(lambda x: smelt.tensor([x.sum().item()]), backend="interpreter")
    with pytest.raises(smelt.Error, match="symbolic"):
        f(smelt.ones(3))

    def boom(x):
        raise KeyError("from the traced function")
    with pytest.raises(KeyError, match="from the traced function"):
        smelt.compile(boom)(smelt.ones(2))
    g = smelt.compile(lambda x: x * 2, backend="interpreter")
    np.testing.assert_array_equal(g(smelt.ones(2)).numpy(), [2, 2])  # tracing still works after errors
    with pytest.raises(TypeError, match="callable"):
        smelt.compile(3)
    with pytest.raises(TypeError, match="return a smelt.Tensor"):
        smelt.compile(lambda x: 3, backend="interpreter")(smelt.ones(1))


def test_captured_tensors_are_read_on_every_call(rng):
    # Found by a newcomer: a from_numpy tensor changed through NumPy was stale in some uses.
    a = rng.standard_normal(4).astype(np.float32)
    w = smelt.from_numpy(a)
    v = smelt.tensor(rng.standard_normal(4).astype(np.float32))

    def f(x):
        return x * w + w.sum() + v.exp()
    g = smelt.compile(f, backend="interpreter")
    x = smelt.tensor(rng.standard_normal((3, 4)).astype(np.float32))
    for change in (lambda: None, lambda: a.__setitem__(1, -5.0), lambda: v.mul_(2.0)):
        with smelt.no_grad():
            change()
        np.testing.assert_allclose(g(x).numpy(), f(x).numpy(), rtol=1e-6, atol=1e-6)
    assert g.num_compiles == 1
    frozen = smelt.compile(f, backend="interpreter", freeze=True)
    frozen(x)
    with smelt.no_grad():
        v.add_(1.0)
    np.testing.assert_allclose(frozen(x).numpy(), f(x).numpy(), rtol=1e-6, atol=1e-6)
    assert frozen.num_compiles == 2 and "changed in place" in frozen.recompile_reasons()[-1]


def test_the_returned_structure_follows_each_signature():
    # Found by a newcomer: one flag for all signatures, so a single tensor came back as a tuple
    # after another signature returned a list.
    g = smelt.compile(lambda x: x * 2 if x.shape[0] == 2 else [x * 2, x + 1], backend="interpreter")
    a, b = smelt.ones(2), smelt.ones(3)
    assert isinstance(g(a), smelt.Tensor)
    assert isinstance(g(b), tuple)
    assert isinstance(g(a), smelt.Tensor)
    assert isinstance(g(b), tuple)


def test_changing_a_captured_tensor_inside_is_refused():
    counter = smelt.zeros(1)

    def step(x):
        counter.add_(1.0)
        return x + counter
    with pytest.raises(smelt.Error, match="captured"):
        smelt.compile(step, backend="interpreter")(smelt.ones(1))
    assert counter.numpy()[0] == 0


def test_dynamic_sequence_and_marked_dims(rng):
    """A (batch, sequence) function: three compiles for many sizes; marked dims: one."""

    def pooled(x):
        return smelt.mean(smelt.softmax(x * 2.0, -1), 1)

    f = smelt.compile(pooled, backend="interpreter")
    sizes = [(2, 8), (4, 8), (4, 12), (1, 5), (3, 33), (7, 1)]
    for b, s in sizes:
        x = smelt.tensor(rng.standard_normal((b, s, 6)).astype(np.float32))
        np.testing.assert_allclose(f(x).numpy(), pooled(x).numpy(), rtol=1e-5, atol=1e-6)
    assert f.num_compiles == 3, f.recompile_reasons()
    assert "input 0 dim 1: 8 -> 12" in f.recompile_reasons()[1]
    marked = smelt.compile(pooled, backend="interpreter", dynamic_dims=[(0, 0), (0, 1)])
    for b, s in sizes:
        x = smelt.tensor(rng.standard_normal((b, s, 6)).astype(np.float32))
        np.testing.assert_allclose(marked(x).numpy(), pooled(x).numpy(), rtol=1e-5, atol=1e-6)
    assert marked.num_compiles == 1, marked.recompile_reasons()
    bad = smelt.compile(pooled, backend="interpreter", dynamic_dims=[(0, 5)])
    with pytest.raises(Exception, match="dynamic_dims names input 0 dim 5"):
        bad(smelt.tensor(np.ones((2, 3, 6), np.float32)))


def test_compiled_function_is_differentiable_mixed_with_eager(rng):
    w = smelt.tensor(rng.standard_normal((8, 4)).astype(np.float32), requires_grad=True)
    x = smelt.tensor(rng.standard_normal((3, 8)).astype(np.float32), requires_grad=True)

    def head(x):
        return (x @ w).tanh().softmax(-1)

    def grads(fn):
        w.grad = None
        x.grad = None
        loss = (fn(x) * fn(x)).sum() + (x @ w).sum()  # the compiled part and an eager part
        loss.backward()
        return w.grad.numpy().copy(), x.grad.numpy().copy()

    want = grads(head)
    f = smelt.compile(head, backend="interpreter", memory_budget=0.0)
    for g, e in zip(grads(f), want):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    report = f.report()
    assert report.differentiable and "saved for the backward" in report.partition
    assert report.saved_bytes <= report.saved_bytes_no_recompute
    with smelt.no_grad():
        assert not f(x).requires_grad


def test_memory_stats_count_storages_and_nodes():
    before = smelt.memory_stats()
    x = smelt.zeros((64,))
    w = smelt.ones((64,), requires_grad=True)
    y = x * w
    now = smelt.memory_stats()
    assert now["storages"] - before["storages"] >= 3 and now["bytes"] - before["bytes"] >= 3 * 64 * 4
    assert now["autograd_nodes"] > before["autograd_nodes"]
    del x, w, y
    after = smelt.memory_stats()
    for key in ("storages", "bytes", "autograd_nodes"):
        assert after[key] == before[key], key
    assert after["peak_bytes"] >= now["bytes"]
    smelt.reset_memory_peak()
    assert smelt.memory_stats()["peak_bytes"] == after["bytes"]


def test_char_lm_example_compiled_step_matches_eager():
    """examples/train_char_lm.py's model: the compiled training step gives eager's losses and gradients."""
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "train_char_lm.py"
    spec = importlib.util.spec_from_file_location("train_char_lm", path)
    lm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lm)
    smelt.manual_seed(1)
    eager = lm.CharLM(12, 8, 16, 2)
    smelt.manual_seed(1)
    compiled = lm.CharLM(12, 8, 16, 2)
    step = smelt.compile_training_step(compiled, lambda x, y: lm.lm_loss(compiled, x, y), backend="interpreter")
    for s in range(3):
        x = smelt.randint(0, 12, (4, 8))
        y = smelt.randint(0, 12, (4, 8))
        for m in (eager, compiled):
            m.zero_grad()
        want = lm.lm_loss(eager, x, y)
        want.backward()
        got = step(x, y)
        np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
        for (name, pe), (_, pc) in zip(eager.named_parameters(), compiled.named_parameters()):
            np.testing.assert_allclose(pc.grad.numpy(), pe.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)


def test_gradient_monitor_names_a_nan_eager_and_compiled(rng):
    model = nn.Linear(4, 3)
    x = smelt.tensor(rng.standard_normal((5, 4)).astype(np.float32))
    bad = x.numpy().copy()
    bad[0, 0] = -5.0
    monitor = smelt.GradientMonitor(model)
    model(smelt.log(x.abs() + 1.0)).sum().backward()
    s = monitor.check()
    assert [name for name, _ in s["norms"]] == ["weight", "bias"] and not s["non_finite"]
    model.zero_grad()
    model(smelt.log(smelt.tensor(bad) + 2.0)).sum().backward()  # log(-3): NaN
    s = monitor.check()
    assert "weight" in s["non_finite"] and "log" in s["origin"], s
    del monitor
    step = smelt.compile_training_step(model, lambda v: model(smelt.log(v + 2.0)).sum(), backend="interpreter",
                                       gradient_norms=True)
    watch = smelt.GradientMonitor(model, detect_anomaly=False)
    model.zero_grad()
    step(x.abs())
    assert not watch.check(step)["non_finite"]
    model.zero_grad()
    step(smelt.tensor(bad))
    s = watch.check(step)
    assert "weight" in s["non_finite"] and "log" in s["origin"], s


def test_compile_step_runs_the_optimizer_in_the_plan(rng):
    """compile_step: loss, gradients, clipping and AdamW's update in one plan equal the eager loop."""
    def make():
        smelt.manual_seed(9)
        return nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 3))
    eager, model = make(), make()
    opt_e = smelt.optim.AdamW(eager.parameters(), lr=1e-2)
    opt = smelt.optim.AdamW(model.parameters(), lr=1e-2)
    sched_e = smelt.optim.lr_scheduler.StepLR(opt_e, 1, 0.9)
    sched = smelt.optim.lr_scheduler.StepLR(opt, 1, 0.9)
    loss_fn = smelt.nn.functional.cross_entropy
    step = smelt.compile_step(model, lambda x, t: loss_fn(model(x), t), opt, clip_grad_norm=0.5,
                              backend="interpreter")
    memory = [p.detach().numpy().ctypes.data for p in model.parameters()]
    for s in range(6):
        x = smelt.tensor(rng.standard_normal((8, 6)).astype(np.float32))
        t = smelt.tensor((np.arange(8) + s) % 3)
        opt_e.zero_grad()
        want = loss_fn(eager(x), t)
        want.backward()
        smelt.nn.clip_grad_norm_(eager.parameters(), 0.5)
        opt_e.step()
        sched_e.step()
        got = step(x, t)
        sched.step()
        np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
    for (name, pe), (_, pc) in zip(eager.named_parameters(), model.named_parameters()):
        np.testing.assert_allclose(pc.detach().numpy(), pe.detach().numpy(), rtol=1e-4, atol=1e-6, err_msg=name)
        assert pc.grad is None
    assert [p.detach().numpy().ctypes.data for p in model.parameters()] == memory, "updated in place"
    assert step.num_compiles == 1
    assert "in place" in step.report().plan
