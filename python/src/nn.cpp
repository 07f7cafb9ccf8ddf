// smelt.nn: C++ modules, subclassable from Python the way torch.nn.Module is.
//
// Every module made from Python is a C++ nn::Module (a trampoline, PyModule<Base>), so the C++
// code that walks modules — named_parameters, state_dict / load_state_dict, train/eval, the
// optimizers, safetensors checkpoints, smelt.compile's module tracing — sees Python-defined
// modules exactly as it sees C++ ones. Python-side registration mirrors PyTorch:
//   self.w = smelt.nn.Parameter(t)   registers a parameter (a slot the module owns)
//   self.block = SomeModule()        registers a child (the module keeps its Python object alive)
//   self.register_buffer("rm", t)    registers a buffer
//   anything else                    a plain Python attribute
// Reading self.w returns the slot's current tensor, so a trace that binds symbolic tensors to the
// slots (compile) is seen by the Python forward too. C++ calls of forward (Sequential, compile)
// reach a Python override through the trampoline.
#include "bind.h"

#include "module_trampoline.h"

namespace smelt::python {

namespace {

using ModuleClass = py::class_<nn::Module, PyModule<nn::Module>, std::shared_ptr<nn::Module>>;

// True once the C++ module behind `self` exists (Module.__init__ ran): before that, pybind11's
// instance holds no object, and a cast would hand out a null reference.
bool module_constructed(py::handle self) {
  auto* inst = reinterpret_cast<py::detail::instance*>(self.ptr());
  for (auto vh : py::detail::values_and_holders(inst)) {
    if (!vh.holder_constructed()) return false;
  }
  return true;
}

nn::Module& module_of(py::handle self, const std::string& what) {
  if (!module_constructed(self)) {
    throw py::attribute_error("cannot " + what + " before Module.__init__() is called (call "
                              "super().__init__() first in your __init__)");
  }
  return self.cast<nn::Module&>();
}

PySlots& slots_of(nn::Module& m, const std::string& what) {
  auto* s = dynamic_cast<PySlots*>(&m);
  if (!s) throw py::type_error("cannot " + what + " on a " + m.type_name() + " made in C++");
  return *s;
}

// The slot named `name` among the module's own (not its children's) parameters or buffers.
Tensor* own_slot(nn::Module& m, const std::string& name, bool parameter) {
  if (auto* s = dynamic_cast<PySlots*>(&m)) {
    if (Tensor* t = s->find(name, parameter)) return t;
  }
  for (auto& [n, slot] : m.named_slots(parameter)) {
    if (n == name) return slot;
  }
  return nullptr;
}

nn::ModulePtr own_child(const nn::Module& m, const std::string& name) {
  for (auto& [n, child] : m.named_children()) {
    if (n == name) return child;
  }
  return nullptr;
}

bool is_data_descriptor(py::handle self, const std::string& name) {
  py::str key(name);
  // A borrowed reference, or null.
  PyObject* attr = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(py::type::of(self).ptr()), key.ptr());
  return attr && Py_TYPE(attr)->tp_descr_set != nullptr;
}

void module_setattr(py::handle self, const std::string& name, py::handle value) {
  if (is_data_descriptor(self, name)) {  // a property (Linear.weight, training): its setter decides
    if (PyObject_GenericSetAttr(self.ptr(), py::str(name).ptr(), value.ptr()) < 0) throw py::error_already_set();
    return;
  }
  nn::Module& m = module_of(self, "assign '" + name + "'");
  if (Tensor* slot = own_slot(m, name, true)) {
    *slot = parameter_value(value, name);
    return;
  }
  if (Tensor* slot = own_slot(m, name, false)) {
    *slot = value.is_none() ? Tensor() : tensor_arg(value, ("buffer '" + name + "'").c_str());
    return;
  }
  if (py::isinstance<Parameter>(value) || py::isinstance<nn::Module>(value)) {
    if (own_child(m, name)) {
      throw py::attribute_error(m.type_name() + ": child module '" + name + "' is already registered and cannot be replaced");
    }
    py::object dict = py::reinterpret_borrow<py::object>(self).attr("__dict__");
    if (dict.contains(name)) dict.attr("pop")(name);  // the registered value shadows no plain attribute
    PySlots& s = slots_of(m, "register '" + name + "'");
    if (py::isinstance<Parameter>(value)) s.add(name, value.cast<Tensor>(), true);
    else s.add_child(name, py::reinterpret_borrow<py::object>(value));
    return;
  }
  if (own_child(m, name)) {
    throw py::attribute_error(m.type_name() + ": '" + name + "' is a child module and cannot be replaced");
  }
  if (PyObject_GenericSetAttr(self.ptr(), py::str(name).ptr(), value.ptr()) < 0) throw py::error_already_set();
}

py::object module_getattr(py::handle self, const std::string& name) {
  nn::Module* m = module_constructed(self) ? &self.cast<nn::Module&>() : nullptr;
  if (m) {
    for (bool parameter : {true, false}) {
      if (Tensor* slot = own_slot(*m, name, parameter)) return slot->defined() ? py::cast(*slot) : py::none();
    }
    if (nn::ModulePtr child = own_child(*m, name)) return py::cast(child);
  }
  throw py::attribute_error("'" + std::string(py::str(py::type::of(self).attr("__name__"))) +
                            "' object has no attribute '" + name + "'");
}

py::list named_list(const nn::NamedTensors& items, const std::string& prefix) {
  py::list out;
  for (const auto& [n, t] : items) out.append(py::make_tuple(prefix.empty() ? n : prefix + "." + n, t));
  return out;
}

}  // namespace

