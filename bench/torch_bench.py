#!/usr/bin/python3
"""PyTorch side of `make bench`: the same workloads as bench/smelt_bench.cpp, served over stdin.

Protocol (tab-separated, one line each way, shared with smelt_bench --serve):
  > list                      < {"threads": T, "peer": {version, BLAS...}, "workloads": [{"name": ..., "impls": [...], "bytes": ..,
                                                              "flops": .., "peak_memory": bool}]}
  > run <workload> <impl> <n> < {"ms": [t1, ..., tn]}     (after a warm-up of the same workload)
                              < {"error": "..."}
  > quit
impl is "torch-eager" or "torch-script" (torch.jit.trace of the same function, where it applies; for
the real models torch.jit.freeze of the trace, which also folds batch norms into convs).

  torch_bench.py --peak-memory <workload> <steps>   (in a fresh process, as smelt_bench does)
    prints {"MiB": growth of the peak RSS over <steps> steps, "baseline_MiB": ...}
PyTorch is used here only as the baseline to compare against; smelt never depends on it.
"""
import json
import os
import re
import resource
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", os.cpu_count())))
torch.manual_seed(0)


def timed(fn, n):
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


class Workload:
    """A workload: build() makes state once, step() is what is timed."""

    def __init__(self, name, build, bytes_moved=0.0, flops=0.0, scriptable=True, training=False, freeze=False):
        self.name, self.build, self.bytes, self.flops, self.scriptable = name, build, bytes_moved, flops, scriptable
        self.freeze = freeze  # torch-script: torch.jit.freeze the trace (inference models)
        self.training = training  # a training step: its peak memory is measured too


def elementwise_chain():
    x = torch.randn(16 * 1024 * 1024)
    a, b = torch.tensor(1.5), torch.tensor(0.25)
    f = lambda x, a, b: F.gelu(x * a + b)
    return (lambda: f(x, a, b)), f, (x, a, b)


def softmax_2048x1024():
    x = torch.randn(2048, 1024)
    f = lambda x: torch.softmax(x, -1)
    return (lambda: f(x)), f, (x,)


def log_softmax_2048x1024():
    x = torch.randn(2048, 1024)
    f = lambda x: torch.log_softmax(x, -1)
    return (lambda: f(x)), f, (x,)


def layer_norm_2048x1024():
    x, w, b = torch.randn(2048, 1024), torch.randn(1024), torch.randn(1024)
    f = lambda x, w, b: F.layer_norm(x, (1024,), w, b)
    return (lambda: f(x, w, b)), f, (x, w, b)


def sgemm_1024():
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    f = lambda a, b: a @ b
    return (lambda: f(a, b)), f, (a, b)


def linear_relu_1024():
    x, w, b = torch.randn(1024, 1024), torch.randn(1024, 1024), torch.randn(1024)
    f = lambda x, w, b: torch.relu(F.linear(x, w, b))
    return (lambda: f(x, w, b)), f, (x, w, b)


def conv3x3_64_56():
    x, w, b = torch.randn(1, 64, 56, 56), torch.randn(64, 64, 3, 3), torch.randn(64)
    f = lambda x, w, b: torch.relu(F.conv2d(x, w, b, padding=1))
    return (lambda: f(x, w, b)), f, (x, w, b)


def mlp_model():
    return torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                               torch.nn.ReLU(), torch.nn.Linear(1024, 10))


def encoder_block():
    return torch.nn.TransformerEncoderLayer(256, 4, dim_feedforward=4 * 256, dropout=0.0, batch_first=True,
                                            norm_first=True)


def mlp_forward():
    model, x = mlp_model().eval(), torch.randn(256, 784)
    return (lambda: model(x)), model, (x,)


def transformer_forward():
    # eval(): PyTorch may take its fused "fast path" kernel for the encoder layer here, as a user
    # running inference would get
    layer, x = encoder_block().eval(), torch.randn(8, 128, 256)
    return (lambda: layer(x)), layer, (x,)


