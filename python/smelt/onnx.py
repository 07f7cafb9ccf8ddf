"""smelt.onnx: ONNX export (smelt.onnx.save(module_or_fn, inputs, path, opset=17))."""
from ._smelt.onnx import save  # noqa: F401
