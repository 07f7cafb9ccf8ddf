// The extension module smelt._smelt: the error translator, then each family of bindings.
// The package smelt (python/smelt/) re-exports it and adds the Python-side classes.
#include "bind.h"

namespace smelt::python {

void bind_dtype(py::module_& m) {
  py::enum_<DType> cls(m, "dtype", "Element types: float32, float64, int64, int32, bool, uint8, int8");
  cls
      .value("float32", DType::Float32)
      .value("float64", DType::Float64)
      .value("int64", DType::Int64)
      .value("bool", DType::Bool)
      .value("uint8", DType::UInt8)
      .value("int32", DType::Int32)
      .value("int8", DType::Int8)
      .def_property_readonly("itemsize", [](DType d) { return dtype_size(d); })
      .def_property_readonly("is_floating_point", [](DType d) { return dtype_is_floating(d); });
  // Replaced rather than overloaded (def would add an overload after enum_'s own, which wins).
  auto name = [](DType d) { return std::string("smelt.") + dtype_name(d); };
  cls.attr("__repr__") = py::cpp_function(name, py::is_method(cls));
  cls.attr("__str__") = py::cpp_function(name, py::is_method(cls));
  m.attr("float32") = DType::Float32;
  m.attr("float64") = DType::Float64;
  m.attr("int64") = DType::Int64;
  m.attr("bool") = DType::Bool;
  m.attr("uint8") = DType::UInt8;
  m.attr("int32") = DType::Int32;
  m.attr("int8") = DType::Int8;
  // PyTorch's aliases.
  m.attr("float") = DType::Float32;
  m.attr("double") = DType::Float64;
  m.attr("long") = DType::Int64;
  m.attr("int") = DType::Int32;
}

}  // namespace smelt::python

PYBIND11_MODULE(_smelt, m) {
  using namespace smelt::python;
  m.doc() = "smelt: tensors, autograd, nn modules, optimizers and a graph compiler (C++ core)";
  // smelt::Error -> smelt.Error, a RuntimeError carrying smelt's message (as PyTorch raises
  // RuntimeError for its checks). A smelt bug (SMELT_INTERNAL_CHECK) says so in the message.
  // The module attribute keeps the type alive; the handle borrows it.
  static py::handle error = py::exception<smelt::Error>(m, "Error", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const smelt::Error& e) {
      std::string what = e.what();
      if (e.internal()) what = "internal error (a bug in smelt, please report it): " + what;
      PyErr_SetString(error.ptr(), what.c_str());
    }
  });
  bind_dtype(m);
  bind_tensor(m);
  bind_functional(m);
  py::module_ nn = m.def_submodule("nn", "modules (subclassable from Python), layers, init");
  bind_nn(nn);
  py::module_ optim = m.def_submodule("optim", "optimizers and learning-rate schedulers");
  bind_optim(optim);
  bind_io_data(m);
  bind_compile(m);
  bind_onnx(m);
  bind_custom_op(m);
  bind_quantize(m);
}