def zoo_model(directory, tokens):
    """A model of bench/models.json, built as tests/models/make_models.py exports it for smelt and
    ONNX Runtime (its LARGE table: random weights, eval mode) with an input of the same shape."""
    def build():
        models_dir = str(Path(__file__).resolve().parent.parent / "tests" / "models")
        if models_dir not in sys.path:
            sys.path.insert(0, models_dir)
        import make_models  # torch, torchvision and numpy; not onnx
        spec = make_models.LARGE[directory]
        model = spec[0]().eval()
        x = torch.randint(0, tokens["vocab"], tuple(tokens["shape"])) if tokens else torch.randn(spec[1])
        return (lambda: model(x)), model, (x,)
    return build


def zoo_workloads():
    """bench/models.json's float models (its INT8 QDQ files have no PyTorch counterpart)."""
    listed = json.loads((Path(__file__).resolve().parent / "models.json").read_text())["models"]
    return [Workload(m["name"], zoo_model(m["dir"], {"shape": m["tokens"], "vocab": m["vocab"]} if "tokens" in m else None),
                     flops=m["flops"], freeze=True)
            for m in listed if "int8_of" not in m]


def train_step(model, x, y, opt):
    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return step


def mlp_train():
    model = mlp_model()
    x, y = torch.randn(256, 784), torch.randint(0, 10, (256,))
    return train_step(model, x, y, torch.optim.Adam(model.parameters(), lr=1e-3)), None, None


def cnn_train():
    # the demo's CNN shape class: 8x8 single-channel digits, batch 64
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                torch.nn.Flatten(), torch.nn.Linear(32 * 4 * 4, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 10))
    x, y = torch.randn(64, 1, 8, 8), torch.randint(0, 10, (64,))
    return train_step(model, x, y, torch.optim.Adam(model.parameters(), lr=1e-3)), None, None


def transformer_train():
    layer, x = encoder_block(), torch.randn(8, 128, 256)
    opt = torch.optim.AdamW(layer.parameters(), lr=1e-3)

    def step():
        opt.zero_grad(set_to_none=True)
        layer(x).pow(2).mean().backward()
        opt.step()
    return step, None, None


def tiny_op():
    a, b = torch.ones(1), torch.ones(1)
    n = 1000

    def step():
        for _ in range(n):
            torch.add(a, b)
    return step, None, None


def python_tiny_adds():
    """`a + b` from a Python loop, as bench/python_bench.py runs it on smelt tensors."""
    a, b = torch.ones(1), torch.ones(1)

    def step():
        for _ in range(1000):
            a + b
    return step, None, None


def tiny_chain():
    """y = a + b + b + ...: 1000 dependent one-element adds (smelt compiles the same chain)."""
    a, b = torch.ones(1), torch.ones(1)

    def f(a, b):
        y = a
        for _ in range(1000):
            y = torch.add(y, b)
        return y
    return (lambda: f(a, b)), f, (a, b)


WORKLOADS = [
    Workload("gelu(x*a+b) 16M", elementwise_chain, bytes_moved=2 * 4 * 16 * 2**20),
    Workload("softmax 2048x1024", softmax_2048x1024, bytes_moved=2 * 4 * 2048 * 1024),
    Workload("log_softmax 2048x1024", log_softmax_2048x1024, bytes_moved=2 * 4 * 2048 * 1024),
    Workload("layer_norm 2048x1024", layer_norm_2048x1024, bytes_moved=2 * 4 * 2048 * 1024),
    Workload("sgemm 1024^3", sgemm_1024, flops=2 * 1024**3),
    Workload("linear+bias+relu 1024^3", linear_relu_1024, flops=2 * 1024**3),
    Workload("conv3x3 64->64 56x56 +bias+relu", conv3x3_64_56, flops=2 * 64 * 64 * 9 * 56 * 56),
    # inference forward passes (no grad); torch-script is torch.jit.trace of the module
    Workload("MLP 784-1024-1024-10 forward b256", mlp_forward, flops=2 * 256 * (784 * 1024 + 1024 * 1024 + 1024 * 10)),
    Workload("transformer block d256 h4 s128 b8 forward", transformer_forward,
             flops=2 * 8 * 128 * 12 * 256**2 + 4 * 8 * 128 * 128 * 256),
    # training flops: matmul/conv flops of forward + backward = 3x forward
    Workload("MLP 784-1024-1024-10 train step b256", mlp_train, flops=6 * 256 * (784 * 1024 + 1024 * 1024 + 1024 * 10),
             scriptable=False, training=True),
    Workload("CNN digits train step b64", cnn_train, flops=6 * 64 * (64 * (16 * 9 + 32 * 16 * 9) + 512 * 64 + 64 * 10),
             scriptable=False, training=True),
    Workload("transformer block d256 h4 s128 b8 fwd+bwd+AdamW", transformer_train,
             flops=3 * (2 * 8 * 128 * 12 * 256**2 + 4 * 8 * 128 * 128 * 256), scriptable=False, training=True),
    Workload("dispatch: 1000 tiny adds", tiny_op, scriptable=False),
    Workload("chain: 1000 tiny adds", tiny_chain),
    Workload("python: 1000 tiny a + b", python_tiny_adds, scriptable=False),
] + zoo_workloads()


