"""smelt.Tensor from Python: creation, metadata, operators with numbers on either side, indexing."""
import math

import numpy as np
import pytest
import smelt


def test_tensor_infers_pytorch_dtypes():
    assert smelt.tensor([1, 2]).dtype == smelt.int64
    assert smelt.tensor([1.0, 2]).dtype == smelt.float32
    assert smelt.tensor([True, False]).dtype == smelt.bool
    assert smelt.tensor(3.5).shape == ()
    assert smelt.tensor([]).shape == (0,)
    assert smelt.tensor([[1, 2]], dtype=smelt.float64).dtype == smelt.float64
    assert smelt.tensor([1, 2], dtype="f32").dtype == smelt.float32
    assert smelt.tensor([1, 2], dtype=np.uint8).dtype == smelt.uint8
    assert repr(smelt.float32) == "smelt.float32"


def test_tensor_rejects_what_it_cannot_hold():
    with pytest.raises(TypeError, match="regular shape"):
        smelt.tensor([[1, 2], [3]])
    with pytest.raises(TypeError, match="int16.*dtype="):
        smelt.tensor(np.arange(3, dtype=np.int16))
    assert smelt.tensor(np.arange(3, dtype=np.int16), dtype=smelt.int64).tolist() == [0, 1, 2]
    assert smelt.tensor(np.arange(3, dtype=np.int32)).dtype == smelt.int32
    with pytest.raises(TypeError, match="no dtype for NumPy's float16"):
        smelt.tensor([1.0], dtype=np.float16)
    with pytest.raises(RuntimeError, match="unknown dtype 'f16'"):
        smelt.tensor([1.0], dtype="f16")


def test_metadata_item_tolist():
    t = smelt.zeros(2, 3, dtype=smelt.float64)
    assert t.shape == (2, 3) and t.size() == (2, 3) and t.size(-1) == 3 and t.ndim == 2
    assert t.stride() == (3, 1) and t.numel() == 6 and len(t) == 2 and t.is_contiguous()
    assert not t.t().is_contiguous() and t.t().stride() == (1, 3)
    big = smelt.tensor([2**63 - 1, -2**63])
    assert big.tolist() == [2**63 - 1, -2**63]          # exact, not through double
    assert big[0].item() == 2**63 - 1 and isinstance(big[0].item(), int)
    assert smelt.tensor([True]).item() is True
    assert smelt.tensor(2.5).tolist() == 2.5
    assert smelt.tensor([[1.5, -0.0]]).tolist() == [[1.5, -0.0]]
    assert math.copysign(1, smelt.tensor([-0.0]).item()) == -1
    assert float(smelt.tensor([3.0])) == 3.0 and int(smelt.tensor([7])) == 7
    with pytest.raises(RuntimeError, match="only a one-element tensor"):
        smelt.ones(2).item()
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(smelt.ones(2))


SPECIAL = np.array([0.0, -0.0, 1.5, -2.25, np.inf, -np.inf, np.nan, 3.0], dtype=np.float32)


def same(actual, expected):
    actual = np.asarray(actual)
    assert actual.dtype == np.asarray(expected).dtype, (actual.dtype, np.asarray(expected).dtype)
    np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize("number", [2.0, -0.5, 0.0])
def test_arithmetic_with_numbers_on_either_side(number):
    a = SPECIAL
    t = smelt.tensor(a)
    n = np.float32(number)
    with np.errstate(all="ignore"):
        same(t + number, a + n)
        same(number + t, n + a)
        same(t - number, a - n)
        same(number - t, n - a)
        same(t * number, a * n)
        same(number * t, n * a)
        same(t / number, a / n)
        same(number / t, n / a)
        same(-t, -a)
        same(t ** 2, a ** np.float32(2))
        same(abs(t), np.abs(a))


def test_tensor_tensor_arithmetic_broadcasts(rng):
    a = rng.standard_normal((3, 1)).astype(np.float64)
    b = rng.standard_normal((1, 4)).astype(np.float64)
    ta, tb = smelt.tensor(a), smelt.tensor(b)
    same(ta + tb, a + b)
    same(ta - tb, a - b)
    same(ta * tb, a * b)
    same(ta / tb, a / b)
    same(ta @ tb, a @ b)
    same(ta.add(tb), a + b)


def test_comparisons_give_bool():
    t = smelt.tensor(SPECIAL)
    for op in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"):
        for other in (0.0, 1.5):
            same(getattr(t, op)(other), getattr(SPECIAL, op)(np.float32(other)))
    same(2.0 > t, np.float32(2.0) > SPECIAL)   # reflected: Python swaps to t < 2
    same(t == t, SPECIAL == SPECIAL)            # NaN != NaN
    assert (t == None) is False                 # noqa: E711  (not a tensor op)


