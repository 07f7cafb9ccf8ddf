"""The golden-data format: encoding tensors, and the case recorder (see make_golden.py)."""
import json
import os
import zlib

import numpy as np
import torch

DTYPE_NAMES = {torch.float32: "float32", torch.float64: "float64", torch.int64: "int64",
               torch.bool: "bool", torch.uint8: "uint8", torch.int8: "int8", torch.int32: "int32"}


def encode_tensor(t):
    """A tensor as a JSON object; floats in the shortest text that reads back exactly."""
    t = t.detach().contiguous()
    if t.dtype == torch.float32:
        data = [float(repr(v)) for v in t.reshape(-1).numpy().astype(np.float32)]
    elif t.dtype == torch.float64:
        data = [float(v) for v in t.reshape(-1).tolist()]
    elif t.dtype in (torch.int64, torch.int32, torch.uint8, torch.int8):
        data = [int(v) for v in t.reshape(-1).tolist()]
    elif t.dtype == torch.bool:
        data = [bool(v) for v in t.reshape(-1).tolist()]
    else:
        raise ValueError(f"no JSON encoding for {t.dtype}")
    if t.is_floating_point() and not torch.isfinite(t).all():
        raise ValueError("golden data must be finite (JSON has no NaN/inf)")
    return {"shape": list(t.shape), "dtype": DTYPE_NAMES[t.dtype], "data": data}


class Input:
    """One named input of a case. `grad` marks it differentiable (float only)."""

    def __init__(self, name, value, grad=None):
        self.name = name
        self.value = value
        self.grad = value.is_floating_point() if grad is None else grad
        assert not self.grad or value.is_floating_point(), name


class Family:
    """The cases of one op family, written to ops/<name>.json."""

    def __init__(self, name):
        self.name = name
        self.cases = []
        self.names = set()

    def generator(self, case_name):
        return torch.Generator().manual_seed(zlib.crc32(f"{self.name}/{case_name}".encode()))

    def add(self, name, op, attrs, inputs, fn, state_outputs=0):
        """Records case `name`: fn(*inputs) -> tensor or list of tensors. The last
        `state_outputs` outputs are state (no weight, no gradient)."""
        assert name not in self.names, f"duplicate case {self.name}/{name}"
        self.names.add(name)
        gen = self.generator(name + "/weights")

        outs32 = _as_list(fn(*[i.value.clone() for i in inputs]))
        leaves = []
        for i in inputs:
            t = i.value.clone()
            if t.dtype == torch.float32:
                t = t.double()
            leaves.append(t.requires_grad_(i.grad))
        outs64 = _as_list(fn(*leaves))
        assert len(outs32) == len(outs64)

        outputs, weights, loss = [], [], None
        for k, (o32, o64) in enumerate(zip(outs32, outs64)):
            if o32.is_floating_point():
                ok = torch.allclose(o32.double(), o64.detach(), rtol=1e-3, atol=1e-4)
            else:
                ok = torch.equal(o32, o64.to(o32.dtype))
            assert ok, f"{self.name}/{name}: float32 and float64 runs disagree on output {k}"
            outputs.append(encode_tensor(o64.detach().to(o32.dtype)))
            if k >= len(outs32) - state_outputs or not o32.is_floating_point():
                weights.append(None)
                continue
            w = torch.randn(o32.shape, generator=gen, dtype=torch.float32)
            weights.append(encode_tensor(w))
            term = (o64 * w.double()).sum()
            loss = term if loss is None else loss + term

        if loss is None or not loss.requires_grad:  # no float output: nothing to differentiate
            for i in inputs:
                i.grad = False
        diff = [t for t, i in zip(leaves, inputs) if i.grad]
        grads = iter(torch.autograd.grad(loss, diff) if diff else [])
        case = {
            "name": name, "op": op, "attrs": attrs,
            "inputs": [dict(name=i.name, requires_grad=i.grad, **encode_tensor(i.value))
                       for i in inputs],
            "outputs": outputs,
            "weights": weights,
            "grads": [encode_tensor(next(grads).to(i.value.dtype)) if i.grad else None
                      for i in inputs],
        }
        self.cases.append(case)

    def write(self, out_dir):
        path = os.path.join(out_dir, self.name + ".json")
        with open(path, "w") as f:
            # One case per line keeps diffs readable and files small.
            f.write('{"cases": [\n')
            f.write(",\n".join(json.dumps(c, separators=(",", ":")) for c in self.cases))
            f.write("\n]}\n")
        return path


def _as_list(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]
