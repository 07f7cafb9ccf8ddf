"""NumPy interop: memory shared both ways where the layout allows, strides, owners kept alive."""
import gc

import numpy as np
import pytest
import smelt


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_, np.uint8])
def test_from_numpy_shares_memory_every_dtype(dtype):
    a = np.arange(6).reshape(2, 3).astype(dtype)
    t = smelt.from_numpy(a)
    assert t.dtype == smelt.dtype.__members__[np.dtype(dtype).name]
    assert t.data_ptr() == a.ctypes.data
    np.testing.assert_array_equal(t.numpy(), a)
    t.zero_()                                   # written through the tensor, seen in the array
    assert not a.any()


def test_from_numpy_non_contiguous_views_keep_strides():
    base = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    for view in (base.transpose(2, 0, 1), base[:, ::2, 1::3], base[1], base[..., 0], base[:, None]):
        t = smelt.from_numpy(view)
        assert t.shape == view.shape
        assert t.stride() == tuple(s // 4 for s in view.strides)
        np.testing.assert_array_equal(t.numpy(), view)
        np.testing.assert_array_equal((t * 1).numpy(), view)   # kernels read the strides
    v = base[:, ::2]
    smelt.from_numpy(v).fill_(-1)
    assert (base[:, ::2] == -1).all() and (base[:, 1::2] != -1).all()


def test_from_numpy_refuses_what_it_cannot_share():
    with pytest.raises(ValueError, match="negative"):
        smelt.from_numpy(np.arange(4.0)[::-1])
    ro = np.arange(4.0)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        smelt.from_numpy(ro)
    with pytest.raises(TypeError, match="int16.*astype"):
        smelt.from_numpy(np.arange(3, dtype=np.int16))
    # int32 is a smelt dtype: shared, exact at the extremes
    i32 = np.array([-2**31, 0, 2**31 - 1], dtype=np.int32)
    t = smelt.from_numpy(i32)
    assert t.dtype == smelt.int32 and t.tolist() == i32.tolist()
    assert t.numpy().dtype == np.int32
    with pytest.raises(TypeError, match="native byte order"):
        smelt.from_numpy(np.arange(3, dtype=">f4"))
    with pytest.raises(TypeError, match="numpy.ndarray"):
        smelt.from_numpy([1, 2])
    # the copying constructor takes them all
    np.testing.assert_array_equal(smelt.tensor(np.arange(4.0)[::-1]).numpy(), [3, 2, 1, 0])
    np.testing.assert_array_equal(smelt.tensor(ro).numpy(), ro)
    np.testing.assert_array_equal(smelt.tensor(np.arange(3, dtype=">f4")).numpy(), [0, 1, 2])


def test_from_numpy_keeps_the_array_alive():
    t = smelt.from_numpy(np.full((1000,), 3.0))
    gc.collect()
    assert t.sum().item() == 3000.0


def test_numpy_shares_and_keeps_the_tensor_alive():
    t = smelt.arange(12, dtype=smelt.float64).reshape(3, 4)
    a = t.numpy()
    assert a.ctypes.data == t.data_ptr()
    a[0, 0] = 42
    assert t[0, 0].item() == 42
    tt = t.t().numpy()
    assert tt.strides == (8, 32) and tt[0, 1] == 4
    e = smelt.ones(1, 3).expand(4, 3)
    assert np.asarray(e).strides == (0, 4)
    arr = (smelt.ones(5) * 2).numpy()
    del t, e
    gc.collect()
    assert arr.sum() == 10.0
    assert np.asarray(smelt.ones(2), dtype=np.float64).dtype == np.float64


def test_numpy_of_a_tensor_that_requires_grad():
    w = smelt.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="detach"):
        w.numpy()
    np.testing.assert_array_equal(w.detach().numpy(), [1, 1])


def test_zero_size_and_0_dim():
    for a in (np.zeros((0, 3), np.float32), np.array(5.0), np.zeros((2, 0, 1), np.int64)):
        t = smelt.from_numpy(a)
        assert t.shape == a.shape
        np.testing.assert_array_equal(t.numpy(), a)


def test_numpy_operands_in_operators():
    t = smelt.ones(3)
    np.testing.assert_array_equal((t + np.array([1, 2, 3], dtype=np.float32)).numpy(), [2, 3, 4])
    np.testing.assert_array_equal((np.array([1, 2, 3], dtype=np.float32) + t).numpy(), [2, 3, 4])
    np.testing.assert_array_equal((t * np.float32(2)).numpy(), [2, 2, 2])
