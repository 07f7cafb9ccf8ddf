"""Reference training run: a small CNN on 8x8 single-channel images, three Adam steps.

Written to tests/golden/cnn_adam.json by make_golden.py. Computed in float64 from float32
initial values (parameters, inputs), like the op cases: the stored numbers are the exact answer
at float32 precision.
"""
import json

import torch
import torch.nn as nn
import torch.nn.functional as F

from golden_format import encode_tensor

SEED = 1234
STEPS = 3
LR = 1e-2
BATCH = 16


def make_model():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(8 * 4 * 4, 10))


def write(path):
    gen = torch.Generator().manual_seed(SEED)
    torch.manual_seed(SEED)  # nn's default initialization draws from the global generator
    model = make_model()
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
    # Digit-like pixel intensities in [0, 1).
    inputs = torch.rand((BATCH, 1, 8, 8), generator=gen)
    targets = torch.randint(0, 10, (BATCH,), generator=gen)

    model = model.double()
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    steps = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(inputs.double()), targets)
        loss.backward()
        grads = {k: p.grad.float() for k, p in model.named_parameters()}
        optimizer.step()
        steps.append({
            "loss_before": float(torch.tensor(loss.item(), dtype=torch.float32)),
            "grads": {k: encode_tensor(g) for k, g in grads.items()},
            "params_after": {k: encode_tensor(v.float()) for k, v in model.state_dict().items()},
        })

    doc = {
        "description": (
            "Three steps of training a small CNN on 8x8 single-channel images. Model (PyTorch "
            "nn.Sequential, parameter names as its state_dict): 0 Conv2d(1, 8, kernel 3, stride "
            "1, padding 1, with bias) -> 1 ReLU -> 2 MaxPool2d(kernel 2, stride 2) -> 3 Flatten "
            "(N, 8*4*4 in (C, H, W) order) -> 4 Linear(128, 10) (y = x W^T + b). Loss: "
            "cross_entropy(logits, targets), mean over the batch. Optimizer: Adam(lr=0.01, "
            "betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False), bias-corrected as "
            "in PyTorch. Each step: zero grads, forward on the same batch, loss, backward, "
            "optimizer step. steps[i].loss_before is the loss computed before step i's update, "
            "steps[i].grads the gradients used by step i, steps[i].params_after the parameters "
            "after it. Computed in float64 from the float32 values stored here and rounded to "
            "float32."),
        "model": ["Conv2d(1, 8, 3, padding=1)", "ReLU()", "MaxPool2d(2)", "Flatten()",
                  "Linear(128, 10)"],
        "optimizer": {"name": "Adam", "lr": LR, "betas": [0.9, 0.999], "eps": 1e-8,
                      "weight_decay": 0.0},
        "loss": "cross_entropy, reduction mean",
        "initial_params": {k: encode_tensor(v) for k, v in initial.items()},
        "inputs": encode_tensor(inputs),   # (16, 1, 8, 8)
        "targets": encode_tensor(targets),  # (16,) Int64 class indices
        "steps": steps,
    }
    with open(path, "w") as f:  # one top-level key (one step) per line
        items = []
        for key, value in doc.items():
            if key == "steps":
                value = "[\n" + ",\n".join(json.dumps(s, separators=(",", ":")) for s in value) + "\n]"
            else:
                value = json.dumps(value, separators=(",", ":"))
            items.append(json.dumps(key) + ": " + value)
        f.write("{\n" + ",\n".join(items) + "\n}\n")
    return path
