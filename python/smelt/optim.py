"""smelt.optim: SGD, Adam, AdamW (smelt.optim.lr_scheduler: StepLR, CosineAnnealingLR, LinearLR,
SequentialLR). They work on any module's parameters, Python-defined ones included."""
import sys as _sys

from ._smelt.optim import SGD, Adam, AdamW, Optimizer, ParamGroup, lr_scheduler  # noqa: F401

# `import smelt.optim.lr_scheduler` as well as attribute access.
_sys.modules[__name__ + ".lr_scheduler"] = lr_scheduler
