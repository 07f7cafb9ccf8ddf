// smelt.quantize: post-training INT8 quantization from Python (smelt::quantize). A module or a
// callable is traced at the first calibration batch's shapes (what it captures, a module's
// parameters, become constants); the batches come from any iterable (a list, a generator, a
// DataLoader mapped to inputs), each a tensor or a tuple/list of tensors.
#include "bind.h"
#include "smelt/onnx.h"
#include "smelt/quantize.h"

namespace smelt::python {

namespace {

// One calibration batch: a tensor (a one-input model) or a sequence of them.
std::vector<Tensor> batch_arg(py::handle item) {
  if (py::isinstance<Tensor>(item)) return {item.cast<Tensor>()};
  return tensor_list(item, "quantize: a calibration batch");
}

py::dict layer_dict(const QuantizedLayerReport& l) {
  py::dict d;
  d["value"] = l.value;
  d["op"] = l.op;
  d["min"] = l.min;
  d["max"] = l.max;
  d["threshold"] = l.threshold;
  d["scale"] = l.scale;
  d["zero_point"] = l.zero_point;
  d["sqnr_db"] = l.sqnr_db;
  return d;
}

}  // namespace

void bind_quantize(py::module_& m) {
  py::class_<QuantizeResult>(m, "QuantizedModel", "an INT8 model made by smelt.quantize")
      .def("__call__", [](const QuantizeResult& q, py::args args) {
        std::vector<Tensor> inputs;
        for (py::handle a : args) inputs.push_back(tensor_arg(a, "QuantizedModel: an input"));
        std::vector<Tensor> out = q.graph.run(inputs);
        if (out.size() == 1) return py::cast(out[0]);
        return py::cast(out);
      }, "runs the quantized graph on the inputs (the shapes it was traced at)")
      .def_property_readonly("layers", [](const QuantizeResult& q) {
        py::list out;
        for (const QuantizedLayerReport& l : q.layers) out.append(layer_dict(l));
        return out;
      }, "per quantized layer: value, op, min, max, threshold, scale, zero_point, sqnr_db")
      .def_property_readonly("float_ops", [](const QuantizeResult& q) { return q.float_ops; },
                             "the ops left in float, by name")
      .def_property_readonly("calibration", [](const QuantizeResult& q) { return q.calibration_json; },
                             "the calibration as JSON (to reuse: quantize(..., calibration=...))")
      .def_property_readonly("ir", [](const QuantizeResult& q) { return q.graph.print(); }, "the graph's text form")
      .def("report", &QuantizeResult::report, "the table `smelt quantize` prints")
      .def("save", [](const QuantizeResult& q, const std::string& path, bool qdq) {
             onnx::ExportOptions options;
             options.quantized_as_qdq = qdq;
             onnx::save(q.graph, path, options);
           },
           py::arg("path"), py::kw_only(), py::arg("qdq") = false,
           "writes the quantized model as ONNX: QLinearConv, QLinearMatMul, ...; with qdq=True as "
           "DequantizeLinear -> Conv/MatMul -> QuantizeLinear (the form ONNX Runtime's quantize_static writes)");

  m.def("quantize", [](py::object fn, py::iterable batches, const std::string& method, double percentile,
                       const std::string& calibration) {
    std::vector<std::vector<Tensor>> all;
    for (py::handle item : batches) all.push_back(batch_arg(item));
    QuantizeOptions options;
    options.method = calibration_method(method);
    options.percentile = percentile;
    options.calibration_json = calibration;
    if (!PyCallable_Check(fn.ptr())) throw py::type_error("quantize: expected a module or a callable");
    NoGradGuard no_grad;
    return quantize([&](const std::vector<Tensor>& in) { return call_python(fn, in, "quantize: the model's results"); },
                    all, options);
  }, py::arg("model"), py::arg("calibration_batches"), py::kw_only(), py::arg("method") = "entropy",
     py::arg("percentile") = 99.99, py::arg("calibration") = "",
     R"(Post-training INT8 quantization: traces model(*batch) (a module in eval mode, or a callable)
at the first batch's shapes, calibrates its activations on the batches (method: "entropy",
"percentile", "max" or "mse"), and makes its convolutions and matmuls integer ops. Returns a
QuantizedModel: call it, read .layers (each with its SQNR) and .report(), .save(path) as ONNX.)");
}

}  // namespace smelt::python
