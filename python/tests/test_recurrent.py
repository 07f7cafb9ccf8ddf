"""smelt.nn.RNN / LSTM / GRU from Python: PyTorch's call convention and parameter names, outputs
and gradients equal to PyTorch's for the same weights, a sequence model trained with a compiled
step equal to the eager loop."""
import numpy as np
import pytest

import smelt
import smelt.nn as nn


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_matches_pytorch(torch, kind, rng):
    """Two layers, bidirectional, batch first, an initial state: outputs, final states and the
    gradients of the input and of every parameter equal PyTorch's (float64)."""
    kwargs = dict(num_layers=2, batch_first=True, bidirectional=True)
    ref = getattr(torch.nn, kind)(3, 5, **kwargs).double()
    mine = getattr(nn, kind)(3, 5, **kwargs, dtype=smelt.float64)
    mine.load_state_dict({k: smelt.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
    x = rng.standard_normal((2, 7, 3))
    h0 = rng.standard_normal((4, 2, 5))
    c0 = rng.standard_normal((4, 2, 5))
    xt, h0t, c0t = (torch.tensor(a, requires_grad=True) for a in (x, h0, c0))
    xs = smelt.tensor(x, requires_grad=True)
    hs, cs = smelt.tensor(h0, requires_grad=True), smelt.tensor(c0, requires_grad=True)
    if kind == "LSTM":
        out_t, (hn_t, cn_t) = ref(xt, (h0t, c0t))
        out_s, (hn_s, cn_s) = mine(xs, (hs, cs))
        np.testing.assert_allclose(cn_s.detach().numpy(), cn_t.detach().numpy(), rtol=1e-10, atol=1e-12)
        loss_t = (out_t ** 2).sum() + hn_t.sum() + (cn_t * 3).sum()
        loss_s = (out_s * out_s).sum() + hn_s.sum() + (cn_s * 3).sum()
    else:
        out_t, hn_t = ref(xt, h0t)
        out_s, hn_s = mine(xs, hs)
        loss_t = (out_t ** 2).sum() + hn_t.sum()
        loss_s = (out_s * out_s).sum() + hn_s.sum()
    np.testing.assert_allclose(out_s.detach().numpy(), out_t.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(hn_s.detach().numpy(), hn_t.detach().numpy(), rtol=1e-10, atol=1e-12)
    loss_t.backward()
    loss_s.backward()
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(hs.grad.numpy(), h0t.grad.numpy(), rtol=1e-9, atol=1e-11)
    for name, p in ref.named_parameters():
        np.testing.assert_allclose(getattr(mine, name).grad.numpy(), p.grad.numpy(), rtol=1e-9, atol=1e-11,
                                   err_msg=name)


def test_call_convention_and_errors():
    lstm = nn.LSTM(4, 3)
    out, (h, c) = lstm(smelt.randn(6, 2, 4))
    assert out.shape == (6, 2, 3) and h.shape == (1, 2, 3) and c.shape == (1, 2, 3)
    out, h = nn.GRU(4, 3, bidirectional=True)(smelt.randn(6, 4))  # unbatched
    assert out.shape == (6, 6) and h.shape == (2, 3)
    assert lstm.weight_ih_l0.shape == (12, 4) and lstm.hidden_size == 3
    assert [n for n, _ in nn.RNN(2, 2, nonlinearity="relu").named_parameters()] == [
        "weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"]
    with pytest.raises(TypeError, match=r"hx must be a tuple \(h_0, c_0\)"):
        lstm(smelt.randn(6, 2, 4), smelt.zeros(1, 2, 3))
    with pytest.raises(smelt.Error, match="input_size is 4"):
        lstm(smelt.randn(6, 2, 5))
    with pytest.raises(smelt.Error, match="'tanh' or 'relu'"):
        nn.RNN(2, 2, nonlinearity="gelu")


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 6)
        self.gru = nn.GRU(6, 8, batch_first=True)
        self.head = nn.Linear(8, 4)

    def forward(self, tokens):
        out, _ = self.gru(self.embed(tokens))
        return self.head(out)


def test_compiled_training_step_equals_eager():
    """A GRU tagger trained 4 steps by compile_step (SGD with momentum) equals the eager loop."""
    smelt.manual_seed(3)
    eager = Tagger()
    smelt.manual_seed(3)
    model = Tagger()
    opt_e = smelt.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9)
    opt = smelt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ce = smelt.nn.functional.cross_entropy

    def loss_of(m, tokens, tags):
        return ce(m(tokens).reshape(-1, 4), tags.reshape(-1))

    step = smelt.compile_step(model, lambda x, t: loss_of(model, x, t), opt, backend="interpreter")
    for s in range(4):
        tokens = smelt.tensor((np.arange(15).reshape(3, 5) * 7 + s) % 20)
        tags = smelt.tensor((np.arange(15).reshape(3, 5) + s) % 4)
        opt_e.zero_grad()
        want = loss_of(eager, tokens, tags)
        want.backward()
        opt_e.step()
        got = step(tokens, tags)
        np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
    for (name, pe), (_, pc) in zip(eager.named_parameters(), model.named_parameters()):
        np.testing.assert_allclose(pc.detach().numpy(), pe.detach().numpy(), rtol=1e-4, atol=1e-6, err_msg=name)
