"""smelt.nn: modules. Subclass smelt.nn.Module as torch.nn.Module: attributes that are Parameters
or Modules are registered (named_parameters, state_dict, optimizers and checkpoints see them),
forward() is what calling the module runs.

The layers (Linear, Conv2d, ...) are smelt's C++ modules; ModuleList and the loss modules below are
Python subclasses of Module over smelt.nn.functional.
"""
import sys as _sys

from .._smelt.nn import (AdaptiveAvgPool2d, AvgPool2d, BatchNorm2d, Conv2d, Dropout, Embedding,  # noqa: F401
                         Flatten, GELU, GRU, LSTM, LayerNorm, LeakyReLU, Linear, MaxPool2d, Module,
                         Parameter, ReLU, RNN, Sequential, SiLU, Sigmoid, Tanh, clip_grad_norm_,
                         digits_cnn, init)
from . import functional, utils  # noqa: F401

_sys.modules[__name__ + ".init"] = init


class ModuleList(Module):
    """Holds modules in a list, registered as children "0", "1", ... (no forward of its own)."""

    def __init__(self, modules=()):
        super().__init__()
        self._size = 0
        for m in modules:
            self.append(m)

    def append(self, module):
        self.add_module(str(self._size), module)
        self._size += 1
        return self

    def __len__(self):
        return self._size

    def __getitem__(self, i):
        if not -self._size <= i < self._size:
            raise IndexError(f"ModuleList index {i} out of range")
        return getattr(self, str(i % self._size))

    def __iter__(self):
        return (self[i] for i in range(self._size))


class _Loss(Module):
    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = reduction

    def extra_repr(self):
        return f"reduction={self.reduction}"


class CrossEntropyLoss(_Loss):
    def __init__(self, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__(reduction)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def forward(self, input, target):
        return functional.cross_entropy(input, target, ignore_index=self.ignore_index,
                                        reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_Loss):
    def __init__(self, ignore_index=-100, reduction="mean"):
        super().__init__(reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return functional.nll_loss(input, target, ignore_index=self.ignore_index, reduction=self.reduction)


class MSELoss(_Loss):
    def forward(self, input, target):
        return functional.mse_loss(input, target, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    def forward(self, input, target):
        return functional.binary_cross_entropy_with_logits(input, target, reduction=self.reduction)