def test_promotions_that_keep_the_number():
    i = smelt.tensor([1, 2, 3])
    same(i + 1, np.array([2, 3, 4]))                                 # int stays int64
    same(i + 0.5, np.array([1.5, 2.5, 3.5], dtype=np.float32))       # float number -> float32
    same(i / 2, np.array([0.5, 1.0, 1.5], dtype=np.float32))         # true division
    same(i > 1.5, np.array([False, True, True]))                     # not truncated to 1
    big = smelt.tensor([2**62 + 1])
    same(big == 2**62 + 1, np.array([True]))                         # int64 compare stays exact
    same(smelt.tensor([True, False]) + 1, np.array([2, 1]))


def test_inplace_operators_write_the_same_tensor():
    t = smelt.zeros(3)
    alias = t
    t += 2
    t *= smelt.tensor([1.0, 2.0, 3.0])
    t -= 1
    t /= 2
    assert alias is t
    same(t, np.array([0.5, 1.5, 2.5], dtype=np.float32))
    t.add_(smelt.ones(3), alpha=2).mul_(2).clamp_(max=8)
    same(t, np.array([5.0, 7.0, 8.0], dtype=np.float32))
    with pytest.raises(TypeError):
        t.mul_("x")


INDEXES = [
    1, -1, slice(None), slice(1, None), slice(None, -1), slice(None, None, 2), slice(-3, -1), slice(5, 1),
    slice(100, 200), (1, 2), (slice(None), 0), (Ellipsis, 1), (None, 0), (0, None, slice(1, 3)),
    (Ellipsis, None), (slice(None), None, slice(None, None, 3)), (1, Ellipsis, 2), (), (-2, slice(1, None, 2), -1),
]


@pytest.mark.parametrize("index", INDEXES, ids=repr)
def test_getitem_matches_numpy(index, rng):
    a = rng.standard_normal((4, 5, 6)).astype(np.float32)
    same(smelt.tensor(a)[index], a[index])


def test_getitem_views_share_and_setitem_writes():
    t = smelt.zeros(3, 4)
    v = t[1:, ::2]
    v.fill_(1.0)
    t[0] = smelt.tensor([1.0, 2.0, 3.0, 4.0])
    t[2, -1] = 7
    t[..., 1] = 5
    expected = np.zeros((3, 4), dtype=np.float32)
    expected[1:, ::2] = 1
    expected[0] = [1, 2, 3, 4]
    expected[2, -1] = 7
    expected[..., 1] = 5
    same(t, expected)
    t[:] = np.full((3, 4), 2.0, dtype=np.float32)
    same(t, np.full((3, 4), 2.0, dtype=np.float32))


def test_tensor_and_list_indices():
    a = np.arange(20, dtype=np.float32).reshape(4, 5)
    t = smelt.tensor(a)
    same(t[smelt.tensor([3, 0, 3])], a[[3, 0, 3]])
    same(t[:, [4, 1]], a[:, [4, 1]])
    same(t[smelt.tensor([[1, 2], [0, 0]])], a[np.array([[1, 2], [0, 0]])])
    with pytest.raises(IndexError, match="boolean mask"):
        t[t > 3]
    with pytest.raises(IndexError, match="not supported"):
        t[[0, 1]] = 0.0


def test_bad_indices_raise():
    t = smelt.zeros(2, 3)
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0, 0]
    with pytest.raises(IndexError, match="out of range"):
        t[2]
    with pytest.raises(ValueError, match="step must be greater than zero"):
        t[::-1]
    with pytest.raises(IndexError, match="single ellipsis"):
        t[..., ...]
    with pytest.raises(TypeError, match="tensor index"):
        t["a"]
    assert [r.tolist() for r in smelt.tensor([[1, 2], [3, 4]])] == [[1, 2], [3, 4]]  # iteration


def test_empty_and_size_one_dims():
    e = smelt.zeros(0, 3)
    assert (e + 1).shape == (0, 3) and e.sum().item() == 0.0 and e[1:].shape == (0, 3)
    assert e.tolist() == []
    s = smelt.ones(1, 3)
    assert (s + smelt.ones(4, 1)).shape == (4, 3)
    assert s.squeeze(0).shape == (3,) and s[0].shape == (3,)


