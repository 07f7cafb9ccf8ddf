"""smelt.optim from Python, on Python-defined modules, against PyTorch's optimizers."""
import gc

import numpy as np
import pytest
import smelt
from smelt import nn


class TwoLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 4)
        self.b = nn.Parameter(smelt.zeros(4))

    def forward(self, x):
        return (self.a(x).tanh() + self.b).sum(1)


def torch_twin(torch, m):
    class T(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(3, 4)
            self.b = torch.nn.Parameter(torch.zeros(4))

        def forward(self, x):
            return (self.a(x).tanh() + self.b).sum(1)
    t = T()
    with torch.no_grad():
        for name, p in t.named_parameters():
            p.copy_(torch.tensor(dict(m.named_parameters())[name].detach().numpy()))
    return t


@pytest.mark.parametrize("kind", ["SGD", "Adam", "AdamW"])
def test_optimizers_match_pytorch_on_a_python_module(torch, rng, kind):
    m = TwoLayer()
    t = torch_twin(torch, m)
    kw = {"SGD": dict(lr=0.1, momentum=0.9, weight_decay=0.01), "Adam": dict(lr=0.05, weight_decay=0.01),
          "AdamW": dict(lr=0.05)}[kind]
    opt_s = getattr(smelt.optim, kind)(m.parameters(), **kw)
    opt_t = getattr(torch.optim, kind)(t.parameters(), **kw)
    sched_s = smelt.optim.lr_scheduler.StepLR(opt_s, 2, gamma=0.5)
    sched_t = torch.optim.lr_scheduler.StepLR(opt_t, 2, gamma=0.5)
    x0, y0 = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    for _ in range(5):
        for opt, model, x, y, mse in ((opt_s, m, smelt.tensor(x0), smelt.tensor(y0), smelt.nn.functional.mse_loss),
                                      (opt_t, t, torch.tensor(x0), torch.tensor(y0), torch.nn.functional.mse_loss)):
            opt.zero_grad()
            mse(model(x), y).backward()
            opt.step()
        sched_s.step()
        sched_t.step()
    assert sched_s.get_last_lr() == pytest.approx(sched_t.get_last_lr())
    for name, p in t.named_parameters():
        np.testing.assert_allclose(dict(m.named_parameters())[name].detach().numpy(), p.detach().numpy(),
                                   rtol=1e-5, atol=1e-6)


def test_param_groups_and_schedulers(torch):
    w, b = nn.Parameter(smelt.ones(2)), nn.Parameter(smelt.ones(1))
    opt = smelt.optim.AdamW([{"params": [w]}, {"params": [b], "weight_decay": 0.0, "lr": 0.5}], lr=0.1)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert opt.param_groups[1]["weight_decay"] == 0.0 and opt.param_groups[0].weight_decay == 0.01
    opt.param_groups[0]["lr"] = 0.2
    assert opt.param_groups[0].lr == 0.2
    warm = smelt.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=3)
    cos = smelt.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
    seq = smelt.optim.lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[3])
    del warm, cos
    gc.collect()
    lrs = []
    for _ in range(6):
        seq.step()
        lrs.append(seq.get_last_lr()[0])

    tw = torch.nn.Parameter(torch.ones(2))
    topt = torch.optim.AdamW([tw], lr=0.2)
    twarm = torch.optim.lr_scheduler.LinearLR(topt, start_factor=0.1, total_iters=3)
    tcos = torch.optim.lr_scheduler.CosineAnnealingLR(topt, T_max=4)
    tseq = torch.optim.lr_scheduler.SequentialLR(topt, [twarm, tcos], milestones=[3])
    tl = []
    for _ in range(6):
        topt.step()
        tseq.step()
        tl.append(tseq.get_last_lr()[0])
    np.testing.assert_allclose(lrs, tl, rtol=1e-9)


def test_scheduler_keeps_its_optimizer_alive():
    p = nn.Parameter(smelt.ones(1))
    sched = smelt.optim.lr_scheduler.StepLR(smelt.optim.SGD([p], lr=1.0), step_size=1)
    gc.collect()
    sched.step()
    assert sched.get_last_lr() == [0.1]


def test_optimizer_bad_arguments():
    with pytest.raises(TypeError, match="iterable"):
        smelt.optim.SGD(None)
    with pytest.raises(TypeError, match="smelt.Tensor"):
        smelt.optim.SGD([1.0, 2.0])
    with pytest.raises(ValueError, match="param group"):
        smelt.optim.SGD([{"params": [nn.Parameter(smelt.ones(1))], "momentun": 0.9}])
    with pytest.raises(smelt.Error):
        smelt.optim.SGD([nn.Parameter(smelt.ones(1))], lr=-1.0)
