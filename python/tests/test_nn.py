"""smelt.nn from Python: subclassing Module, registration by assignment, layers, losses."""
import gc

import numpy as np
import pytest
import smelt
import smelt.nn.functional as F
from smelt import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 3)
        self.scale = nn.Parameter(smelt.ones(3))
        self.register_buffer("calls", smelt.zeros(()))
        self.hidden = 8                                  # a plain attribute

    def forward(self, x):
        return self.fc2(self.fc1(x).relu()) * self.scale


def test_subclass_registers_parameters_children_buffers():
    m = Block()
    names = [n for n, _ in m.named_parameters()]
    assert names == ["scale", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert [n for n, _ in m.named_buffers()] == ["calls"]
    assert list(m.state_dict()) == names + ["calls"]
    assert len(m.parameters()) == 5 and m.num_parameters() == 4 * 8 + 8 + 8 * 3 + 3 + 3
    assert [n for n, _ in m.named_children()] == ["fc1", "fc2"]
    assert m.hidden == 8 and isinstance(m.fc1, nn.Linear) and m.fc1 is m.fc1
    assert m.scale.requires_grad and m.scale.is_leaf
    assert "Block(" in repr(m) and "(fc1): Linear(in_features=4, out_features=8" in repr(m)
    y = m(smelt.randn(2, 4))
    assert y.shape == (2, 3)
    y.sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())


def test_assignment_replaces_slots_and_ties_weights():
    m = Block()
    new = nn.Parameter(smelt.full((3,), 2.0))
    m.scale = new
    assert m.scale.is_same(new) or m.scale.tolist() == [2.0, 2.0, 2.0]
    other = nn.Linear(4, 8)
    m.fc1.weight = other.weight                          # tying: another module's parameter
    assert m.fc1.weight.data_ptr() == other.weight.data_ptr()
    with pytest.raises(TypeError, match="Parameter"):
        m.scale = smelt.ones(3)                          # a plain tensor is not a parameter
    m.fc2.bias = None
    assert m.fc2.bias is None and "fc2.bias" not in dict(m.named_parameters())
    with pytest.raises(AttributeError, match="cannot be replaced"):
        m.fc1 = nn.Linear(4, 8)
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        m.missing


def test_train_eval_state_dict_round_trip():
    m, n = Block(), Block()
    assert m.training and m.fc1.training
    assert m.eval() is m and not m.fc1.training
    m.train()
    assert m.fc2.training
    missing, unexpected = n.load_state_dict(m.state_dict())
    assert missing == [] and unexpected == []
    x = smelt.randn(3, 4)
    np.testing.assert_array_equal(n(x).detach().numpy(), m(x).detach().numpy())
    with pytest.raises(smelt.Error, match="missing"):
        n.load_state_dict({"scale": smelt.ones(3)})


def test_module_errors():
    class NoInit(nn.Module):
        def __init__(self):
            self.fc = nn.Linear(1, 1)
    with pytest.raises(AttributeError, match="super"):
        NoInit()

    class NoForward(nn.Module):
        pass
    with pytest.raises(NotImplementedError, match="NoForward defines no forward"):
        NoForward()(smelt.ones(1))
    with pytest.raises(NotImplementedError, match="NoForward defines no forward"):
        nn.Sequential(NoForward())(smelt.ones(1))


def test_sequential_holds_python_modules():
    def make():
        return nn.Sequential(Block(), nn.ReLU(), nn.Linear(3, 2))
    seq = make()
    gc.collect()                                         # the Block's Python object must survive
    assert seq(smelt.randn(5, 4)).shape == (5, 2)
    assert len(seq) == 3 and isinstance(seq[0], Block) and isinstance(seq[-1], nn.Linear)
    assert [n for n, _ in seq.named_parameters()][:2] == ["0.scale", "0.fc1.weight"]
    ml = nn.ModuleList([nn.Linear(2, 2), nn.Tanh()])
    assert len(ml) == 2 and isinstance(ml[1], nn.Tanh) and len(ml.parameters()) == 2


def test_subclassing_a_builtin_layer():
    class Scaled(nn.Linear):
        def __init__(self):
            super().__init__(2, 2)
            self.gain = nn.Parameter(smelt.full((1,), 3.0))

        def forward(self, x):
            return nn.Linear.forward(self, x) * self.gain
    s = Scaled()
    x = smelt.ones(1, 2)
    expected = (F.linear(x, s.weight, s.bias) * 3).detach().numpy()
    np.testing.assert_allclose(s(x).detach().numpy(), expected, rtol=1e-6)
    assert [n for n, _ in s.named_parameters()] == ["weight", "bias", "gain"]
    assert nn.Sequential(s)(x).shape == (1, 2)           # the C++ Sequential calls the override