def test_methods_match_numpy(rng):
    a = rng.standard_normal((3, 4))
    t = smelt.tensor(a)
    np.testing.assert_allclose(t.exp().numpy(), np.exp(a), rtol=1e-12)
    np.testing.assert_allclose(t.sum(1).numpy(), a.sum(1), rtol=1e-12)
    np.testing.assert_allclose(t.mean((0, 1), keepdim=True).numpy(), a.mean(keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(t.amax(0).numpy(), a.max(0))
    np.testing.assert_allclose(t.var(1, correction=0).numpy(), a.var(1), rtol=1e-12)
    assert t.argmax(1).tolist() == a.argmax(1).tolist() and t.argmax().item() == a.argmax()
    np.testing.assert_allclose(t.softmax(-1).numpy(), np.exp(a) / np.exp(a).sum(-1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(t.reshape(4, 3).numpy(), a.reshape(4, 3))
    np.testing.assert_allclose(t.permute(1, 0).numpy(), a.T)
    np.testing.assert_allclose(t.T.numpy(), a.T)
    np.testing.assert_allclose(t.clamp(min=0).numpy(), np.maximum(a, 0))
    assert t.to(smelt.float32).dtype == smelt.float32 and t.long().dtype == smelt.int64
    with pytest.raises(TypeError, match="amax"):
        t.max(1)
    assert t.max().item() == a.max()
    parts = t.split(2, 1)
    assert [p.shape for p in parts] == [(3, 2), (3, 2)]
    np.testing.assert_allclose(smelt.cat([t, t], 0).numpy(), np.concatenate([a, a]))
    np.testing.assert_allclose(smelt.where(t > 0, t, 0.0).numpy(), np.where(a > 0, a, 0.0))


@pytest.mark.parametrize("name,low,high,ref", [
    ("floor", -3, 3, np.floor), ("ceil", -3, 3, np.ceil), ("round", -3, 3, np.round),
    ("sin", -3, 3, np.sin), ("cos", -3, 3, np.cos), ("tan", -1.2, 1.2, np.tan),
    ("asin", -0.99, 0.99, np.arcsin), ("acos", -0.99, 0.99, np.arccos), ("atan", -3, 3, np.arctan),
    ("sinh", -3, 3, np.sinh), ("cosh", -3, 3, np.cosh), ("asinh", -3, 3, np.arcsinh),
    ("acosh", 1, 4, np.arccosh), ("atanh", -0.99, 0.99, np.arctanh)])
def test_rounding_and_trigonometric_methods_match_numpy(rng, name, low, high, ref):
    a = rng.uniform(low, high, (3, 5))
    a[0, 0] = 2.5 if name == "round" else a[0, 0]  # half to even, as NumPy
    t = smelt.tensor(a)
    np.testing.assert_allclose(getattr(t, name)().numpy(), ref(a), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(getattr(smelt, name)(t).numpy(), ref(a), rtol=1e-12, atol=1e-15)


def test_prod_cumsum_topk_match_numpy(rng):
    a = rng.standard_normal((3, 5))
    a[1, 2] = 0.0
    t = smelt.tensor(a)
    np.testing.assert_allclose(t.prod(1).numpy(), a.prod(1), rtol=1e-12)
    np.testing.assert_allclose(smelt.prod(t, 0, keepdim=True).numpy(), a.prod(0, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(t.cumsum(1).numpy(), a.cumsum(1), rtol=1e-12)
    np.testing.assert_allclose(smelt.cumsum(t, 0).numpy(), a.cumsum(0), rtol=1e-12)
    values, indices = t.topk(2)
    order = np.argsort(-a, axis=1, kind="stable")[:, :2]
    assert indices.tolist() == order.tolist()
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(a, order, 1))
    small, _ = smelt.topk(t, 1, dim=0, largest=False)
    np.testing.assert_array_equal(small.numpy(), a.min(0, keepdims=True))
    x = smelt.tensor([2.0, 0.0, 3.0], requires_grad=True)
    x.prod().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.0, 6.0, 0.0])
    with pytest.raises(smelt.Error):
        t.topk(6)


def test_activation_methods_match_the_functions(rng):
    a = rng.standard_normal((4, 3))
    t = smelt.tensor(a)
    F = smelt.nn.functional
    for got, want in [(t.silu(), F.silu(t)), (t.gelu(approximate="tanh"), F.gelu(t, approximate="tanh")),
                      (t.leaky_relu(0.2), F.leaky_relu(t, 0.2)), (t.softplus(2.0, 1.0), F.softplus(t, 2.0, 1.0))]:
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(t.where(t > 0, 0.5).numpy(), np.where(a > 0, a, 0.5))
    with pytest.raises(ValueError, match="approximate"):
        t.gelu(approximate="fast")


def test_retain_grad_keeps_a_non_leaf_gradient():
    x = smelt.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = x * 2.0
    assert not y.retains_grad
    y.retain_grad()
    assert y.retains_grad
    (y * y).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), [4.0, -8.0, 12.0])
    np.testing.assert_allclose(x.grad.numpy(), [8.0, -16.0, 24.0])


def test_operator_slots_and_methods_agree():
    # `a + b` of two plain tensors takes the direct slot; subclasses (Parameter), numbers and
    # reflected forms go through the methods' path: same results, same errors.
    p = smelt.nn.Parameter(smelt.tensor([1.0, 2.0]))
    t = smelt.tensor([3.0, 4.0])
    for x, y in ((p, t), (t, p), (t, t)):
        for op in ("__add__", "__sub__", "__mul__", "__truediv__"):
            expected = getattr(x.detach().numpy(), op)(y.detach().numpy())
            np.testing.assert_array_equal(getattr(x, op)(y).detach().numpy(), expected)
    np.testing.assert_array_equal((t + p).detach().numpy(), [4.0, 6.0])
    np.testing.assert_array_equal((-p).detach().numpy(), [-1.0, -2.0])
    with pytest.raises(smelt.Error, match=r"\(2,\).*\(3,\)"):
        t.__add__(smelt.ones(3))
    with pytest.raises(TypeError):
        t + None
