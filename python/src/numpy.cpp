// NumPy interop, both ways without copies:
//   smelt.from_numpy(a)   a Tensor viewing a's memory (its strides, any layout NumPy has with
//                         non-negative strides); the tensor keeps the array alive
//   t.numpy(), np.asarray(t)   an array viewing t's memory (its strides); the array keeps t's
//                         storage alive
// and with copies: smelt.tensor(data) from an array, a nested list or a number.
// dtypes: float32, float64, int64, int32, bool, uint8, int8 map to the NumPy dtypes of the same names; any
// other NumPy dtype is a TypeError that says how to convert.
#include "bind.h"

#include <cstring>

namespace smelt::python {

namespace {

const char* kValidDTypes = "float32, float64, int64, int32, bool, uint8, int8";

py::dtype numpy_dtype(DType d) {
  switch (d) {
    case DType::Float32: return py::dtype::of<float>();
    case DType::Float64: return py::dtype::of<double>();
    case DType::Int64: return py::dtype::of<int64_t>();
    case DType::Bool: return py::dtype::of<bool>();
    case DType::UInt8: return py::dtype::of<uint8_t>();
    case DType::Int32: return py::dtype::of<int32_t>();
    case DType::Int8: return py::dtype::of<int8_t>();
  }
  throw py::type_error("unknown dtype");
}

// smelt's dtype for a NumPy dtype; nullopt when smelt has none.
std::optional<DType> smelt_dtype(const py::dtype& dt) {
  const char kind = dt.kind();
  const size_t size = dt.itemsize();
  if (kind == 'f' && size == 4) return DType::Float32;
  if (kind == 'f' && size == 8) return DType::Float64;
  if (kind == 'i' && size == 8) return DType::Int64;
  if (kind == 'i' && size == 4) return DType::Int32;
  if (kind == 'b' && size == 1) return DType::Bool;
  if (kind == 'u' && size == 1) return DType::UInt8;
  if (kind == 'i' && size == 1) return DType::Int8;
  return std::nullopt;
}

std::string numpy_dtype_name(const py::dtype& dt) { return py::str(dt.attr("name")); }

bool native_byte_order(const py::dtype& dt) {
  const char order = dt.attr("byteorder").cast<std::string>()[0];
  return order != '>' || dt.itemsize() == 1;  // '=' native, '|' not applicable, '<' on x86
}

Tensor from_numpy(py::handle obj) {
  if (!py::isinstance<py::array>(obj)) {
    throw py::type_error("from_numpy: expected a numpy.ndarray, got " +
                         std::string(py::str(py::type::of(obj).attr("__name__"))));
  }
  py::array a = py::reinterpret_borrow<py::array>(obj);
  std::optional<DType> dtype = smelt_dtype(a.dtype());
  if (!dtype || !native_byte_order(a.dtype())) {
    throw py::type_error("from_numpy: smelt has no dtype for NumPy's " + numpy_dtype_name(a.dtype()) +
                         "; valid: " + kValidDTypes + " (native byte order); convert first, e.g. "
                         "a.astype(numpy.float32)");
  }
  if (!a.writeable()) {
    throw py::value_error("from_numpy: the array is read-only, and a tensor sharing its memory could be "
                          "written; use smelt.tensor(a) for a copy");
  }
  const auto itemsize = int64_t(a.itemsize());
  Shape shape(a.shape(), a.shape() + a.ndim()), strides(a.ndim());
  int64_t extent = a.size() == 0 ? 0 : itemsize;  // bytes from the first element to past the last
  for (py::ssize_t d = 0; d < a.ndim(); ++d) {
    const int64_t s = a.strides()[d];
    if (s < 0 || s % itemsize != 0) {
      throw py::value_error("from_numpy: stride " + std::to_string(s) + " bytes of dim " + std::to_string(d) +
                            " is " + (s < 0 ? "negative" : "not a multiple of the element size") +
                            "; smelt views need non-negative element strides (copy with "
                            "numpy.ascontiguousarray(a) or use smelt.tensor(a))");
    }
    strides[d] = s / itemsize;
    if (a.size() != 0) extent += (shape[d] - 1) * s;
  }
  if (reinterpret_cast<uintptr_t>(a.data()) % size_t(itemsize) != 0) {
    throw py::value_error("from_numpy: the array's data is not aligned to its element size; use smelt.tensor(a)");
  }
  std::shared_ptr<py::object> owner = gil_safe(py::reinterpret_borrow<py::object>(obj));
  auto storage = make_ref<Storage>(const_cast<void*>(a.data()), size_t(extent), [owner](void*) {});
  return make_tensor(std::move(storage), std::move(shape), std::move(strides), 0, *dtype);
}

py::array to_numpy(const Tensor& t, const char* where) {
  SMELT_CHECK(!t.requires_grad()) << where << ": the tensor requires grad; use t.detach().numpy() for "
                                              "its values without the history";
  SMELT_CHECK(t.storage()) << where << ": the tensor has no data; it is symbolic (inside smelt.compile's "
                                       "trace), and a compiled function cannot read values";
  const auto itemsize = py::ssize_t(dtype_size(t.dtype()));
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end()), strides;
  for (int64_t s : t.strides()) strides.push_back(s * itemsize);
  // The array's base is a new Tensor handle on the same storage: it outlives the caller's.
  return py::array(numpy_dtype(t.dtype()), shape, strides, t.raw_data(), py::cast(t.detach()));
}

}  // namespace

