// smelt.compile(fn): smelt::compile over a Python callable. The callable is traced through the
// same dispatcher as C++ code (its smelt ops record IR on symbolic tensors), so a Python function
// compiles exactly as the C++ one would; it must not read tensor values (item(), numpy(), bool()
// raise smelt.Error on a symbolic tensor). Also compile_module and compile_training_step.
#include "bind.h"

#include <map>

namespace smelt::python {

namespace {

// What the Python callable returned when traced: one tensor or several. It may differ between
// signatures (a function returning a tensor for one shape and a list for another), so each call
// looks up its own: a trace records its answer for the signature of the call that ran it.
struct Returns {
  bool traced_single = true;  // the latest trace's
  uint64_t traces = 0;
  std::map<std::string, bool> single;  // by call key (key_of)
};

// The inputs' dtypes and shapes, and the module's mode: what selects a plan (and so a trace).
std::string key_of(const std::vector<Tensor>& in, const nn::Module* module) {
  std::string key = module ? (module->is_training() ? "train:" : "eval:") : "";
  for (const Tensor& t : in) key += std::string(dtype_name(t.dtype())) + shape_str(t.shape()) + ";";
  return key;
}

// A compiled function and what its Python callable returns.
struct PyCompiled {
  CompiledFunction fn;
  std::shared_ptr<Returns> returns;
  const nn::Module* module = nullptr;

