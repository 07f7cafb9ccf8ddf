// smelt.Tensor: metadata, autograd, views, in-place updates and the op methods. Each method calls
// the free function of include/smelt/ops.h (or the Tensor member) of the same name, with
// PyTorch's spelling of the arguments.
#include "bind.h"

#include <cstring>

namespace smelt::python {

namespace {

// One element at `ptr` as the Python object of its dtype (int64 stays exact).
py::object element(const void* ptr, DType dtype) {
  switch (dtype) {
    case DType::Float32: return py::float_(*static_cast<const float*>(ptr));
    case DType::Float64: return py::float_(*static_cast<const double*>(ptr));
    case DType::Int64: return py::int_(*static_cast<const int64_t*>(ptr));
    case DType::Bool: return py::bool_(*static_cast<const bool*>(ptr));
    case DType::UInt8: return py::int_(*static_cast<const uint8_t*>(ptr));
    case DType::Int32: return py::int_(*static_cast<const int32_t*>(ptr));
    case DType::Int8: return py::int_(*static_cast<const int8_t*>(ptr));
  }
  return py::none();
}

const char* symbolic_hint = "; it is symbolic (inside smelt.compile's trace): a compiled function "
                            "must compute with smelt ops only and cannot read values";

py::object item(const Tensor& t) {
  SMELT_CHECK(t.numel() == 1) << "item(): the tensor has " << t.numel() << " elements (shape "
                              << shape_str(t.shape()) << "); only a one-element tensor converts to a number";
  SMELT_CHECK(t.storage()) << "item(): the tensor has no data" << symbolic_hint;
  return element(t.raw_data(), t.dtype());
}

// Nested lists, row-major; a 0-dim tensor gives a number, as PyTorch's tolist().
py::object tolist(const Tensor& t) {
  SMELT_CHECK(t.storage()) << "tolist(): the tensor has no data" << symbolic_hint;
  Tensor c = t.contiguous();
  const char* base = static_cast<const char*>(c.raw_data());
  const size_t itemsize = dtype_size(c.dtype());
  if (c.dim() == 0) return element(base, c.dtype());
  std::function<py::list(int64_t, int64_t)> level = [&](int64_t d, int64_t offset) {
    py::list out;
    const int64_t n = c.size(d), stride = c.stride(d);
    for (int64_t i = 0; i < n; ++i) {
      if (d + 1 == c.dim()) out.append(element(base + (offset + i * stride) * itemsize, c.dtype()));
      else out.append(level(d + 1, offset + i * stride));
    }
    return out;
  };
  return level(0, 0);
}

Tensor grad_output_arg(py::handle gradient) {
  return gradient.is_none() ? Tensor() : tensor_arg(gradient, "backward: gradient");
}

}  // namespace

void bind_tensor(py::module_& m) {
  py::class_<Tensor> cls(m, "Tensor", R"(A view onto refcounted storage, with autograd.

Made by smelt.tensor(data), smelt.from_numpy(array), the creation functions and ops.
smelt.Tensor(data, dtype=None, requires_grad=False) is smelt.tensor; smelt.Tensor(t) shares t.)");
  cls.def(py::init([](py::handle data, py::handle dtype, bool requires_grad) {
            if (py::isinstance<Tensor>(data) && dtype.is_none() && !requires_grad) {
              return Tensor(data.cast<const Tensor&>());  // an alias, as PyTorch's Tensor(t)
            }
            Tensor t = tensor_from_data(data, dtype);
            if (requires_grad) t.set_requires_grad(true);
            return t;
          }),
          py::arg("data"), py::arg("dtype") = py::none(), py::arg("requires_grad") = false);

  // ---- metadata
  cls.def_property_readonly("shape", [](const Tensor& t) { return py::tuple(py::cast(t.shape())); })
      .def("size", [](const Tensor& t, py::object dim) -> py::object {
             if (dim.is_none()) return py::tuple(py::cast(t.shape()));
             return py::int_(t.size(dim.cast<int64_t>()));
           }, py::arg("dim") = py::none())
      .def("stride", [](const Tensor& t, py::object dim) -> py::object {
             if (dim.is_none()) return py::tuple(py::cast(t.strides()));
             return py::int_(t.stride(dim.cast<int64_t>()));
           }, py::arg("dim") = py::none())
      .def_property_readonly("dtype", &Tensor::dtype)
      .def_property_readonly("ndim", &Tensor::dim)
      .def("dim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def("storage_offset", &Tensor::offset)
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("is_floating_point", [](const Tensor& t) { return dtype_is_floating(t.dtype()); })
      .def("element_size", [](const Tensor& t) { return dtype_size(t.dtype()); })
      .def("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.raw_data()); })
      .def("__len__", [](const Tensor& t) {
        SMELT_CHECK(t.dim() > 0) << "len() of a 0-dim tensor";
        return t.size(0);
      })
      .def("item", &item)
      .def("tolist", &tolist)
      .def("__float__", [](const Tensor& t) { return item(t).cast<double>(); })
      .def("__int__", [](const Tensor& t) { return py::int_(item(t)); })
      .def("__index__", [](const Tensor& t) {
        // TypeError (not smelt.Error): Python's protocols ("a" * t) try __index__ and move on.
        if ((t.dtype() != DType::Int64 && t.dtype() != DType::Int32 && t.dtype() != DType::UInt8) ||
            t.numel() != 1) {
          throw py::type_error("only a one-element integer tensor converts to an index");
        }
        return py::int_(item(t));
      })
      .def("__bool__", [](const Tensor& t) {
        SMELT_CHECK(t.numel() == 1) << "the truth value of a tensor with " << t.numel()
                                    << " elements is ambiguous; use .all()-like reductions";
        return item(t).cast<double>() != 0.0;
      })
      .def("__repr__", &Tensor::to_string)
      .def("__hash__", [](py::handle self) { return py::hash(py::int_(reinterpret_cast<uintptr_t>(self.ptr()))); })
      .def("is_same", &Tensor::same, "True when both are the same tensor (not merely equal)");

  // ---- autograd
  // The storage's write count (in-place ops and plan writes bump it): what saved tensors are
  // checked against, as PyTorch's Tensor._version (smelt.autograd.Function's saved_tensors).
  cls.def_property_readonly("_version", [](const Tensor& t) -> uint64_t {
    return t.storage() ? t.storage()->version() : 0;
  });
  cls.def_property("requires_grad", &Tensor::requires_grad,
                   [](Tensor& t, bool on) { t.set_requires_grad(on); })
      .def("requires_grad_", [](Tensor& t, bool on) -> Tensor& { return t.set_requires_grad(on); },
           py::arg("requires_grad") = true, py::return_value_policy::reference_internal)
      .def_property_readonly("is_leaf", &Tensor::is_leaf)
      .def("retain_grad", &Tensor::retain_grad)
      .def_property_readonly("retains_grad", &Tensor::retains_grad)
      .def_property("grad",
                    [](const Tensor& t) -> py::object {
                      Tensor g = t.grad();
                      return g.defined() ? py::cast(g) : py::none();
                    },
                    [](Tensor& t, py::handle g) {
                      if (g.is_none()) t.zero_grad();
                      else t.set_grad(tensor_arg(g, "grad"));
                    })
      .def_property_readonly("grad_fn", [](const Tensor& t) -> py::object {
        GradNode* fn = t.grad_fn();
        return fn ? py::str(std::string(fn->name()) + "Backward") : py::object(py::none());
      })
      .def("backward",
           [](const Tensor& t, py::handle gradient, py::handle retain_graph, bool create_graph) {
             bool retain = retain_graph.is_none() ? create_graph : retain_graph.cast<bool>();
             Tensor g = grad_output_arg(gradient);
             py::gil_scoped_release release;  // as a compiled call (compile.cpp): Python inside takes the GIL
             t.backward(g, retain, create_graph);
           },
           py::arg("gradient") = py::none(), py::arg("retain_graph") = py::none(),
           py::arg("create_graph") = false)
      .def("detach", &Tensor::detach)
      .def("register_hook", [](const Tensor& t, py::function hook) {
        std::shared_ptr<py::object> fn = gil_safe(std::move(hook));
        t.register_hook([fn](const Tensor& g) -> Tensor {
          py::gil_scoped_acquire gil;
          py::object r = (*fn)(g);
          return r.is_none() ? Tensor() : tensor_arg(r, "a gradient hook's result");
        });
      });

  // ---- views and copies
  cls.def("reshape", [](const Tensor& t, py::args shape) { return t.reshape(shape_args(shape, "reshape")); })
      .def("view", [](const Tensor& t, py::args shape) -> Tensor {
        if (shape.size() == 1 && (py::isinstance<DType>(shape[0]))) {
          throw py::type_error("view(dtype) is not supported; use .to(dtype)");
        }
        return t.view(shape_args(shape, "view"));
      })
      .def("permute", [](const Tensor& t, py::args dims) { return t.permute(shape_args(dims, "permute")); })
      .def("transpose", &Tensor::transpose, py::arg("dim0"), py::arg("dim1"))
      .def("t", &Tensor::t)
      .def_property_readonly("T", [](const Tensor& t) {
        Shape dims;
        for (int64_t d = t.dim() - 1; d >= 0; --d) dims.push_back(d);
        return t.permute(dims);
      })
      .def("narrow", &Tensor::narrow, py::arg("dim"), py::arg("start"), py::arg("length"))
      .def("select", &Tensor::select, py::arg("dim"), py::arg("index"))
      .def("expand", [](const Tensor& t, py::args shape) { return t.expand(shape_args(shape, "expand")); })
      .def("expand_as", [](const Tensor& t, const Tensor& other) { return t.expand(other.shape()); })
      .def("squeeze", [](const Tensor& t, py::object dim) {
        return dim.is_none() ? t.squeeze() : t.squeeze(dim.cast<int64_t>());
      }, py::arg("dim") = py::none())
      .def("unsqueeze", &Tensor::unsqueeze, py::arg("dim"))
      .def("flatten", &Tensor::flatten, py::arg("start_dim") = 0, py::arg("end_dim") = -1)
      .def("contiguous", &Tensor::contiguous)
      .def("clone", &Tensor::clone)
      .def("to", [](const Tensor& t, py::handle dtype) { return t.to(dtype_arg(dtype)); }, py::arg("dtype"))
      .def("type", [](const Tensor& t, py::handle dtype) { return t.to(dtype_arg(dtype)); }, py::arg("dtype"))
      .def("float", [](const Tensor& t) { return t.to(DType::Float32); })
      .def("double", [](const Tensor& t) { return t.to(DType::Float64); })
      .def("long", [](const Tensor& t) { return t.to(DType::Int64); })
      .def("int", [](const Tensor& t) { return t.to(DType::Int32); })
      .def("bool", [](const Tensor& t) { return t.to(DType::Bool); })
      .def("split", [](const Tensor& t, py::handle size, int64_t dim) {
        if (py::isinstance<py::int_>(size)) return split(t, size.cast<int64_t>(), dim);
        return split(t, int_list(size, "split: split_size_or_sections"), dim);
      }, py::arg("split_size_or_sections"), py::arg("dim") = 0);

  // ---- in-place updates (each returns the tensor itself, as PyTorch's)
  auto self = py::return_value_policy::reference_internal;
  cls.def("copy_", [](Tensor& t, py::handle src) -> Tensor& {
        return t.copy_(tensor_operand(src, t, "copy_: src"));
      }, py::arg("src"), self)
      .def("fill_", [](Tensor& t, double v) -> Tensor& { return t.fill_(v); }, py::arg("value"), self)
      .def("zero_", [](Tensor& t) -> Tensor& { return t.zero_(); }, self)
      .def("neg_", [](Tensor& t) -> Tensor& { return t.neg_(); }, self)
      .def("exp_", [](Tensor& t) -> Tensor& { return t.exp_(); }, self)
      .def("relu_", [](Tensor& t) -> Tensor& { return t.relu_(); }, self)
      .def("clamp_", [](Tensor& t, std::optional<double> lo, std::optional<double> hi) -> Tensor& {
        return t.clamp_(lo, hi);
      }, py::arg("min") = py::none(), py::arg("max") = py::none(), self);
  bind_operators(cls);
  bind_indexing(cls);
  bind_numpy(m, cls);

  // ---- ops as methods
  cls.def("neg", [](const Tensor& t) { return neg(t); })
      .def("exp", [](const Tensor& t) { return exp(t); })
      .def("log", [](const Tensor& t) { return log(t); })
      .def("sqrt", [](const Tensor& t) { return sqrt(t); })
      .def("rsqrt", [](const Tensor& t) { return rsqrt(t); })
      .def("abs", [](const Tensor& t) { return abs(t); })
      .def("sign", [](const Tensor& t) { return sign(t); })
      .def("erf", [](const Tensor& t) { return erf(t); })
      .def("relu", [](const Tensor& t) { return relu(t); })
      .def("sigmoid", [](const Tensor& t) { return sigmoid(t); })
      .def("tanh", [](const Tensor& t) { return tanh(t); })
      .def("silu", [](const Tensor& t) { return silu(t); })
      .def("gelu", [](const Tensor& t, const std::string& approximate) { return gelu(t, gelu_approx(approximate)); },
           py::arg("approximate") = "none")
      .def("leaky_relu", [](const Tensor& t, double slope) { return leaky_relu(t, slope); },
           py::arg("negative_slope") = 0.01)
      .def("softplus", [](const Tensor& t, double beta, double threshold) { return softplus(t, beta, threshold); },
           py::arg("beta") = 1.0, py::arg("threshold") = 20.0)
      .def("where", [](const Tensor& t, const Tensor& condition, py::handle other) {
        return where(condition, t, tensor_operand(other, t, "where: other"));
      }, py::arg("condition"), py::arg("other"))
      .def("floor", [](const Tensor& t) { return floor(t); })
      .def("ceil", [](const Tensor& t) { return ceil(t); })
      .def("round", [](const Tensor& t) { return round(t); })
      .def("sin", [](const Tensor& t) { return sin(t); })
      .def("cos", [](const Tensor& t) { return cos(t); })
      .def("tan", [](const Tensor& t) { return tan(t); })
      .def("asin", [](const Tensor& t) { return asin(t); })
      .def("acos", [](const Tensor& t) { return acos(t); })
      .def("atan", [](const Tensor& t) { return atan(t); })
      .def("sinh", [](const Tensor& t) { return sinh(t); })
      .def("cosh", [](const Tensor& t) { return cosh(t); })
      .def("asinh", [](const Tensor& t) { return asinh(t); })
      .def("acosh", [](const Tensor& t) { return acosh(t); })
      .def("atanh", [](const Tensor& t) { return atanh(t); })
      .def("clamp", [](const Tensor& t, std::optional<double> lo, std::optional<double> hi) {
        return clamp(t, lo, hi);
      }, py::arg("min") = py::none(), py::arg("max") = py::none())
      .def("sum", [](const Tensor& t, py::handle dim, bool keepdim) {
        return sum(t, dims_arg(dim, "sum: dim"), keepdim);
      }, py::arg("dim") = py::none(), py::arg("keepdim") = false)
      .def("mean", [](const Tensor& t, py::handle dim, bool keepdim) {
        return mean(t, dims_arg(dim, "mean: dim"), keepdim);
      }, py::arg("dim") = py::none(), py::arg("keepdim") = false)
      .def("amax", [](const Tensor& t, py::handle dim, bool keepdim) {
        return amax(t, dims_arg(dim, "amax: dim"), keepdim);
      }, py::arg("dim") = py::none(), py::arg("keepdim") = false)
      .def("prod", [](const Tensor& t, py::handle dim, bool keepdim) {
        return prod(t, dims_arg(dim, "prod: dim"), keepdim);
      }, py::arg("dim") = py::none(), py::arg("keepdim") = false)
      .def("cumsum", [](const Tensor& t, int64_t dim) { return cumsum(t, dim); }, py::arg("dim"))
      .def("topk", [](const Tensor& t, int64_t k, int64_t dim, bool largest) {
        TopKResult r = topk(t, k, dim, largest);
        return py::make_tuple(r.values, r.indices);
      }, py::arg("k"), py::arg("dim") = -1, py::arg("largest") = true)
      .def("amin", [](const Tensor& t, py::handle dim, bool keepdim) {
        return amin(t, dims_arg(dim, "amin: dim"), keepdim);
      }, py::arg("dim") = py::none(), py::arg("keepdim") = false)
      .def("var", [](const Tensor& t, py::handle dim, int64_t correction, bool keepdim) {
        return var(t, dims_arg(dim, "var: dim"), correction, keepdim);
      }, py::arg("dim") = py::none(), py::arg("correction") = 1, py::arg("keepdim") = false)
      .def("argmax", [](const Tensor& t, py::handle dim, bool keepdim) {
        if (dim.is_none()) return argmax(t.reshape({-1}), 0, false);
        return argmax(t, dim.cast<int64_t>(), keepdim);
      }, py::arg("dim") = py::none(), py::arg("keepdim") = false)
      .def("softmax", [](const Tensor& t, int64_t dim) { return softmax(t, dim); }, py::arg("dim"))
      .def("log_softmax", [](const Tensor& t, int64_t dim) { return log_softmax(t, dim); }, py::arg("dim"))
      .def("matmul", [](const Tensor& a, py::handle b) { return matmul(a, tensor_arg(b, "matmul: other")); })
      .def("pow", [](const Tensor& a, py::handle e) {
        double v;
        bool is_float;
        if (number_value(e, &v, &is_float)) return pow(a, v);
        return pow(a, tensor_arg(e, "pow: exponent"));
      }, py::arg("exponent"))
      .def("maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); })
      .def("minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); })
      .def("index_select", [](const Tensor& t, int64_t dim, const Tensor& index) {
        return index_select(t, dim, index);
      }, py::arg("dim"), py::arg("index"))
      .def("gather", [](const Tensor& t, int64_t dim, const Tensor& index) { return gather(t, dim, index); },
           py::arg("dim"), py::arg("index"))
      .def("scatter_add", [](const Tensor& t, int64_t dim, const Tensor& index, const Tensor& src) {
        return scatter_add(t, dim, index, src);
      }, py::arg("dim"), py::arg("index"), py::arg("src"))
      .def("index_add", [](const Tensor& t, int64_t dim, const Tensor& index, const Tensor& src) {
        return index_add(t, dim, index, src);
      }, py::arg("dim"), py::arg("index"), py::arg("source"))
      // max/min with a dim would be amax/amin in C++ but (values, indices) in PyTorch: rather than
      // silently differ from either, they take no dim here.
      .def("max", [](const Tensor& t, py::handle dim) {
        if (!dim.is_none()) {
          throw py::type_error("max(dim): use amax(dim) for the values and argmax(dim) for the indices");
        }
        return amax(t);
      }, py::arg("dim") = py::none())
      .def("min", [](const Tensor& t, py::handle dim) {
        if (!dim.is_none()) throw py::type_error("min(dim): use amin(dim) for the values");
        return amin(t);
      }, py::arg("dim") = py::none());
  install_number_slots(cls);
}

}  // namespace smelt::python