Tensor tensor_from_data(py::handle data, py::handle dtype_obj) {
  std::optional<DType> want;
  if (!dtype_obj.is_none()) want = dtype_arg(dtype_obj);
  if (py::isinstance<Tensor>(data)) {
    Tensor t = data.cast<const Tensor&>().detach().clone();
    return want ? t.to(*want) : t;
  }
  py::module_ np = py::module_::import("numpy");
  py::array a;
  if (py::isinstance<py::array>(data)) {
    a = py::reinterpret_borrow<py::array>(data);
  } else {
    try {
      a = np.attr("asarray")(data);
    } catch (py::error_already_set& e) {
      throw py::type_error(std::string("tensor(): data must be a number or a (nested) sequence of numbers with "
                                       "a regular shape (NumPy says: ") + e.what() + ")");
    }
    if (a.dtype().kind() == 'O' || a.dtype().kind() == 'U' || a.dtype().kind() == 'S') {
      throw py::type_error("tensor(): data must be a number or a (nested) sequence of numbers with a regular "
                           "shape, got " + std::string(py::str(py::type::of(data).attr("__name__"))));
    }
    // Python floats are float32 by default, as PyTorch's; ints int64, bools bool.
    if (!want && a.dtype().kind() == 'f') want = DType::Float32;
    if (!want && a.dtype().kind() == 'i') want = DType::Int64;
  }
  std::optional<DType> have = smelt_dtype(a.dtype());
  if (!want && !have) {
    throw py::type_error("tensor(): smelt has no dtype for NumPy's " + numpy_dtype_name(a.dtype()) +
                         "; valid: " + kValidDTypes + "; pass dtype= to convert (e.g. dtype=smelt.int64)");
  }
  const DType dtype = want ? *want : *have;
  // One contiguous native-order copy in the target dtype (NumPy converts), then into a tensor.
  py::array c = a.attr("astype")(numpy_dtype(dtype), py::arg("order") = "C", py::arg("copy") = false);
  Tensor t = empty(Shape(c.shape(), c.shape() + c.ndim()), dtype);
  if (c.nbytes() > 0) std::memcpy(t.raw_data(), c.data(), size_t(c.nbytes()));
  return t;
}

void bind_numpy(py::module_& m, py::class_<Tensor>& cls) {
  m.def("from_numpy", &from_numpy, py::arg("array"),
        "A tensor sharing the array's memory (no copy); it keeps the array alive.");
  m.def("tensor", [](py::handle data, py::handle dtype, bool requires_grad) {
          Tensor t = tensor_from_data(data, dtype);
          if (requires_grad) t.set_requires_grad(true);
          return t;
        }, py::arg("data"), py::arg("dtype") = py::none(), py::arg("requires_grad") = false,
        "A new tensor copying data (a number, a nested list, a NumPy array or a tensor).");
  cls.def("numpy", [](const Tensor& t) { return to_numpy(t, "numpy()"); },
          "An array sharing this tensor's memory (no copy).");
  cls.def("__array__", [](const Tensor& t, py::handle dtype) -> py::object {
    py::array a = to_numpy(t, "__array__");
    if (dtype.is_none()) return py::object(a);
    return a.attr("astype")(dtype);
  }, py::arg("dtype") = py::none());
}

}  // namespace smelt::python
