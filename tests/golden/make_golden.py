#!/usr/bin/python3
"""Golden reference data for smelt's op tests, computed with PyTorch.

Rerun from the repository root with Debian's python3-torch (a pyenv or virtualenv python3 may
not see it, hence the explicit interpreter):

    /usr/bin/python3 tests/golden/make_golden.py

It rewrites tests/golden/ops/<family>.json (cases defined in golden_ops_a/b/c.py) and
tests/golden/cnn_adam.json (golden_cnn.py), tests/golden/recurrent.json
(golden_recurrent.py) and tests/golden/quantize.json (golden_quantize.py). The output is
deterministic: every case draws its inputs from a torch.Generator seeded with a CRC of its
family and name, so adding a case never changes the others. PyTorch is used only here, never by
smelt's build or tests (tests/ops/golden_test.cpp reads the JSON).

Format of tests/golden/ops/<family>.json:

    {"cases": [{"name": "...", "op": "<smelt public function>", "attrs": {...},
                "inputs":  [{"name": "x", "requires_grad": true, <tensor>}, ...],
                "outputs": [<tensor>, ...],
                "weights": [<tensor> or null, ...],     # one per output
                "grads":   [<tensor> or null, ...]}]}   # one per input
    <tensor> = "shape": [..], "dtype": "float32" | "float64" | "int64" | "bool", "data": [..]

"op" is the smelt function (or Tensor method, for views such as "transpose" or "select") and
"attrs" its arguments by the parameter names of include/smelt/ops.h; a reduction is "mean",
"sum" or "none". Optional tensor arguments (bias, weight) are simply absent from "inputs" when
not passed. Two attrs are not arguments: "permute_first" (views) permutes the input before the op,
to test non-contiguous inputs; "pow_scalar" is pow(a, double exponent).

"grads" are d/d(input) of sum_k sum(outputs[k] * weights[k]); a null weight marks an output that
is state rather than a result (batch_norm's updated running statistics) or is not floating
point; a null grad marks an input that does not require grad. Float inputs and weights are
float32 values; the reference outputs and gradients are computed by PyTorch in float64 from
those exact values and then rounded to the output's dtype, so the stored numbers are the exact
answer to float32 precision and smelt's float32 error is measured against the truth rather than
against PyTorch's own float32 rounding. (Every case is also run in float32 and checked against
the float64 result here, which pins the output dtypes and catches case mistakes.)
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden_cnn  # noqa: E402  (the CNN + Adam training reference)
import golden_ops_a  # noqa: E402  (op cases: elementwise, reductions, softmax)
import golden_ops_b  # noqa: E402  (op cases: contractions, pools, norms, dropout, losses)
import golden_ops_c  # noqa: E402  (op cases: indexing, joining, views)
import golden_quantize  # noqa: E402  (quantized linear and conv, oneDNN)
import golden_recurrent  # noqa: E402  (nn.RNN, nn.LSTM, nn.GRU)

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ops")


def main():
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    os.makedirs(OUT_DIR, exist_ok=True)
    total = 0
    for make in golden_ops_a.FAMILIES + golden_ops_b.FAMILIES + golden_ops_c.FAMILIES:
        family = make()
        path = family.write(OUT_DIR)
        total += os.path.getsize(path)
        print(f"{path}: {len(family.cases)} cases, {os.path.getsize(path)} bytes")
    path = golden_cnn.write(os.path.join(os.path.dirname(OUT_DIR), "cnn_adam.json"))
    total += os.path.getsize(path)
    print(f"{path}: {os.path.getsize(path)} bytes")
    path = golden_recurrent.write(os.path.join(os.path.dirname(OUT_DIR), "recurrent.json"))
    total += os.path.getsize(path)
    print(f"{path}: {os.path.getsize(path)} bytes")
    path = golden_quantize.write(os.path.join(os.path.dirname(OUT_DIR), "quantize.json"))
    total += os.path.getsize(path)
    print(f"{path}: {os.path.getsize(path)} bytes")
    print(f"total {total} bytes")


if __name__ == "__main__":
    main()
