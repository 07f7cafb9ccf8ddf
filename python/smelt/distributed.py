"""smelt.distributed: data-parallel training across processes, on MPI (docs/distributed.md).

    # mpirun -np 2 python3 train.py   (or scripts/mpirun.sh 2 python3 train.py)
    import smelt, smelt.distributed as dist
    dist.init()
    model = Net()
    ddp = dist.DistributedDataParallel(model)          # rank 0's weights on every rank
    opt = smelt.optim.SGD(model.parameters(), lr=0.1)
    loader = smelt.data.DataLoader(train, batch_size=32, shuffle=True, seed=1,
                                   num_shards=dist.world_size(), shard=dist.rank())
    for x, y in loader:
        opt.zero_grad()
        smelt.nn.functional.cross_entropy(ddp(x), y).backward()   # gradients averaged
        opt.step()

Outside mpirun the world is this one process. An exception that escapes on any rank stops every
rank with an error naming it.
"""
import contextlib as _contextlib
import os as _os
import sys as _sys

from . import _smelt_distributed as _d

rank = _d.rank
world_size = _d.world_size
is_initialized = _d.is_initialized
broadcast = _d.broadcast
all_gather = _d.all_gather
barrier = _d.barrier
save_checkpoint = _d.save_checkpoint
report_failure = _d.report_failure


def init(world_size=0, timeout=300.0):
    """Joins the world mpirun started (world_size > 0: the number expected). From then on an
    exception that escapes to sys.excepthook is reported to every other rank before this
    process exits."""
    _d.init(world_size, timeout)
    previous = _sys.excepthook
    if getattr(previous, "_smelt_distributed", False):
        return

    def report_and_exit(kind, value, traceback):
        previous(kind, value, traceback)
        _d.report_failure(f"{kind.__name__}: {value}")
        _sys.stderr.flush()
        _os._exit(1)

    report_and_exit._smelt_distributed = True
    _sys.excepthook = report_and_exit


def all_reduce(tensor, op="sum"):
    """In place on every rank: op is "sum", "mean", "max" or "min"."""
    _d.all_reduce(tensor, op)


class DistributedDataParallel:
    """Wraps `module`: construction gives every rank rank 0's parameters and buffers; each
    backward through a call of the wrapper leaves the mean over the ranks of the gradients in
    .grad, all-reduced in buckets overlapped with the backward."""

    def __init__(self, module, bucket_cap_mb=25.0, broadcast_buffers=True):
        self.module = module
        self._ddp = _d.DistributedDataParallel(module, bucket_cap_mb, broadcast_buffers)

    def __call__(self, *args, **kwargs):
        self._ddp.prepare_forward()
        return self.module(*args, **kwargs)

    forward = __call__

    def parameters(self):
        return self.module.parameters()

    @_contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside only accumulate locally; the next one outside all-reduces."""
        previous = self._ddp.gradient_sync
        self._ddp.gradient_sync = False
        try:
            yield
        finally:
            self._ddp.gradient_sync = previous

    def compile_step(self, loss_fn, optimizer, *, clip_grad_norm=0.0, accumulation_steps=1, backend="auto"):
        """smelt.compile_step whose plan all-reduces the gradients in buckets, overlapped with the
        backward; loss_fn(*inputs) returns the scalar loss and each call returns it."""
        return self._ddp.compile_step(loss_fn, optimizer, clip_grad_norm=clip_grad_norm,
                                      accumulation_steps=accumulation_steps, backend=backend)

    def broadcast_buffers(self):
        self._ddp.broadcast_buffers()

    @property
    def last_stats(self):
        """The last synchronized backward's communication: buckets, bytes, comm_seconds,
        blocked_seconds and overlap (the part of it hidden behind the backward)."""
        return self._ddp.last_stats
