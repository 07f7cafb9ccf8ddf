// t[index] and t[index] = value with Python's index forms:
//   int            select (drops the dim); negative counts from the end; IndexError out of range
//   slice          a view; start/stop as Python's (None = open end, clamped), step > 0
//   None           a new size-1 dim
//   ...            as many full slices as the other items leave
//   int64 tensor / list of ints (one per index)   index_select along that dim (a copy)
// Every form but the tensor one is a view, so t[1:, None] = x writes into t. Boolean masks are
// refused with a message: their result's size depends on the values.
#include "bind.h"

namespace smelt::python {

namespace {

bool is_integer_index(py::handle item) {
  return !PyBool_Check(item.ptr()) && !py::isinstance<Tensor>(item) && PyIndex_Check(item.ptr());
}

// An int64 index tensor from a tensor (int32 converted) or a list item; undefined when `item` is neither.
Tensor index_tensor(py::handle item) {
  if (py::isinstance<Tensor>(item)) {
    const Tensor& t = item.cast<const Tensor&>();
    if (t.dtype() == DType::Bool || t.dtype() == DType::UInt8) {
      throw py::index_error("indexing with a boolean mask is not supported (the result's size "
                            "would depend on the values); use smelt.where(mask, x, other)");
    }
    if (t.dtype() == DType::Int32) return t.to(DType::Int64);  // as PyTorch, int32 indexes too
    if (t.dtype() != DType::Int64) {
      throw py::index_error(std::string("tensors used as indices must be int64 or int32, got ") +
                            dtype_name(t.dtype()));
    }
    return t;
  }
  if (py::isinstance<py::list>(item)) return tensor_from_data(item, py::cast(DType::Int64));
  return Tensor();
}

struct Indexed {
  Tensor result;
  bool is_view = true;  // false once a tensor index copied
};

Indexed apply_index(const Tensor& x, py::handle index) {
  py::tuple items = py::isinstance<py::tuple>(index) ? py::reinterpret_borrow<py::tuple>(index)
                                                     : py::make_tuple(index);
  int64_t consumed = 0, ellipses = 0;
  for (py::handle item : items) {
    if (item.ptr() == Py_Ellipsis) ++ellipses;
    else if (!item.is_none()) ++consumed;
  }
  if (ellipses > 1) throw py::index_error("an index can only have a single ellipsis ('...')");
  if (consumed > x.dim()) {
    throw py::index_error("too many indices for a tensor of dimension " + std::to_string(x.dim()) + ": " +
                          std::to_string(consumed) + " given");
  }
  Indexed out{x};
  Tensor& r = out.result;
  int64_t d = 0;  // the dim of r the next item applies to
  int tensor_indices = 0;
  for (py::handle item : items) {
    if (item.ptr() == Py_Ellipsis) {
      d += x.dim() - consumed;
    } else if (item.is_none()) {
      r = r.unsqueeze(d++);
    } else if (is_integer_index(item)) {
      const int64_t n = r.size(d);
      int64_t i = item.cast<int64_t>();
      if (i < -n || i >= n) {
        throw py::index_error("index " + std::to_string(i) + " is out of range for dim " + std::to_string(d) +
                              " of size " + std::to_string(n));
      }
      r = r.select(d, i < 0 ? i + n : i);
    } else if (py::isinstance<py::slice>(item)) {
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(item.ptr(), &start, &stop, &step) < 0) throw py::error_already_set();
      if (step <= 0) throw py::value_error("slice step must be greater than zero, got " + std::to_string(step));
      const int64_t n = r.size(d);
      PySlice_AdjustIndices(n, &start, &stop, step);
      if (start != 0 || stop != n || step != 1) r = slice(r, d, start, stop, step);
      ++d;
    } else if (Tensor idx = index_tensor(item); idx.defined()) {
      if (++tensor_indices > 1) {
        throw py::index_error("only one tensor (or list) index per indexing expression is supported");
      }
      if (idx.dim() == 0) {
        r = r.select(d, idx.item<int64_t>());
        continue;
      }
      Shape shape = r.shape();
      shape.erase(shape.begin() + d);
      shape.insert(shape.begin() + d, idx.shape().begin(), idx.shape().end());
      r = index_select(r, d, idx.reshape({-1})).reshape(shape);
      d += idx.dim();
      out.is_view = false;
    } else {
      throw py::type_error("tensor index: expected an int, a slice, None, ..., an int64 tensor or a list "
                           "of ints, got " + std::string(py::str(py::type::of(item).attr("__name__"))));
    }
  }
  return out;
}

}  // namespace

void bind_indexing(py::class_<Tensor>& cls) {
  cls.def("__getitem__", [](const Tensor& t, py::handle index) { return apply_index(t, index).result; });
  cls.def("__setitem__", [](const Tensor& t, py::handle index, py::handle value) {
    Indexed target = apply_index(t, index);
    if (!target.is_view) {
      throw py::index_error("assigning through a tensor (or list) index is not supported; use index_add "
                            "or scatter_add");
    }
    double v;
    bool is_float;
    if (number_value(value, &v, &is_float)) target.result.fill_(v);
    else target.result.copy_(tensor_operand(value, t, "tensor[index] = value"));
  });
}

}  // namespace smelt::python
