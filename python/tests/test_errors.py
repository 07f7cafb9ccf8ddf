"""Bad input from Python is a Python exception carrying smelt's message, never a crash."""
import pytest
import smelt
from smelt import nn


def test_smelt_errors_are_runtime_errors_with_the_message():
    assert issubclass(smelt.Error, RuntimeError)
    with pytest.raises(smelt.Error, match=r"\(2, 3\).*\(4,\)"):
        smelt.ones(2, 3) + smelt.ones(4)
    with pytest.raises(smelt.Error, match="float64"):
        smelt.ones(2) + smelt.ones(2, dtype=smelt.float64)
    with pytest.raises(smelt.Error, match="negative size"):
        smelt.zeros(-1)
    with pytest.raises(smelt.Error, match="dim 5 is out of range"):
        smelt.ones(2).sum(5)
    with pytest.raises(smelt.Error, match="conv2d"):
        smelt.nn.functional.conv2d(smelt.ones(3, 3), smelt.ones(1, 1, 1, 1))
    with pytest.raises(smelt.Error, match="cross_entropy"):
        smelt.nn.functional.cross_entropy(smelt.ones(2, 3), smelt.ones(2))
    with pytest.raises(smelt.Error, match="view"):
        smelt.ones(2, 3).t().view(6)


@pytest.mark.parametrize("call", [
    lambda: smelt.exp(None),
    lambda: smelt.ones(2) + "a",
    lambda: "a" * smelt.ones(2),
    lambda: smelt.ones(2).reshape("a"),
    lambda: smelt.ones(2) @ 3,
    lambda: smelt.zeros(2.5),
    lambda: smelt.ones(2).matmul(None),
    lambda: smelt.cat([smelt.ones(1), None]),
    lambda: smelt.cat(None),
    lambda: nn.Linear(2, 2)(None),
    lambda: nn.Linear("2", 2),
    lambda: nn.Conv2d(1, 1, (3, 3, 3)),
    lambda: smelt.nn.functional.max_pool2d(smelt.ones(1, 1, 4, 4), "x"),
    lambda: smelt.tensor([1.0], dtype=3),
    lambda: smelt.tensor(object()),
    lambda: smelt.io.save_safetensors("/tmp/x.safetensors", {"a": 1}),
], ids=range(16))
def test_wrong_types_raise_type_errors(call):
    with pytest.raises((TypeError, ValueError)):
        call()


def test_bad_values_raise():
    with pytest.raises(smelt.Error, match="dataset is null"):
        smelt.data.DataLoader(None)
    with pytest.raises(ValueError, match="reduction"):
        smelt.nn.functional.mse_loss(smelt.ones(1), smelt.ones(1), reduction="avg")
    with pytest.raises(ValueError, match="approximate"):
        nn.GELU("fast")
    with pytest.raises(OverflowError):
        smelt.zeros(2**70)
    with pytest.raises(smelt.Error, match="too large|overflow|out of memory"):
        smelt.zeros(2**40, 2**40)
    with pytest.raises(smelt.Error, match="requires_grad|leaf"):
        (smelt.ones(2, requires_grad=True) * 2).requires_grad = False
    with pytest.raises(smelt.Error, match="undefined|defined|save"):
        smelt.io.save_safetensors("/nonexistent/dir/x.safetensors", {"a": smelt.ones(1)})
