"""One rank of the jobs test_distributed.py runs under mpirun (scripts/mpirun.sh N python3 this):
    distributed_worker.py train   collectives, DistributedDataParallel against one process on the
                                  concatenated batch (eager, no_sync, compiled), the sampler
    distributed_worker.py throw   rank 1 raises; every rank must stop naming it
"""
import sys
import time

import numpy as np
import smelt
import smelt.distributed as dist
from smelt import nn

dist.init(timeout=120)
R, W = dist.rank(), dist.world_size()
PER_RANK = 5


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(12, 16)
        self.b = nn.Linear(16, 4)

    def forward(self, x, scale=1.0):
        return self.b(self.a(x).tanh()) * scale


def net(seed):
    smelt.manual_seed(seed)
    return Net()


def batch(step):
    rng = np.random.default_rng(100 + step)
    x = rng.uniform(-1, 1, (W * PER_RANK, 12)).astype(np.float32)
    y = (np.arange(W * PER_RANK) * 3 + step) % 4
    return smelt.tensor(x), smelt.tensor(y.astype(np.int64))


def mine(t):
    return t[R * PER_RANK:(R + 1) * PER_RANK].contiguous()


def loss_of(model, x, y):
    return smelt.nn.functional.cross_entropy(model(x, 0.5), y)


def same_parameters(a, b, rtol=2e-5):
    for (name, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=rtol, atol=rtol / 10, err_msg=name)


def check_collectives():
    t = smelt.tensor([float(R + 1)] * 3)
    dist.all_reduce(t)
    assert t.tolist() == [W * (W + 1) / 2] * 3, t.tolist()
    t = smelt.tensor([float(R)])
    dist.all_reduce(t, "max")
    assert t.tolist() == [W - 1]
    gathered = dist.all_gather(smelt.tensor([R, 10 * R]))
    assert [g.tolist() for g in gathered] == [[r, 10 * r] for r in range(W)]
    t = smelt.tensor([float(R)] * 2)
    dist.broadcast(t, src=W - 1)
    assert t.tolist() == [W - 1] * 2
    try:
        dist.all_reduce(smelt.zeros(R + 1))
        assert W == 1, "a shape mismatch went unnoticed"
    except smelt.Error as e:
        assert "every rank must pass the same shape" in str(e), str(e)
    dist.barrier()


def check_eager_and_no_sync():
    model, reference = net(7 + R), net(7)
    ddp = dist.DistributedDataParallel(model)
    opt = smelt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ref_opt = smelt.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    for step in range(10):
        x, y = batch(step)
        opt.zero_grad()
        if step % 2 == 0:  # two micro-batches: the first only accumulates
            with ddp.no_sync():
                smelt.nn.functional.cross_entropy(ddp(mine(x)[:2], 0.5), mine(y)[:2]).backward()
            smelt.nn.functional.cross_entropy(ddp(mine(x)[2:], 0.5), mine(y)[2:]).backward()
            ref_opt.zero_grad()
            for r in range(W):
                xs, ys = x[r * PER_RANK:(r + 1) * PER_RANK], y[r * PER_RANK:(r + 1) * PER_RANK]
                (loss_of(reference, xs[:2], ys[:2]) * (1.0 / W)).backward()
                (loss_of(reference, xs[2:], ys[2:]) * (1.0 / W)).backward()
        else:
            loss_of(ddp, mine(x), mine(y)).backward()
            ref_opt.zero_grad()
            loss_of(reference, x, y).backward()
        opt.step()
        ref_opt.step()
    same_parameters(model, reference)
    assert ddp.last_stats["buckets"] >= 1


def check_compiled():
    model, reference = net(20 + R), net(20)
    ddp = dist.DistributedDataParallel(model, bucket_cap_mb=1e-6)
    opt = smelt.optim.Adam(model.parameters(), lr=1e-2)
    ref_opt = smelt.optim.Adam(reference.parameters(), lr=1e-2)
    step_fn = ddp.compile_step(lambda x, y: loss_of(model, x, y), opt, backend="interpreter")
    for step in range(10):
        x, y = batch(step)
        step_fn(mine(x), mine(y))
        ref_opt.zero_grad()
        loss_of(reference, x, y).backward()
        ref_opt.step()
    same_parameters(model, reference)
    if W > 1:
        assert ddp.last_stats["buckets"] == 4, ddp.last_stats


def check_sampler():
    n = 7 * W + 1
    data = smelt.data.TensorDataset(smelt.arange(n).float().reshape(n, 1), smelt.arange(n))
    loader = smelt.data.DataLoader(data, batch_size=3, shuffle=True, seed=4, num_shards=W, shard=R)
    seen = [int(v) for _, y in loader for v in y.tolist()]
    everyone = dist.all_gather(smelt.tensor(seen))
    assert set(v for t in everyone for v in t.tolist()) == set(range(n))


mode = sys.argv[1]
if mode == "train":
    check_collectives()
    check_eager_and_no_sync()
    check_compiled()
    check_sampler()
    print(f"rank {R} of {W}: ok", flush=True)
elif mode == "throw":
    for step in range(200):
        if step == 3 and R == 1:
            raise RuntimeError("python boom")
        dist.barrier()
        time.sleep(0.01)
