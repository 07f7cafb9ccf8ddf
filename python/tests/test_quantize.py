"""smelt.quantize from Python: a small CNN quantized on calibration batches from a generator stays
close to float, reports its layers, saves as ONNX (QOperator or QDQ) and reuses its calibration."""
import pytest
import smelt
from smelt import nn


def _model():
    smelt.manual_seed(3)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                          nn.Flatten(), nn.Linear(8 * 6 * 6, 5))
    model.eval()
    return model


def _batches(n):
    smelt.manual_seed(11)
    return [smelt.rand(2, 3, 6, 6) for _ in range(n)]


def test_quantize_a_module_from_a_generator(tmp_path):
    model = _model()
    batches = _batches(6)
    q = smelt.quantize(model, (b for b in batches), method="percentile")
    assert [layer["op"] for layer in q.layers] == ["conv2d+bias+relu", "conv2d+bias+relu", "matmul+bias"]
    assert all(layer["sqnr_db"] > 20 for layer in q.layers)
    x = batches[0]
    with smelt.no_grad():
        want = model(x)
    got = q(x)
    assert got.shape == want.shape
    err = ((got - want) ** 2).sum().item() / (want ** 2).sum().item()
    assert err < 0.01
    assert "SQNR" in q.report()
    path = str(tmp_path / "q.onnx")
    q.save(path)
    qdq = str(tmp_path / "q_qdq.onnx")
    q.save(qdq, qdq=True)
    again = smelt.quantize(model, batches, calibration=q.calibration)
    assert again.ir == q.ir
    onnx = pytest.importorskip("onnx")
    ops = [n.op_type for n in onnx.load(path).graph.node]
    assert "QLinearConv" in ops and "Conv" not in ops
    ops = [n.op_type for n in onnx.load(qdq).graph.node]
    assert "QLinearConv" not in ops and ops.count("Conv") == 2 and "MatMul" in ops and "DequantizeLinear" in ops


def test_quantize_errors():
    model = _model()
    with pytest.raises(smelt.Error, match="entropy"):
        smelt.quantize(model, _batches(1), method="kl")
    with pytest.raises(smelt.Error, match="calibration batch"):
        smelt.quantize(model, [])
    with pytest.raises(TypeError):
        smelt.quantize(3, _batches(1))