  py::object call(py::args args) {
    std::vector<Tensor> in;
    for (py::handle a : args) in.push_back(tensor_arg(a, "compiled function: inputs"));
    const uint64_t traces = returns->traces;
    std::vector<Tensor> out;
    {
      // The plan runs without the GIL: a Python kernel in it (smelt.library) takes the GIL while a
      // second Python thread, holding the GIL, would wait on this plan's lock forever. Everything
      // the call runs in Python (the traced function, kernels, hooks) takes the GIL itself.
      py::gil_scoped_release release;
      out = fn(in);
    }
    const std::string key = key_of(in, module);
    if (returns->traces != traces) returns->single[key] = returns->traced_single;
    auto it = returns->single.find(key);
    const bool single = it != returns->single.end() ? it->second : returns->traced_single;
    if (single && out.size() == 1) return py::cast(out[0]);
    return py::tuple(py::cast(out));
  }
};

// The C++ Fn calling `callable(*inputs)`; records in `returns` whether it returned one tensor.
CompiledFunction::Fn wrap(py::object callable, const std::shared_ptr<Returns>& returns) {
  std::shared_ptr<py::object> fn = gil_safe(std::move(callable));
  return [fn, returns](const std::vector<Tensor>& inputs) {
    py::gil_scoped_acquire gil;
    py::tuple args(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) args[i] = py::cast(inputs[i]);
    py::object r = (*fn)(*args);
    ++returns->traces;
    if (py::isinstance<Tensor>(r)) {
      returns->traced_single = true;
      return std::vector<Tensor>{r.cast<Tensor>()};
    }
    if (!py::isinstance<py::sequence>(r)) {
      throw py::type_error(
          "compile: the function must return a smelt.Tensor or a tuple/list of them, got " +
          std::string(py::str(py::type::of(r).attr("__name__"))));
    }
    returns->traced_single = false;
    return tensor_list(r, "compile: the function's results");
  };
}

CompileOptions options(const std::string& backend, const std::string& passes, bool fuse,
                       bool memory_plan, int recompile_limit, bool profile, bool freeze = false,
                       std::vector<std::pair<int, int>> dynamic_dims = {}, double memory_budget = 0) {
  CompileOptions o;
  o.memory_budget = memory_budget;
  o.freeze = freeze;
  o.dynamic_dims = std::move(dynamic_dims);
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
      .def_readonly("differentiable", &CompileReport::differentiable)
      .def_readonly("saved_bytes", &CompileReport::saved_bytes)
      .def_readonly("saved_bytes_no_recompute", &CompileReport::saved_bytes_no_recompute)
      .def_readonly("partition", &CompileReport::partition)
      .def_readonly("fusion", &CompileReport::fusion)
      .def_readonly("plan", &CompileReport::plan);
  py::class_<PyCompiled>(m, "CompiledFunction")
      .def("__call__", &PyCompiled::call)
      .def_property_readonly("num_compiles",
                             [](const PyCompiled& c) { return c.fn.num_compiles(); })
      .def("recompile_reasons", [](const PyCompiled& c) { return c.fn.recompile_reasons(); })
      .def("report", [](const PyCompiled& c) { return c.fn.report(); })
      .def("profile_table", [](const PyCompiled& c) { return c.fn.profile_table(); })
      .def("write_chrome_trace",
           [](const PyCompiled& c, const std::string& path) { c.fn.write_chrome_trace(path); });

  m.def(
      "compile",
      [](py::object fn, const std::string& backend, const std::string& passes, bool fuse,
         bool memory_plan, int recompile_limit, bool profile, bool freeze,
         std::vector<std::pair<int, int>> dynamic_dims, double memory_budget) {
        if (!PyCallable_Check(fn.ptr())) throw py::type_error("compile: expected a callable");
        auto returns = std::make_shared<Returns>();
        return PyCompiled{
            compile(wrap(fn, returns), options(backend, passes, fuse, memory_plan, recompile_limit,
                                               profile, freeze, std::move(dynamic_dims),
                                               memory_budget)),
            returns};
      },
      py::arg("fn"), py::kw_only(), py::arg("backend") = "auto", py::arg("passes") = "",
      py::arg("fuse") = true, py::arg("memory_plan") = true, py::arg("recompile_limit") = 8,
      py::arg("profile") = false, py::arg("freeze") = false,
      py::arg("dynamic_dims") = std::vector<std::pair<int, int>>{}, py::arg("memory_budget") = 0.0,
      R"(Captures fn(*tensors) once per input signature, optimizes and fuses it, and replays
the plan. Tensors fn captures from outside (weights) are read on every call, so in-place changes to them
are seen (freeze=True: folded as constants, recompiled when changed in place by smelt ops; a
write through a NumPy view from Tensor.numpy() is not seen then); fn must not read tensor values
or change captured tensors in place. A call that differs from an earlier one only in some dims
(batch, sequence length) makes those dims dynamic: one set of kernels for every size;
dynamic_dims=[(input, dim), ...] marks dims dynamic from the first call. With grad mode on and
inputs or captured tensors that require grad, a call records one autograd node whose backward is
compiled too, so compiled and eager code mix in one loss; memory_budget (0 to 1) trades what the
backward recomputes for what it keeps (report().partition says which).)");
  m.def(
      "compile_module",
      [](nn::Module& mod, py::object fn, const std::string& backend, bool fuse, double memory_budget) {
        auto returns = std::make_shared<Returns>();
        py::object call = fn.is_none() ? py::cast(&mod, py::return_value_policy::reference) : fn;
        return PyCompiled{compile_module(mod, wrap(call, returns),
                                         options(backend, "", fuse, true, 8, false, false, {}, memory_budget)),
                          returns, &mod};
      },
      py::arg("module"), py::arg("fn") = py::none(), py::kw_only(), py::arg("backend") = "auto",
      py::arg("fuse") = true, py::arg("memory_budget") = 0.0, py::keep_alive<0, 1>(),
      "The module's forward (or fn(*inputs) calling it), reading its parameters on every call; "
      "with grad mode on, the parameters get their gradients through it.");
  m.def(
      "compile_training_step",
      [](nn::Module& mod, py::object loss_fn, const std::string& backend, double memory_budget,
         bool gradient_norms) {
        auto returns = std::make_shared<Returns>();
        CompileOptions o = options(backend, "", true, true, 8, false, false, {}, memory_budget);
        o.gradient_norms = gradient_norms;
        return PyCompiled{compile_training_step(mod, wrap(loss_fn, returns), o), returns, &mod};
      },
      py::arg("module"), py::arg("loss_fn"), py::kw_only(), py::arg("backend") = "auto",
      py::arg("memory_budget") = 0.0, py::arg("gradient_norms") = false, py::keep_alive<0, 1>(),
      "loss_fn(*inputs) -> scalar loss; each call returns the loss and adds the gradients into "
      ".grad. memory_budget (0 to 1): what the backward recomputes against what it keeps; "
      "gradient_norms: the step's plan also computes each gradient's norm (GradientMonitor.check(step)).");

  m.def(
      "compile_step",
      [](nn::Module& mod, py::object loss_fn, optim::Optimizer& optimizer, double clip_grad_norm,
         int accumulation_steps, const std::string& backend, double memory_budget, bool gradient_norms) {
        auto returns = std::make_shared<Returns>();
        CompileOptions o = options(backend, "", true, true, 8, false, false, {}, memory_budget);
        o.gradient_norms = gradient_norms;
        return PyCompiled{compile_step(mod, wrap(loss_fn, returns), optimizer,
                                       StepOptions{clip_grad_norm, accumulation_steps}, o),
                          returns, &mod};
      },
      py::arg("module"), py::arg("loss_fn"), py::arg("optimizer"), py::kw_only(),
      py::arg("clip_grad_norm") = 0.0, py::arg("accumulation_steps") = 1, py::arg("backend") = "auto",
      py::arg("memory_budget") = 0.0, py::arg("gradient_norms") = false, py::keep_alive<0, 1>(),
      py::keep_alive<0, 3>(),
      "A whole training step as one plan: loss_fn(*inputs) -> scalar loss, its gradients, "
      "clipping by total norm (clip_grad_norm > 0) and the optimizer's update, the parameters "
      "and the optimizer's state updated in place. Each call returns the loss; every "
      "accumulation_steps-th call updates (the others add into .grad). The rate and step count "
      "are read on every call, so schedulers need no recompile.");

  // The gradient health monitor (smelt/monitor.h): each step's record as a dict.
  py::class_<GradientMonitor>(m, "GradientMonitor")
      .def(py::init([](nn::Module& module, double exploding, double vanishing, bool detect_anomaly) {
             return std::make_unique<GradientMonitor>(
                 module, GradientMonitorOptions{exploding, vanishing, detect_anomaly});
           }),
           py::arg("module"), py::kw_only(), py::arg("exploding") = 1e4, py::arg("vanishing") = 1e-10,
           py::arg("detect_anomaly") = true, py::keep_alive<1, 2>())
      .def(
          "check",
          [](GradientMonitor& monitor, py::object step) {
            const GradientStep& s = step.is_none() ? monitor.check() : monitor.check(step.cast<PyCompiled&>().fn);
            py::dict d;
            d["step"] = s.step;
            d["norms"] = s.norms;
            d["non_finite"] = s.non_finite;
            d["origin"] = s.origin;
            d["warnings"] = s.warnings;
            return d;
          },
          py::arg("step") = py::none(),
          "After a step's backward (or a call of a training step compiled with gradient_norms=True, "
          "passed as `step`): the norm of each parameter's gradient, the parameters whose gradient "
          "is not finite and the op that first produced a NaN or an infinity, and the warnings.");
}

}  // namespace smelt::python
