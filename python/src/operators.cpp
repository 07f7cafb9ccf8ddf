// Python operators on smelt.Tensor: + - * / ** @ with tensors or numbers on either side,
// comparisons giving bool tensors, unary -, abs(), and the in-place forms += -= *= /=.
//
// A number takes the tensor's dtype (as C++'s mixed operators), after PyTorch's promotions that
// would otherwise lose the number: a float with an integer or bool tensor computes in float32
// (float64 for comparisons, so that large int64 values compare exactly); an int with a bool tensor
// in int64; true division (/) of integers computes in float32. An operand that is neither a
// Tensor nor a number returns NotImplemented, so Python raises its usual TypeError.
#include "bind.h"

namespace smelt::python {

namespace {

enum class Kind { Arithmetic, TrueDivide, Compare };

using BinaryFn = Tensor (*)(const Tensor&, const Tensor&);

Tensor true_divide_operand(const Tensor& t) {
  return dtype_is_floating(t.dtype()) ? t : t.to(DType::Float32);
}

// `a op other` (or `other op a` when reflected).
template <BinaryFn Op, Kind K>
py::object binary(const Tensor& a, py::handle other, bool reflected) {
  if (py::isinstance<Tensor>(other)) {
    const Tensor& b = other.cast<const Tensor&>();
    if (K == Kind::TrueDivide) {
      return py::cast(reflected ? Op(true_divide_operand(b), true_divide_operand(a))
                                : Op(true_divide_operand(a), true_divide_operand(b)));
    }
    return py::cast(reflected ? Op(b, a) : Op(a, b));
  }
  double v;
  bool is_float;
  Tensor lhs = a;
  if (number_value(other, &v, &is_float)) {
    const DType dt = a.dtype();
    if (K == Kind::TrueDivide) lhs = true_divide_operand(a);
    else if (is_float && !dtype_is_floating(dt)) lhs = a.to(K == Kind::Compare ? DType::Float64 : DType::Float32);
    else if (!PyBool_Check(other.ptr()) && dt == DType::Bool) lhs = a.to(DType::Int64);
    Tensor b = number_operand(other, v, lhs);
    return py::cast(reflected ? Op(b, lhs) : Op(lhs, b));
  }
  if (py::isinstance<py::array>(other) || py::isinstance<py::list>(other)) {
    Tensor b = tensor_from_data(other, py::none());
    if (K == Kind::TrueDivide) {
      lhs = true_divide_operand(a);
      b = true_divide_operand(b);
    }
    return py::cast(reflected ? Op(b, lhs) : Op(lhs, b));
  }
  return py::reinterpret_borrow<py::object>(Py_NotImplemented);
}

template <BinaryFn Op, Kind K>
void def_binary(py::class_<Tensor>& cls, const char* name, const char* rname) {
  cls.def(name, [](const Tensor& a, py::handle b) { return binary<Op, K>(a, b, false); }, py::is_operator());
  if (rname) {
    cls.def(rname, [](const Tensor& a, py::handle b) { return binary<Op, K>(a, b, true); }, py::is_operator());
  }
}

Tensor pow_tensors(const Tensor& a, const Tensor& b) { return pow(a, b); }

// `t op= other` (and t.mul_(other), ...): writes into t (version counter, autograd rebase as
// Tensor's in-place rules) and returns t itself. The operator form returns NotImplemented for an
// operand it cannot take; the method form raises TypeError.
using InplaceTensorFn = Tensor& (*)(Tensor&, const Tensor&);
using InplaceNumberFn = Tensor& (*)(Tensor&, double);

template <InplaceTensorFn WithTensor, InplaceNumberFn WithNumber, bool Operator>
py::object inplace(py::object self, py::handle other) {
  Tensor& t = self.cast<Tensor&>();
  double v;
  bool is_float;
  if (py::isinstance<Tensor>(other)) WithTensor(t, other.cast<const Tensor&>());
  else if (number_value(other, &v, &is_float)) WithNumber(t, v);
  else if (py::isinstance<py::array>(other) || py::isinstance<py::list>(other))
    WithTensor(t, tensor_from_data(other, py::none()));
  else if (Operator) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  else throw py::type_error("in-place op: expected a smelt.Tensor or a number, got " +
                            std::string(py::str(py::type::of(other).attr("__name__"))));
  return self;
}

Tensor& add_t(Tensor& t, const Tensor& o) { return t.add_(o); }
Tensor& add_n(Tensor& t, double v) { return t.add_(v); }
Tensor& sub_t(Tensor& t, const Tensor& o) { return t.sub_(o); }
Tensor& sub_n(Tensor& t, double v) { return t.sub_(v); }
Tensor& mul_t(Tensor& t, const Tensor& o) { return t.mul_(o); }
Tensor& mul_n(Tensor& t, double v) { return t.mul_(v); }
Tensor& div_t(Tensor& t, const Tensor& o) { return t.div_(o); }
Tensor& div_n(Tensor& t, double v) { return t.div_(v); }

// ---- the number slots: `a + b` without pybind11's method dispatch
//
// Python evaluates `a + b` through the type's nb_add slot. Left to pybind11, that slot looks up
// __add__ and runs pybind11's generic dispatcher (argument loaders, overload chain), which costs
// about as much as smelt's whole eager op on a tiny tensor. The slots below handle two plain
// Tensors directly and hand every other case (numbers, arrays, subclasses, reflection) to the same
// binary<>() as the methods, so both routes give the same results and errors.

PyTypeObject* g_tensor_type = nullptr;

// The Tensor inside an initialized instance of exactly smelt.Tensor (a single pybind11 base, so
// its value pointer sits in the instance itself); null for anything else.
const Tensor* plain_tensor(PyObject* o) {
  if (Py_TYPE(o) != g_tensor_type) return nullptr;
  auto* inst = reinterpret_cast<py::detail::instance*>(o);
  if (!inst->simple_layout || !inst->simple_holder_constructed) return nullptr;
  return static_cast<const Tensor*>(inst->simple_value_holder[0]);
}

// Turns the exception in flight into a Python error, through pybind11's registered translators
// (smelt::Error -> smelt.Error, py::type_error -> TypeError, ...), as its dispatcher does.
void set_python_error() {
  auto& translators = py::detail::get_internals().registered_exception_translators;
  for (auto& translate : translators) {
    try {
      translate(std::current_exception());
      return;
    } catch (...) {
    }
  }
  PyErr_SetString(PyExc_SystemError, "smelt: an unknown C++ exception reached Python");
}

template <BinaryFn Op, Kind K>
PyObject* number_slot(PyObject* x, PyObject* y) {
  try {
    const Tensor* a = plain_tensor(x);
    const Tensor* b = plain_tensor(y);
    if (a && b && (K != Kind::TrueDivide || (dtype_is_floating(a->dtype()) && dtype_is_floating(b->dtype())))) {
      return py::cast(Op(*a, *b)).release().ptr();
    }
    py::handle hx(x), hy(y);
    if (py::isinstance<Tensor>(hx)) return binary<Op, K>(hx.cast<const Tensor&>(), hy, false).release().ptr();
    return binary<Op, K>(hy.cast<const Tensor&>(), hx, true).release().ptr();
  } catch (...) {
    set_python_error();
    return nullptr;
  }
}

PyObject* negative_slot(PyObject* x) {
  try {
    if (const Tensor* a = plain_tensor(x)) return py::cast(-*a).release().ptr();
    return py::cast(-py::handle(x).cast<const Tensor&>()).release().ptr();
  } catch (...) {
    set_python_error();
    return nullptr;
  }
}

}  // namespace

void install_number_slots(py::class_<Tensor>& cls) {
  g_tensor_type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  PyNumberMethods* number = g_tensor_type->tp_as_number;  // a heap type's own table
  number->nb_add = &number_slot<operator+, Kind::Arithmetic>;
  number->nb_subtract = &number_slot<static_cast<BinaryFn>(operator-), Kind::Arithmetic>;
  number->nb_multiply = &number_slot<operator*, Kind::Arithmetic>;
  number->nb_true_divide = &number_slot<operator/, Kind::TrueDivide>;
  number->nb_negative = &negative_slot;
  PyType_Modified(g_tensor_type);
}

void bind_operators(py::class_<Tensor>& cls) {
  def_binary<operator+, Kind::Arithmetic>(cls, "__add__", "__radd__");
  def_binary<static_cast<BinaryFn>(operator-), Kind::Arithmetic>(cls, "__sub__", "__rsub__");
  def_binary<operator*, Kind::Arithmetic>(cls, "__mul__", "__rmul__");
  def_binary<operator/, Kind::TrueDivide>(cls, "__truediv__", "__rtruediv__");
  def_binary<pow_tensors, Kind::Arithmetic>(cls, "__pow__", "__rpow__");
  def_binary<eq, Kind::Compare>(cls, "__eq__", nullptr);
  def_binary<ne, Kind::Compare>(cls, "__ne__", nullptr);
  def_binary<lt, Kind::Compare>(cls, "__lt__", nullptr);
  def_binary<le, Kind::Compare>(cls, "__le__", nullptr);
  def_binary<gt, Kind::Compare>(cls, "__gt__", nullptr);
  def_binary<ge, Kind::Compare>(cls, "__ge__", nullptr);
  // The same as methods, PyTorch's names (t.add(1), t.gt(0)).
  def_binary<operator+, Kind::Arithmetic>(cls, "add", nullptr);
  def_binary<static_cast<BinaryFn>(operator-), Kind::Arithmetic>(cls, "sub", nullptr);
  def_binary<operator*, Kind::Arithmetic>(cls, "mul", nullptr);
  def_binary<operator/, Kind::TrueDivide>(cls, "div", nullptr);
  def_binary<eq, Kind::Compare>(cls, "eq", nullptr);
  def_binary<ne, Kind::Compare>(cls, "ne", nullptr);
  def_binary<lt, Kind::Compare>(cls, "lt", nullptr);
  def_binary<le, Kind::Compare>(cls, "le", nullptr);
  def_binary<gt, Kind::Compare>(cls, "gt", nullptr);
  def_binary<ge, Kind::Compare>(cls, "ge", nullptr);

  cls.def("__matmul__", [](const Tensor& a, py::handle b) -> py::object {
        if (!py::isinstance<Tensor>(b)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
        return py::cast(matmul(a, b.cast<const Tensor&>()));
      }, py::is_operator())
      .def("__rmatmul__", [](const Tensor& a, py::handle b) -> py::object {
        if (!py::isinstance<Tensor>(b)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
        return py::cast(matmul(b.cast<const Tensor&>(), a));
      }, py::is_operator())
      .def("__neg__", [](const Tensor& a) { return -a; })
      .def("__pos__", [](const Tensor& a) { return a; })
      .def("__abs__", [](const Tensor& a) { return abs(a); })
      .def("__iadd__", &inplace<add_t, add_n, true>, py::is_operator())
      .def("__isub__", &inplace<sub_t, sub_n, true>, py::is_operator())
      .def("__imul__", &inplace<mul_t, mul_n, true>, py::is_operator())
      .def("__itruediv__", &inplace<div_t, div_n, true>, py::is_operator())
      .def("add_", [](py::object self, py::handle other, double alpha) -> py::object {
        Tensor& t = self.cast<Tensor&>();
        double v;
        bool is_float;
        if (number_value(other, &v, &is_float)) t.add_(v * alpha);
        else t.add_(tensor_arg(other, "add_: other"), alpha);
        return self;
      }, py::arg("other"), py::arg("alpha") = 1.0)
      .def("sub_", [](py::object self, py::handle other, double alpha) -> py::object {
        Tensor& t = self.cast<Tensor&>();
        double v;
        bool is_float;
        if (number_value(other, &v, &is_float)) t.sub_(v * alpha);
        else t.sub_(tensor_arg(other, "sub_: other"), alpha);
        return self;
      }, py::arg("other"), py::arg("alpha") = 1.0)
      .def("mul_", &inplace<mul_t, mul_n, false>, py::arg("other"))
      .def("div_", &inplace<div_t, div_n, false>, py::arg("other"));
  // NumPy: `array + tensor` defers to Tensor.__radd__ instead of converting the tensor.
  cls.attr("__array_ufunc__") = py::none();
}

}  // namespace smelt::python