@smelt.no_grad()
def copy_from_torch(smelt_layer, torch_layer):
    for name, p in torch_layer.named_parameters():
        getattr(smelt_layer, name).copy_(smelt.tensor(p.detach().numpy()))


def test_layers_and_losses_match_pytorch(torch, rng):
    tnn, tF = torch.nn, torch.nn.functional
    x0 = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    conv_t, conv_s = tnn.Conv2d(3, 4, 3, padding=1, stride=2), nn.Conv2d(3, 4, 3, padding=1, stride=2)
    ln_t, ln_s = tnn.LayerNorm(16), nn.LayerNorm(16)
    lin_t, lin_s = tnn.Linear(16, 5), nn.Linear(16, 5)
    for s, t in ((conv_s, conv_t), (ln_s, ln_t), (lin_s, lin_t)):
        copy_from_torch(s, t)
    target = [1, 4]

    xs = smelt.tensor(x0, requires_grad=True)
    logits_s = lin_s(ln_s(nn.Flatten()(nn.MaxPool2d(2)(nn.ReLU()(conv_s(xs))))))
    loss_s = nn.CrossEntropyLoss(label_smoothing=0.1)(logits_s, smelt.tensor(target))
    loss_s.backward()
    xt = torch.tensor(x0, requires_grad=True)
    logits_t = lin_t(ln_t(tnn.Flatten()(tnn.MaxPool2d(2)(tnn.ReLU()(conv_t(xt))))))
    loss_t = tnn.CrossEntropyLoss(label_smoothing=0.1)(logits_t, torch.tensor(target))
    loss_t.backward()
    np.testing.assert_allclose(loss_s.item(), loss_t.item(), rtol=1e-5)
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(conv_s.weight.grad.numpy(), conv_t.weight.grad.numpy(), rtol=1e-4, atol=1e-6)

    a0, b0 = rng.standard_normal((3, 4)).astype(np.float32), rng.random((3, 4)).astype(np.float32)
    a, b = smelt.tensor(a0), smelt.tensor(b0)
    at, bt = torch.tensor(a0), torch.tensor(b0)
    checks = [
        (nn.MSELoss()(a, b), tF.mse_loss(at, bt)),
        (nn.BCEWithLogitsLoss(reduction="sum")(a, b), tF.binary_cross_entropy_with_logits(at, bt, reduction="sum")),
        (nn.NLLLoss()(F.log_softmax(a, 1), smelt.tensor([0, 3, 1])),
         tF.nll_loss(tF.log_softmax(at, 1), torch.tensor([0, 3, 1]))),
        (F.gelu(a, approximate="tanh"), tF.gelu(at, approximate="tanh")),
        (F.embedding(smelt.tensor([2, 0]), a), tF.embedding(torch.tensor([2, 0]), at)),
        (F.avg_pool2d(a.reshape(1, 1, 3, 4), 2, stride=1), tF.avg_pool2d(at.reshape(1, 1, 3, 4), 2, stride=1)),
        # torch's avg_pool2d has no dilation: the taps unfold gathers, averaged
        (F.avg_pool2d(a.reshape(1, 1, 3, 4), (1, 2), stride=1, dilation=2),
         tF.unfold(at.reshape(1, 1, 3, 4), (1, 2), dilation=2).mean(1).reshape(1, 1, 3, 2)),
        (F.cross_entropy(a, smelt.tensor([0, -100, 2]), reduction="none"),
         tF.cross_entropy(at, torch.tensor([0, -100, 2]), reduction="none")),
    ]
    for got, want in checks:
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_batch_norm_module_updates_running_stats(torch, rng):
    x0 = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    bn_s, bn_t = nn.BatchNorm2d(2), torch.nn.BatchNorm2d(2)
    y_s, y_t = bn_s(smelt.tensor(x0)), bn_t(torch.tensor(x0))
    np.testing.assert_allclose(y_s.detach().numpy(), y_t.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(bn_s.running_var.numpy(), bn_t.running_var.numpy(), rtol=1e-5)
    assert [n for n, _ in bn_s.named_buffers()] == ["running_mean", "running_var", "num_batches_tracked"]
