// smelt._smelt_distributed: the Python side of smelt::distributed (smelt/distributed.h), wrapped
// by python/smelt/distributed.py. A module of its own, so that only `import smelt.distributed`
// loads MPI; its Tensor and Module arguments are the types smelt._smelt registered.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "smelt/distributed.h"
#include "smelt/smelt.h"

namespace py = pybind11;
using namespace smelt;
namespace dist = smelt::distributed;

namespace {

dist::ReduceOp reduce_op(const std::string& name) {
  if (name == "sum") return dist::ReduceOp::Sum;
  if (name == "mean") return dist::ReduceOp::Mean;
  if (name == "max") return dist::ReduceOp::Max;
  if (name == "min") return dist::ReduceOp::Min;
  throw Error("distributed.all_reduce: unknown op '" + name + "'; valid: sum, mean, max, min");
}

py::dict stats_dict(const dist::CommStats& s) {
  py::dict d;
  d["buckets"] = s.buckets;
  d["bytes"] = s.bytes;
  d["comm_seconds"] = s.comm_seconds;
  d["blocked_seconds"] = s.blocked_seconds;
  d["overlap"] = s.overlap();
  return d;
}

// loss_fn(*inputs) -> the scalar loss, called (with the GIL) when the step traces it.
CompiledFunction::Fn loss_caller(py::function loss_fn) {
  auto fn = std::shared_ptr<py::function>(new py::function(std::move(loss_fn)), [](py::function* f) {
    py::gil_scoped_acquire gil;
    delete f;
  });
  return [fn](const std::vector<Tensor>& inputs) {
    py::gil_scoped_acquire gil;
    py::tuple args(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) args[i] = py::cast(inputs[i]);
    return std::vector<Tensor>{(*fn)(*args).cast<Tensor>()};
  };
}

}  // namespace

PYBIND11_MODULE(_smelt_distributed, m) {
  py::module_::import("smelt._smelt");  // registers Tensor, Module, Optimizer
  m.def("init", [](int world_size, double timeout) { dist::init({world_size, timeout}); },
        py::arg("world_size") = 0, py::arg("timeout") = 300.0);
  m.def("is_initialized", &dist::is_initialized);
  m.def("rank", &dist::rank);
  m.def("world_size", &dist::world_size);
  m.def("report_failure", [](const std::string& message) {
    py::gil_scoped_release release;
    dist::report_failure(message);
  });
  m.def("all_reduce", [](const Tensor& t, const std::string& op) {
    const dist::ReduceOp o = reduce_op(op);
    py::gil_scoped_release release;
    dist::all_reduce(t, o);
  }, py::arg("tensor"), py::arg("op") = "sum");
  m.def("broadcast", [](const Tensor& t, int root) {
    py::gil_scoped_release release;
    dist::broadcast(t, root);
  }, py::arg("tensor"), py::arg("src") = 0);
  m.def("all_gather", [](const Tensor& t) {
    py::gil_scoped_release release;
    return dist::all_gather(t);
  }, py::arg("tensor"));
  m.def("barrier", [] {
    py::gil_scoped_release release;
    dist::barrier();
  });
  m.def("save_checkpoint", [](const std::string& path, const nn::Module& module, const optim::Optimizer& opt) {
    py::gil_scoped_release release;
    dist::save_checkpoint(path, module, opt);
  }, py::arg("path"), py::arg("module"), py::arg("optimizer"));

  py::class_<dist::DistributedStep>(m, "DistributedStep")
      .def("__call__", [](dist::DistributedStep& step, py::args args) {
        std::vector<Tensor> in;
        for (py::handle a : args) in.push_back(a.cast<Tensor>());
        std::vector<Tensor> out;
        {
          py::gil_scoped_release release;
          out = step(in);
        }
        return out[0];
      });

  py::class_<dist::DistributedDataParallel>(m, "DistributedDataParallel")
      .def(py::init([](nn::Module& module, double bucket_cap_mb, bool broadcast_buffers) {
             py::gil_scoped_release release;
             return new dist::DistributedDataParallel(module, {bucket_cap_mb, broadcast_buffers});
           }),
           py::arg("module"), py::arg("bucket_cap_mb") = 25.0, py::arg("broadcast_buffers") = true,
           py::keep_alive<1, 2>())
      .def("prepare_forward", [](dist::DistributedDataParallel& d) {
        py::gil_scoped_release release;
        d.prepare_forward();
      })
      .def_property("gradient_sync", &dist::DistributedDataParallel::gradient_sync,
                    &dist::DistributedDataParallel::set_gradient_sync)
      .def("broadcast_buffers", [](dist::DistributedDataParallel& d) {
        py::gil_scoped_release release;
        d.broadcast_buffers();
      })
      .def_property_readonly("last_stats", [](const dist::DistributedDataParallel& d) { return stats_dict(d.last_stats()); })
      .def(
          "compile_step",
          [](dist::DistributedDataParallel& d, py::function loss_fn, optim::Optimizer& opt, double clip_grad_norm,
             int accumulation_steps, const std::string& backend) {
            StepOptions step;
            step.clip_grad_norm = clip_grad_norm;
            step.accumulation_steps = accumulation_steps;
            CompileOptions options;
            options.backend = backend;
            return d.compile_step(loss_caller(std::move(loss_fn)), opt, step, options);
          },
          py::arg("loss_fn"), py::arg("optimizer"), py::kw_only(), py::arg("clip_grad_norm") = 0.0,
          py::arg("accumulation_steps") = 1, py::arg("backend") = "auto", py::keep_alive<0, 1>(),
          py::keep_alive<0, 3>());
}