def peer_info():
    """PyTorch's version and the libraries it computes with (torch.__config__, and the BLAS shared
    library actually mapped after a matrix product: Debian builds with BLAS_INFO=generic, which
    is whatever libblas.so.3 the system points to), for the report."""
    config = torch.__config__.show()
    fields = dict(re.findall(r"\b(BLAS_INFO|LAPACK_INFO|USE_MKL|USE_MKLDNN|USE_OPENMP)=([^,\s]*)", config))
    for line in config.splitlines():
        line = line.strip(" -")
        if line.startswith(("Intel(R) MKL-DNN", "oneDNN", "Intel(R) oneAPI", "Intel(R) Math Kernel",
                            "CPU capability usage")):
            fields.setdefault("libraries", []).append(line)
    torch.randn(64, 64) @ torch.randn(64, 64)
    try:
        maps = open("/proc/self/maps").read()
        fields["blas_library"] = sorted({os.path.basename(m) for m in re.findall(r"\S*(?:blas|mkl_rt|mkl_core)\S*", maps)})
    except OSError:
        pass
    return {"name": "PyTorch", "version": torch.__version__, "python": sys.executable,
            "python_version": sys.version.split()[0], "config": fields,
            "mkl": torch.backends.mkl.is_available(), "mkldnn": torch.backends.mkldnn.is_available()}


def build_step(w, impl):
    step, fn, args = w.build()
    if impl == "torch-script":
        with torch.no_grad():
            traced = torch.jit.trace(fn, args)
            if w.freeze:
                traced = torch.jit.freeze(traced)
        step = lambda: traced(*args)
    return step


def grad_context(w):
    return torch.no_grad() if w.scriptable else torch.enable_grad()


def serve():
    by_name = {w.name: w for w in WORKLOADS}
    built = {}
    for line in sys.stdin:
        parts = line.rstrip("\n").split("\t")
        if parts[0] == "quit":
            break
        if parts[0] == "list":
            print(json.dumps({"threads": torch.get_num_threads(), "peer": peer_info(),
                              "workloads": [{"name": w.name, "bytes": w.bytes, "flops": w.flops,
                                             "impls": ["torch-eager"] + (["torch-script"] if w.scriptable else []),
                                             "peak_memory": w.training} for w in WORKLOADS]}), flush=True)
            continue
        try:
            _, name, impl, n = parts
            w = by_name[name]
            if impl not in ("torch-eager", "torch-script") or (impl == "torch-script" and not w.scriptable):
                raise ValueError(f"'{name}' has no impl '{impl}'")
            with grad_context(w):
                if (name, impl) not in built:
                    built[(name, impl)] = build_step(w, impl)
                    timed(built[(name, impl)], 3)  # warm-up (and the jit's profiling runs)
                reply = {"ms": timed(built[(name, impl)], int(n))}
        except Exception as e:  # noqa: BLE001 - any failure is reported to run.py, not fatal
            reply = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(reply), flush=True)


def max_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux reports KiB


def peak_memory(name, steps):
    """Peak RSS growth over `steps` steps above the built model and inputs (as smelt_bench)."""
    w = {w.name: w for w in WORKLOADS}[name]
    with grad_context(w):
        step = build_step(w, "torch-eager")
        baseline = max_rss_mib()
        for _ in range(steps):
            step()
        peak = max_rss_mib()
    print(json.dumps({"MiB": peak - baseline, "baseline_MiB": baseline}), flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--peak-memory":
        peak_memory(sys.argv[2], int(sys.argv[3]))
    else:
        serve()
