// smelt.compile(fn): smelt::compile over a Python callable. The callable is traced through the
// same dispatcher as C++ code (its smelt ops record IR on symbolic tensors), so a Python function
// compiles exactly as the C++ one would; it must not read tensor values (item(), numpy(), bool()
// raise smelt.Error on a symbolic tensor). Also compile_module and compile_training_step.
#include "bind.h"

namespace smelt::python {

namespace {

// A compiled function and what the Python callable returned when traced (one tensor or several).
struct PyCompiled {
  CompiledFunction fn;
  std::shared_ptr<bool> single;

  py::object call(py::args args) {
    std::vector<Tensor> in;
    for (py::handle a : args) in.push_back(tensor_arg(a, "compiled function: inputs"));
    std::vector<Tensor> out = fn(in);
    if (*single && out.size() == 1) return py::cast(out[0]);
    return py::tuple(py::cast(out));
  }
};

// The C++ Fn calling `callable(*inputs)`; records in `single` whether it returned one tensor.
CompiledFunction::Fn wrap(py::object callable, const std::shared_ptr<bool>& single) {
  std::shared_ptr<py::object> fn = gil_safe(std::move(callable));
  return [fn, single](const std::vector<Tensor>& inputs) {
    py::gil_scoped_acquire gil;
    py::tuple args(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) args[i] = py::cast(inputs[i]);
    py::object r = (*fn)(*args);
    if (py::isinstance<Tensor>(r)) {
      *single = true;
      return std::vector<Tensor>{r.cast<Tensor>()};
    }
    if (!py::isinstance<py::sequence>(r)) {
      throw py::type_error("compile: the function must return a smelt.Tensor or a tuple/list of them, got " +
                           std::string(py::str(py::type::of(r).attr("__name__"))));
    }
    *single = false;
    return tensor_list(r, "compile: the function's results");
  };
}

CompileOptions options(const std::string& backend, const std::string& passes, bool fuse, bool memory_plan,
                       int recompile_limit, bool profile) {
  CompileOptions o;
  o.backend = backend;
  o.passes = passes;
  o.fuse = fuse;
  o.memory_plan = memory_plan;
  o.recompile_limit = recompile_limit;
  o.profile = profile;
  return o;
}

}  // namespace

void bind_compile(py::module_& m) {
  py::class_<CompileReport>(m, "CompileReport")
      .def_readonly("signature", &CompileReport::signature)
      .def_readonly("nodes_traced", &CompileReport::nodes_traced)
      .def_readonly("nodes_optimized", &CompileReport::nodes_optimized)
      .def_readonly("kernels", &CompileReport::kernels)
      .def_readonly("op_steps", &CompileReport::op_steps)
      .def_readonly("interpreted_groups", &CompileReport::interpreted_groups)
      .def_readonly("arena_bytes", &CompileReport::arena_bytes)
      .def_readonly("naive_bytes", &CompileReport::naive_bytes)
      .def_readonly("lower_bound_bytes", &CompileReport::lower_bound_bytes)
      .def_readonly("compile_ms", &CompileReport::compile_ms)
      .def_readonly("fusion", &CompileReport::fusion)
      .def_readonly("plan", &CompileReport::plan);
  py::class_<PyCompiled>(m, "CompiledFunction")
      .def("__call__", &PyCompiled::call)
      .def_property_readonly("num_compiles", [](const PyCompiled& c) { return c.fn.num_compiles(); })
      .def("recompile_reasons", [](const PyCompiled& c) { return c.fn.recompile_reasons(); })
      .def("report", [](const PyCompiled& c) { return c.fn.report(); })
      .def("profile_table", [](const PyCompiled& c) { return c.fn.profile_table(); })
      .def("write_chrome_trace", [](const PyCompiled& c, const std::string& path) { c.fn.write_chrome_trace(path); });

  m.def("compile", [](py::object fn, const std::string& backend, const std::string& passes, bool fuse,
                      bool memory_plan, int recompile_limit, bool profile) {
    if (!PyCallable_Check(fn.ptr())) throw py::type_error("compile: expected a callable");
    auto single = std::make_shared<bool>(true);
    return PyCompiled{compile(wrap(fn, single), options(backend, passes, fuse, memory_plan, recompile_limit, profile)),
                      single};
  }, py::arg("fn"), py::kw_only(), py::arg("backend") = "auto", py::arg("passes") = "", py::arg("fuse") = true,
     py::arg("memory_plan") = true, py::arg("recompile_limit") = 8, py::arg("profile") = false,
     R"(Captures fn(*tensors) once per input signature, optimizes and fuses it, and replays the plan.
Tensors fn captures (weights) become constants; for a module use compile_module.)");
  m.def("compile_module", [](nn::Module& mod, py::object fn, const std::string& backend, bool fuse) {
    auto single = std::make_shared<bool>(true);
    py::object call = fn.is_none() ? py::cast(&mod, py::return_value_policy::reference) : fn;
    return PyCompiled{compile_module(mod, wrap(call, single), options(backend, "", fuse, true, 8, false)), single};
  }, py::arg("module"), py::arg("fn") = py::none(), py::kw_only(), py::arg("backend") = "auto",
     py::arg("fuse") = true, py::keep_alive<0, 1>(),
     "The module's forward (or fn(*inputs) calling it), reading its parameters on every call.");
  m.def("compile_training_step", [](nn::Module& mod, py::object loss_fn, const std::string& backend) {
    auto single = std::make_shared<bool>(true);
    return PyCompiled{compile_training_step(mod, wrap(loss_fn, single), options(backend, "", true, true, 8, false)),
                      single};
  }, py::arg("module"), py::arg("loss_fn"), py::kw_only(), py::arg("backend") = "auto", py::keep_alive<0, 1>(),
     "loss_fn(*inputs) -> scalar loss; each call returns the loss and adds the gradients into .grad.");
}

}  // namespace smelt::python