void bind_nn(py::module_& m) {
  py::class_<Parameter, Tensor>(m, "Parameter", "A tensor that module attribute assignment registers as a "
                                                "parameter (a leaf that requires grad).")
      .def(py::init([](const Tensor& data, bool requires_grad) {
             Parameter p(data.is_leaf() ? data : data.detach());
             p.set_requires_grad(requires_grad);
             return p;
           }),
           py::arg("data"), py::arg("requires_grad") = true);

  ModuleClass cls(m, "Module", py::dynamic_attr(), R"(Base class of every module; subclass it as torch.nn.Module.

    class MLP(smelt.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = smelt.nn.Linear(4, 2)
            self.scale = smelt.nn.Parameter(smelt.ones(2))
        def forward(self, x):
            return self.fc(x) * self.scale)");
  cls.def(py::init_alias<>())
      .def("forward", [](nn::Module& self, const Tensor& x) { return self.forward(x); })
      .def("__call__", [](py::handle self, py::args args, py::kwargs kwargs) {
        return self.attr("forward")(*args, **kwargs);
      })
      .def("__setattr__", &module_setattr)
      .def("__getattr__", &module_getattr)
      .def("register_parameter", [](py::handle self, const std::string& name, py::handle p) {
        Tensor t = parameter_value(p, name);
        nn::Module& mod = module_of(self, "register a parameter");
        slots_of(mod, "register parameter '" + name + "'").add(name, t, true);
      }, py::arg("name"), py::arg("param"))
      .def("register_buffer", [](py::handle self, const std::string& name, const Tensor& t) {
        nn::Module& mod = module_of(self, "register a buffer");
        slots_of(mod, "register buffer '" + name + "'").add(name, t, false);
      }, py::arg("name"), py::arg("tensor"))
      .def("add_module", [](py::handle self, const std::string& name, py::handle child) {
        if (!py::isinstance<nn::Module>(child)) throw py::type_error("add_module: expected a smelt.nn.Module");
        nn::Module& mod = module_of(self, "add a module");
        slots_of(mod, "add module '" + name + "'").add_child(name, py::reinterpret_borrow<py::object>(child));
      }, py::arg("name"), py::arg("module"))
      .def("named_parameters", [](const nn::Module& self, const std::string& prefix, bool recurse) {
        return named_list(self.named_parameters(recurse), prefix);
      }, py::arg("prefix") = "", py::arg("recurse") = true)
      .def("parameters", [](const nn::Module& self, bool recurse) { return self.parameters(recurse); },
           py::arg("recurse") = true)
      .def("named_buffers", [](const nn::Module& self, const std::string& prefix, bool recurse) {
        return named_list(self.named_buffers(recurse), prefix);
      }, py::arg("prefix") = "", py::arg("recurse") = true)
      .def("buffers", [](const nn::Module& self, bool recurse) { return self.buffers(recurse); },
           py::arg("recurse") = true)
      .def("named_children", &nn::Module::named_children)
      .def("children", [](const nn::Module& self) {
        py::list out;
        for (auto& [_, c] : self.named_children()) out.append(py::cast(c));
        return out;
      })
      .def("num_parameters", &nn::Module::num_parameters)
      .def("train", [](py::object self, bool mode) {
        self.cast<nn::Module&>().train(mode);
        return self;
      }, py::arg("mode") = true)
      .def("eval", [](py::object self) {
        self.cast<nn::Module&>().eval();
        return self;
      })
      .def_property_readonly("training", &nn::Module::is_training)
      .def("zero_grad", [](nn::Module& self, bool set_to_none) {
        if (!set_to_none) throw py::value_error("zero_grad: only set_to_none=True (smelt drops .grad)");
        self.zero_grad();
      }, py::arg("set_to_none") = true)
      .def("state_dict", [](const nn::Module& self) {
        py::dict out;  // insertion-ordered: parameters, then buffers, as named_*
        for (auto& [n, t] : self.named_parameters()) out[py::str(n)] = t.detach();
        for (auto& [n, t] : self.named_buffers()) out[py::str(n)] = t.detach();
        return out;
      })
      .def("load_state_dict", [](nn::Module& self, const std::map<std::string, Tensor>& state, bool strict) {
        nn::Module::LoadResult r = self.load_state_dict(state, strict);
        return py::make_tuple(r.missing_keys, r.unexpected_keys);
      }, py::arg("state_dict"), py::arg("strict") = true,
         "Copies into the module's tensors in place; returns (missing_keys, unexpected_keys).")
      .def("extra_repr", [](const nn::Module& self) { return self.nn::Module::extra_repr(); })
      .def("__repr__", &nn::Module::to_string);
  bind_layers(m);
  bind_recurrent(m);
  m.def("clip_grad_norm_", [](py::handle params, double max_norm, bool error_if_nonfinite) {
    std::vector<Tensor> ps = py::isinstance<Tensor>(params) ? std::vector<Tensor>{params.cast<Tensor>()}
                                                           : tensor_list(params, "clip_grad_norm_: parameters");
    return optim::clip_grad_norm_(ps, max_norm, error_if_nonfinite);
  }, py::arg("parameters"), py::arg("max_norm"), py::arg("error_if_nonfinite") = false);
  py::module_ init = m.def_submodule("init", "in-place initializers (no autograd recording)");
  init.def("uniform_", [](const Tensor& t, double a, double b) { nn::init::uniform_(t, a, b); return t; },
           py::arg("tensor"), py::arg("a") = 0.0, py::arg("b") = 1.0);
  init.def("normal_", [](const Tensor& t, double mean, double std) { nn::init::normal_(t, mean, std); return t; },
           py::arg("tensor"), py::arg("mean") = 0.0, py::arg("std") = 1.0);
  init.def("constant_", [](const Tensor& t, double v) { nn::init::constant_(t, v); return t; }, py::arg("tensor"),
           py::arg("val"));
  init.def("zeros_", [](const Tensor& t) { nn::init::zeros_(t); return t; }, py::arg("tensor"));
  init.def("ones_", [](const Tensor& t) { nn::init::ones_(t); return t; }, py::arg("tensor"));
  init.def("kaiming_uniform_", [](const Tensor& t, double a) { nn::init::kaiming_uniform_(t, a); return t; },
           py::arg("tensor"), py::arg("a") = 0.0);
  init.def("xavier_uniform_", [](const Tensor& t, double gain) { nn::init::xavier_uniform_(t, gain); return t; },
           py::arg("tensor"), py::arg("gain") = 1.0);
  m.def("digits_cnn", [] { return std::static_pointer_cast<nn::Module>(models::digits_cnn()); },
        "The digits CNN of `smelt demo` (models::digits_cnn), made in C++.");
}

}  // namespace smelt::python
