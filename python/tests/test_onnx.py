"""smelt.onnx.save from Python: modules keep their state-dict names, callables their captured
weights; the files pass onnx.checker when python3-onnx is installed."""
import pytest
import smelt
from smelt import nn


def _check(path):
    onnx = pytest.importorskip("onnx", reason="python3-onnx is not installed")
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    return model


def test_module_export(tmp_path):
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    model.eval()
    path = str(tmp_path / "mlp.onnx")
    smelt.onnx.save(model, [smelt.randn(2, 4)], path, input_names=["x"], output_names=["logits"])
    m = _check(path)
    assert [i.name for i in m.graph.input] == ["x"]
    assert [o.name for o in m.graph.output] == ["logits"]
    assert sorted(t.name for t in m.graph.initializer if t.name[0].isdigit()) == \
        ["0.bias", "0.weight", "2.bias", "2.weight"]
    assert [d.dim_value for d in m.graph.output[0].type.tensor_type.shape.dim] == [2, 3]


def test_callable_export_and_opset(tmp_path):
    w = smelt.randn(3, 3)
    path = str(tmp_path / "f.onnx")
    smelt.onnx.save(lambda x: (x @ w).softmax(-1), [smelt.randn(2, 3)], path, opset=13)
    m = _check(path)
    assert [o.version for o in m.opset_import if o.domain == ""] == [13]
    assert {n.op_type for n in m.graph.node} == {"MatMul", "Softmax"}


def test_export_errors(tmp_path):
    with pytest.raises(smelt.Error, match="opset 12"):
        smelt.onnx.save(lambda x: x.relu(), [smelt.randn(2)], str(tmp_path / "a.onnx"), opset=12)
    model = nn.Dropout(0.5)
    model.train()
    with pytest.raises(smelt.Error, match="eval"):
        smelt.onnx.save(model, [smelt.randn(4)], str(tmp_path / "b.onnx"))
    with pytest.raises(TypeError):
        smelt.onnx.save(3, [smelt.randn(2)], str(tmp_path / "c.onnx"))
