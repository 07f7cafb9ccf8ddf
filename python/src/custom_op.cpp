// User-defined ops and functions from Python (smelt/custom_op.h): smelt.library.register_op (an
// op whose kernels are Python callables, NumPy inside them welcome) and the primitive under
// smelt.autograd.Function (python/smelt/autograd.py). Every call into Python takes the GIL first:
// a compiled plan may run the op on a thread of its own.
#include "bind.h"

namespace smelt::python {
namespace {

py::object attr_to_python(const AttrValue& v) {
  return std::visit([](const auto& x) -> py::object { return py::cast(x); }, v);
}

py::dict attrs_to_kwargs(const Attrs& attrs) {
  py::dict d;
  for (const auto& [name, value] : attrs.items()) d[py::str(name)] = attr_to_python(value);
  return d;
}

Attrs kwargs_to_attrs(const py::kwargs& kwargs) {
  Attrs attrs;
  for (const auto& [key, value] : kwargs) {
    const std::string name = py::str(key);
    if (py::isinstance<py::bool_>(value) || py::isinstance<py::int_>(value)) {
      attrs.set(name, value.cast<int64_t>());
    } else if (py::isinstance<py::float_>(value)) {
      attrs.set(name, value.cast<double>());
    } else if (py::isinstance<py::str>(value)) {
      attrs.set(name, value.cast<std::string>());
    } else if (py::isinstance<DType>(value)) {
      attrs.set(name, value.cast<DType>());
    } else if (py::isinstance<py::sequence>(value)) {
      attrs.set(name, int_list(value, name.c_str()));
    } else {
      throw py::type_error("attribute '" + name + "' must be an int, a float, a str, a dtype or a "
                           "sequence of ints, got " + std::string(py::str(value.get_type().attr("__name__"))));
    }
  }
  return attrs;
}

py::tuple tensors_to_tuple(const std::vector<Tensor>& ts) {
  py::tuple t(ts.size());
  for (size_t i = 0; i < ts.size(); ++i) t[i] = ts[i].defined() ? py::cast(ts[i]) : py::none();
  return t;
}

// A kernel's operands for Python: values without history (a kernel computes, it records nothing;
// .numpy() works on them).
py::tuple kernel_operands(const std::vector<Tensor>& ts) {
  std::vector<Tensor> detached;
  for (const Tensor& t : ts) detached.push_back(t.defined() ? t.detach() : t);
  return tensors_to_tuple(detached);
}

// A callable's result as tensors: one tensor (or array) or a sequence of them; None is an
// undefined tensor where `none_ok`.
std::vector<Tensor> results(py::handle r, const std::string& where, bool none_ok) {
  std::vector<py::handle> items;
  if (py::isinstance<py::tuple>(r) || py::isinstance<py::list>(r)) {
    for (py::handle h : r) items.push_back(h);
  } else {
    items.push_back(r);
  }
  std::vector<Tensor> out;
  for (py::handle h : items) {
    if (h.is_none()) {
      if (!none_ok) throw py::type_error(where + " returned None where a tensor was expected");
      out.emplace_back();
    } else if (py::isinstance<Tensor>(h)) {
      out.push_back(h.cast<Tensor>());
    } else {
      out.push_back(tensor_from_data(h, py::none()));  // a NumPy array, a list, a number
    }
  }
  return out;
}

// A Python callable held for C++ (gil_safe: dropped under the GIL, from any thread).
struct PyCallable {
  std::shared_ptr<py::object> fn;
  template <class... A>
  py::object operator()(A&&... args) const {
    return (*fn)(std::forward<A>(args)...);
  }
};

// Writes `values` (what the Python callable `what` returned) into the kernel's outputs, checking
// each against the shape rule's meta.
void write_outputs(const char* what, const std::vector<Tensor>& values, const std::vector<Tensor>& out) {
  SMELT_CHECK(values.size() == out.size())
      << what << " returned " << values.size() << " results for " << out.size() << " outputs";
  for (size_t k = 0; k < out.size(); ++k) {
    SMELT_CHECK(values[k].shape() == out[k].shape())
        << what << "'s result " << k << " has shape " << shape_str(values[k].shape()) << ", the shape rule says "
        << shape_str(out[k].shape());
    NoGradGuard no_grad;
    Tensor target = out[k];
    target.copy_(values[k]);  // cast to the rule's dtype (a NumPy float64 result into float32)
  }
}

class PyBackwardCtx {
 public:
  py::tuple inputs, outputs;
  py::dict attrs;
};

// A view rule from Python: view(in_shape, in_strides, in_offset, out_shape, **attrs) returns
// (strides, offset).
OpViewRule python_view_rule(const std::string& name, py::object view) {
  PyCallable rule{gil_safe(std::move(view))};
  return [rule, name](const Shape& in_shape, const Shape& in_strides, int64_t in_offset,
                      const Shape& out_shape, const Attrs& attrs) {
    py::gil_scoped_acquire gil;
    py::object r = (*rule.fn)(py::tuple(py::cast(in_shape)), py::tuple(py::cast(in_strides)),
                              in_offset, py::tuple(py::cast(out_shape)), **attrs_to_kwargs(attrs));
    if (!py::isinstance<py::sequence>(r) || py::len(r) != 2) {
      throw py::type_error("the view rule of '" + name + "' must return (strides, offset)");
    }
    py::sequence pair = r.cast<py::sequence>();
    return StridedLayout{int_list(pair[0], "strides"), pair[1].cast<int64_t>()};
  };
}

CustomOp register_python_op(const std::string& name, py::object forward, py::object backward, py::object shape,
                            int num_inputs, int num_outputs, const std::string& onnx_domain,
                            bool check_inputs_unchanged, py::object view) {
  OpDefinition def;
  def.name = name;
  def.num_inputs = num_inputs;
  def.num_outputs = num_outputs;
  def.onnx_domain = onnx_domain;
  def.check_inputs_unchanged = check_inputs_unchanged;
  SMELT_CHECK(!forward.is_none() || !view.is_none())
      << "register_op '" << name << "': forward is required (or view, for a view op)";
  if (!view.is_none()) def.view = python_view_rule(name, std::move(view));
  if (!forward.is_none()) {
    PyCallable fwd{gil_safe(forward)};
    def.forward = [fwd, name](const std::vector<Tensor>& in, const Attrs& attrs, const std::vector<Tensor>& out) {
      py::gil_scoped_acquire gil;
      py::tuple args = kernel_operands(in);
      py::object r = (*fwd.fn)(*args, **attrs_to_kwargs(attrs));
      write_outputs("forward", results(r, "forward", false), out);
    };
  }
  if (!shape.is_none()) {
    PyCallable rule{gil_safe(shape)};
    def.shape = [rule](const std::vector<TensorMeta>& in, const Attrs& attrs) {
      py::gil_scoped_acquire gil;
      py::tuple args(in.size());
      for (size_t i = 0; i < in.size(); ++i) args[i] = py::cast(in[i]);
      py::object r = (*rule.fn)(*args, **attrs_to_kwargs(attrs));
      std::vector<TensorMeta> metas;
      if (py::isinstance<TensorMeta>(r)) return std::vector<TensorMeta>{r.cast<TensorMeta>()};
      for (py::handle h : r) metas.push_back(h.cast<TensorMeta>());
      return metas;
    };
  }
  SMELT_CHECK(backward.is_none() || num_inputs >= 1)
      << "register_op '" << name << "': an op with a backward takes a fixed number of inputs (num_inputs >= 1)";
  if (!backward.is_none()) {
    // The backward is an op of its own (`<name>_backward`: inputs, outputs and output gradients
    // in, one gradient per input out), so that a compiled training step records it as a step
    // that calls Python, NumPy and all, instead of tracing into it.
    PyCallable bwd{gil_safe(backward)};
    OpDefinition grad_def;
    grad_def.name = name + "_backward";
    grad_def.num_inputs = -1;
    grad_def.num_outputs = num_inputs;
    const int n_in = num_inputs, n_out = num_outputs;
    grad_def.shape = [n_in, n_out, name](const std::vector<TensorMeta>& in, const Attrs&) {
      SMELT_CHECK(in.size() == size_t(n_in + 2 * n_out))
          << "'" << name << "_backward' takes the op's " << n_in << " inputs, " << n_out << " outputs and "
          << n_out << " output gradients, got " << in.size() << " tensors";
      const size_t inputs = size_t(n_in);
      std::vector<TensorMeta> metas(in.begin(), in.begin() + std::ptrdiff_t(inputs));
      for (TensorMeta& m : metas) {
        if (!dtype_is_floating(m.dtype)) m.dtype = DType::Float32;  // no gradient: zeros, dropped below
      }
      return metas;
    };
    grad_def.forward = [bwd, n_out, name](const std::vector<Tensor>& in, const Attrs& attrs,
                                          const std::vector<Tensor>& out) {
      py::gil_scoped_acquire gil;
      const size_t inputs = in.size() - 2 * size_t(n_out);
      PyBackwardCtx ctx;
      ctx.inputs = kernel_operands({in.begin(), in.begin() + std::ptrdiff_t(inputs)});
      ctx.outputs = kernel_operands({in.begin() + std::ptrdiff_t(inputs), in.end() - n_out});
      ctx.attrs = attrs_to_kwargs(attrs);
      py::tuple grads = kernel_operands({in.end() - n_out, in.end()});
      py::object r = (*bwd.fn)(py::cast(ctx), *grads);
      std::vector<Tensor> gs = results(r, name + " backward", true);
      SMELT_CHECK(gs.size() == out.size())
          << "backward returned " << gs.size() << " gradients for " << out.size() << " inputs (one per input; None "
          << "for an input without one)";
      for (size_t i = 0; i < gs.size(); ++i) {
        if (!gs[i].defined()) {
          NoGradGuard no_grad;
          Tensor target = out[i];
          target.zero_();
          gs[i] = out[i];
        }
      }
      write_outputs("backward", gs, out);
    };
    grad_def.check_inputs_unchanged = check_inputs_unchanged;
    // The op itself is registered first, so that a name taken (by a built-in too) is refused
    // before '<name>_backward' exists; its backward finds the second op when it runs.
    auto grad_op = std::make_shared<CustomOp>();
    def.backward = [grad_op](const GradContext& c) {
      std::vector<Tensor> args = c.inputs;
      args.insert(args.end(), c.outputs.begin(), c.outputs.end());
      args.insert(args.end(), c.grads.begin(), c.grads.end());
      std::vector<Tensor> grads = (*grad_op)(args, c.attrs);
      for (size_t i = 0; i < grads.size(); ++i) {
        if (!dtype_is_floating(c.inputs[i].dtype())) grads[i] = Tensor();
      }
      return grads;
    };
    CustomOp op = register_op(def);
    *grad_op = register_op(grad_def);
    return op;
  }
  return register_op(def);
}

}  // namespace

void bind_custom_op(py::module_& m) {
  py::module_ lib = m.def_submodule("library", "user-defined ops: smelt.library.register_op");
  py::class_<TensorMeta>(lib, "TensorMeta", "Shape and dtype of an op's operand, without data (shape rules)")
      .def(py::init([](py::handle shape, py::handle dtype) { return TensorMeta{int_list(shape, "shape"), dtype_arg(dtype)}; }),
           py::arg("shape"), py::arg("dtype"))
      .def_property_readonly("shape", [](const TensorMeta& t) { return py::tuple(py::cast(t.shape)); })
      .def_property_readonly("dtype", [](const TensorMeta& t) { return t.dtype; })
      .def("__repr__", [](const TensorMeta& t) {
        return "TensorMeta(" + shape_str(t.shape) + ", " + dtype_name(t.dtype) + ")";
      });
  py::class_<PyBackwardCtx>(lib, "BackwardContext", "What an op's backward sees besides the output gradients")
      .def_readonly("inputs", &PyBackwardCtx::inputs)
      .def_readonly("outputs", &PyBackwardCtx::outputs)
      .def_readonly("attrs", &PyBackwardCtx::attrs);
  py::class_<CustomOp>(lib, "CustomOp", "A registered op: call it with tensors and keyword attributes")
      .def_property_readonly("name", &CustomOp::name)
      .def("__call__", [](const CustomOp& op, py::args args, py::kwargs kwargs) -> py::object {
        std::vector<Tensor> in;
        for (py::handle h : args) in.push_back(tensor_arg(h, op.name().c_str()));
        std::vector<Tensor> out = op(in, kwargs_to_attrs(kwargs));
        if (out.size() == 1) return py::cast(out[0]);
        return tensors_to_tuple(out);
      })
      .def("__repr__", [](const CustomOp& op) { return "<smelt op " + op.name() + ">"; });
  lib.def("register_op", &register_python_op, py::arg("name"), py::arg("forward") = py::none(), py::kw_only(),
          py::arg("backward") = py::none(), py::arg("shape") = py::none(), py::arg("num_inputs") = 1,
          py::arg("num_outputs") = 1, py::arg("onnx_domain") = "", py::arg("check_inputs_unchanged") = true,
          py::arg("view") = py::none(),
          R"(Registers an op whose kernels are Python callables.

forward(*inputs, **attrs) returns the output (or a tuple of them): smelt tensors or NumPy arrays,
cast to the shape rule's dtypes. shape(*metas, **attrs) returns a TensorMeta (or a list of them);
by default one output like input 0. backward(ctx, *grad_outputs) returns one gradient per input
(None where there is none), reading ctx.inputs, ctx.outputs and ctx.attrs; it runs as an op of its
own, '<name>_backward', so NumPy works in it in compiled training steps too. The op then works in
eager code, autograd, smelt.compile (an opaque step), the IR text and ONNX import (nodes of
onnx_domain whose op type is the name).

A view op has no forward: view(in_shape, in_strides, in_offset, out_shape, **attrs) returns the
output's (strides, offset) in elements, an affine function of the input's (a diagonal: strides
in_strides[0] + in_strides[1]); the output shares the input's memory, as x.permute() does, and
compiled code fuses it as index arithmetic (OpDefinition::view in smelt/custom_op.h).)");
  lib.def("find_op", &find_op, py::arg("name"), "The registered op called `name`.");
  lib.def("is_registered", &is_registered_op, py::arg("name"));

  py::module_ ag = m.attr("autograd").cast<py::module_>();
  ag.def("_apply_function", [](const std::string& name, py::handle inputs, py::object forward, py::object backward) {
    PyCallable fwd{gil_safe(std::move(forward))}, bwd{gil_safe(std::move(backward))};
    std::vector<Tensor> outs = apply_function(
        name, tensor_list(inputs, "inputs"),
        [fwd, name] {
          py::gil_scoped_acquire gil;
          return results((*fwd.fn)(), name + ".forward", false);
        },
        [bwd, name](const std::vector<Tensor>& grads) {
          py::gil_scoped_acquire gil;
          return results((*bwd.fn)(tensors_to_tuple(grads)), name + ".backward", true);
        });
    return tensors_to_tuple(outs);
  }, py::arg("name"), py::arg("inputs"), py::arg("forward"), py::arg("backward"),
     "The primitive under smelt.autograd.Function.apply.");
}

}  // namespace smelt::python
