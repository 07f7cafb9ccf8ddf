// Shared pieces of the Python bindings: one bind_* function per file (called in order by
// module.cpp), and the argument conversions every file uses. Bindings only: each Python name
// calls a C++ function of smelt's public API; conversions turn Python's spellings (ints or
// tuples for sizes, None for "not given", numbers on either side) into its arguments.
#pragma once

#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "smelt/compile.h"
#include "smelt/smelt.h"

namespace py = pybind11;

namespace smelt::python {

void bind_dtype(py::module_& m);
void bind_tensor(py::module_& m);
void bind_operators(py::class_<Tensor>& cls);
void bind_indexing(py::class_<Tensor>& cls);
// Points the Tensor type's nb_add/... slots at direct C++ functions; call after every def on it.
void install_number_slots(py::class_<Tensor>& cls);
void bind_numpy(py::module_& m, py::class_<Tensor>& cls);
void bind_functional(py::module_& m);
void bind_nn(py::module_& m);
void bind_optim(py::module_& m);
void bind_io_data(py::module_& m);
void bind_compile(py::module_& m);
void bind_onnx(py::module_& m);  // onnx.cpp: smelt.onnx.save
void bind_custom_op(py::module_& m);  // custom_op.cpp: smelt.library, autograd.Function's primitive
void bind_quantize(py::module_& m);   // quantize.cpp: smelt.quantize

// ---- conversions (conversions.cpp)

// A dtype argument: smelt.float32, a name ("float32", "f32"), or a NumPy dtype / scalar type.
DType dtype_arg(py::handle obj);
// dtype_arg, with None meaning float32 (the layers' parameters).
inline DType dtype_or_float(py::handle dtype) { return dtype.is_none() ? DType::Float32 : dtype_arg(dtype); }
// A shape given as separate ints (t.reshape(2, 3)) or as one sequence (t.reshape((2, 3))).
Shape shape_args(const py::args& args, const char* where);
// A sequence of ints (or one int) as a vector; `where` names the argument in errors.
std::vector<int64_t> int_list(py::handle obj, const char* where);
// An int or a sequence of `n` ints, as PyTorch takes kernel sizes, strides and paddings.
std::vector<int64_t> int_tuple(py::handle obj, size_t n, const char* where);
// dim=None (every dim), an int, or a sequence of ints.
std::vector<int64_t> dims_arg(py::handle obj, const char* where);
// reduction="mean" | "sum" | "none".
Reduction reduction_arg(const std::string& name);
// A Python bool/int/float (or NumPy scalar): true when `obj` is one, with its value.
bool number_value(py::handle obj, double* value, bool* is_float);
// A 0-dim tensor of `like`'s dtype holding the number `obj` (whose value number_value gave):
// scalar_like, except that a Python int with an int64 tensor is stored exactly (beyond 2^53).
Tensor number_operand(py::handle obj, double value, const Tensor& like);
// A Tensor, or a Python number / nested list / NumPy array made into one (numbers take `like`'s
// dtype, as C++'s mixed operators do). Raises TypeError otherwise.
Tensor tensor_operand(py::handle obj, const Tensor& like, const char* where);
// A tensor argument that must be a smelt.Tensor: a clear TypeError otherwise (None included).
const Tensor& tensor_arg(py::handle obj, const char* where);
// Tensors from a Python iterable (parameters, cat's inputs).
std::vector<Tensor> tensor_list(py::handle obj, const char* where);
// fn(*inputs), a Python callable returning a tensor or a tuple/list of them; `where` names it in
// errors.
std::vector<Tensor> call_python(const py::object& fn, const std::vector<Tensor>& inputs, const char* where);

// Holds a Python object in C++ (a callable stored in a std::function) so that whichever thread
// drops the last reference takes the GIL first: compile's background work may outlive a call.
std::shared_ptr<py::object> gil_safe(py::object obj);

// Creating a tensor from Python data (numpy.cpp): a NumPy array (copied), a nested list of
// numbers, or a number. dtype None: the array's dtype, or float32 / int64 / bool for lists.
Tensor tensor_from_data(py::handle data, py::handle dtype);

// GELU's `approximate` argument ("none" or "tanh"; ValueError otherwise).
GeluApprox gelu_approx(const std::string& approximate);

}  // namespace smelt::python
