// smelt.onnx: ONNX export from Python. A callable is traced as smelt.compile traces it (the
// tensors it captures become initializers); a module is traced with its parameters and buffers as
// initializers named as in its state dict (smelt::onnx::save_module).
#include "bind.h"
#include "smelt/onnx.h"

namespace smelt::python {

namespace {

std::vector<std::string> names_arg(py::handle obj) {
  return obj.is_none() ? std::vector<std::string>{} : obj.cast<std::vector<std::string>>();
}

}  // namespace

void bind_onnx(py::module_& m) {
  py::module_ o = m.def_submodule("onnx", "ONNX export");
  o.def("save", [](py::object fn, py::handle inputs, const std::string& path, int64_t opset, py::handle input_names,
                   py::handle output_names, bool external_data) {
    onnx::ExportOptions options;
    options.opset = opset;
    options.input_names = names_arg(input_names);
    options.output_names = names_arg(output_names);
    options.external_data = external_data;
    const std::vector<Tensor> examples = tensor_list(inputs, "onnx.save: inputs");
    if (py::isinstance<nn::Module>(fn)) {
      nn::Module& mod = fn.cast<nn::Module&>();
      onnx::save_module(
          mod, [&](const std::vector<Tensor>& in) { return call_python(fn, in, "onnx.save: the function's results"); },
          examples, path, options);
      return;
    }
    if (!PyCallable_Check(fn.ptr())) throw py::type_error("onnx.save: expected a module or a callable");
    Graph g = Graph::trace(
        [&](const std::vector<Tensor>& in, const std::vector<Tensor>&) {
          return call_python(fn, in, "onnx.save: the function's results");
        },
        examples);
    onnx::save(g, path, options);
  }, py::arg("fn"), py::arg("inputs"), py::arg("path"), py::kw_only(), py::arg("opset") = 17,
     py::arg("input_names") = py::none(), py::arg("output_names") = py::none(), py::arg("external_data") = false,
     R"(Traces fn(*inputs) (a module, or a callable whose captured tensors become initializers) and
writes it as an ONNX model at path. A module keeps its state-dict names; call eval() first.)");
}

}  // namespace smelt::python
