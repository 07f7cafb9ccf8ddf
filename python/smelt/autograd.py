"""smelt.autograd: gradients without touching .grad (smelt.autograd.grad)."""
from ._smelt.autograd import grad  # noqa: F401
