"""Reference outputs and gradients of PyTorch's nn.RNN, nn.LSTM and nn.GRU.

Written to tests/golden/recurrent.json by make_golden.py (tests/nn/recurrent_golden_test.cpp
reads it). Each case is a module configuration; the stored parameters (PyTorch's state dict),
input and initial states are float32 values, and the outputs and gradients are computed in
float64 from them, so they are the exact answer at float32 precision.

    {"cases": [{"name", "module": "LSTM" | "GRU" | "RNN", "input_size", "hidden_size",
                "num_layers", "bias", "batch_first", "bidirectional", "nonlinearity",
                "parameters": {name: <tensor>}, "input": <tensor>, "h0": <tensor>|null,
                "c0": <tensor>|null, "output", "h_n", "c_n": <tensor>|null,
                "weights": {"output", "h_n", "c_n"},        # the loss: sum(out * weight)
                "grads": {"input", "h0", "c0", <parameter name>: <tensor>}}]}
"""
import json
import zlib

import torch
import torch.nn as nn

from golden_format import encode_tensor

CASES = [
    # name, module, input, hidden, layers, bias, batch_first, bidirectional, nonlinearity, states
    ("lstm_1layer", "LSTM", 4, 3, 1, True, False, False, "tanh", False),
    ("lstm_2layer_bidirectional_batch_first", "LSTM", 5, 4, 2, True, True, True, "tanh", True),
    ("lstm_no_bias_states", "LSTM", 3, 5, 1, False, False, False, "tanh", True),
    ("gru_1layer", "GRU", 4, 3, 1, True, False, False, "tanh", False),
    ("gru_2layer_bidirectional", "GRU", 3, 4, 2, True, False, True, "tanh", True),
    ("rnn_tanh_batch_first", "RNN", 4, 3, 2, True, True, False, "tanh", True),
    ("rnn_relu_bidirectional", "RNN", 3, 4, 1, True, False, True, "relu", False),
]
SEQ, BATCH = 6, 3


def make_case(name, kind, inp, hidden, layers, bias, batch_first, bidirectional, nonlin, states):
    gen = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    torch.manual_seed(zlib.crc32(name.encode()))
    kwargs = dict(num_layers=layers, bias=bias, batch_first=batch_first,
                  bidirectional=bidirectional)
    if kind == "RNN":
        kwargs["nonlinearity"] = nonlin
    module = getattr(nn, kind)(inp, hidden, **kwargs)
    params = {k: v.detach().float() for k, v in module.state_dict().items()}
    module = module.double()
    dirs = 2 if bidirectional else 1
    shape = (BATCH, SEQ, inp) if batch_first else (SEQ, BATCH, inp)
    x = (torch.rand(shape, generator=gen) * 4 - 2).float().double().requires_grad_(True)
    h0 = c0 = None
    if states:
        h0 = (torch.rand((layers * dirs, BATCH, hidden), generator=gen) * 2 - 1).float().double()
        h0.requires_grad_(True)
        if kind == "LSTM":
            c0 = (torch.rand((layers * dirs, BATCH, hidden), generator=gen) * 2 - 1).float().double()
            c0.requires_grad_(True)
    if kind == "LSTM":
        out, (h_n, c_n) = module(x, (h0, c0) if states else None)
    else:
        out, h_n = module(x, h0)
        c_n = None
    weights = {"output": torch.rand(out.shape, generator=gen).double() * 2 - 1,
               "h_n": torch.rand(h_n.shape, generator=gen).double() * 2 - 1}
    loss = (out * weights["output"]).sum() + (h_n * weights["h_n"]).sum()
    if c_n is not None:
        weights["c_n"] = torch.rand(c_n.shape, generator=gen).double() * 2 - 1
        loss = loss + (c_n * weights["c_n"]).sum()
    loss.backward()
    grads = {"input": x.grad}
    if h0 is not None:
        grads["h0"] = h0.grad
    if c0 is not None:
        grads["c0"] = c0.grad
    for k, p in module.named_parameters():
        grads[k] = p.grad
    enc = lambda t: None if t is None else encode_tensor(t)  # noqa: E731
    f32 = lambda t: None if t is None else encode_tensor(t.float())  # noqa: E731
    return {"name": name, "module": kind, "input_size": inp, "hidden_size": hidden,
            "num_layers": layers, "bias": bias, "batch_first": batch_first,
            "bidirectional": bidirectional, "nonlinearity": nonlin,
            "parameters": {k: encode_tensor(v) for k, v in params.items()},
            "input": f32(x), "h0": f32(h0), "c0": f32(c0),
            "output": enc(out), "h_n": enc(h_n), "c_n": enc(c_n),
            "weights": {k: enc(v) for k, v in weights.items()},
            "grads": {k: enc(v) for k, v in grads.items()}}


def write(path):
    cases = [make_case(*c) for c in CASES]
    with open(path, "w") as f:
        json.dump({"cases": cases}, f, separators=(",", ":"))
        f.write("\n")
    return path
