"""smelt.nn.functional: the functions of torch.nn.functional that smelt has, with PyTorch's
argument names and order (embedding(input, weight), cross_entropy(input, target, ...))."""
from .._smelt import (adaptive_avg_pool2d, avg_pool2d, batch_norm,  # noqa: F401
                      binary_cross_entropy_with_logits, conv2d, cross_entropy, dropout, embedding, gelu,
                      layer_norm, leaky_relu, linear, log_softmax, max_pool2d, mse_loss, nll_loss, one_hot,
                      relu, sigmoid, silu, softmax, softplus, tanh)
