// Python arguments -> smelt's C++ arguments. Every failure is a TypeError or ValueError naming
// the argument and what would be valid, never a crash.
#include "bind.h"

#include <cmath>

namespace smelt::python {

namespace {

std::string type_name_of(py::handle obj) { return py::str(py::type::of(obj).attr("__name__")); }

bool is_int_like(py::handle obj) {
  return !py::isinstance<Tensor>(obj) && !PyBool_Check(obj.ptr()) && PyIndex_Check(obj.ptr());
}

int64_t to_int(py::handle obj, const char* where) {
  if (!is_int_like(obj)) {
    throw py::type_error(std::string(where) + ": expected an int, got " + type_name_of(obj));
  }
  // PyNumber_Index accepts NumPy integers too; an int beyond int64 is an OverflowError.
  py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(obj.ptr()));
  if (!index) throw py::error_already_set();
  long long v = PyLong_AsLongLong(index.ptr());
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  return v;
}

}  // namespace

DType dtype_arg(py::handle obj) {
  if (py::isinstance<DType>(obj)) return obj.cast<DType>();
  if (py::isinstance<py::str>(obj)) return dtype_from_name(obj.cast<std::string>());
  // A NumPy dtype or scalar type (np.float32, np.dtype("int64")).
  py::module_ np = py::module_::import("numpy");
  py::object dt;
  try {
    dt = np.attr("dtype")(obj);
  } catch (py::error_already_set&) {
    throw py::type_error("dtype: expected smelt.float32/float64/int64/int32/bool/uint8/int8, a dtype name or "
                         "a NumPy dtype, got " + type_name_of(obj));
  }
  std::string name = py::str(dt.attr("name"));
  if (name == "float32" || name == "float64" || name == "int64" || name == "int32" || name == "bool" ||
      name == "uint8" || name == "int8") {
    return dtype_from_name(name);
  }
  throw py::type_error("dtype: smelt has no dtype for NumPy's " + name +
                       "; valid: float32, float64, int64, int32, bool, uint8, int8");
}

Shape shape_args(const py::args& args, const char* where) {
  if (args.size() == 1 && !is_int_like(args[0])) return int_list(args[0], where);
  Shape shape;
  for (py::handle a : args) shape.push_back(to_int(a, where));
  return shape;
}

std::vector<int64_t> int_list(py::handle obj, const char* where) {
  if (is_int_like(obj)) return {to_int(obj, where)};
  if (!py::isinstance<py::sequence>(obj) || py::isinstance<py::str>(obj)) {
    throw py::type_error(std::string(where) + ": expected an int or a sequence of ints, got " +
                         type_name_of(obj));
  }
  std::vector<int64_t> out;
  for (py::handle item : obj.cast<py::sequence>()) out.push_back(to_int(item, where));
  return out;
}

std::vector<int64_t> int_tuple(py::handle obj, size_t n, const char* where) {
  if (is_int_like(obj)) return std::vector<int64_t>(n, to_int(obj, where));
  std::vector<int64_t> v = int_list(obj, where);
  if (v.size() != n) {
    throw py::value_error(std::string(where) + ": expected an int or " + std::to_string(n) +
                          " ints, got " + std::to_string(v.size()));
  }
  return v;
}

std::vector<int64_t> dims_arg(py::handle obj, const char* where) {
  if (obj.is_none()) return {};
  return int_list(obj, where);
}

Reduction reduction_arg(const std::string& name) {
  if (name == "mean") return Reduction::Mean;
  if (name == "sum") return Reduction::Sum;
  if (name == "none") return Reduction::None;
  throw py::value_error("reduction: '" + name + "' is not one of 'mean', 'sum', 'none'");
}

bool number_value(py::handle obj, double* value, bool* is_float) {
  PyObject* p = obj.ptr();
  if (PyFloat_Check(p)) {
    *value = PyFloat_AS_DOUBLE(p);
    *is_float = true;
    return true;
  }
  if (PyLong_Check(p)) {  // bool is an int too
    *value = PyLong_AsDouble(p);
    if (*value == -1.0 && PyErr_Occurred()) throw py::error_already_set();
    *is_float = false;
    return true;
  }
  // NumPy scalars (np.float32(2), np.int64(3)): numbers.Number without being a Tensor.
  if (py::isinstance<Tensor>(obj) || py::isinstance<py::array>(obj)) return false;
  if (PyIndex_Check(p)) {
    *value = double(to_int(obj, "number"));
    *is_float = false;
    return true;
  }
  if (PyNumber_Check(p) && py::hasattr(obj, "dtype")) {  // a NumPy floating or bool scalar
    *value = PyFloat_AsDouble(p);
    if (*value == -1.0 && PyErr_Occurred()) throw py::error_already_set();
    *is_float = !py::isinstance<py::bool_>(obj) && std::string(py::str(obj.attr("dtype").attr("kind"))) == "f";
    return true;
  }
  return false;
}

Tensor number_operand(py::handle obj, double value, const Tensor& like) {
  if (like.dtype() == DType::Int64 && PyLong_Check(obj.ptr()) && !PyBool_Check(obj.ptr())) {
    long long v = PyLong_AsLongLong(obj.ptr());  // OverflowError beyond int64
    if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
    Tensor t = empty({}, DType::Int64);
    *static_cast<int64_t*>(t.raw_data()) = v;
    return t;
  }
  return scalar_like(like, value);
}

Tensor tensor_operand(py::handle obj, const Tensor& like, const char* where) {
  if (py::isinstance<Tensor>(obj)) return obj.cast<const Tensor&>();
  double v;
  bool is_float;
  if (number_value(obj, &v, &is_float)) return number_operand(obj, v, like);
  if (py::isinstance<py::array>(obj) || py::isinstance<py::list>(obj) || py::isinstance<py::tuple>(obj)) {
    return tensor_from_data(obj, py::none());
  }
  throw py::type_error(std::string(where) + ": expected a smelt.Tensor or a number, got " + type_name_of(obj));
}

const Tensor& tensor_arg(py::handle obj, const char* where) {
  if (!py::isinstance<Tensor>(obj)) {
    throw py::type_error(std::string(where) + ": expected a smelt.Tensor, got " + type_name_of(obj));
  }
  return obj.cast<const Tensor&>();
}

std::vector<Tensor> tensor_list(py::handle obj, const char* where) {
  if (py::isinstance<Tensor>(obj) || !py::hasattr(obj, "__iter__")) {
    throw py::type_error(std::string(where) + ": expected an iterable of smelt.Tensor, got " +
                         type_name_of(obj));
  }
  std::vector<Tensor> out;
  for (py::handle item : obj) out.push_back(tensor_arg(item, where));
  return out;
}

std::vector<Tensor> call_python(const py::object& fn, const std::vector<Tensor>& inputs, const char* where) {
  py::tuple args(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) args[i] = py::cast(inputs[i]);
  py::object r = fn(*args);
  if (py::isinstance<Tensor>(r)) return {r.cast<Tensor>()};
  return tensor_list(r, where);
}

std::shared_ptr<py::object> gil_safe(py::object obj) {
  return std::shared_ptr<py::object>(new py::object(std::move(obj)), [](py::object* o) {
    if (Py_IsInitialized()) {
      py::gil_scoped_acquire gil;
      delete o;
    } else {
      o->release();  // the interpreter is gone: leak the reference rather than touch it
      delete o;
    }
  });
}

}  // namespace smelt::python
