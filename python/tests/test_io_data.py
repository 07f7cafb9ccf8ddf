"""safetensors files and the digits data set from Python."""
import numpy as np
import pytest
import smelt
from smelt import nn


def test_safetensors_round_trip(tmp_path):
    path = str(tmp_path / "t.safetensors")
    tensors = {"a": smelt.arange(6).reshape(2, 3), "b": smelt.tensor([[1.5, -0.0, float("nan")]]),
               "c": smelt.tensor([True, False]), "d": smelt.zeros(0, 4, dtype=smelt.float64)}
    smelt.io.save_safetensors(path, tensors, {"note": "hi"})
    back, meta = smelt.io.load_safetensors(path, with_metadata=True)
    assert meta == {"note": "hi"} and sorted(back) == ["a", "b", "c", "d"]
    for k, t in tensors.items():
        assert back[k].dtype == t.dtype and back[k].shape == t.shape
        np.testing.assert_array_equal(back[k].numpy(), t.numpy())
    with pytest.raises(smelt.Error, match="nope.safetensors"):
        smelt.io.load_safetensors(str(tmp_path / "nope.safetensors"))
    (tmp_path / "bad.safetensors").write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00{]")
    with pytest.raises(smelt.Error):
        smelt.io.load_safetensors(str(tmp_path / "bad.safetensors"))


def test_module_and_checkpoint_files(tmp_path):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)
            self.bias2 = nn.Parameter(smelt.randn(2))

        def forward(self, x):
            return self.fc(x) + self.bias2
    a, b = Net(), Net()
    opt = smelt.optim.Adam(a.parameters(), lr=0.01)
    a(smelt.ones(1, 3)).sum().backward()
    opt.step()
    path = str(tmp_path / "ck.safetensors")
    smelt.io.save_checkpoint(path, a, opt, {"epoch": "1"})
    opt_b = smelt.optim.Adam(b.parameters(), lr=0.5)
    assert smelt.io.load_checkpoint(path, b, opt_b) == {"epoch": "1"}
    x = smelt.randn(4, 3)
    np.testing.assert_array_equal(a(x).detach().numpy(), b(x).detach().numpy())
    assert opt_b.param_groups[0]["lr"] == 0.01
    smelt.io.save_module(str(tmp_path / "m.safetensors"), a)
    with pytest.raises(smelt.Error, match="unexpected|missing"):
        smelt.io.load_module(str(tmp_path / "m.safetensors"), nn.Linear(3, 2))


def test_digits_and_loader():
    digits = smelt.data.load_digits()
    assert len(digits) == 1797 and digits.inputs.shape == (1797, 64) and digits.targets.dtype == smelt.int64
    x, y = digits[0]
    assert x.shape == (64,) and 0 <= y.item() <= 9 and digits.inputs.amax().item() == 16
    train, test = smelt.data.train_test_split(digits, 0.8, seed=0)
    assert len(train) == 1437 and len(test) == 360
    loader = smelt.data.DataLoader(train, batch_size=64, shuffle=True, seed=1)
    batches = list(loader)
    assert len(batches) == len(loader) == 23 and batches[0][0].shape == (64, 64) and batches[-1][0].shape == (29, 64)
    again = smelt.data.DataLoader(train, batch_size=64, shuffle=True, seed=1)
    assert next(iter(again))[1].tolist() == batches[0][1].tolist()     # same seed, same first batch
    assert sorted(t for _, ys in batches for t in ys.tolist()) == sorted(train.get_batch(list(range(len(train))))[1].tolist())
    ds = smelt.data.TensorDataset(smelt.arange(10).reshape(5, 2), smelt.arange(5))
    assert ds[-1][1].item() == 4
    with pytest.raises(IndexError):
        ds[5]
