#!/usr/bin/python3
"""Python side of smelt in `make bench`: the cost of an op called from Python.

Served over the same line protocol as smelt_bench --serve and torch_bench.py (see torch_bench.py):
workload "python: 1000 tiny a + b" (impl smelt-eager) is `a + b` on two one-element tensors, 1000
times in a Python loop; torch_bench.py serves the same loop over torch tensors (impl torch-eager),
so ms per call x 1000 = ns per op, Python's loop included on both sides.

    python_bench.py                  serve (run.py starts it with the build tree's smelt on PYTHONPATH)
    python_bench.py --compare [N]    smelt and PyTorch in this one process, interleaved rounds
"""
import json
import os
import statistics
import sys
import time

import smelt

N_OPS = 1000
NAME = "python: 1000 tiny a + b"


def tiny_adds(lib):
    a, b = lib.ones(1), lib.ones(1)

    def step():
        for _ in range(N_OPS):
            a + b
    return step


def timed(fn, n):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def serve():
    step = None
    for line in sys.stdin:
        parts = line.rstrip("\n").split("\t")
        if parts[0] == "quit":
            break
        if parts[0] == "list":
            print(json.dumps({"threads": int(os.environ.get("OMP_NUM_THREADS", "0")) or None,
                              "workloads": [{"name": NAME, "impls": ["smelt-eager"], "bytes": 0, "flops": 0,
                                             "peak_memory": False}]}), flush=True)
            continue
        try:
            _, name, impl, n = parts
            if name != NAME or impl != "smelt-eager":
                raise ValueError(f"'{name}' has no impl '{impl}'")
            if step is None:
                step = tiny_adds(smelt)
                timed(step, 3)
            reply = {"ms": timed(step, int(n))}
        except Exception as e:  # noqa: BLE001 - reported to run.py
            reply = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(reply), flush=True)


def compare(rounds):
    """Both libraries in one process: round r runs smelt then PyTorch (reversed in odd rounds)."""
    import torch
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", os.cpu_count())))
    steps = {"smelt": tiny_adds(smelt), "torch": tiny_adds(torch)}
    samples = {k: [] for k in steps}
    for step in steps.values():
        timed(step, 20)
    for r in range(rounds):
        for name in (sorted(steps) if r % 2 == 0 else sorted(steps, reverse=True)):
            samples[name].extend(timed(steps[name], 50))
    for name, ms in samples.items():
        q = statistics.quantiles(ms, n=4)
        print(f"{name:6s} a + b (1-element, from Python): {statistics.median(ms) * 1e3 / N_OPS * 1e3:7.1f} ns/op "
              f"(quartiles {q[0] * 1e3:.0f}-{q[2] * 1e3:.0f} ns; {len(ms)} x {N_OPS} ops)")
    ratio = statistics.median(samples["torch"]) / statistics.median(samples["smelt"])
    print(f"PyTorch {torch.__version__} / smelt: {ratio:.2f}x (above 1: smelt's per-op overhead is lower)")


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--compare":
        compare(int(sys.argv[2]) if len(sys.argv) > 2 else 10)
    else:
        serve()
