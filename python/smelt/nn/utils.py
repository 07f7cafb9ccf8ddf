"""smelt.nn.utils: clip_grad_norm_."""
from .._smelt.nn import clip_grad_norm_  # noqa: F401
