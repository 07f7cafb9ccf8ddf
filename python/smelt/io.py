"""smelt.io: safetensors files of tensors, modules, optimizers and whole checkpoints."""
from ._smelt.io import (load_checkpoint, load_module, load_optimizer, load_safetensors,  # noqa: F401
                        save_checkpoint, save_module, save_optimizer, save_safetensors)
