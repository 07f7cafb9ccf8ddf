// smelt.optim: SGD, Adam, AdamW and the learning-rate schedulers, with PyTorch's arguments.
// They hold the parameter tensors themselves (shared with the modules, Python-defined ones
// included), so step() updates the modules in place. A scheduler keeps its optimizer alive.
#include "bind.h"

namespace smelt::python {

namespace {

// params: an iterable of tensors, or of dicts {"params": [...], "lr": ..., "weight_decay": ...}.
std::vector<optim::ParamGroupOptions> groups_arg(py::handle params) {
  if (py::isinstance<Tensor>(params) || !py::hasattr(params, "__iter__")) {
    throw py::type_error("optimizer: params must be an iterable of tensors or of param-group dicts");
  }
  std::vector<optim::ParamGroupOptions> groups;
  std::vector<Tensor> plain;
  for (py::handle item : params) {
    if (py::isinstance<py::dict>(item)) {
      py::dict d = py::reinterpret_borrow<py::dict>(item);
      if (!d.contains("params")) throw py::value_error("optimizer: a param group needs a 'params' entry");
      optim::ParamGroupOptions g;
      py::handle ps = d["params"];
      g.params = py::isinstance<Tensor>(ps) ? std::vector<Tensor>{ps.cast<Tensor>()} : tensor_list(ps, "params");
      for (auto [key, value] : d) {
        std::string k = py::str(key);
        if (k == "lr") g.lr = value.cast<double>();
        else if (k == "weight_decay") g.weight_decay = value.cast<double>();
        else if (k != "params") throw py::value_error("optimizer: a param group takes params, lr, weight_decay; got '" + k + "'");
      }
      groups.push_back(std::move(g));
    } else {
      plain.push_back(tensor_arg(item, "optimizer: params"));
    }
  }
  if (!plain.empty() && !groups.empty()) {
    throw py::type_error("optimizer: params mixes tensors and param-group dicts");
  }
  if (groups.empty()) groups.push_back({plain, std::nullopt, std::nullopt});
  return groups;
}

std::pair<double, double> betas_arg(py::handle betas) {
  auto b = betas.cast<std::vector<double>>();
  if (b.size() != 2) throw py::value_error("betas: expected two numbers (beta1, beta2)");
  return {b[0], b[1]};
}

optim::AdamOptions adam_options(double lr, py::handle betas, double eps, std::optional<double> wd, bool amsgrad,
                                bool maximize) {
  optim::AdamOptions o;
  o.lr = lr;
  std::tie(o.beta1, o.beta2) = betas_arg(betas);
  o.eps = eps;
  o.weight_decay = wd;
  o.amsgrad = amsgrad;
  o.maximize = maximize;
  return o;
}

const char* kGroupKeys = "'lr', 'weight_decay', 'params', 'initial_lr'";

py::object group_get(const optim::ParamGroup& g, const std::string& key) {
  if (key == "lr") return py::float_(g.lr);
  if (key == "weight_decay") return py::float_(g.weight_decay);
  if (key == "params") return py::cast(g.params);
  if (key == "initial_lr") return g.initial_lr ? py::object(py::float_(*g.initial_lr)) : py::object(py::none());
  throw py::key_error("param group has no '" + key + "'; keys: " + kGroupKeys);
}

}  // namespace

void bind_optim(py::module_& m) {
  py::class_<optim::ParamGroup>(m, "ParamGroup", "One parameter group; g['lr'] = ... as in PyTorch.")
      .def_readwrite("lr", &optim::ParamGroup::lr)
      .def_readwrite("weight_decay", &optim::ParamGroup::weight_decay)
      .def_readonly("params", &optim::ParamGroup::params)
      .def("__getitem__", &group_get)
      .def("__setitem__", [](optim::ParamGroup& g, const std::string& key, double v) {
        if (key == "lr") g.lr = v;
        else if (key == "weight_decay") g.weight_decay = v;
        else throw py::key_error("param group: only 'lr' and 'weight_decay' can be set, not '" + key + "'");
      })
      .def("keys", [](const optim::ParamGroup&) { return py::make_tuple("params", "lr", "weight_decay", "initial_lr"); });

  py::class_<optim::Optimizer>(m, "Optimizer")
      .def("step", &optim::Optimizer::step)
      .def("zero_grad", [](optim::Optimizer& o, bool set_to_none) {
        if (!set_to_none) throw py::value_error("zero_grad: only set_to_none=True (smelt drops .grad)");
        o.zero_grad();
      }, py::arg("set_to_none") = true)
      .def_property_readonly("param_groups", [](py::object self) {
        py::list out;
        for (optim::ParamGroup& g : self.cast<optim::Optimizer&>().param_groups()) {
          out.append(py::cast(&g, py::return_value_policy::reference_internal, self));
        }
        return out;
      })
      .def("set_lr", &optim::Optimizer::set_lr, py::arg("lr"))
      .def("state_dict", [](const optim::Optimizer& o) { return o.state_dict(); })
      .def("load_state_dict", [](optim::Optimizer& o, const StateDict& s) { o.load_state_dict(s); },
           py::arg("state_dict"))
      .def("__repr__", [](const optim::Optimizer& o) {
        return o.type_name() + "(groups=" + std::to_string(o.param_groups().size()) + ")";
      });

  py::class_<optim::SGD, optim::Optimizer>(m, "SGD")
      .def(py::init([](py::handle params, double lr, double momentum, double dampening, double weight_decay,
                       bool nesterov, bool maximize) {
             optim::SGDOptions o{lr, momentum, dampening, weight_decay, nesterov, maximize};
             return new optim::SGD(groups_arg(params), o);
           }),
           py::arg("params"), py::arg("lr") = 1e-3, py::arg("momentum") = 0.0, py::arg("dampening") = 0.0,
           py::arg("weight_decay") = 0.0, py::kw_only(), py::arg("nesterov") = false, py::arg("maximize") = false);
  py::class_<optim::Adam, optim::Optimizer>(m, "Adam")
      .def(py::init([](py::handle params, double lr, py::handle betas, double eps, std::optional<double> wd,
                       bool amsgrad, bool maximize) {
             return new optim::Adam(groups_arg(params), adam_options(lr, betas, eps, wd, amsgrad, maximize));
           }),
           py::arg("params"), py::arg("lr") = 1e-3, py::arg("betas") = py::make_tuple(0.9, 0.999),
           py::arg("eps") = 1e-8, py::arg("weight_decay") = py::none(), py::arg("amsgrad") = false, py::kw_only(),
           py::arg("maximize") = false);
  py::class_<optim::AdamW, optim::Adam>(m, "AdamW")
      .def(py::init([](py::handle params, double lr, py::handle betas, double eps, std::optional<double> wd,
                       bool amsgrad, bool maximize) {
             return new optim::AdamW(groups_arg(params), adam_options(lr, betas, eps, wd, amsgrad, maximize));
           }),
           py::arg("params"), py::arg("lr") = 1e-3, py::arg("betas") = py::make_tuple(0.9, 0.999),
           py::arg("eps") = 1e-8, py::arg("weight_decay") = py::none(), py::arg("amsgrad") = false, py::kw_only(),
           py::arg("maximize") = false);

  py::module_ sched = m.def_submodule("lr_scheduler", "learning-rate schedulers (PyTorch's closed forms)");
  py::class_<optim::LRScheduler>(sched, "LRScheduler")
      .def("step", &optim::LRScheduler::step)
      .def_property_readonly("last_epoch", &optim::LRScheduler::last_epoch)
      .def("set_epoch", &optim::LRScheduler::set_epoch, py::arg("epoch"))
      .def("get_last_lr", &optim::LRScheduler::get_last_lr)
      .def_property_readonly("base_lrs", &optim::LRScheduler::base_lrs);
  py::class_<optim::StepLR, optim::LRScheduler>(sched, "StepLR")
      .def(py::init<optim::Optimizer&, int64_t, double>(), py::arg("optimizer"), py::arg("step_size"),
           py::arg("gamma") = 0.1, py::keep_alive<1, 2>());
  py::class_<optim::CosineAnnealingLR, optim::LRScheduler>(sched, "CosineAnnealingLR")
      .def(py::init<optim::Optimizer&, int64_t, double>(), py::arg("optimizer"), py::arg("T_max"),
           py::arg("eta_min") = 0.0, py::keep_alive<1, 2>());
  py::class_<optim::LinearLR, optim::LRScheduler>(sched, "LinearLR")
      .def(py::init<optim::Optimizer&, double, double, int64_t>(), py::arg("optimizer"),
           py::arg("start_factor") = 1.0 / 3.0, py::arg("end_factor") = 1.0, py::arg("total_iters") = 5,
           py::keep_alive<1, 2>());
  py::class_<optim::SequentialLR, optim::LRScheduler>(sched, "SequentialLR")
      .def(py::init([](optim::Optimizer& o, const py::list& schedulers, std::vector<int64_t> milestones) {
             std::vector<const optim::LRScheduler*> ss;
             for (py::handle s : schedulers) ss.push_back(&s.cast<const optim::LRScheduler&>());
             return new optim::SequentialLR(o, std::move(ss), std::move(milestones));
           }),
           py::arg("optimizer"), py::arg("schedulers"), py::arg("milestones"), py::keep_alive<1, 2>(),
           // the list holds the schedulers this one calls
           py::keep_alive<1, 3>());
}

}  // namespace smelt::python
